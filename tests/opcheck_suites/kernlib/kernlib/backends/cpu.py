"""CPU kernels: the dequantization kernels and row_sums in C (kernlib/backends/_native.c,
through ctypes), the rest in plain torch."""

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

_SOURCE = Path(__file__).with_name("_native.c")


def _build() -> Path:
    """Compile _native.c once per source version into the temp dir and return the .so
    (written under a temporary name and moved into place: concurrent builds are safe)."""
    source = _SOURCE.read_bytes()
    lib = Path(tempfile.gettempdir()) / f"kernlib_native_{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not lib.exists():
        fd, tmp = tempfile.mkstemp(prefix=f".{lib.name}.", suffix=".tmp", dir=lib.parent)
        os.close(fd)
        try:
            subprocess.run([os.environ.get("CC", "cc"), "-O1", "-shared", "-fPIC", "-o", tmp, str(_SOURCE)],
                           check=True, capture_output=True, text=True)
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
_lib.kernlib_dequant.argtypes = [_p, _p, _i64, _p, _p, _p, _i64, _i64, _i64]
_lib.kernlib_dequant.restype = None
_lib.kernlib_row_sums.argtypes = [_p, _i64, _i64, _p]
_lib.kernlib_row_sums.restype = None


def _ptr(t):
    return None if t is None else t.data_ptr()


def _dequant(A, absmax, blocksize, out, offset=None, offset_scale=None):
    torch._check(blocksize >= 1, lambda: f"blocksize must be >= 1, got {blocksize}")
    A = A.to(torch.uint8).contiguous()
    absmax = absmax.float().contiguous()
    offset = None if offset is None else offset.float().contiguous()
    offset_scale = None if offset_scale is None else offset_scale.float().contiguous()
    n = A.numel()
    _lib.kernlib_dequant(A.data_ptr(), absmax.data_ptr(), absmax.numel(), _ptr(offset), _ptr(offset_scale),
                         out.data_ptr(), n, min(n, out.numel()), blocksize)


@torch.library.register_kernel("kernlib::dequant_blocks", "cpu")
def _(A, absmax, blocksize):
    out = torch.empty(A.shape, dtype=torch.float32)
    _dequant(A, absmax, blocksize, out)
    return out


@torch.library.register_kernel("kernlib::dequant_blocks_out", "cpu")
def _(A, absmax, blocksize, out):
    # Lax, as such kernels are: it writes what fits into whatever `out` it is given.
    torch._check(out.dtype == torch.float32 and out.is_contiguous(), lambda: "out must be contiguous float32")
    _dequant(A, absmax, blocksize, out)


@torch.library.register_kernel("kernlib::dequant_offset", "cpu")
def _(A, absmax, blocksize, offset=None, offset_scale=None):
    out = torch.empty(A.shape, dtype=torch.float32)
    _dequant(A, absmax, blocksize, out, offset, offset_scale)
    return out


@torch.library.register_kernel("kernlib::row_sums", "cpu")
def _(x):
    """BUG (planted): the wrapper copies x only when its last dim is strided, taking
    stride(-1) == 1 for "contiguous"; an expanded (stride-0 rows) or row-sliced x is read
    as a dense row-major buffer, and the sums are garbage."""
    torch._check(x.dim() == 2, lambda: f"x must be 2-D, got {x.dim()}-D")
    x = x.float()
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty((x.shape[0],), dtype=torch.float32)
    _lib.kernlib_row_sums(x.data_ptr(), x.shape[0], x.shape[1], out.data_ptr())
    return out


class _SoftClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (1 - torch.tanh(x) ** 2)


@torch.library.register_kernel("kernlib::soft_clip", "cpu")
def _(x):
    """BUG (planted): the gradient formula is an autograd.Function applied inside the CPU
    kernel, below the Autograd key, where the dispatcher has already left autograd: the
    outputs require grad, and under torch.compile the formula is silently skipped."""
    torch._check(x.is_floating_point(), lambda: f"x must be floating point, got {x.dtype}")
    return _SoftClip.apply(x)
