"""Repro snippets: short torch-only scripts that show one check's failure.

Rendered by ``corpus.scripts.render_snippet``, like every symfuzz script:
the one prelude, then the failing input rebuilt (``make_input``) and the one
thing that failed, pasted from the functions of ``opcheck/snippet_bodies.py``
(code a linter and an editor read as code); what they do around it comes from
the helpers file written beside them (``opcheck/snippet_files.py``). Each snippet
imports the module that registers the op (when we can tell which), from the
folder this process imported it from, so it runs from any folder; when that
import or the op's lookup fails it prints "could not run: ..." and exits 2,
apart from 1 (an exception: the bug reproduced) and 0 (it passed). The
Inductor check's snippet also uses the check's own run
(``opcheck.checks.compile.run_collecting``, ``float64_inputs``) and the
judging function (``script_runtime.compare``), so it agrees with the check;
so do the snippets of the mutation, fake_device and layout_consistency
checks, with their own pieces (``snippet_files.CHECK_PIECES``).
"""

from __future__ import annotations

import sys

import torch

from symfuzz.corpus.linker import function_body
from symfuzz.corpus.scripts import EXIT_INVALID, render_snippet
from symfuzz.opcheck.checklist import (AOT_DISPATCH_DYNAMIC, AUTOGRAD_REGISTRATION, BY_NAME, FAKETENSOR, INDUCTOR_DYNAMIC,
                                       LAYOUT_CONSISTENCY, MUTATION, NO_GRADS, SYMBOLIC_FAKE)
from symfuzz.opcheck.inputs import Case
from symfuzz.opcheck.provenance import import_root, registering_modules
from symfuzz.opcheck.snippet_files import ALWAYS, CHECK_PIECES, SHARED

# The checks whose snippet needs to know which inputs the op may write to (MUTABLE).
_NEEDS_MUTABLE = (INDUCTOR_DYNAMIC.name, MUTATION.name, LAYOUT_CONSISTENCY.name)


def op_module(op) -> str | None:
    """The Python module that registered ``op``, if torch's records tell (opcheck.provenance)."""
    modules = registering_modules(op._schema.name)
    return modules[0] if modules else None


def _render(value, names):
    if isinstance(value, torch.Tensor):
        return next(names)
    if isinstance(value, tuple):
        inner = ", ".join(_render(v, names) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v, names) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v, names)}" for k, v in value.items()) + "}"
    if isinstance(value, torch.dtype):
        return str(value)  # "torch.float32"
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    return repr(value)


def inputs_source(case: Case, *, requires_grad=frozenset(), dtype=None) -> str:
    specs = case.tensor_inputs()
    lines = ["def inputs():"]
    if case.is_original:
        lines.append("    # stand-ins with your sample's shapes and value range; your own values failed")
    for n, spec in enumerate(specs):
        code = spec.code(case.template.slots[n].device)
        if dtype and spec.dtype.startswith(("float", "bfloat")):
            code = code.replace(f"torch.{spec.dtype}", f"torch.{dtype}")
        if n in requires_grad and not code.endswith(".requires_grad_()"):
            code += ".requires_grad_()"
        lines.append(f"    x{n} = {code}")
    names = iter(f"x{n}" for n in range(len(specs)))
    args = _render(case.template.args, names)
    kwargs = _render(case.template.kwargs, names)
    lines.append(f"    return {args}, {kwargs}")
    return "\n".join(lines)


# A snippet's exit codes: an uncaught exception (the bug shown) exits 1, a clean end 0.
EXIT_CANNOT_RUN = EXIT_INVALID  # 2: the op could not be loaded, so nothing was tried

_ABOUT = (f"Run it with plain `python`: exit 1 (an exception) while the bug reproduces, 0 once it passes,\n"
          f"{EXIT_CANNOT_RUN} (\"could not run: ...\") when the op cannot be loaded, so nothing was tried.")


def _import_root(module: str) -> str | None:
    """The sys.path entry ``module`` was imported from in this process, if it has a file."""
    file = getattr(sys.modules.get(module), "__file__", None)
    return import_root(module, file) if file else None


def _load_op(op, module: str | None) -> str:
    """main()'s first lines: load the module that registers the op (from the folder it was
    imported from here too, so the snippet runs from any folder without PYTHONPATH), then
    look the op up. Either failing ends the snippet with one line and EXIT_CANNOT_RUN."""
    ns, name = op._schema.name.split("::")
    qualname = f"{ns}::{name}.{op._overloadname}"
    if module is None:
        return f"# import the module that registers {ns}::{name} here\nop = lookup_op({qualname!r})"
    root = _import_root(module)
    return (f"import_registering({module!r}, {root!r})  # registers {ns}::{name}\n"
            f"op = lookup_op({qualname!r}, {module!r})")


def _snippet(op, case: Case, body: str, what: str, *, helpers=(), **inputs_options) -> str:
    """The snippet: its head, then main(): the op loaded, the failing input rebuilt, and ``body``;
    the helpers after it."""
    module = op_module(op)
    ns, name = op._schema.name.split("::")
    code = "\n".join([_load_op(op, module), inputs_source(case, **inputs_options),
                      "args, kwargs = inputs()", "", body.strip()])
    return render_snippet(f"symfuzz opcheck repro: {what} of {ns}::{name}.", code, about=_ABOUT,
                          helpers=[*ALWAYS, *helpers], shared=SHARED)


def render(check: str, kind: str, op, case: Case, *, grads=frozenset()) -> str:
    spec = BY_NAME[check]
    options = {}
    if spec.grads != NO_GRADS:
        options["requires_grad"] = grads
    if spec.repro_dtype:
        options["dtype"] = spec.repro_dtype
    body = _body(check, kind)
    if check in _NEEDS_MUTABLE:
        mutable = sorted(n for n, slot in enumerate(case.template.slots) if slot.mutable)
        body = f"MUTABLE = {mutable!r}  # the inputs the schema lets the op write to\n\n" + body
    return _snippet(op, case, body, f"{check} ({kind})", helpers=CHECK_PIECES.get(check, ()), **options)


# The checks' snippet bodies, as code: functions whose bodies are pasted (corpus.linker.function_body).
_PIECES = "symfuzz.opcheck.snippet_bodies"


def _pieces(*names: str, values: dict | None = None) -> str:
    """The bodies of the functions ``names`` of snippet_bodies, in order, a blank line between."""
    return "\n\n".join(function_body(_PIECES, name, values) for name in names)


def _fake(kind):
    return _pieces("fake_start", "fake_static", "fake_aliasing" if kind == "wrong-aliasing" else "fake_metadata")


def _symbolic(kind):
    text = _pieces("fake_start", "fake_symbolic")
    if kind == "specializes":
        return text + "\n" + _pieces("symbolic_specializes")
    if kind == "data-dependent-size-not-unbacked":
        return text + "\n" + _pieces("symbolic_unbacked")
    if kind.startswith("wrong-"):  # sizes and strides evaluated at this input's sizes (the symbols' hints)
        return text + "\n\n" + _pieces("symbolic_at_hint")
    return text


def _body(check: str, kind: str) -> str:
    """The snippet body of ``check`` failing with ``kind``: the function of snippet_bodies named after the
    check (every check of opcheck.checklist has one), or for the fake-tensor checks the pieces the kind needs."""
    if check == FAKETENSOR.name:
        return _fake(kind)
    if check == SYMBOLIC_FAKE.name:
        return _symbolic(kind)
    if check in (AUTOGRAD_REGISTRATION.name, AOT_DISPATCH_DYNAMIC.name):  # they run torch's test of their name
        return _pieces(check, values={"SLOT_TORCH_TEST": f'"test_{check}"'})
    return _pieces(check)


def crash_repro(op, case: Case) -> str:
    """A snippet that calls the real kernel on ``case``: run it in a fresh
    process; the process dies if the kernel crashes on this input."""
    return _snippet(op, case, _pieces("kernel_crash"), "a kernel crash")
