"""quantlib: a small blockwise-quantization op library (a test fixture for symfuzz's
opcheck plugin, laid out like real op libraries such as bitsandbytes)."""

import torch

from . import _ops  # noqa: F401  (defines the ops)
from . import _fake  # noqa: F401  (fake kernels)
from . import _autograd  # noqa: F401  (autograd formulas)
from . import backends  # noqa: F401  (real kernels)

__all__ = ["create_dynamic_map", "quantize_blockwise", "dequantize_blockwise"]


def create_dynamic_map() -> torch.Tensor:
    """The 256-entry quantization table: sorted, in [-1, 1], finer near 0."""
    t = torch.linspace(-1.0, 1.0, 256, dtype=torch.float64)
    return (t.sign() * t.abs() ** 1.5).to(torch.float32)


def quantize_blockwise(A: torch.Tensor, code: torch.Tensor | None = None, blocksize: int = 256):
    """Returns (codes, absmax, code)."""
    if code is None:
        code = create_dynamic_map().to(A.device)
    out, absmax = torch.ops.quantlib.quantize_blockwise(A, code, blocksize)
    return out, absmax, code


def dequantize_blockwise(A: torch.Tensor, absmax: torch.Tensor, code: torch.Tensor, blocksize: int = 256):
    return torch.ops.quantlib.dequantize_blockwise(A, absmax, code, blocksize)
