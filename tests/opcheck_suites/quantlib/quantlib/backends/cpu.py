"""CPU kernels: blockwise (de)quantization in C (quantlib/backends/_native.c, via
ctypes), scale_rows in plain torch."""

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("_native.c")


def _build() -> Path:
    """Compile _native.c once per source version into the temp dir and return the .so.

    The file is named by the source's hash; it is written under a temporary name
    and moved into place, so processes building it at the same time never load a
    half-written library.
    """
    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    lib = Path(tempfile.gettempdir()) / f"quantlib_native_{digest}.so"
    if not lib.exists():
        fd, tmp = tempfile.mkstemp(prefix=f".{lib.name}.", suffix=".tmp", dir=lib.parent)
        os.close(fd)
        try:
            subprocess.run(
                [os.environ.get("CC", "cc"), "-O1", "-shared", "-fPIC", "-o", tmp, str(_SOURCE), "-lm"],
                check=True, capture_output=True, text=True,
            )
            os.chmod(tmp, 0o755)
            os.replace(tmp, lib)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"building {_SOURCE} failed:\n{e.stderr}") from e
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return lib


_lib = ctypes.CDLL(str(_build()))
_p, _i64 = ctypes.c_void_p, ctypes.c_int64
_lib.quantlib_quantize_blockwise.argtypes = [_p, _p, _i64, _p, _p, _i64, _i64]
_lib.quantlib_quantize_blockwise.restype = None
_lib.quantlib_dequantize_blockwise.argtypes = [_p, _p, _p, _i64, _p, _i64, _i64]
_lib.quantlib_dequantize_blockwise.restype = None


@torch.library.register_kernel("quantlib::quantize_blockwise", "cpu")
def _(A, code, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    A = A.float().contiguous()
    code = code.float().contiguous()
    n = A.numel()
    out = torch.empty(A.shape, dtype=torch.uint8)
    absmax = torch.empty(((n + blocksize - 1) // blocksize,), dtype=torch.float32)
    _lib.quantlib_quantize_blockwise(
        A.data_ptr(), code.data_ptr(), code.numel(), out.data_ptr(), absmax.data_ptr(), n, blocksize
    )
    return out, absmax


@torch.library.register_kernel("quantlib::dequantize_blockwise", "cpu")
def _(A, absmax, code, blocksize):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    torch._check(A.dtype == torch.uint8, lambda: f"A must be uint8, got {A.dtype}")
    n = A.numel()
    torch._check(absmax.numel() >= (n + blocksize - 1) // blocksize,
                 lambda: "absmax has fewer entries than A has blocks")
    A = A.contiguous()
    absmax = absmax.float().contiguous()
    code = code.float().contiguous()
    out = torch.empty(A.shape, dtype=torch.float32)
    _lib.quantlib_dequantize_blockwise(
        A.data_ptr(), absmax.data_ptr(), code.data_ptr(), code.numel(), out.data_ptr(), n, blocksize
    )
    return out


@torch.library.register_kernel("quantlib::scale_rows", "cpu")
def _(x, scale):
    torch._check(x.dim() == 2, lambda: f"x must be 2-D, got {x.dim()}-D")
    torch._check(scale.dim() == 1 and scale.shape[0] == x.shape[0], lambda: "scale must have one entry per row of x")
    return (x * scale[:, None]).contiguous()
