"""Custom ops whose one bug only a sweep axis reveals, for the opcheck quality tests.

Namespace ``symfuzz_sweep``.  Each op carries one realistic bug and is
otherwise correct (its fake kernel is right wherever the bug is not in the
fake, its autograd formula is right unless the bug is autograd).  ``SAMPLES``
holds the one ordinary sample an author would write: float32, shape (4, 8),
``torch.randn`` from a seeded generator (select_rows adds an int64 index,
pad_to and take_last a scalar).  On that sample every op behaves; only an
input from one of the sweep's axes shows the bug: a dtype class, a value
class, an argument kind, a device, a layout or a broadcast pattern.

``EXPECTED[name] = (check, kind, axis_prefix)``: the check meant to catch the
bug, the failure kind it reports, and how the axis it names starts (the
prefix "dtype int" matches "dtype int32" and "dtype int64"; "" matches any).

Where layout does not matter to the bug, the real kernel's output layout and
the fake kernel's agree for every input layout (transposed, sliced, expanded):
either both follow the input (``torch.empty_like`` and elementwise ops agree)
or the real kernel returns a contiguous tensor and the fake kernel says so.
"""

from typing import Optional

import torch

from opcheck_ops.kernel_parts import double, no_context, row_major_strides, save_inputs, save_shape

NS = "symfuzz_sweep"

# 1. mean_div (dtype class: int) ---------------------------------------------


@torch.library.custom_op(f"{NS}::mean_div", mutates_args=())
def mean_div(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel gives the wrong dtype for integer inputs.

    The real kernel takes the mean of the last dim as ``x.sum(-1) / n``: true
    division, so an int (or bool) input gives a float32 output.  The fake
    kernel keeps the input's dtype, which is right for every floating and
    complex input, the float32 sample included, and wrong for int32/int64
    (and bool) inputs only."""
    return (x.sum(-1) / x.shape[-1]).contiguous()  # a fresh tensor: contiguous() copies nothing


@mean_div.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])


mean_div.register_autograd(
    lambda ctx, grad: grad.unsqueeze(-1).expand(ctx.shape) / ctx.shape[-1],
    setup_context=save_shape,
)


# 2. magnitude (dtype class: complex) ----------------------------------------


@torch.library.custom_op(f"{NS}::magnitude", mutates_args=())
def magnitude(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel gives the wrong dtype for complex inputs.

    The real kernel is ``x.abs()``, whose output is real (float32 for a
    complex64 input).  The fake kernel says ``torch.empty_like(x)``: right for
    every real dtype, the float32 sample included, wrong for complex inputs
    only.  (Layouts agree: abs and empty_like both follow the input's.)"""
    return x.abs()


@magnitude.register_fake
def _(x):
    return torch.empty_like(x)


def _magnitude_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.sgn()


magnitude.register_autograd(_magnitude_backward, setup_context=save_inputs)


# 3. nonzeros (value class: zeros) -------------------------------------------


@torch.library.custom_op(f"{NS}::nonzeros", mutates_args=())
def nonzeros(x: torch.Tensor) -> torch.Tensor:
    """Bug class: data-dependent output size that is not an unbacked size.

    The real kernel returns the nonzero elements, ``x[x != 0]``, a 1-D tensor
    whose length depends on the data.  The fake kernel guesses ``x.numel()``:
    random floats are never exactly 0, so on the float32 sample (and on any
    randn input) the guess is right and the length never varies; an input
    with zeros gives a shorter output.  A floating-point-only kernel (int and
    bool inputs, where zeros are common, are refused), so only the value
    class "zeros" reveals it."""
    if not x.is_floating_point():
        raise TypeError("nonzeros: floating-point inputs only")
    return x[x != 0].clone()


@nonzeros.register_fake
def _(x):
    torch._check(x.is_floating_point(), lambda: "nonzeros: floating-point inputs only")
    return x.new_empty(x.numel())


def _nonzeros_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x != 0)


def _nonzeros_backward(ctx, grad):
    (mask,) = ctx.saved_tensors
    return grad.new_zeros(mask.shape).masked_scatter(mask, grad)


nonzeros.register_autograd(_nonzeros_backward, setup_context=_nonzeros_setup)


# 4. clip_inplace (value class: large) ---------------------------------------


@torch.library.custom_op(f"{NS}::clip_inplace", mutates_args=())
def clip_inplace(x: torch.Tensor) -> torch.Tensor:
    """Bug class: undeclared mutation that only some values trigger.

    The kernel returns ``2 * clamp(x, -10, 10)`` but clamps x itself, in
    place, on a fast path that skips the clamp when nothing is out of range.
    The schema (``mutates_args=()``) declares no mutation.  Standard-normal
    values never leave [-10, 10], so on the float32 sample x is neither
    changed nor even written (its version counter stays); large values are
    clamped, and the caller's x changes."""
    if bool((x.abs() > 10).any()):
        x.clamp_(-10, 10)
    return double(x)


@clip_inplace.register_fake
def _(x):
    return torch.empty_like(x)


def _clip_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _clip_backward(ctx, grad):
    (out,) = ctx.saved_tensors
    return grad * 2 * (out.abs() < 20)


clip_inplace.register_autograd(_clip_backward, setup_context=_clip_setup)


# 5. select_rows (argument kind: index as a bool mask) -----------------------


_INDEX_DTYPES = (torch.int64, torch.int32, torch.bool)


@torch.library.custom_op(f"{NS}::select_rows", mutates_args=())
def select_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel reads data, for one kind of index argument.

    The real kernel is ``x[index]``: index is int64 row numbers or a bool mask
    over the rows.  The fake kernel counts a mask's rows with
    ``int(index.sum().item())``, which reads data (a fake tensor has none);
    for int64 indices it uses ``index.shape[0]``, which is right.  The sample's
    index is int64, so only the sweep's bool-mask index reveals it."""
    if index.dtype not in _INDEX_DTYPES:
        # uint8 would index as a (deprecated) mask, other dtypes not at all
        raise TypeError(f"select_rows: index must be int64, int32 or bool, not {index.dtype}")
    return x[index].contiguous()  # advanced indexing copies: contiguous() only fixes the layout


@select_rows.register_fake
def _(x, index):
    if index.dtype == torch.bool:
        rows = int(index.sum().item())
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


select_rows.register_autograd(_select_rows_backward, setup_context=_select_rows_setup)


# 6. pad_to (argument kind: optional argument given) -------------------------


def _pad_to(x, n):
    if n is None:
        return x.clone()
    out = x.new_zeros(*x.shape[:-1], n)
    m = min(n, x.shape[-1])
    out[..., :m] = x[..., :m]
    return out


@torch.library.custom_op(f"{NS}::pad_to", mutates_args=())
def pad_to(x: torch.Tensor, n: Optional[int] = None) -> torch.Tensor:
    """Bug class: fake kernel ignores an optional argument.

    The real kernel pads (with zeros) or truncates the last dim to ``n`` when
    n is given, and copies x when it is None.  The fake kernel always says
    ``torch.empty_like(x)``, right only for n=None (the sample) and for n equal
    to the width; giving n reveals it."""
    return _pad_to(x, n)


@pad_to.register_fake
def _(x, n=None):
    return torch.empty_like(x)


def _pad_to_setup(ctx, inputs, output):
    ctx.shape = inputs[0].shape


def _pad_to_backward(ctx, grad):
    gx = grad.new_zeros(ctx.shape)
    m = min(grad.shape[-1], ctx.shape[-1])
    gx[..., :m] = grad[..., :m]
    return gx, None


pad_to.register_autograd(_pad_to_backward, setup_context=_pad_to_setup)


# 7. take_last (argument kind: scalar at a boundary) -------------------------


@torch.library.custom_op(f"{NS}::take_last", mutates_args=())
def take_last(x: torch.Tensor, k: int) -> torch.Tensor:
    """Bug class: real and fake kernels disagree at one scalar value (k=0).

    The op takes the last k columns (0 <= k <= width; others are refused).
    The real kernel slices ``x[..., -k:]``, and Python's -0 is 0, so k=0
    takes the whole last dim; the fake kernel says k columns (what the op's
    contract says), 0 for k=0.  Every k from 1 to the width agrees, the
    sample's k=3 included."""
    if not 0 <= k <= x.shape[-1]:
        raise ValueError(f"take_last: k={k} is not in [0, {x.shape[-1]}]")
    return x[..., -k:].clone(memory_format=torch.contiguous_format)


@take_last.register_fake
def _(x, k):
    return x.new_empty(*x.shape[:-1], k)


def _take_last_backward(ctx, grad):
    gx = grad.new_zeros(ctx.shape)
    gx[..., ctx.shape[-1] - grad.shape[-1]:] = grad
    return gx, None


take_last.register_autograd(_take_last_backward, setup_context=save_shape)


# 8. cpu_only_fake (device) --------------------------------------------------


@torch.library.custom_op(f"{NS}::cpu_only_fake", mutates_args=())
def cpu_only_fake(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel puts its output on the wrong device.

    The real kernel is ``x + x``.  The fake kernel allocates its output with
    ``device="cpu"`` hard-coded (the author only ever tested on the CPU):
    dtype, shape and strides are right, and so is the device for every CPU
    input, the sample included; on meta tensors or fake CUDA tensors the
    output lands on the CPU."""
    return double(x)


@cpu_only_fake.register_fake
def _(x):
    # empty_like keeps x's layout, as x + x does; only the device is wrong.
    return torch.empty_like(x, device="cpu")


cpu_only_fake.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# 9. row_major (layout: transposed) ------------------------------------------


@torch.library.custom_op(f"{NS}::row_major", mutates_args=())
def row_major(x: torch.Tensor) -> torch.Tensor:
    """Bug class: kernel reads raw memory as if the input were row-major.

    Like a C++ kernel walking ``data_ptr`` with a flat index, the real kernel
    views x's storage (from its storage offset) with contiguous strides, then
    doubles it.  For a contiguous input, the sample included, that is x; for a
    transposed input the elements come in the wrong order, so
    ``op(x) != op(x.contiguous())``.  The output is always contiguous, as the
    fake kernel says."""
    raw = torch.as_strided(x, x.shape, row_major_strides(x.shape), x.storage_offset())
    return double(raw)


@row_major.register_fake
def _(x):
    return x.new_empty(x.shape)


row_major.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# 10. no_offset (layout: sliced) ---------------------------------------------


@torch.library.custom_op(f"{NS}::no_offset", mutates_args=())
def no_offset(x: torch.Tensor) -> torch.Tensor:
    """Bug class: kernel ignores the input's storage offset.

    The real kernel views x's storage with x's own sizes and strides but
    from offset 0 (like a C++ kernel that takes the storage's base pointer
    instead of ``data_ptr``), then doubles it.  Contiguous, transposed and
    expanded inputs start at offset 0, the sample included; a sliced input
    (an offset view) reads the wrong elements.  The output is always
    contiguous, as the fake kernel says."""
    return double(torch.as_strided(x, x.shape, x.stride(), 0)).contiguous()  # fresh: no copy unless strided


@no_offset.register_fake
def _(x):
    return x.new_empty(x.shape)


no_offset.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# 11. mul_rows (broadcast: gradient) -----------------------------------------


def _unbroadcast_by_mean(grad, shape):
    """The bug: reduces the broadcast dims with mean; the chain rule sums them."""
    lead = grad.dim() - len(shape)
    if lead:
        grad = grad.mean(tuple(range(lead)))
    dims = tuple(d for d, size in enumerate(shape) if size == 1 and grad.shape[d] != 1)
    return grad.mean(dims, keepdim=True) if dims else grad


@torch.library.custom_op(f"{NS}::mul_rows", mutates_args=())
def mul_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Bug class: wrong gradient for broadcast inputs only.

    The kernel is ``x * w`` (x and w broadcast) and the fake is right.  The
    backward reduces each gradient over the dims its input was broadcast along
    with ``.mean`` instead of ``.sum`` (one helper, used for w, the usual
    broadcast operand, and for x).  With equal shapes nothing is reduced: the
    sample's w is (4, 8) like x, so gradcheck passes on it; a w of (1, 8) or
    (8,), or an x broadcast up, gets a gradient n times too small."""
    return (x * w).contiguous()  # fresh: contiguous() copies nothing unless strided


@mul_rows.register_fake
def _(x, w):
    return x.new_empty(torch.broadcast_shapes(x.shape, w.shape), dtype=torch.result_type(x, w))


def _mul_rows_backward(ctx, grad):
    x, w = ctx.saved_tensors
    return _unbroadcast_by_mean(grad * w, x.shape), _unbroadcast_by_mean(grad * x, w.shape)


mul_rows.register_autograd(_mul_rows_backward, setup_context=save_inputs)


# 12. add_bias (broadcast: fake) ---------------------------------------------


@torch.library.custom_op(f"{NS}::add_bias", mutates_args=())
def add_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel assumes the first input has the output's shape.

    The real kernel is ``x + b`` (broadcasting both ways).  The fake kernel
    returns x's shape, right whenever b broadcasts to x (a bias of (8,) or
    (1, 8)) and when the shapes are equal, as in the sample; wrong when x is
    the one broadcast up (x of (1, 8) or (8,) with b of (4, 8))."""
    return (x + b).contiguous()  # fresh: contiguous() copies nothing unless strided


@add_bias.register_fake
def _(x, b):
    return x.new_empty(x.shape, dtype=torch.result_type(x, b))


def _add_bias_setup(ctx, inputs, output):
    ctx.shapes = inputs[0].shape, inputs[1].shape


def _add_bias_backward(ctx, grad):
    xs, bs = ctx.shapes
    return grad.sum_to_size(xs), grad.sum_to_size(bs)


add_bias.register_autograd(_add_bias_backward, setup_context=_add_bias_setup)


# 13. sanitize (mutation that changes no value) ------------------------------


@torch.library.custom_op(f"{NS}::sanitize", mutates_args=())
def sanitize(x: torch.Tensor) -> torch.Tensor:
    """Bug class: undeclared write that leaves the values as they were.

    The kernel zeroes non-finite entries of x in place
    (``x.masked_fill_(~isfinite(x), 0)``) before returning ``2 * x``, but the
    schema declares no mutation.  For finite inputs (the sample, and every
    input the sweep draws) no value changes, so a before/after comparison of
    values (SchemaCheckMode) sees nothing; x's version counter is bumped, and
    its storage written, on every call."""
    x.masked_fill_(~torch.isfinite(x), 0)
    return double(x)


@sanitize.register_fake
def _(x):
    return torch.empty_like(x)


sanitize.register_autograd(lambda ctx, grad: grad * 2, setup_context=no_context)


# 14. half_accum (dtype class: half precision) -------------------------------


@torch.library.custom_op(f"{NS}::half_accum", mutates_args=())
def half_accum(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel gives the wrong dtype for low-precision inputs.

    The real kernel sums the last dim in at least float32 (float16 and
    bfloat16 inputs accumulate, and return, float32; float64 stays float64)
    and returns the accumulator's dtype.  The fake kernel keeps the input's
    dtype: right for float32 (the sample), float64 and complex, wrong for
    float16 and bfloat16 (and for int and bool inputs, which sum to float32)."""
    acc = torch.promote_types(x.dtype, torch.float32)
    return x.to(acc).sum(-1).contiguous()  # fresh: contiguous() copies nothing unless strided


@half_accum.register_fake
def _(x):
    return x.new_empty(x.shape[:-1])


def _half_accum_setup(ctx, inputs, output):
    ctx.shape, ctx.dtype = inputs[0].shape, inputs[0].dtype


half_accum.register_autograd(
    lambda ctx, grad: grad.unsqueeze(-1).expand(ctx.shape).to(ctx.dtype),
    setup_context=_half_accum_setup,
)


# ---------------------------------------------------------------------------

_gen = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


SAMPLES = {
    "mean_div": ((_randn(4, 8),), {}),
    "magnitude": ((_randn(4, 8),), {}),
    "nonzeros": ((_randn(4, 8),), {}),
    "clip_inplace": ((_randn(4, 8),), {}),
    "select_rows": ((_randn(4, 8), torch.tensor([2, 0, 3, 1])), {}),
    "pad_to": ((_randn(4, 8),), {"n": None}),
    "take_last": ((_randn(4, 8), 3), {}),
    "cpu_only_fake": ((_randn(4, 8),), {}),
    "row_major": ((_randn(4, 8),), {}),
    "no_offset": ((_randn(4, 8),), {}),
    "mul_rows": ((_randn(4, 8), _randn(4, 8)), {}),
    "add_bias": ((_randn(4, 8), _randn(4, 8)), {}),
    "sanitize": ((_randn(4, 8),), {}),
    "half_accum": ((_randn(4, 8),), {}),
}

OPS = {name: getattr(torch.ops.symfuzz_sweep, name).default for name in SAMPLES}

# name -> (the check meant to catch the bug, the failure kind, how the axis label starts)
EXPECTED = {
    "mean_div": ("faketensor", "wrong-dtype", "dtype int"),
    "magnitude": ("faketensor", "wrong-dtype", "dtype complex"),
    "nonzeros": ("symbolic_fake", "data-dependent-size-not-unbacked", "value zeros"),
    "clip_inplace": ("schema", "undeclared-mutation", "value large"),
    "select_rows": ("faketensor", "fake-reads-data", "dtype bool"),
    "pad_to": ("faketensor", "wrong-shape", "argument n"),
    "take_last": ("faketensor", "wrong-shape", "argument k=0"),
    "cpu_only_fake": ("fake_device", "wrong-device", "device"),
    "row_major": ("layout_consistency", "layout-dependent", "layout transposed"),
    "no_offset": ("layout_consistency", "layout-dependent", "layout sliced"),
    "mul_rows": ("gradient", "wrong-gradient", "broadcast"),
    "add_bias": ("faketensor", "wrong-shape", "broadcast"),
    "sanitize": ("mutation", "undeclared-mutation", "the sample"),  # the version counter moves on any input
    "half_accum": ("faketensor", "wrong-dtype", "dtype"),
}

# The ops whose bug the meant check shows on the sample itself: that check
# varies the axis on its own (fake_device moves the sample to meta and fake
# CUDA; mutation watches the version counter, which every call bumps), so a
# sample-only run of it fails too. Every other op passes its check on the sample.
SAMPLE_SHOWS = {"cpu_only_fake", "sanitize"}
