"""Custom ops with no bugs, for the opcheck quality tests (no false alarms).

Namespace ``symfuzz_ok``.  Each op's fake kernel agrees with its real kernel
on shape, strides and dtype for every size (0 and 1 included), layout
(transposed, sliced, expanded) and dtype the real kernel accepts (kernels
that would promote integers refuse them); it uses only symbolic-
friendly operations (no ``int()`` of sizes, no data reads); autograd formulas
are right and the schemas say what the kernels do.  ``SAMPLES`` holds one
ordinary sample per op; ``torch.library.opcheck`` passes on each.
"""

import torch

NS = "symfuzz_ok"


def _floating_only(x, name):
    # Integer and bool inputs would promote (sum, exp, * 3) where the fake kernel
    # keeps the dtype: these kernels refuse them, as a correct op must or its fake must follow.
    if not x.is_floating_point():
        raise TypeError(f"{name}: floating-point input only, got {x.dtype}")


# 1. scaled_add -------------------------------------------------------------


def _check_same(x, y):
    torch._check(x.dim() == y.dim(), lambda: "x and y must have the same rank")
    for a, b in zip(x.shape, y.shape):
        torch._check(a == b, lambda: "x and y must have the same shape")
    torch._check(x.dtype == y.dtype, lambda: "x and y must have the same dtype")
    torch._check(x.is_floating_point(), lambda: "x and y must be floating point")


@torch.library.custom_op(f"{NS}::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """``x + alpha * y`` for same-shape, same-dtype floating inputs.

    The output is always contiguous, whatever the inputs' layouts."""
    _check_same(x, y)
    return torch.add(x, y, alpha=alpha).contiguous()


@scaled_add.register_fake
def _(x, y, alpha):
    _check_same(x, y)
    return x.new_empty(x.shape)


def _scaled_add_setup(ctx, inputs, output):
    ctx.alpha = inputs[2]


def _scaled_add_backward(ctx, grad):
    return grad, grad * ctx.alpha, None


scaled_add.register_autograd(_scaled_add_backward, setup_context=_scaled_add_setup)


# 2. row_softmax ------------------------------------------------------------


@torch.library.custom_op(f"{NS}::row_softmax", mutates_args=())
def row_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim, by hand: ``exp(x - max) / sum``.

    The output is always contiguous (the fake kernel says so too)."""
    _floating_only(x, "row_softmax")
    if x.dim() > 0 and x.shape[-1] == 0:
        # max over an empty dim raises; the softmax of nothing is nothing.
        return x.new_empty(x.shape)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).contiguous()


@row_softmax.register_fake
def _(x):
    return x.new_empty(x.shape)


def _row_softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _row_softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return y * (grad - (grad * y).sum(-1, keepdim=True))


row_softmax.register_autograd(_row_softmax_backward, setup_context=_row_softmax_setup)


# 3. mm ---------------------------------------------------------------------


def _check_mm(a, b):
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "mm: a and b must be 2-D")
    torch._check(a.shape[1] == b.shape[0], lambda: "mm: inner dims must agree")
    torch._check(a.dtype == b.dtype, lambda: "mm: a and b must have the same dtype")


@torch.library.custom_op(f"{NS}::mm", mutates_args=())
def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Matrix product ``a @ b`` of 2-D tensors; contiguous output."""
    _check_mm(a, b)
    return (a @ b).contiguous()


@mm.register_fake
def _(a, b):
    _check_mm(a, b)
    return a.new_empty(a.shape[0], b.shape[1])


def _mm_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.t(), a.t() @ grad


mm.register_autograd(_mm_backward, setup_context=_mm_setup)


# 4. nonzero_rows -----------------------------------------------------------


@torch.library.custom_op(f"{NS}::nonzero_rows", mutates_args=())
def nonzero_rows(x: torch.Tensor) -> torch.Tensor:
    """The rows of 2-D ``x`` whose sum is positive (data-dependent row count).

    The fake kernel allocates the row count as an unbacked dynamic size."""
    torch._check(x.dim() == 2, lambda: "nonzero_rows: x must be 2-D")
    return x[x.sum(1) > 0].clone()


@nonzero_rows.register_fake
def _(x):
    torch._check(x.dim() == 2, lambda: "nonzero_rows: x must be 2-D")
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(n, x.shape[1])


def _nonzero_rows_setup(ctx, inputs, output):
    (x,) = inputs
    # Save the mask, not its nonzero() indices: under torch.compile the indices
    # would be a second data-dependent size that no output carries, which
    # Dynamo refuses (PendingUnbackedSymbolNotFound).
    ctx.save_for_backward(x.sum(1) > 0)


def _nonzero_rows_backward(ctx, grad):
    # The selected rows get their gradient back, in order; the others get zero.
    (mask,) = ctx.saved_tensors
    full = mask.unsqueeze(1).expand(mask.shape[0], grad.shape[1])
    return grad.new_zeros(full.shape).masked_scatter(full, grad)


nonzero_rows.register_autograd(
    _nonzero_rows_backward, setup_context=_nonzero_rows_setup
)


# 5. add_ -------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::add_", mutates_args=("x",))
def add_(x: torch.Tensor, y: torch.Tensor) -> None:
    """In place ``x += y`` (y broadcasts to x); the schema declares x mutated."""
    x.add_(y)


@add_.register_fake
def _(x, y):
    return None


# 6. group_sum --------------------------------------------------------------


@torch.library.custom_op(f"{NS}::group_sum", mutates_args=())
def group_sum(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Sums each row's columns in ``groups`` equal groups. The width must divide
    by ``groups``: the fake kernel says so with torch._check, a contract (the
    real kernel refuses other widths), not an over-specialization."""
    _floating_only(x, "group_sum")
    n, w = x.shape
    if w % groups:
        raise ValueError("group_sum: width must divide by groups")
    return x.reshape(n, groups, w // groups).sum(-1)


@group_sum.register_fake
def _(x, groups):
    torch._check(x.shape[1] % groups == 0, lambda: "group_sum: width must divide by groups")
    return x.new_empty(x.shape[0], groups)


def _group_sum_setup(ctx, inputs, output):
    x, groups = inputs
    ctx.shape, ctx.groups = x.shape, groups


def _group_sum_backward(ctx, grad):
    n, w = ctx.shape
    return grad.unsqueeze(-1).expand(n, ctx.groups, w // ctx.groups).reshape(n, w), None


group_sum.register_autograd(_group_sum_backward, setup_context=_group_sum_setup)


# 7. width8 -----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::width8", mutates_args=())
def width8(x: torch.Tensor) -> torch.Tensor:
    """A kernel written for width 8 only (it refuses others); the fake kernel's
    torch._check(width == 8) pins the size, but only to what the kernel accepts."""
    _floating_only(x, "width8")
    if x.shape[-1] != 8:
        raise ValueError("width8: the last dim must be 8")
    return x * 3


@width8.register_fake
def _(x):
    torch._check(x.shape[-1] == 8, lambda: "width8: the last dim must be 8")
    return torch.empty_like(x)


width8.register_autograd(lambda ctx, grad: grad * 3, setup_context=lambda ctx, inputs, output: None)


# 8. bf16_double ------------------------------------------------------------


@torch.library.custom_op(f"{NS}::bf16_double", mutates_args=())
def bf16_double(x: torch.Tensor) -> torch.Tensor:
    """A bfloat16-only kernel (it refuses other dtypes), so no float64 or
    float32 gradcheck is possible, and half-precision finite differences are noise."""
    if x.dtype != torch.bfloat16:
        raise TypeError("bf16_double: bfloat16 only")
    return x * 2


@bf16_double.register_fake
def _(x):
    return torch.empty_like(x)


bf16_double.register_autograd(lambda ctx, grad: grad * 2, setup_context=lambda ctx, inputs, output: None)


# 9. pick -------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::pick", mutates_args=())
def pick(x: torch.Tensor, positive_only: bool) -> torch.Tensor:
    """The positive elements (a data-dependent size) or all of them (a fixed one)."""
    return (x[x > 0] if positive_only else x.reshape(-1)).clone()


@pick.register_fake
def _(x, positive_only):
    if positive_only:
        return x.new_empty(torch.library.get_ctx().new_dynamic_size())
    return x.new_empty(x.numel())


def _pick_setup(ctx, inputs, output):
    x, positive_only = inputs
    ctx.save_for_backward(x > 0 if positive_only else torch.ones_like(x, dtype=torch.bool))


def _pick_backward(ctx, grad):
    (mask,) = ctx.saved_tensors
    return grad.new_zeros(mask.shape).masked_scatter(mask, grad), None


pick.register_autograd(_pick_backward, setup_context=_pick_setup)


# 10. scale_by --------------------------------------------------------------


@torch.library.custom_op(f"{NS}::scale_by", mutates_args=())
def scale_by(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``x * s`` for a 0-dim tensor ``s`` (a learned scale)."""
    return x * s


@scale_by.register_fake
def _(x, s):
    return torch.empty_like(x)


def _scale_by_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _scale_by_backward(ctx, grad):
    x, s = ctx.saved_tensors
    return grad * s, (grad * x).sum()


scale_by.register_autograd(_scale_by_backward, setup_context=_scale_by_setup)


# ---------------------------------------------------------------------------

_gen = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


SAMPLES = {
    "scaled_add": ((_randn(4, 8), _randn(4, 8)), {"alpha": 0.5}),
    "row_softmax": ((_randn(4, 8),), {}),
    "mm": ((_randn(4, 8), _randn(8, 3)), {}),
    "nonzero_rows": ((_randn(4, 8),), {}),
    "add_": ((_randn(4, 8), _randn(4, 8)), {}),
    "group_sum": ((_randn(4, 8), 4), {}),
    "width8": ((_randn(4, 8),), {}),
    "bf16_double": ((_randn(4, 8).bfloat16(),), {}),
    "pick": ((_randn(4, 8), True), {}),
    "scale_by": ((_randn(4, 8), torch.tensor(0.5)), {}),
}

OPS = {name: getattr(torch.ops.symfuzz_ok, name).default for name in SAMPLES}
