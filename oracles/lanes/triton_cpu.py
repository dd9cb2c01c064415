"""Run Inductor's *Triton* codegen on a CPU-only machine via Triton's interpreter.

Self-contained on purpose: this file imports only the standard library, torch,
triton and numpy (the last three lazily, inside functions), because its source
text is inlined verbatim into standalone repro scripts.  Do not import other
project modules from here.

How the lane works
------------------
* ``torch._inductor.config.cpu_backend = "triton"`` makes Inductor lower CPU
  tensors to real ``@triton.jit`` kernels (symbolic sizes become kernel
  arguments, exactly as on GPU) instead of C++.
* ``TRITON_INTERPRET=1`` makes ``triton.jit`` return ``InterpretedFunction``
  objects that execute the kernel body in Python/numpy on host memory, so no
  GPU driver is needed.  It has to be in the environment *before* triton is
  imported: ``@triton.jit`` functions defined at import time (Triton's own
  ``triton.language.standard`` helpers, Inductor's ``triton_helpers``) are
  turned into compiled-mode ``JITFunction`` objects otherwise.  Note that
  ``import torch._inductor.config`` already imports triton, while a bare
  ``import torch`` does not.  Inductor checks for the exact string ``"1"``
  (``async_compile.py``/``triton_heuristics.py``), so other truthy spellings
  are normalised to ``"1"``.

Two things still assume a real GPU and are patched by
:func:`enable_triton_interpreter`:

1. ``torch.utils._triton.triton_hash_with_backend()`` asks
   ``triton.runtime.driver.active`` for the current target, which raises
   without an active GPU driver.  Inductor only uses the value as a cache-key
   component (``backend_hash`` in the Triton kernel's ``inductor_meta`` and in
   the autotune cache), so a constant derived from the Triton sources plus an
   "interpreter" tag is a faithful replacement.

2. ``libdevice``.  Inductor's generated kernels do
   ``from torch._inductor.runtime.triton_helpers import libdevice`` which is
   the module ``triton.language.extra.libdevice``.  That module only holds
   *stubs* (``def exp(arg0): ...``); the compiler swaps them for the backend
   module (``triton.language.extra.cuda.libdevice``, whose functions call
   ``core.extern_elementwise`` with per-dtype symbol tables such as
   ``fp32 -> "__nv_expf"``).  The interpreter does none of that: it only
   rebinds the builtins of ``tl``, ``tl.core`` and ``tl.math`` to its numpy
   builder, so in interpreted kernels ``libdevice.exp(x)`` calls the stub and
   silently returns ``None`` (the kernel then dies with "'NoneType' object has
   no attribute 'type'").  Even calling the CUDA functions would not help,
   because ``InterpreterBuilder.create_extern_elementwise`` raises
   ``NotImplementedError``.

   The stand-ins installed here therefore (a) replace each stub in
   ``triton.language.extra.libdevice`` with a wrapper that calls the matching
   CUDA libdevice function with the interpreter's semantic object, so the
   *real* CUDA dtype tables, scalar promotion and broadcasting are applied
   (fp32 -> fp32, ``isinf`` -> int32, ``pow(fp32, int32)`` -> ``powi``, fp16 /
   bf16 rejected exactly as on GPU), and (b) replace
   ``InterpreterBuilder.create_extern_elementwise`` with a numpy evaluator
   keyed by the libdevice function name.  Names that have no CUDA function
   (e.g. ``fast_tanhf``) get a direct numpy wrapper; names without a numpy
   implementation raise a clear ``NotImplementedError`` instead of the stub's
   silent ``None``.

Public API: :func:`enable_triton_interpreter`,
:func:`triton_interpreter_unavailable_reason`.
"""

# No ``from __future__`` imports: this text may be pasted mid-file.
import functools
import hashlib
import importlib.metadata as md
import importlib.util
import inspect
import math
import os
import re
import sys
import threading
import warnings

__all__ = ["enable_triton_interpreter", "triton_interpreter_unavailable_reason"]

_ENV_VAR = "TRITON_INTERPRET"
# Triton 3.4 replaced the ``_builder`` plumbing with ``_semantic`` objects and
# introduced ``triton.runtime.interpreter.interpreter_semantic``; the stand-ins
# below call CUDA libdevice functions with ``_semantic=interpreter_semantic``.
_MIN_TRITON = (3, 4)
_TRUTHY = ("1", "true", "on", "yes")
# Marker attribute used to keep every patch idempotent.
_MARK = "__symfuzz_triton_cpu__"

# Bump when the stand-ins' numerics change (folded into the backend hash).
_STANDINS_VERSION = 1

_state = {"enabled": False}
_tls = threading.local()  # which libdevice function is being evaluated


# --------------------------------------------------------------------------
# Availability probing (must not import triton / torch._inductor)
# --------------------------------------------------------------------------


def _version_tuple(text):
    m = re.match(r"\s*(\d+)\.(\d+)", str(text))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _package_dir(name):
    """Directory of a top-level package, found without importing it."""
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "__file__", None):
        return os.path.dirname(mod.__file__)
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    locs = list(spec.submodule_search_locations or [])
    if locs:
        return locs[0]
    return os.path.dirname(spec.origin) if spec.origin else None


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def _triton_version(triton_dir):
    mod = sys.modules.get("triton")
    if mod is not None and getattr(mod, "__version__", None):
        return str(mod.__version__)
    for dist in ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu", "triton-cpu"):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            continue
        except Exception:  # pragma: no cover - broken metadata
            continue
    text = _read(os.path.join(triton_dir, "__init__.py")) or ""
    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    return m.group(1) if m else None


def _env_truthy():
    return os.environ.get(_ENV_VAR, "").strip().lower() in _TRUTHY


def triton_interpreter_unavailable_reason() -> str | None:
    """Why the Triton-interpreter lane cannot run here, or ``None`` if it can.

    Returns a one-line human-readable reason.  Never raises, and never
    imports triton or ``torch._inductor`` (importing them before
    ``TRITON_INTERPRET=1`` is set would itself break the lane); versions and
    features are read from package metadata and source text instead.
    """
    try:
        return _unavailable_reason()
    except Exception as e:  # pragma: no cover - defensive, must not raise
        return f"could not probe the Triton interpreter lane: {type(e).__name__}: {e}"


def _unavailable_reason():
    if importlib.util.find_spec("numpy") is None:
        return "numpy is not installed (Triton's interpreter runs kernels on numpy)"
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    triton_dir = _package_dir("triton")
    if triton_dir is None:
        return "triton is not installed"

    version = _triton_version(triton_dir)
    vt = _version_tuple(version) if version else None
    if vt is not None and vt < _MIN_TRITON:
        want = ".".join(map(str, _MIN_TRITON))
        return f"triton {version} is too old for the interpreter lane (need >= {want})"

    interp_src = _read(os.path.join(triton_dir, "runtime", "interpreter.py"))
    if interp_src is None:
        return f"triton {version} has no interpreter (triton/runtime/interpreter.py missing)"
    for needle in ("interpreter_semantic", "def create_extern_elementwise", "class InterpreterBuilder"):
        if needle not in interp_src:
            return f"triton {version} interpreter lacks {needle.split()[-1]!r}; unsupported triton layout"
    if not os.path.isfile(os.path.join(triton_dir, "language", "extra", "libdevice.py")):
        return f"triton {version} has no triton.language.extra.libdevice module"

    if "triton" in sys.modules and not _env_truthy():
        return (
            f"triton was imported before {_ENV_VAR}=1 was set; set {_ENV_VAR}=1 in the "
            "environment before importing triton or torch._inductor"
        )

    torch_dir = _package_dir("torch")
    cfg_mod = sys.modules.get("torch._inductor.config")
    if cfg_mod is not None:
        if not hasattr(cfg_mod, "cpu_backend"):
            return "this torch has no torch._inductor.config.cpu_backend option"
    else:
        cfg_src = _read(os.path.join(torch_dir, "_inductor", "config.py")) if torch_dir else None
        if cfg_src is None:
            return "torch._inductor is not available in this torch build"
        m = re.search(r"^cpu_backend\s*:(.*)$", cfg_src, re.M)
        if m is None:
            return "this torch has no torch._inductor.config.cpu_backend option"
        if "Literal" in m.group(1) and "triton" not in m.group(1):
            return "this torch's torch._inductor.config.cpu_backend does not accept 'triton'"
    return None


# --------------------------------------------------------------------------
# Enabling
# --------------------------------------------------------------------------


def enable_triton_interpreter() -> None:
    """Make ``torch.compile`` (Inductor) emit Triton kernels for CPU tensors
    and run them through Triton's interpreter.  Idempotent.

    * Sets ``TRITON_INTERPRET=1`` (must happen before triton is imported; if
      triton is already imported without it, raises ``RuntimeError``).
    * Sets ``torch._inductor.config.cpu_backend = "triton"`` (re-applied on
      every call, in case a ``config.patch`` context reset it).
    * Patches ``triton_hash_with_backend`` (needs a GPU driver; only feeds a
      cache key).
    * Installs numpy-backed ``libdevice`` stand-ins (interpreter cannot run
      extern calls; see module docstring).
    """
    if not _state["enabled"]:
        if "triton" in sys.modules and not _env_truthy():
            raise RuntimeError(
                f"triton was already imported without {_ENV_VAR}=1, so its @triton.jit "
                "functions were built for compiled (GPU) mode. Set the environment "
                f"variable {_ENV_VAR}=1 before importing triton or torch._inductor "
                "(a bare `import torch` is fine), e.g. call enable_triton_interpreter() "
                "first or export it in the shell."
            )
        # Probe before touching the environment so a failed enable leaves no trace.
        reason = triton_interpreter_unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"Triton interpreter lane unavailable: {reason}")
        # Inductor compares against the exact string "1" (other truthy spellings
        # would make triton interpret while Inductor launches as if compiled).
        os.environ[_ENV_VAR] = "1"

    import torch._inductor.config as inductor_config  # imports triton (now interpreted)

    if not hasattr(inductor_config, "cpu_backend"):
        raise RuntimeError("Triton interpreter lane unavailable: torch lacks torch._inductor.config.cpu_backend")
    inductor_config.cpu_backend = "triton"

    if not _state["enabled"]:
        import triton  # lazy, as are all non-stdlib imports here (see the module docstring)

        knobs = getattr(triton, "knobs", None)
        if knobs is not None and not knobs.runtime.interpret:  # pragma: no cover - defensive
            raise RuntimeError(f"triton does not see {_ENV_VAR}=1; set it before importing triton")
        _patch_backend_hash()
        _install_libdevice_standins()
        _silence_known_noise()
        _state["enabled"] = True


def _silence_known_noise():
    """Targeted warning filters for messages that are expected in this lane.

    * Inductor's CPU-Triton wrapper calls ``triton_helpers.set_driver_to_cpu()``
      which warns "Could not find an active CPU backend. Generated kernels will
      not be executable!" unless the triton-cpu fork is installed.  Under the
      interpreter no driver is needed, so the warning is false.
    * The interpreter evaluates masked-off lanes too (e.g. ``0/0`` past the end
      of a row), which makes numpy emit RuntimeWarnings attributed to
      ``triton.runtime.interpreter``; the masked results are discarded.
    """
    warnings.filterwarnings("ignore", message="Could not find an active CPU backend", category=UserWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")


# --------------------------------------------------------------------------
# Patch 1: backend hash
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _interpreter_backend_hash() -> str:
    """Stand-in for ``torch.utils._triton.triton_hash_with_backend``.

    The original hashes ``triton_key()`` with ``triton_backend().hash()``; the
    latter queries ``driver.active.get_current_target()`` and fails without a
    GPU.  The value is only a cache key, so hash the Triton sources (or, if
    unavailable, the version) together with a fixed "interpreter" backend tag.
    Upper-case hex like the original (it must not look like a Python keyword).
    """
    import triton  # lazy, as are all non-stdlib imports here (see the module docstring)

    try:
        # lazy, as are all non-stdlib imports here (see the module docstring)
        from triton.runtime.cache import triton_key

        base = triton_key()
    except Exception:
        base = f"triton-{getattr(triton, '__version__', '?')}"
    key = f"{base}-interpreter-numpy-standins-v{_STANDINS_VERSION}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest().upper()


def _patch_backend_hash():
    """Replace ``triton_hash_with_backend`` in ``torch.utils._triton`` and in
    every already-imported torch module that bound it by name (``from ...
    import triton_hash_with_backend``).  Modules imported later pick up the
    patched attribute from ``torch.utils._triton`` itself."""
    import torch.utils._triton as tu  # lazy, as are all non-stdlib imports here (see the module docstring)

    original = getattr(tu, "triton_hash_with_backend", None)
    if original is None or getattr(original, _MARK, False):
        return
    setattr(_interpreter_backend_hash, _MARK, True)
    tu.triton_hash_with_backend = _interpreter_backend_hash
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("torch"):
            continue
        try:
            if getattr(mod, "triton_hash_with_backend", None) is original:
                setattr(mod, "triton_hash_with_backend", _interpreter_backend_hash)
        except Exception:  # pragma: no cover - exotic lazy modules
            continue


# --------------------------------------------------------------------------
# Patch 2: libdevice stand-ins
# --------------------------------------------------------------------------

# Result dtype for the direct (no CUDA table) path; default is "same as the
# first argument".
_INT32_RESULT = frozenset({"isnan", "isinf", "signbit", "finitef", "isfinited", "ilogb"})
_INT64_RESULT = frozenset({"llrint", "llround"})


@functools.lru_cache(maxsize=None)
def _impls():
    """name -> numpy function on ``np.ndarray`` arguments.

    Arguments arrive already promoted/broadcast (CUDA dtype tables), e.g. both
    fp32.  Results are cast to the libdevice return dtype by the caller, so
    helpers may compute in a wider type where that is more exact.  Functions
    numpy lacks use torch's CPU kernels (same numerics as eager).
    """
    import numpy as np  # lazy, as are all non-stdlib imports here (see the module docstring)

    def torch_unary(path):
        def impl(x):
            import torch  # lazy, as are all non-stdlib imports here (see the module docstring)

            fn = torch
            for part in path.split("."):
                fn = getattr(fn, part)
            with torch.no_grad():
                return fn(torch.from_numpy(np.array(x, copy=True))).numpy()

        return impl

    def vec_math(fn, on_error):
        def safe(*v):
            try:
                return fn(*v)
            except (ValueError, OverflowError):
                return on_error(*v)

        vf = np.vectorize(safe, otypes=[np.float64])
        return lambda *a: vf(*[np.asarray(v, dtype=np.float64) for v in a])

    def round_half_away(x):
        t = np.trunc(x)
        return np.where(np.abs(x - t) >= 0.5, t + np.copysign(np.ones_like(x), x), t)

    def ilogb(x):
        _, e = np.frexp(x)
        r = e.astype(np.int64) - 1
        r = np.where(np.isinf(x), np.iinfo(np.int32).max, r)
        r = np.where((x == 0) | np.isnan(x), np.iinfo(np.int32).min, r)
        return r.astype(np.int32)

    def logb(x):
        _, e = np.frexp(x)
        r = (e.astype(np.int64) - 1).astype(x.dtype)
        r = np.where(x == 0, -np.inf, r)
        r = np.where(np.isinf(x), np.inf, r)
        return np.where(np.isnan(x), x, r)

    def pow_(x, y):
        # pow(fp, int32) is libdevice "powi": exponent given as an integer.
        if np.issubdtype(y.dtype, np.integer):
            return np.power(x.astype(np.float64), y.astype(np.float64))
        return np.power(x, y)

    def ldexp(x, n):
        return np.ldexp(x, n.astype(np.int32))

    def fdim(x, y):
        d = np.where(x > y, x - y, np.zeros_like(x))
        return np.where(np.isnan(x) | np.isnan(y), np.nan, d)

    def fma(x, y, z):
        if x.dtype == np.float32:  # exact product in fp64, one final rounding (ok up to rare double rounding)
            return x.astype(np.float64) * y.astype(np.float64) + z.astype(np.float64)
        return x * y + z  # fp64: not fused

    def saturate(x):
        return np.where(np.isnan(x), np.zeros_like(x), np.clip(x, 0, 1))

    def exp10(x):
        return np.power(np.asarray(10, dtype=x.dtype), x)

    def sinpi(x):
        x64 = x.astype(np.float64)
        r = np.sin(np.pi * np.remainder(x64, 2.0))
        return np.where(x64 == np.round(x64), np.copysign(0.0, x64), r)

    def cospi(x):
        x64 = x.astype(np.float64)
        r = np.cos(np.pi * np.remainder(x64, 2.0))
        return np.where(np.abs(x64 - np.floor(x64)) == 0.5, 0.0, r)

    def erfcinv(y):
        import torch  # lazy, as are all non-stdlib imports here (see the module docstring)

        t = torch.from_numpy(np.asarray(y, dtype=np.float64) / 2.0)
        return (-torch.special.ndtri(t) / math.sqrt(2.0)).numpy()

    def tgamma_err(v):
        if v == 0:
            return math.copysign(math.inf, v)
        if v < 0 and v == math.floor(v):
            return math.nan
        return math.inf  # overflow

    t = {
        # rounding / abs
        "abs": np.abs,
        "floor": np.floor,
        "ceil": np.ceil,
        "trunc": np.trunc,
        "rint": np.rint,
        "nearbyint": np.rint,  # round-half-even, like torch.round
        "round": round_half_away,  # C round(): half away from zero
        "llrint": np.rint,
        "llround": round_half_away,
        "saturatef": saturate,
        # exp / log
        "exp": np.exp,
        "exp2": np.exp2,
        "exp10": exp10,
        "expm1": np.expm1,
        "log": np.log,
        "log2": np.log2,
        "log10": np.log10,
        "log1p": np.log1p,
        "logb": logb,
        "ilogb": ilogb,
        "ldexp": ldexp,
        "scalbn": ldexp,
        # roots / powers
        "sqrt": np.sqrt,
        "sqrt_rn": np.sqrt,
        "rsqrt": lambda x: 1 / np.sqrt(x),
        "rsqrt_rn": lambda x: 1 / np.sqrt(x),
        "cbrt": np.cbrt,
        "rcbrt": lambda x: 1 / np.cbrt(x),
        "pow": pow_,
        "hypot": np.hypot,
        # trig / hyperbolic
        "sin": np.sin,
        "cos": np.cos,
        "tan": np.tan,
        "asin": np.arcsin,
        "acos": np.arccos,
        "atan": np.arctan,
        "atan2": np.arctan2,
        "sinh": np.sinh,
        "cosh": np.cosh,
        "tanh": np.tanh,
        "asinh": np.arcsinh,
        "acosh": np.arccosh,
        "atanh": np.arctanh,
        "sinpi": sinpi,
        "cospi": cospi,
        # arithmetic with explicit rounding mode (numpy rounds to nearest)
        "add_rn": lambda x, y: x + y,
        "sub_rn": lambda x, y: x - y,
        "mul_rn": lambda x, y: x * y,
        "div_rn": lambda x, y: x / y,
        "rcp_rn": lambda x: 1 / x,
        "fma": fma,
        "fma_rn": fma,
        "fmod": np.fmod,
        "remainder": vec_math(math.remainder, lambda a, b: math.nan),  # IEEE remainder, not np.remainder
        "fdim": fdim,
        "copysign": np.copysign,
        "nextafter": np.nextafter,
        # classification (int32 0/1 results)
        "isnan": np.isnan,
        "isinf": np.isinf,
        "signbit": np.signbit,
        "finitef": np.isfinite,
        "isfinited": np.isfinite,
        # special functions (torch CPU kernels == eager numerics)
        "erf": torch_unary("erf"),
        "erfc": torch_unary("erfc"),
        "erfcx": torch_unary("special.erfcx"),
        "erfinv": torch_unary("erfinv"),
        "erfcinv": erfcinv,
        "normcdf": torch_unary("special.ndtr"),
        "normcdfinv": torch_unary("special.ndtri"),
        "lgamma": torch_unary("lgamma"),
        "tgamma": vec_math(math.gamma, tgamma_err),
        "j0": torch_unary("special.bessel_j0"),
        "j1": torch_unary("special.bessel_j1"),
        "y0": torch_unary("special.bessel_y0"),
        "y1": torch_unary("special.bessel_y1"),
        "cyl_bessel_i0": torch_unary("special.i0"),
        "cyl_bessel_i1": torch_unary("special.i1"),
    }
    # "fast" approximate variants: evaluate exactly.
    for fast, base in (
        ("fast_expf", "exp"),
        ("fast_logf", "log"),
        ("fast_log2f", "log2"),
        ("fast_log10f", "log10"),
        ("fast_exp10f", "exp10"),
        ("fast_sinf", "sin"),
        ("fast_cosf", "cos"),
        ("fast_tanf", "tan"),
        ("fast_tanhf", "tanh"),
        ("fast_powf", "pow"),
        ("fast_dividef", "div_rn"),
    ):
        t[fast] = t[base]
    return t


def _np_dtype(tl_scalar_dtype):
    """numpy storage dtype the interpreter uses for a Triton scalar dtype."""
    try:
        from triton.runtime.interpreter import _get_np_dtype  # private; present in 3.x

        return _get_np_dtype(tl_scalar_dtype)
    except ImportError:  # pragma: no cover - fallback for a moved helper
        import numpy as np  # lazy, as are all non-stdlib imports here (see the module docstring)

        name = str(tl_scalar_dtype)
        table = {"int1": "bool", "fp16": "float16", "fp32": "float32", "fp64": "float64"}
        return np.dtype(table.get(name, name))


def _evaluate(name, arrays, np_out_dtype):
    import numpy as np  # lazy, as are all non-stdlib imports here (see the module docstring)

    impl = _impls().get(name)
    if impl is None:
        raise NotImplementedError(
            f"libdevice.{name} has no numpy stand-in for Triton's interpreter (symfuzz triton_cpu lane)"
        )
    with np.errstate(all="ignore"):
        out = np.asarray(impl(*arrays))
        return out.astype(np_out_dtype, copy=False)


def _numpy_extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure):
    """Replacement for ``InterpreterBuilder.create_extern_elementwise``
    (upstream raises NotImplementedError).  ``argList`` are TensorHandles that
    ``core.extern_elementwise`` already promoted and broadcast; ``retType`` is
    the dtype (or block type) chosen from the CUDA symbol table.  Evaluated
    with numpy under the libdevice name recorded by the calling stand-in, or,
    for direct callers, the name recovered from the symbol."""
    # lazy, as are all non-stdlib imports here (see the module docstring)
    from triton.runtime.interpreter import TensorHandle

    name = getattr(_tls, "name", None) or _name_from_symbol(symbol)
    scalar_ty = getattr(retType, "scalar", retType)
    out = _evaluate(name, [a.data for a in argList], _np_dtype(scalar_ty))
    return TensorHandle(out, scalar_ty)


setattr(_numpy_extern_elementwise, _MARK, True)


_SYMBOL_ALIASES = {"powi": "pow", "fabs": "abs", "llabs": "abs", "isnand": "isnan", "isinfd": "isinf"}


def _name_from_symbol(symbol):
    """Best effort "__nv_expf" -> "exp" for extern calls that did not come
    through a stand-in (which records the exact libdevice name instead)."""
    s = re.sub(r"^__(nv|ocml)_", "", str(symbol))
    s = re.sub(r"_f(16|32|64)$", "", s)
    table = _impls()
    for cand in (s, s[:-1], s[1:], s[1:-1]):  # optional f/d type prefix or suffix
        cand = _SYMBOL_ALIASES.get(cand, cand)
        if cand in table:
            return cand
    return s


def _make_cuda_standin(name, cuda_fn, semantic, stub_module_name):
    def standin(*args, **kwargs):
        kwargs.pop("_semantic", None)
        prev = getattr(_tls, "name", None)
        _tls.name = name
        try:
            return cuda_fn(*args, _semantic=semantic, **kwargs)
        except KeyError as e:
            # core.extern_elementwise indexes the dtype table directly, so a dtype
            # libdevice does not support (e.g. fp16/bf16) surfaces as a bare KeyError.
            dtypes = tuple(str(getattr(a, "dtype", type(a).__name__)) for a in args)
            raise TypeError(
                f"libdevice.{name} has no overload for argument dtypes {dtypes} "
                f"(real CUDA libdevice rejects them too): {e!r}"
            ) from None
        finally:
            _tls.name = prev

    standin.__name__ = standin.__qualname__ = name
    standin.__module__ = stub_module_name  # triton treats this module's members as stubs
    standin.__doc__ = f"symfuzz interpreter stand-in for libdevice.{name} (CUDA dtype table, numpy math)"
    setattr(standin, _MARK, True)
    return standin


def _make_direct_standin(name, semantic, stub_module_name):
    """For libdevice names without a CUDA function (e.g. ``fast_tanhf``):
    promote/broadcast like ``extern_elementwise`` but without a dtype table."""

    def standin(*args, **kwargs):
        import triton.language as tl  # lazy, as are all non-stdlib imports here (see the module docstring)
        # lazy, as are all non-stdlib imports here (see the module docstring)
        from triton.runtime.interpreter import TensorHandle

        tensors = [semantic.to_tensor(a) for a in args]
        for tt in tensors:
            # bf16/fp8 are stored as raw bits in the interpreter; libdevice has no
            # overloads for them (nor for fp16) on GPU either.
            if not (tt.dtype.is_fp32() or tt.dtype.is_fp64() or tt.dtype.is_int()):
                raise TypeError(f"libdevice.{name}: unsupported argument dtype {tt.dtype}")
        if len(tensors) > 1:
            anchor = tensors[0]
            for tt in tensors:
                _, anchor = semantic.binary_op_type_checking_impl(tt, anchor, arithmetic_check=False)
            tensors = [semantic.binary_op_type_checking_impl(tt, anchor, arithmetic_check=False)[0] for tt in tensors]
        if name in _INT32_RESULT:
            ret = tl.int32
        elif name in _INT64_RESULT:
            ret = tl.int64
        else:
            ret = tensors[0].dtype
        out = _evaluate(name, [tt.handle.data for tt in tensors], _np_dtype(ret))
        ty = tensors[0].type
        ret_ty = ty.with_element_ty(ret) if ty.is_block() else ret
        return tl.tensor(TensorHandle(out, ret), ret_ty)

    standin.__name__ = standin.__qualname__ = name
    standin.__module__ = stub_module_name
    standin.__doc__ = f"symfuzz interpreter stand-in for libdevice.{name} (numpy, no CUDA table)"
    setattr(standin, _MARK, True)
    return standin


def _make_missing_standin(name, stub_module_name):
    def standin(*args, **kwargs):
        raise NotImplementedError(
            f"libdevice.{name} is not supported by Triton's interpreter and has no "
            "symfuzz stand-in (triton_cpu lane)"
        )

    standin.__name__ = standin.__qualname__ = name
    standin.__module__ = stub_module_name
    setattr(standin, _MARK, True)
    return standin


def _install_libdevice_standins():
    """Bind every function of ``triton.language.extra.libdevice`` (the module
    Inductor's kernels call as ``libdevice``) to an interpreter stand-in.

    The module object is patched in place rather than rebinding
    ``triton_helpers.libdevice`` so that every alias (``tl.extra.libdevice``,
    ``triton_compat.libdevice``, kernels' globals) sees the stand-ins.  This is
    only done with TRITON_INTERPRET=1, where the stubs are unusable anyway.
    """
    import triton.runtime.interpreter as interp  # lazy, as are all non-stdlib imports here (see the module docstring)
    # lazy, as are all non-stdlib imports here (see the module docstring)
    from triton.language.extra import libdevice as stub

    if not getattr(interp.InterpreterBuilder.create_extern_elementwise, _MARK, False):
        interp.InterpreterBuilder.create_extern_elementwise = _numpy_extern_elementwise

    try:
        # lazy, as are all non-stdlib imports here (see the module docstring)
        from triton.language.extra.cuda import libdevice as cuda
    except Exception:  # triton build without the NVIDIA extras: direct wrappers only
        cuda = None

    semantic = interp.interpreter_semantic
    impls = _impls()
    names = {n for n, f in inspect.getmembers(stub, inspect.isfunction) if f.__module__ == stub.__name__}
    names |= set(impls)
    for name in sorted(names):
        current = getattr(stub, name, None)
        if current is not None and getattr(current, _MARK, False):
            continue
        cuda_fn = getattr(cuda, name, None) if cuda is not None else None
        if name in impls and cuda_fn is not None:
            fn = _make_cuda_standin(name, cuda_fn, semantic, stub.__name__)
        elif name in impls:
            fn = _make_direct_standin(name, semantic, stub.__name__)
        else:
            fn = _make_missing_standin(name, stub.__name__)
        setattr(stub, name, fn)
