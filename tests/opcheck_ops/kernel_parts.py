"""Pieces the planted-bug ops (sweep_bugs.py) and their correct twins (sweep_ok.py) share,
so that a twin differs from its buggy op only where the bug is."""

import torch


def no_context(ctx, inputs, output):
    pass


def save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*(t for t in inputs if isinstance(t, torch.Tensor)))


def save_shape(ctx, inputs, output):
    ctx.shape = inputs[0].shape


def double(x):
    """``x + x``: twice x in x's own dtype (``x * 2`` would turn a bool x into int64)."""
    return x + x


def row_major_strides(shape):
    """The strides of a contiguous tensor of ``shape`` (what a C++ kernel assumes)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
