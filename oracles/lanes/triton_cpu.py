"""Run Inductor's *Triton* codegen on a CPU-only machine via Triton's interpreter.

Self-contained on purpose: this file imports only the standard library, torch,
triton and numpy (the last three lazily, inside functions), because its source
text is inlined verbatim into standalone repro scripts.  The only project
modules it imports from are its two parts below, which keep to the same rule
(the scripts paste what it imports from them): ``triton_interpreter_probe``
(can the lane run here?) and ``libdevice_numpy`` (the stand-ins' numpy math).
Do not import other project modules from here.

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
   keyed by the libdevice function name (``libdevice_numpy``).  Names that have no CUDA function
   (e.g. ``fast_tanhf``) get a direct numpy wrapper; names without a numpy
   implementation raise a clear ``NotImplementedError`` instead of the stub's
   silent ``None``.

Public API: :func:`enable_triton_interpreter`,
:func:`triton_interpreter_unavailable_reason`.
"""

# No ``from __future__`` imports: this text may be pasted mid-file.
import functools
import hashlib
import inspect
import os
import sys
import threading
import warnings

# Project names only as `from symfuzz.x import name`: scripts inline this file and paste them.
from symfuzz.oracles.lanes.libdevice_numpy import (
    _INT32_RESULT,
    _INT64_RESULT,
    _evaluate,
    _impls,
    _name_from_symbol,
    _np_dtype,
)
from symfuzz.oracles.lanes.triton_interpreter_probe import _ENV_VAR, _env_truthy, triton_interpreter_unavailable_reason

__all__ = ["enable_triton_interpreter", "triton_interpreter_unavailable_reason"]

# Marker attribute used to keep every patch idempotent.
_MARK = "__symfuzz_triton_cpu__"

# Bump when the stand-ins' numerics change (folded into the backend hash).
_STANDINS_VERSION = 1

_state = {"enabled": False}
_tls = threading.local()  # which libdevice function is being evaluated


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
