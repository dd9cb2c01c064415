"""Where custom ops come from: what a child process must load to rebuild them.

Real op libraries register an op in several places: ``torch.library.define``
in one module, ``register_fake`` in another, ``register_kernel(..., "cpu")``
in per-backend modules, some of them wrapping C code, all wired together by a
package's ``__init__``; the test file often imports only the package. The
child that checks the ops must import the same things, so we ask the session:

1. Torch's registration records name the files that register pieces of the
   op: the fake kernel's ``source``, a ``custom_op``'s functions, and the
   dispatcher's debug strings for ``torch.library.Library`` users.
   (``define`` and ``register_kernel`` record torch's own ``library.py``,
   so those say nothing.)
2. The top-level package of each such module counts, with every module of it
   the session imported: that is where the per-backend kernels live.
3. Where no record names a file, the modules the session imported from the
   project (under its root directory) count instead.
4. C++ libraries loaded with ``torch.ops.load_library`` are loaded first.

The child then checks that it rebuilt the op: the dispatch keys with a
kernel and the fake kernel must match the session's (``registrations``).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

import torch

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_REGISTERED_AT = re.compile(r"registered at (\S+?\.py):\d+")
_KERNEL_LINE = re.compile(r"^(\w+)(?:\[alias\])?: registered at ", re.MULTILINE)


@dataclass
class Provenance:
    modules: list[str] = field(default_factory=list)  # must import: they register the ops
    extra_modules: list[str] = field(default_factory=list)  # imported if they can be (same packages)
    paths: list[str] = field(default_factory=list)  # sys.path entries they import from
    libraries: list[str] = field(default_factory=list)  # torch.ops.load_library'd
    unknown: list[str] = field(default_factory=list)  # ops no record names a file for


def registrations(qualname: str) -> dict:
    """What torch holds for one op: dispatch keys with a kernel, and whether a fake kernel is registered."""
    try:
        dump = torch._C._dispatch_dump(qualname)
    except RuntimeError:
        dump = ""
    keys = sorted(set(_KERNEL_LINE.findall(dump)))
    fake = False
    try:
        # private torch API: looked up at use, inside try, so a torch that moved it degrades
        from torch._library.simple_registry import singleton

        fake = getattr(singleton.find(qualname).fake_impl, "kernel", None) is not None
    except (ImportError, AttributeError):
        pass
    return {"keys": keys, "fake": fake}


def missing_registrations(expected: dict, qualname: str) -> list[str]:
    """What the session had registered for ``qualname`` that this process lacks."""
    have = registrations(qualname)
    missing = [f"a {key} kernel" for key in expected.get("keys", []) if key not in have["keys"]]
    if expected.get("fake") and not have["fake"]:
        missing.append("its fake kernel")
    return missing


def registering_files(qualname: str) -> list[str]:
    """Python files that registered a piece of the op, per torch's records."""
    files = []
    try:
        # private torch API: looked up at use, inside try, so a torch that moved it degrades
        from torch._library.custom_ops import OPDEFS

        opdef = OPDEFS.get(qualname)
    except ImportError:
        opdef = None
    if opdef is not None:
        fns = [getattr(opdef, "_init_fn", None), getattr(opdef, "_abstract_fn", None),
               getattr(opdef, "_setup_context_fn", None), getattr(opdef, "_backward_fn", None),
               *getattr(opdef, "_backend_fns", {}).values()]
        files += [_code_file(fn) for fn in fns]
    try:
        # private torch API: looked up at use, inside try, so a torch that moved it degrades
        from torch._library.simple_registry import singleton

        source = getattr(getattr(singleton.find(qualname).fake_impl, "kernel", None), "source", "") or ""
        files.append(source.rsplit(":", 1)[0])
    except (ImportError, AttributeError):
        pass
    try:
        files += _REGISTERED_AT.findall(torch._C._dispatch_dump(qualname))
    except RuntimeError:
        pass
    out = []
    for f in files:
        if f and f.endswith(".py") and not os.path.abspath(f).startswith(_TORCH_DIR):
            path = os.path.abspath(f)
            if path not in out:
                out.append(path)
    return out


def _code_file(fn) -> str:
    fn = getattr(fn, "__wrapped__", fn)
    return getattr(getattr(fn, "__code__", None), "co_filename", "") or ""


def _modules_by_file() -> dict:
    """Source file -> module name, over sys.modules. Kept while sys.modules is unchanged
    (the same size and last import): every failure's repro asks, and the walk over a few
    thousand modules costs more than the rest of rendering it."""
    key = (len(sys.modules), next(reversed(sys.modules), None))
    if _BY_FILE.get("key") != key:
        out = {}
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if name != "__main__" and file and file.endswith(".py"):
                out.setdefault(os.path.abspath(file), name)
        _BY_FILE.update(key=key, value=out)
    return dict(_BY_FILE["value"])


_BY_FILE: dict = {}


def import_root(name: str, file: str) -> str:
    """The sys.path entry ``name`` imports from."""
    root = os.path.dirname(os.path.abspath(file))
    for _ in range(name.count(".") + (1 if file.endswith("__init__.py") else 0)):
        root = os.path.dirname(root)
    return root


def _ours(name: str) -> bool:
    top = name.split(".")[0]
    return top in ("symfuzz", "torch", "_pytest", "pytest")


def registering_modules(qualname: str, by_file=None) -> list[str]:
    """Names of the imported modules that registered a piece of the op."""
    by_file = _modules_by_file() if by_file is None else by_file
    return [by_file[f] for f in registering_files(qualname) if f in by_file and not _ours(by_file[f])]


def provenance(op_names, *, project_root=None) -> Provenance:
    """What a fresh process must load to rebuild these ops as this session has them."""
    by_file = _modules_by_file()
    found, unknown = [], []
    for op in dict.fromkeys(op_names):
        modules = registering_modules(op.split(".")[0], by_file)
        if not modules:
            unknown.append(op)
        found += [m for m in modules if m not in found]
    packages = {m.split(".")[0] for m in found}
    extra = sorted(name for name, module in list(sys.modules.items())
                   if name.split(".")[0] in packages and name not in found and getattr(module, "__file__", None)
                   and not name.endswith(".__main__"))
    if unknown and project_root is not None:
        root = os.path.abspath(str(project_root)) + os.sep
        extra += sorted(name for f, name in by_file.items()
                        if f.startswith(root) and not _ours(name) and name not in found and name not in extra
                        and not f.startswith(_TORCH_DIR) and "site-packages" not in f)
    paths = []
    for name in found + extra:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            root = import_root(name, file)
            if root not in paths:
                paths.append(root)
    libraries = sorted(getattr(torch.ops, "loaded_libraries", ()))
    # Parents before children: importing a package's __init__ first is what its users do.
    return Provenance(modules=found, extra_modules=sorted(extra, key=lambda n: (n.count("."), n)), paths=paths,
                      libraries=libraries, unknown=unknown)
