"""Fake (meta) kernels: output shapes and dtypes without computing anything."""

import torch


@torch.library.register_fake("quantlib::quantize_blockwise")
def _(A, code, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    n_blocks = (A.numel() + blocksize - 1) // blocksize
    out = torch.empty(A.shape, dtype=torch.uint8, device=A.device)
    absmax = torch.empty((n_blocks,), dtype=torch.float32, device=A.device)
    return out, absmax


@torch.library.register_fake("quantlib::dequantize_blockwise")
def _(A, absmax, code, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    torch._check(A.dtype == torch.uint8, lambda: f"A must be uint8, got {A.dtype}")
    n_blocks = (A.numel() + blocksize - 1) // blocksize
    torch._check(absmax.numel() >= n_blocks, lambda: "absmax has fewer entries than A has blocks")
    return torch.empty(A.shape, dtype=torch.float32, device=A.device)


@torch.library.register_fake("quantlib::scale_rows")
def _(x, scale):
    torch._check(x.dim() == 2, lambda: f"x must be 2-D, got {x.dim()}-D")
    torch._check(scale.dim() == 1 and scale.shape[0] == x.shape[0], lambda: "scale must have one entry per row of x")
    return x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, scale.dtype))


@torch.library.register_fake("quantlib::row_absmax")
def _(x):
    torch._check(x.dim() == 2, lambda: f"x must be 2-D, got {x.dim()}-D")
    return x.new_empty((x.shape[0],), dtype=torch.float32)
