"""What every opcheck repro snippet does before its failing call, inlined after its main()
(``opcheck.repro``): load the module that registers the op, then look the op up. Either
failing ends the snippet with one line and exit code 2: nothing was tried.

Torch-only, like everything a snippet inlines.
"""

import importlib
import sys

import torch

CANNOT_RUN = 2  # opcheck.repro.EXIT_CANNOT_RUN


def import_registering(module, root=None):
    """Import ``module`` (it registers the op), from ``root`` too, the folder symfuzz imported it from."""
    if root and root not in sys.path:
        sys.path.append(root)
    try:
        importlib.import_module(module)
    except (Exception, SystemExit) as exc:
        where = f"(it was {root} when this snippet was written)" if root else ""
        print(f"could not run: cannot import {module} ({type(exc).__name__}: {exc}); "
              f"set PYTHONPATH to the folder it imports from {where}".rstrip(), file=sys.stderr)
        sys.exit(CANNOT_RUN)


def lookup_op(qualname, module=None):
    """The OpOverload ``ns::name.overload``."""
    ns, rest = qualname.split("::")
    name, overload = rest.split(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), name), overload)
    except (AttributeError, RuntimeError) as exc:
        hint = (f"{module} imported but did not register it" if module
                else "import the module that registers it at the top of this snippet")
        print(f"could not run: no op {qualname} is registered ({exc}); {hint}", file=sys.stderr)
        sys.exit(CANNOT_RUN)
