"""What each libdevice function computes, in numpy: the math of the Triton-interpreter lane's stand-ins.

``triton_cpu`` binds every function of ``triton.language.extra.libdevice`` to a
stand-in (see its docstring); the stand-ins evaluate here, by libdevice name
(``_evaluate``).  ``_impls`` holds the numpy implementation of each name,
``_name_from_symbol`` recovers the name from a CUDA symbol, and ``_INT32_RESULT`` /
``_INT64_RESULT`` give the result dtype where there is no CUDA dtype table.  Bump
``triton_cpu._STANDINS_VERSION`` when these numerics change.

Self-contained like ``triton_cpu``, whose inlined copy in standalone repro scripts
pastes what it uses from here: only the standard library at module level; numpy,
torch and triton are imported lazily, inside functions.
"""

# No ``from __future__`` imports: this text may be pasted mid-file.
import functools
import math
import re


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
