"""Autograd formulas (gelu_scale is composite: it needs none)."""

import torch


def _scale_f32_setup(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x, scale)


def _scale_f32_backward(ctx, grad):
    x, scale = ctx.saved_tensors
    grad_x = (grad * scale.float()).to(x.dtype)
    grad_scale = (grad * x.float()).sum().reshape(scale.shape).to(scale.dtype)
    return grad_x, grad_scale


torch.library.register_autograd("kernlib::scale_f32", _scale_f32_backward, setup_context=_scale_f32_setup)
