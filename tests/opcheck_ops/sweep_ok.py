"""Correct controls for opcheck's sweep axes: none may be flagged.

Namespace ``symfuzz_sweep_ok``.  Most ops are the fixed twin of an op in
``sweep_bugs`` (same name + "_ok"): the same real kernel, or its fix, with a
fake kernel that agrees with it on dtype, shape, strides and device for every
dtype class the real kernel accepts (refusing a dtype is not a failure), every
value class, argument kind, layout and broadcast pattern.

``FORWARD_ONLY`` names the correct ops registered without an autograd formula
on purpose (rounding, argmax, quantization: not differentiable); opcheck must
report them as not differentiable (an info entry), never fail them, unless
autograd is required.

``SAMPLES`` holds one ordinary sample per op (float32, shape (4, 8),
``torch.randn`` from a seeded generator, plus the op's other arguments).
"""

from typing import Optional

import torch

from opcheck_ops.kernel_parts import double, no_context, row_major_strides, save_inputs, save_shape

NS = "symfuzz_sweep_ok"

# mean_div_ok ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::mean_div_ok", mutates_args=())
def mean_div_ok(x: torch.Tensor) -> torch.Tensor:
    """The mean of the last dim, ``x.sum(-1) / n``: true division, so int and
    bool inputs give the default float dtype; the fake kernel says so."""
    return (x.sum(-1) / x.shape[-1]).contiguous()  # a fresh tensor: contiguous() copies nothing


@mean_div_ok.register_fake
def _(x):
    keeps = x.is_floating_point() or x.is_complex()
    return x.new_empty(x.shape[:-1], dtype=x.dtype if keeps else torch.get_default_dtype())


mean_div_ok.register_autograd(
    lambda ctx, grad: grad.unsqueeze(-1).expand(ctx.shape) / ctx.shape[-1],
    setup_context=save_shape,
)


# magnitude_ok ---------------------------------------------------------------


@torch.library.custom_op(f"{NS}::magnitude_ok", mutates_args=())
def magnitude_ok(x: torch.Tensor) -> torch.Tensor:
    """``x.abs()``: real-valued for complex inputs (bool is refused by abs)."""
    return x.abs()


@magnitude_ok.register_fake
def _(x):
    # x.real is x itself for a real tensor, the real part for a complex one:
    # its dtype is abs's output dtype either way. empty_like follows x's layout, as abs does.
    return torch.empty_like(x, dtype=x.real.dtype)


def _magnitude_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.sgn()


magnitude_ok.register_autograd(_magnitude_backward, setup_context=save_inputs)


# nonzeros_ok ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::nonzeros_ok", mutates_args=())
def nonzeros_ok(x: torch.Tensor) -> torch.Tensor:
    """The nonzero elements of a floating-point x (a data-dependent length,
    which the fake kernel allocates as an unbacked size)."""
    if not x.is_floating_point():
        raise TypeError("nonzeros_ok: floating-point inputs only")
    return x[x != 0].clone()


@nonzeros_ok.register_fake
def _(x):
    torch._check(x.is_floating_point(), lambda: "nonzeros_ok: floating-point inputs only")
    return x.new_empty(torch.library.get_ctx().new_dynamic_size())


def _nonzeros_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x != 0)


def _nonzeros_backward(ctx, grad):
    (mask,) = ctx.saved_tensors
    return grad.new_zeros(mask.shape).masked_scatter(mask, grad)


nonzeros_ok.register_autograd(_nonzeros_backward, setup_context=_nonzeros_setup)


# select_rows_ok -------------------------------------------------------------


_INDEX_DTYPES = (torch.int64, torch.int32, torch.bool)


@torch.library.custom_op(f"{NS}::select_rows_ok", mutates_args=())
def select_rows_ok(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]``: int64 row numbers, or a bool mask over the rows (then the
    row count depends on the data: an unbacked size in the fake kernel)."""
    if index.dtype not in _INDEX_DTYPES:
        # uint8 would index as a (deprecated) mask, other dtypes not at all
        raise TypeError(f"select_rows_ok: index must be int64, int32 or bool, not {index.dtype}")
    return x[index].contiguous()  # advanced indexing copies: contiguous() only fixes the layout


@select_rows_ok.register_fake
def _(x, index):
    if index.dtype == torch.bool:
        rows = torch.library.get_ctx().new_dynamic_size()
    else:
        rows = index.shape[0]
    return x.new_empty(rows, *x.shape[1:])


def _select_rows_setup(ctx, inputs, output):
    x, index = inputs
    ctx.shape = x.shape
    ctx.save_for_backward(index)


def _select_rows_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    return grad.new_zeros(ctx.shape).index_put_((index,), grad, accumulate=True), None


select_rows_ok.register_autograd(_select_rows_backward, setup_context=_select_rows_setup)


# pad_to_ok ------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::pad_to_ok", mutates_args=())
def pad_to_ok(x: torch.Tensor, n: Optional[int] = None) -> torch.Tensor:
    """A copy of x (n None), or x's last dim zero-padded or truncated to n
    (a new contiguous tensor)."""
    if n is None:
        return x.clone()
    out = x.new_zeros(*x.shape[:-1], n)
    m = min(n, x.shape[-1])
    out[..., :m] = x[..., :m]
    return out


@pad_to_ok.register_fake
def _(x, n=None):
    if n is None:
        return torch.empty_like(x)  # clone keeps x's layout, as empty_like does
    return x.new_empty(*x.shape[:-1], n)


def _pad_to_backward(ctx, grad):
    gx = grad.new_zeros(ctx.shape)
    m = min(grad.shape[-1], ctx.shape[-1])
    gx[..., :m] = grad[..., :m]
    return gx, None


pad_to_ok.register_autograd(_pad_to_backward, setup_context=save_shape)


# take_last_ok ---------------------------------------------------------------


@torch.library.custom_op(f"{NS}::take_last_ok", mutates_args=())
def take_last_ok(x: torch.Tensor, k: int) -> torch.Tensor:
    """The last k columns, 0 <= k <= width (others refused); k=0 gives none.
    It slices from ``width - k``, never ``-k`` (Python's -0 is 0)."""
    width = x.shape[-1]
    if not 0 <= k <= width:
        raise ValueError(f"take_last_ok: k={k} is not in [0, {width}]")
    return x[..., width - k:].clone(memory_format=torch.contiguous_format)


@take_last_ok.register_fake
def _(x, k):
    return x.new_empty(*x.shape[:-1], k)


def _take_last_backward(ctx, grad):
    gx = grad.new_zeros(ctx.shape)
    gx[..., ctx.shape[-1] - grad.shape[-1]:] = grad
    return gx, None


take_last_ok.register_autograd(_take_last_backward, setup_context=save_shape)


# cpu_ok ---------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::cpu_ok", mutates_args=())
def cpu_ok(x: torch.Tensor) -> torch.Tensor:
    """``x + x``; the fake kernel's output is on x's device (meta, fake CUDA)."""
    return double(x)


@cpu_ok.register_fake
def _(x):
    return torch.empty_like(x, device=x.device)


cpu_ok.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# row_major_ok ---------------------------------------------------------------


@torch.library.custom_op(f"{NS}::row_major_ok", mutates_args=())
def row_major_ok(x: torch.Tensor) -> torch.Tensor:
    """``2 * x``, written like a C++ kernel that walks raw memory as row-major,
    after ``x.contiguous()`` makes that true for every layout (transposed,
    sliced, expanded)."""
    x = x.contiguous()
    raw = torch.as_strided(x, x.shape, row_major_strides(x.shape), x.storage_offset())
    return double(raw)


@row_major_ok.register_fake
def _(x):
    return x.new_empty(x.shape)


row_major_ok.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# no_offset_ok ---------------------------------------------------------------


@torch.library.custom_op(f"{NS}::no_offset_ok", mutates_args=())
def no_offset_ok(x: torch.Tensor) -> torch.Tensor:
    """``2 * x`` through a raw view of x's storage that keeps x's strides and
    its storage offset (a sliced input reads the right elements)."""
    return double(torch.as_strided(x, x.shape, x.stride(), x.storage_offset())).contiguous()


@no_offset_ok.register_fake
def _(x):
    return x.new_empty(x.shape)


no_offset_ok.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# mul_rows_ok ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::mul_rows_ok", mutates_args=())
def mul_rows_ok(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x * w`` (broadcasting); the backward sums each gradient over the dims
    its input was broadcast along."""
    return (x * w).contiguous()  # fresh: contiguous() copies nothing unless strided


@mul_rows_ok.register_fake
def _(x, w):
    return x.new_empty(torch.broadcast_shapes(x.shape, w.shape), dtype=torch.result_type(x, w))


def _mul_rows_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return (grad * w).sum_to_size(x.shape), (grad * x).sum_to_size(w.shape)


mul_rows_ok.register_autograd(_mul_rows_backward, setup_context=save_inputs)


# add_bias_ok ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::add_bias_ok", mutates_args=())
def add_bias_ok(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x + b``, broadcasting both ways; the fake kernel broadcasts the shapes."""
    return (x + b).contiguous()  # fresh: contiguous() copies nothing unless strided


@add_bias_ok.register_fake
def _(x, b):
    return x.new_empty(torch.broadcast_shapes(x.shape, b.shape), dtype=torch.result_type(x, b))


def _add_bias_setup(ctx, inputs, output):
    ctx.shapes = inputs[0].shape, inputs[1].shape


def _add_bias_backward(ctx, grad):
    xs, bs = ctx.shapes
    return grad.sum_to_size(xs), grad.sum_to_size(bs)


add_bias_ok.register_autograd(_add_bias_backward, setup_context=_add_bias_setup)


# clip_ok --------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::clip_ok", mutates_args=())
def clip_ok(x: torch.Tensor) -> torch.Tensor:
    """``2 * clamp(x, -10, 10)``, out of place: large values are clipped in the output only.
    Numbers only: bool is refused (clamp would promote it to int64)."""
    if x.dtype == torch.bool:
        raise TypeError("clip_ok: bool inputs are not numbers")
    return double(x.clamp(-10, 10))


@clip_ok.register_fake
def _(x):
    return torch.empty_like(x)


def _clip_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _clip_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 2 * (x.abs() <= 10)


clip_ok.register_autograd(_clip_backward, setup_context=_clip_setup)


# sanitize_ok ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::sanitize_ok", mutates_args=())
def sanitize_ok(x: torch.Tensor) -> torch.Tensor:
    """``2 * x`` with non-finite entries zeroed, out of place: x is never written."""
    # where() follows x's layout, as empty_like does (out-of-place masked_fill returns a contiguous tensor)
    return double(torch.where(torch.isfinite(x), x, torch.zeros((), dtype=x.dtype)))


@sanitize_ok.register_fake
def _(x):
    return torch.empty_like(x)


def _sanitize_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 2 * torch.isfinite(x)


sanitize_ok.register_autograd(_sanitize_backward, setup_context=save_inputs)


# half_accum_ok --------------------------------------------------------------


@torch.library.custom_op(f"{NS}::half_accum_ok", mutates_args=())
def half_accum_ok(x: torch.Tensor) -> torch.Tensor:
    """The sum of the last dim, accumulated (and returned) in at least float32."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return x.to(acc).sum(-1).contiguous()  # fresh: contiguous() copies nothing unless strided


@half_accum_ok.register_fake
def _(x):
    return x.new_empty(x.shape[:-1], dtype=torch.promote_types(x.dtype, torch.float32))


def _half_accum_setup(ctx, inputs, output):
    ctx.shape, ctx.dtype = inputs[0].shape, inputs[0].dtype


half_accum_ok.register_autograd(
    lambda ctx, grad: grad.unsqueeze(-1).expand(ctx.shape).to(ctx.dtype),
    setup_context=_half_accum_setup,
)


# Forward-only ops: no register_autograd, on purpose ---------------------------


def _floating_only(name, x):
    if not x.is_floating_point():
        raise TypeError(f"{name}: floating-point inputs only")


@torch.library.custom_op(f"{NS}::fwd_round", mutates_args=())
def fwd_round(x: torch.Tensor) -> torch.Tensor:
    """x rounded to the nearest quarter (floating inputs only). Piecewise
    constant, so no autograd formula: forward-only on purpose."""
    _floating_only("fwd_round", x)
    return (torch.round(x * 4) / 4).contiguous()  # fresh: contiguous() copies nothing unless strided


@fwd_round.register_fake
def _(x):
    torch._check(x.is_floating_point(), lambda: "fwd_round: floating-point inputs only")
    return x.new_empty(x.shape)


@torch.library.custom_op(f"{NS}::fwd_argmax", mutates_args=())
def fwd_argmax(x: torch.Tensor) -> torch.Tensor:
    """The index (int64) of the largest element of each row's last dim; ties
    go to the first. An integer output: forward-only on purpose."""
    return x.argmax(-1).contiguous()  # fresh: contiguous() copies nothing unless strided


@fwd_argmax.register_fake
def _(x):
    return x.new_empty(x.shape[:-1], dtype=torch.int64)


@torch.library.custom_op(f"{NS}::fwd_quantize", mutates_args=())
def fwd_quantize(x: torch.Tensor, scale: float) -> torch.Tensor:
    """int8 codes ``round(x / scale)`` clamped to [-128, 127], for a positive
    scale (others refused: x / 0 would make NaNs, whose int8 cast is
    undefined). An integer output: forward-only on purpose."""
    if not scale > 0:
        raise ValueError(f"fwd_quantize: scale must be positive, got {scale}")
    if x.is_complex():
        raise TypeError("fwd_quantize: real inputs only")
    return torch.round(x / scale).clamp(-128, 127).to(torch.int8).contiguous()


@fwd_quantize.register_fake
def _(x, scale):
    return x.new_empty(x.shape, dtype=torch.int8)


# ---------------------------------------------------------------------------

_gen = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


SAMPLES = {
    "mean_div_ok": ((_randn(4, 8),), {}),
    "magnitude_ok": ((_randn(4, 8),), {}),
    "nonzeros_ok": ((_randn(4, 8),), {}),
    "select_rows_ok": ((_randn(4, 8), torch.tensor([2, 0, 3, 1])), {}),
    "pad_to_ok": ((_randn(4, 8),), {"n": None}),
    "take_last_ok": ((_randn(4, 8), 3), {}),
    "cpu_ok": ((_randn(4, 8),), {}),
    "row_major_ok": ((_randn(4, 8),), {}),
    "no_offset_ok": ((_randn(4, 8),), {}),
    "mul_rows_ok": ((_randn(4, 8), _randn(4, 8)), {}),
    "add_bias_ok": ((_randn(4, 8), _randn(4, 8)), {}),
    "clip_ok": ((_randn(4, 8),), {}),
    "sanitize_ok": ((_randn(4, 8),), {}),
    "half_accum_ok": ((_randn(4, 8),), {}),
    "fwd_round": ((_randn(4, 8),), {}),
    "fwd_argmax": ((_randn(4, 8),), {}),
    "fwd_quantize": ((_randn(4, 8),), {"scale": 0.05}),
}

OPS = {name: getattr(torch.ops.symfuzz_sweep_ok, name).default for name in SAMPLES}

# Correct ops with no autograd formula on purpose.
FORWARD_ONLY = {"fwd_round", "fwd_argmax", "fwd_quantize"}
