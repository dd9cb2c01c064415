"""Three custom ops in namespace ``mylib``, each with a fake kernel and autograd.

scaled_gelu and pair_sum are correct. downsample has a bug that its author's
tests don't see, kept on purpose for the demo: its fake kernel says
``n // 2`` output columns where the real kernel keeps ``ceil(n / 2)``, so the
two disagree only when the last dimension is odd (the tests use width 8).
symfuzz opcheck finds it by sweeping shapes; the example's
``opcheck_failures.json`` records it as a known failure (xfail).
"""

import math

import torch

# scaled_gelu ----------------------------------------------------------------


@torch.library.custom_op("mylib::scaled_gelu", mutates_args=())
def scaled_gelu(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale * gelu(x)`` (tanh approximation), elementwise; output is contiguous.

    Floating-point inputs only: an integer input would come out float, which the
    fake kernel (output dtype = input dtype) does not say."""
    torch._check(x.is_floating_point(), lambda: f"scaled_gelu: floating-point input only, got {x.dtype}")
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))
    return (scale * 0.5 * x * (1.0 + torch.tanh(inner))).contiguous()


@scaled_gelu.register_fake
def _(x, scale):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _scaled_gelu_setup(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x)
    ctx.scale = scale


def _scaled_gelu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    c = math.sqrt(2.0 / math.pi)
    t = torch.tanh(c * (x + 0.044715 * x.pow(3)))
    d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)
    return grad * ctx.scale * d, None


scaled_gelu.register_autograd(_scaled_gelu_backward, setup_context=_scaled_gelu_setup)


# pair_sum -------------------------------------------------------------------


@torch.library.custom_op("mylib::pair_sum", mutates_args=())
def pair_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x + y`` for two tensors of the same shape and dtype; output is contiguous."""
    torch._check(x.shape == y.shape, lambda: "pair_sum: x and y must have the same shape")
    torch._check(x.dtype == y.dtype, lambda: "pair_sum: x and y must have the same dtype")
    return (x + y).contiguous()


@pair_sum.register_fake
def _(x, y):
    torch._check(x.shape == y.shape, lambda: "pair_sum: x and y must have the same shape")
    torch._check(x.dtype == y.dtype, lambda: "pair_sum: x and y must have the same dtype")
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


pair_sum.register_autograd(lambda ctx, grad: (grad, grad), setup_context=lambda ctx, inputs, output: None)


# downsample -----------------------------------------------------------------


@torch.library.custom_op("mylib::downsample", mutates_args=())
def downsample(x: torch.Tensor) -> torch.Tensor:
    """Every other column of ``x`` (columns 0, 2, 4, ...): ``ceil(n / 2)`` of ``n``.

    KNOWN BUG (kept for the demo): the fake kernel below floors instead.
    """
    return x[..., ::2].clone(memory_format=torch.contiguous_format)


@downsample.register_fake
def _(x):
    # BUG: should be (x.shape[-1] + 1) // 2; wrong for odd widths only.
    return x.new_empty(*x.shape[:-1], x.shape[-1] // 2)


def _downsample_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.shape = x.shape


def _downsample_backward(ctx, grad):
    gx = grad.new_zeros(ctx.shape)
    gx[..., ::2] = grad
    return gx


downsample.register_autograd(_downsample_backward, setup_context=_downsample_setup)



# snap -----------------------------------------------------------------------
# Forward-only on purpose: an inference-time op with no register_autograd (its
# gradient is zero almost everywhere). symfuzz opcheck reports it as not
# differentiable, an info line, never a failure; --opcheck-require-autograd (or
# the store's require_autograd setting) would make the missing formula one.


@torch.library.custom_op("mylib::snap", mutates_args=())
def snap(x: torch.Tensor, step: float) -> torch.Tensor:
    """``x`` rounded to the nearest multiple of ``step`` (fake quantization, inference only)."""
    torch._check(x.is_floating_point(), lambda: f"snap: floating-point input only, got {x.dtype}")
    return (torch.round(x / step) * step).contiguous()


@snap.register_fake
def _(x, step):
    torch._check(x.is_floating_point(), lambda: f"snap: floating-point input only, got {x.dtype}")
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)
