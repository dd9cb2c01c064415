"""Device-independent kernels in plain torch ("default" = CompositeExplicitAutograd;
gelu_scale is CompositeImplicitAutograd: autograd goes through the ops it calls).

The forward-only kernels compute under no_grad, as their C counterparts would: a kernel
below the Autograd key whose outputs require grad is a registration bug (soft_clip's).
"""

import torch


@torch.library.register_kernel("kernlib::dequant_rows", "default")
@torch.no_grad()
def _(A, row_stats):
    torch._check(A.dim() == 2, lambda: f"A must be 2-D, got {A.dim()}-D")
    # Broadcasts whatever it is given: the per-row contract is the caller's to keep.
    return (A.float() * row_stats.float()[:, None] / 127.0).contiguous()


@torch.library.register_kernel("kernlib::int8_linear", "default")
@torch.no_grad()
def _(A, B, row_stats=None, col_stats=None, bias=None):
    torch._check(A.dim() == 2 and B.dim() == 2, lambda: "A and B must be 2-D")
    torch._check(A.shape[1] == B.shape[1], lambda: "A and B must have the same number of columns")
    acc = A.to(torch.int32) @ B.to(torch.int32).T
    if row_stats is None:
        return acc
    out = acc.float() * (row_stats.float()[:, None] * col_stats.float()[None, :] / (127.0 * 127.0))
    return out if bias is None else out + bias.float()


_lib = torch.library.Library("kernlib", "FRAGMENT")


def _gelu_scale(x, w):
    return torch.nn.functional.gelu(x) * w


_lib.impl("gelu_scale", _gelu_scale, "CompositeImplicitAutograd")


@torch.library.register_kernel("kernlib::scale_f32", "default")
def _(x, scale):
    torch._check(scale.numel() == 1, lambda: f"scale must have one element, got {scale.numel()}")
    return (x.float() * scale.float()).contiguous()


@torch.library.register_kernel("kernlib::fp8_dequant", "default")
@torch.no_grad()
def _(x, scale):
    torch._check(scale.numel() == 1, lambda: f"scale must have one element, got {scale.numel()}")
    return (x.float() * scale.float()).contiguous()


@torch.library.register_kernel("kernlib::rescale", "default")
@torch.no_grad()
def _(x, factor):
    """BUG (planted): this keeps x's layout (a transposed x gives a transposed result),
    while the fake kernel says contiguous: compiled code then trips Inductor's stride assert."""
    return x * factor


@torch.library.register_kernel("kernlib::center", "default")
@torch.no_grad()
def _(x):
    """BUG (planted): scales x in place to save a copy and scales it back after: the values
    come back unchanged, but x was written (its version counter moves) though the schema
    does not declare it mutable; under torch.compile or autograd that write is unsafe."""
    x.mul_(2.0)
    out = x - x.mean()
    x.div_(2.0)
    return out / 2.0
