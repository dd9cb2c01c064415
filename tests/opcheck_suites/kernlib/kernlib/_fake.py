"""Fake (meta) kernels: output shapes and dtypes without computing anything."""

import torch


@torch.library.register_fake("kernlib::dequant_blocks")
def _(A, absmax, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    return A.new_empty(A.shape, dtype=torch.float32)


@torch.library.register_fake("kernlib::dequant_blocks_out")
def _(A, absmax, blocksize, out):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    torch._check(out.shape == A.shape, lambda: f"out must have A's shape {tuple(A.shape)}, got {tuple(out.shape)}")
    torch._check(out.dtype == torch.float32, lambda: f"out must be float32, got {out.dtype}")


@torch.library.register_fake("kernlib::dequant_offset")
def _(A, absmax, blocksize, offset=None, offset_scale=None):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    return A.new_empty(A.shape, dtype=torch.float32)


@torch.library.register_fake("kernlib::dequant_rows")
def _(A, row_stats):
    torch._check(A.dim() == 2, lambda: f"A must be 2-D, got {A.dim()}-D")
    return A.new_empty(A.shape, dtype=torch.float32)


@torch.library.register_fake("kernlib::int8_linear")
def _(A, B, row_stats=None, col_stats=None, bias=None):
    torch._check(A.dim() == 2 and B.dim() == 2, lambda: "A and B must be 2-D")
    torch._check(A.shape[1] == B.shape[1], lambda: "A and B must have the same number of columns")
    dtype = torch.int32 if row_stats is None else torch.float32
    return A.new_empty((A.shape[0], B.shape[0]), dtype=dtype)


@torch.library.register_fake("kernlib::scale_f32")
def _(x, scale):
    torch._check(scale.numel() == 1, lambda: f"scale must have one element, got {scale.numel()}")
    return x.new_empty(x.shape, dtype=torch.float32)


@torch.library.register_fake("kernlib::fp8_dequant")
def _(x, scale):
    torch._check(scale.numel() == 1, lambda: f"scale must have one element, got {scale.numel()}")
    return x.new_empty(x.shape, dtype=torch.float32)


@torch.library.register_fake("kernlib::rescale")
def _(x, factor):
    return x.new_empty(x.shape)  # contiguous strides: the bug (the real kernel keeps x's layout)


@torch.library.register_fake("kernlib::row_sums")
def _(x):
    torch._check(x.dim() == 2, lambda: f"x must be 2-D, got {x.dim()}-D")
    return x.new_empty((x.shape[0],), dtype=torch.float32)


@torch.library.register_fake("kernlib::center")
def _(x):
    return torch.empty_like(x)


@torch.library.register_fake("kernlib::soft_clip")
def _(x):
    return torch.empty_like(x)
