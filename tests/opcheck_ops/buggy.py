"""Custom ops that each carry exactly one realistic bug, for the opcheck quality tests.

Namespace ``symfuzz_buggy``.  Every op is otherwise correct: its fake kernel is
right wherever the bug is not in the fake, its autograd formula is right unless
the bug is autograd, and so on, for floating inputs (integer and bool
inputs, which most of these kernels take and promote where their fakes keep
the dtype, are a second finding the dtype sweep makes).  ``SAMPLES`` holds the one ordinary sample an
author would write for each op; on it, ``torch.library.opcheck`` does not catch
the fake/stride/dtype/guard/gradient/registration bugs (ops 1-5, 8, 9).  The
samples of add_one and flat are mutated/aliased by their kernels: pass clones.

add_one and the others use ``torch.library.custom_op``; flat uses the low-level
``torch.library.Library`` API because custom_op refuses, at run time, a kernel
whose output aliases an input.
"""

import torch

NS = "symfuzz_buggy"


def _no_context(ctx, inputs, output):
    pass


# 1. half_cols --------------------------------------------------------------


@torch.library.custom_op(f"{NS}::half_cols", mutates_args=())
def half_cols(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel gives the wrong shape for some sizes only.

    The real kernel keeps every other column, ceil(n/2) of them; the fake
    kernel says ``n // 2``, which is wrong only when the last dim is odd
    (the sample's last dim, 8, is even).  The output is always contiguous, as
    the fake kernel says, so strides are right."""
    return x[..., ::2].clone(memory_format=torch.contiguous_format)


@half_cols.register_fake
def _(x):
    return x.new_empty(*x.shape[:-1], x.shape[-1] // 2)


def _half_cols_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.shape = x.shape


def _half_cols_backward(ctx, grad):
    gx = grad.new_zeros(ctx.shape)
    gx[..., ::2] = grad
    return gx


half_cols.register_autograd(_half_cols_backward, setup_context=_half_cols_setup)


# 2. scale2 -----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::scale2", mutates_args=())
def scale2(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel gives the wrong strides.

    The real kernel writes into ``torch.empty_like(x)``, which keeps a
    non-contiguous (e.g. transposed) input's strides; the fake kernel always
    returns a contiguous tensor.  Shapes and dtypes agree; strides differ only
    for non-contiguous inputs (the sample is contiguous)."""
    out = torch.empty_like(x)
    torch.mul(x, 2, out=out)
    return out


@scale2.register_fake
def _(x):
    return x.new_empty(x.shape)


scale2.register_autograd(lambda ctx, grad: grad * 2, setup_context=_no_context)


# 3. soft_gate --------------------------------------------------------------


@torch.library.custom_op(f"{NS}::soft_gate", mutates_args=())
def soft_gate(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel gives the wrong dtype for some input dtypes.

    The real kernel (quick GELU, ``x * sigmoid(1.702 x)``) returns x's dtype;
    the fake kernel hard-codes float32, which is wrong for float64, float16
    and bfloat16 inputs only (the sample is float32)."""
    return x * torch.sigmoid(1.702 * x)


@soft_gate.register_fake
def _(x):
    # Layout follows x, as the real kernel's output does; only dtype is wrong.
    return torch.empty_like(x, dtype=torch.float32)


def _soft_gate_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _soft_gate_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(1.702 * x)
    return grad * (s + 1.702 * x * s * (1 - s))


soft_gate.register_autograd(_soft_gate_backward, setup_context=_soft_gate_setup)


# 4. row_sum ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::row_sum", mutates_args=())
def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel specializes a symbolic size.

    The real kernel sums the last dim of a 2-D input; the fake kernel calls
    ``int()`` on ``x.shape[0]``.  Shapes are right at every concrete size, but
    under a ShapeEnv ``int()`` of a SymInt installs a guard that pins the size,
    so a compiled graph recompiles for every new row count."""
    return x.sum(-1)


@row_sum.register_fake
def _(x):
    n = int(x.shape[0])
    return x.new_empty(n)


def _row_sum_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.shape = x.shape


row_sum.register_autograd(
    lambda ctx, grad: grad.unsqueeze(-1).expand(ctx.shape),
    setup_context=_row_sum_setup,
)


# 5. positives --------------------------------------------------------------


@torch.library.custom_op(f"{NS}::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    """Bug class: data-dependent output size without an unbacked size.

    The real kernel returns the positive elements (a 1-D tensor whose length
    depends on the data); the fake kernel guesses the "typical" length
    ``x.numel() // 2`` instead of allocating a dynamic size with
    ``torch.library.get_ctx().new_dynamic_size()``.  Wrong whenever the number
    of positives is not exactly half."""
    return x[x > 0].clone()


@positives.register_fake
def _(x):
    return x.new_empty(x.numel() // 2)


def _positives_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.mask = x > 0


def _positives_backward(ctx, grad):
    gx = grad.new_zeros(ctx.mask.shape)
    gx[ctx.mask] = grad
    return gx


positives.register_autograd(_positives_backward, setup_context=_positives_setup)


# 6. add_one ----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::add_one", mutates_args=())
def add_one(x: torch.Tensor) -> torch.Tensor:
    """Bug class: undeclared mutation.

    The schema (``mutates_args=()``) declares no mutation, but the kernel
    increments its input in place (``x.add_(1)``) before returning a copy, so
    the caller's ``x`` changes.  custom_op does not check this at run time;
    SchemaCheckMode (opcheck's test_schema) reports "Argument x is not defined
    as mutable but was mutated"."""
    x.add_(1)
    return x.clone()


@add_one.register_fake
def _(x):
    return torch.empty_like(x)


add_one.register_autograd(lambda ctx, grad: grad, setup_context=_no_context)


# 7. flat -------------------------------------------------------------------
# custom_op refuses this bug at run time ("The output of this custom operator
# (1) must not also be an input to this custom operator"), so the op is
# defined with the low-level Library API, which runs the kernel unchecked.

_lib = torch.library.Library(NS, "DEF")
_lib.define("flat(Tensor x) -> Tensor")


def _flat_impl(x):
    """Bug class: undeclared alias.

    The schema ``flat(Tensor x) -> Tensor`` promises a fresh tensor, but the
    kernel returns ``x.reshape(-1)``, which is a view of x for contiguous
    inputs (so writing to the output writes to x).  The fake kernel allocates
    a new tensor, as the schema says.  opcheck's test_schema reports the alias
    and its test_faketensor the outputs_alias_inputs mismatch."""
    return x.reshape(-1)


_lib.impl("flat", _flat_impl, "CompositeExplicitAutograd")


@torch.library.register_fake(f"{NS}::flat", lib=_lib)
def _(x):
    return x.new_empty(x.numel())


def _flat_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.shape = x.shape


torch.library.register_autograd(
    f"{NS}::flat",
    lambda ctx, grad: grad.reshape(ctx.shape),
    setup_context=_flat_setup,
    lib=_lib,
)


# 8. cube -------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::cube", mutates_args=())
def cube(x: torch.Tensor) -> torch.Tensor:
    """Bug class: wrong gradient formula.

    The kernel computes ``x ** 3`` and the fake is right, but the registered
    backward returns ``grad * 3 * x`` instead of ``grad * 3 * x**2``.
    ``torch.autograd.gradcheck`` in float64 fails."""
    return x**3


@cube.register_fake
def _(x):
    return torch.empty_like(x)


def _cube_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _cube_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 3 * x


cube.register_autograd(_cube_backward, setup_context=_cube_setup)


# 9. smooth -----------------------------------------------------------------


@torch.library.custom_op(f"{NS}::smooth", mutates_args=())
def smooth(x: torch.Tensor) -> torch.Tensor:
    """Bug class: missing autograd registration.

    Kernel ``tanh(x) * 0.5`` and fake are right, but no autograd formula is
    registered: backward through it raises "no autograd formula was
    registered" although the op is plainly differentiable."""
    return torch.tanh(x) * 0.5


@smooth.register_fake
def _(x):
    return torch.empty_like(x)


# 10. peek ------------------------------------------------------------------


@torch.library.custom_op(f"{NS}::peek", mutates_args=())
def peek(x: torch.Tensor) -> torch.Tensor:
    """Bug class: fake kernel reads tensor data.

    The kernel is a leaky ReLU (``where(x > 0, x, 0.1 x)``).  The fake kernel
    asks ``bool((x > 0).all())`` (a leftover fast path), which needs the data.
    Fake tensors have none: without a ShapeEnv, or with
    ``ShapeEnv(allow_scalar_outputs=False)``, it raises
    DataDependentOutputException; with scalar outputs allowed it raises
    GuardOnDataDependentSymNode (what opcheck reports)."""
    return torch.where(x > 0, x, 0.1 * x)


@peek.register_fake
def _(x):
    if bool((x > 0).all()):
        return torch.empty_like(x)
    return torch.empty_like(x)


def _peek_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _peek_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.where(x > 0, grad, 0.1 * grad)


peek.register_autograd(_peek_backward, setup_context=_peek_setup)


# ---------------------------------------------------------------------------

_gen = torch.Generator().manual_seed(0)


def _randn(*shape):
    return torch.randn(*shape, generator=_gen)


def _half_positive(*shape):
    # An ordinary randn sample in which exactly half the entries are positive,
    # which is what positives' fake kernel guesses (so opcheck passes on it).
    x = _randn(*shape).flatten().abs()
    x[torch.randperm(x.numel(), generator=_gen)[: x.numel() // 2]] *= -1
    return x.reshape(shape)


SAMPLES = {
    "half_cols": ((_randn(4, 8),), {}),
    "scale2": ((_randn(4, 8),), {}),
    "soft_gate": ((_randn(4, 8),), {}),
    "row_sum": ((_randn(4, 8),), {}),
    "positives": ((_half_positive(4, 8),), {}),
    "add_one": ((_randn(4, 8),), {}),
    "flat": ((_randn(4, 8),), {}),
    "cube": ((_randn(4, 8),), {}),
    "smooth": ((_randn(4, 8),), {}),
    "peek": ((_randn(4, 8),), {}),
}

OPS = {name: getattr(torch.ops.symfuzz_buggy, name).default for name in SAMPLES}

# (check, kind) each planted bug must be reported as (tests/test_quality_opcheck.py, benchmarks/opcheck.py).
EXPECTED = {
    "half_cols": ("faketensor", "wrong-shape"),
    "scale2": ("faketensor", "wrong-strides"),
    "soft_gate": ("faketensor", "wrong-dtype"),
    "row_sum": ("symbolic_fake", "specializes"),
    "positives": ("symbolic_fake", "data-dependent-size-not-unbacked"),
    "add_one": ("schema", "undeclared-mutation"),
    "flat": ("schema", "undeclared-alias"),
    "cube": ("gradient", "wrong-gradient"),
    "smooth": ("autograd_registration", "missing-autograd"),
    "peek": ("faketensor", "fake-reads-data"),
}
