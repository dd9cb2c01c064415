"""Device-independent kernels in plain torch ("default" = CompositeExplicitAutograd).

Backends with their own kernel for an op (quantlib.backends.cpu) take precedence
on their device; these serve every other device.
"""

import torch


@torch.library.register_kernel("quantlib::row_absmax", "default")
def _(x):
    torch._check(x.dim() == 2, lambda: f"x must be 2-D, got {x.dim()}-D")
    # A zero column makes the max of an empty row 0 (|x| >= 0 everywhere else).
    return torch.nn.functional.pad(x.abs().float(), (0, 1)).amax(dim=1)


@torch.library.register_kernel("quantlib::quantize_blockwise", "default")
def _(A, code, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    flat = A.reshape(-1).float()
    n = flat.numel()
    n_blocks = (n + blocksize - 1) // blocksize
    padded = torch.nn.functional.pad(flat, (0, n_blocks * blocksize - n)).view(n_blocks, blocksize)
    absmax = padded.abs().amax(dim=1) if n_blocks else flat.new_empty((0,))
    scaled = padded / torch.where(absmax > 0, absmax, 1.0)[:, None]
    idx = (scaled.reshape(-1, 1) - code.float().reshape(1, -1)).abs().argmin(dim=1)
    return idx[:n].to(torch.uint8).view(A.shape), absmax


@torch.library.register_kernel("quantlib::dequantize_blockwise", "default")
def _(A, absmax, code, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    flat = A.reshape(-1).long()
    block = torch.arange(flat.numel(), device=A.device) // blocksize
    return (code.float()[flat] * absmax.float()[block]).view(A.shape)
