"""Custom ops with no bugs, for the opcheck quality tests (no false alarms).

Namespace ``symfuzz_ok``.  Each op's fake kernel agrees with its real kernel
on shape, strides and dtype for every size (0 and 1 included), layout
(transposed, sliced, expanded) and floating dtype; it uses only symbolic-
friendly operations (no ``int()`` of sizes, no data reads); autograd formulas
are right and the schemas say what the kernels do.  ``SAMPLES`` holds one
ordinary sample per op; ``torch.library.opcheck`` passes on each.
"""

import torch

NS = "symfuzz_ok"


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
}

OPS = {name: getattr(torch.ops.symfuzz_ok, name).default for name in SAMPLES}
