"""Can the Triton-interpreter lane run here?  Probed without importing triton or torch._inductor.

Part of the lane in ``triton_cpu`` (see its docstring), and self-contained for the same
reason: this file imports only the standard library, because standalone repro scripts
inline it together with ``triton_cpu``.  Importing triton or ``torch._inductor`` before
``TRITON_INTERPRET=1`` is set would itself break the lane, so versions and features are
read from package metadata and source text instead.

Public API: :func:`triton_interpreter_unavailable_reason`.
"""

# No ``from __future__`` imports: this text may be pasted mid-file.
import importlib.metadata as md
import importlib.util
import os
import re
import sys


_ENV_VAR = "TRITON_INTERPRET"
# Triton 3.4 replaced the ``_builder`` plumbing with ``_semantic`` objects and
# introduced ``triton.runtime.interpreter.interpreter_semantic``; the stand-ins
# (triton_cpu) call CUDA libdevice functions with ``_semantic=interpreter_semantic``.
_MIN_TRITON = (3, 4)
_TRUTHY = ("1", "true", "on", "yes")


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
