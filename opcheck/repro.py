"""Repro snippets: short torch-only scripts that show one check's failure.

Rendered by ``corpus.scripts.render_snippet``, like every symfuzz script:
the one prelude, then the failing input rebuilt (``make_input``) and the one
thing that failed; what they do around it comes from the helpers file written
beside them (``opcheck/snippet_files.py``). Each snippet
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

from symfuzz.corpus.scripts import EXIT_INVALID, render_snippet
from symfuzz.opcheck.checklist import (AOT_DISPATCH_DYNAMIC, AUTOGRAD_REGISTRATION, BY_NAME, FAKE_DEVICE, FAKETENSOR,
                                       GRADIENT, INDUCTOR_DYNAMIC, LAYOUT_CONSISTENCY, MUTATION, NO_GRADS, SCHEMA,
                                       SYMBOLIC_FAKE)
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
    body = _BODIES[check](kind)
    if check in _NEEDS_MUTABLE:
        mutable = sorted(n for n, slot in enumerate(case.template.slots) if slot.mutable)
        body = f"MUTABLE = {mutable!r}  # the inputs the schema lets the op write to\n" + body
    return _snippet(op, case, body, f"{check} ({kind})", helpers=CHECK_PIECES.get(check, ()), **options)


def _schema(kind):
    return """
from torch._subclasses.schema_check_mode import SchemaCheckMode

with SchemaCheckMode():
    op(*args, **kwargs)  # raises: the op writes to or aliases an input its schema doesn't declare
"""


def _autograd(kind):
    return """
out = op(*args, **kwargs)
outs = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
leaves = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
torch.library.opcheck(op, args, kwargs, test_utils="test_autograd_registration")
torch.autograd.grad(sum(o.sum() for o in outs), leaves)  # raises: no backward registered
"""


_FAKE_COMMON = """
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

real_args = args
real = op(*args, **kwargs)
args, kwargs = inputs()
env = ShapeEnv(allow_scalar_outputs=False)  # .item() in a fake kernel raises
mode = FakeTensorMode(shape_env=env)
"""

_COMPARE = """
for r, f in zip(torch.utils._pytree.tree_leaves(real), torch.utils._pytree.tree_leaves(fake)):
    print("real", r.dtype, list(r.shape), r.stride(), "| fake", f.dtype, list(f.shape), f.stride())
    assert r.dtype == f.dtype and list(r.shape) == list(f.shape), "fake kernel disagrees with the real one"
    assert all(r.stride(d) == f.stride(d) for d in range(r.dim()) if r.shape[d] > 1), "strides differ"
"""


def _fake(kind):
    text = _FAKE_COMMON + """
fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(
    torch.Tensor, lambda t: mode.from_tensor(t, static_shapes=True), (args, kwargs))
with mode:
    fake = op(*fake_args, **fake_kwargs)
"""
    if kind == "wrong-aliasing":
        return text + """
from torch.multiprocessing.reductions import StorageWeakRef

def views(out, inputs):
    stores = [StorageWeakRef(t.untyped_storage()) for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    return [[n for n, s in enumerate(stores) if StorageWeakRef(o.untyped_storage()) == s]
            for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]

print("outputs viewing inputs: real", views(real, real_args), "| fake", views(fake, fake_args))
assert views(real, real_args) == views(fake, fake_args), "the fake kernel aliases inputs differently"
"""
    return text + _COMPARE


def _symbolic(kind):
    text = _FAKE_COMMON + """
from torch._dynamo.source import LocalSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext, free_unbacked_symbols

names = iter(f"x{n}" for n in range(100))
def symbolic(t):
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DUCK] * t.dim())
    return mode.from_tensor(t, source=LocalSource(next(names)), symbolic_context=ctx)

fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(torch.Tensor, symbolic, (args, kwargs))
with mode:
    fake = op(*fake_args, **fake_kwargs)
print("guards installed by the fake kernel:", [g.expr for g in env.guards])
print("fake output sizes:", [list(f.shape) for f in torch.utils._pytree.tree_leaves(fake) if isinstance(f, torch.Tensor)])
print("real output sizes:", [list(r.shape) for r in torch.utils._pytree.tree_leaves(real) if isinstance(r, torch.Tensor)])
"""
    if kind == "specializes":
        text += 'assert not env.guards, "the fake kernel specializes on a size"\n'
    elif kind == "data-dependent-size-not-unbacked":
        text += ('sizes = [s for f in torch.utils._pytree.tree_leaves(fake) if isinstance(f, torch.Tensor) for s in f.shape]\n'
                 'assert any(isinstance(s, torch.SymInt) and free_unbacked_symbols(s.node.expr) for s in sizes), '
                 '"a data-dependent size must be unbacked (ctx.new_dynamic_size())"\n')
    elif kind.startswith("wrong-"):
        # Sizes and strides evaluated at this input's sizes (the symbols' hints).
        text += """
def at_hint(s):
    return s.node.hint if isinstance(s, torch.SymInt) else s

for r, f in zip(torch.utils._pytree.tree_leaves(real), torch.utils._pytree.tree_leaves(fake)):
    if isinstance(r, torch.Tensor):
        shape, stride = [at_hint(s) for s in f.shape], [at_hint(s) for s in f.stride()]
        assert r.dtype == f.dtype and list(r.shape) == shape, f"fake {f.dtype}{shape}, real {r.dtype}{list(r.shape)}"
        assert all(r.stride(d) == stride[d] for d in range(r.dim()) if r.shape[d] > 1), f"strides {stride} vs {r.stride()}"
"""
    return text


def _gradient(kind):
    return """
leaves, spec = torch.utils._pytree.tree_flatten((args, kwargs))
slots = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor) and t.requires_grad]

def fn(*tensors):
    new = list(leaves)
    for i, t in zip(slots, tensors):
        new[i] = t
    a, k = torch.utils._pytree.tree_unflatten(new, spec)
    out = op(*a, **k)
    return tuple(o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.is_floating_point())

torch.autograd.gradcheck(fn, tuple(leaves[i] for i in slots), check_undefined_grad=False, check_batched_grad=False)
"""


def _aot(kind):
    return """
torch.library.opcheck(op, args, kwargs, test_utils="test_aot_dispatch_dynamic")
"""


def _inductor(kind):
    return """
def run(fn, float64=False):
    \"\"\"(outputs, mutated inputs, input grads) of fresh inputs, as the check runs them.\"\"\"
    args, kwargs = inputs()
    if float64:
        args, kwargs = float64_inputs(args, kwargs)
    return run_collecting(fn, args, kwargs, MUTABLE)


def reference():  # the fp64 reference, for outputs that differ from eager only by rounding
    try:
        return run(op, float64=True)
    except Exception:
        return None


compiled = torch.compile(lambda *a, **k: op(*a, **k), backend="inductor", dynamic=True, fullgraph=True)
expected, actual = run(op), run(compiled)
diff = compare(expected, actual, reference)  # paths: out[0] outputs, out[1] mutated inputs, out[2] grads
assert diff is None, f"compiled vs eager: {diff['symptom']} at {diff['path']}: {diff['detail']}"
print("compiled matches eager")
"""


def _mutation(kind):
    return """
tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
versions, before = [t._version for t in tensors], [storage_bytes(t) for t in tensors]  # the whole storage
with torch.no_grad():
    op(*args, **kwargs)
for n, t in enumerate(tensors):
    changed = storage_bytes(t) != before[n]
    if n in MUTABLE:
        outside = changed & ~view_bytes(t, changed.numel())
        assert not outside.any(), (f"x{n}: the op wrote {int(outside.sum())} byte(s) of storage outside the view "
                                   f"(sizes {list(t.shape)}, strides {list(t.stride())}, offset {t.storage_offset()})")
    else:
        assert t._version == versions[n], f"x{n} is not declared mutable, but its version counter moved: the op writes to it"
        assert not changed.any(), f"x{n} is not declared mutable, but {int(changed.sum())} byte(s) of its storage changed"
print("no undeclared write")
"""


def _device(kind):
    return """
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

real = op(*args, **kwargs)


def same_metadata(real, out, device):
    for r, f in zip(torch.utils._pytree.tree_leaves(real), torch.utils._pytree.tree_leaves(out)):
        if not isinstance(r, torch.Tensor):
            continue
        print(f"real {r.dtype}{list(r.shape)} strides {r.stride()} | on {device}: {f.device} {f.dtype}{list(f.shape)} "
              f"strides {f.stride()}")
        assert f.device.type == device, f"on {device} inputs the fake kernel returned a tensor on {f.device}"
        sizes = [s if isinstance(s, int) else None for s in f.shape]  # None: a data-dependent size
        assert f.dtype == r.dtype and len(sizes) == r.dim(), "dtype or rank differs"
        assert all(s in (None, rs) for s, rs in zip(sizes, r.shape)), "shape differs"
        if None not in sizes:
            assert all(f.stride(d) == r.stride(d) for d in range(r.dim()) if r.shape[d] > 1), "strides differ"


# (a) meta tensors with the inputs' sizes, strides and storage offsets
meta_args, meta_kwargs = torch.utils._pytree.tree_map_only(
    torch.Tensor, lambda t: strided_like(t, "meta"), (args, kwargs))
try:
    meta = op(*meta_args, **meta_kwargs)
except Exception as exc:
    if not NEEDS_SHAPE_ENV.search(f"{type(exc).__name__}: {exc}"):
        raise
    print("data-dependent output sizes need a ShapeEnv: not judged on meta tensors")
else:
    same_metadata(real, meta, "meta")
# (b) FakeTensors on cuda (no GPU needed)
with FakeTensorMode(shape_env=ShapeEnv()):
    fake_args, fake_kwargs = torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: strided_like(t, "cuda"), (args, kwargs))
    fake = op(*fake_args, **fake_kwargs)
same_metadata(real, fake, "cuda")
print("the fake kernel agrees on meta and on fake cuda tensors")
"""


def _layout(kind):
    return """
def run(contiguous=False, float64=False):
    \"\"\"(outputs, mutated inputs) of fresh inputs, as laid out or made contiguous, as the check runs them.\"\"\"
    args, kwargs = inputs()
    return run_laid_out(op, args, kwargs, MUTABLE, contiguous=contiguous, float64=float64)


def reference():  # the fp64 reference, for outputs that differ only by rounding
    try:
        return run(contiguous=True, float64=True)
    except Exception:
        return None


# compare() calls its first argument "eager" (here: contiguous) and its second "compiled" (here: as laid out)
diff = compare(run(contiguous=True), run(), reference)  # paths: out[0] outputs, out[1] mutated inputs
assert diff is None, f"op(x) differs from op(x.contiguous()): {diff['symptom']} at {diff['path']}: {diff['detail']}"
print("op(x) matches op(x.contiguous())")
"""


# Each check's snippet body (every check of opcheck.checklist has one).
_BODIES = {
    SCHEMA.name: _schema,
    MUTATION.name: _mutation,
    AUTOGRAD_REGISTRATION.name: _autograd,
    FAKETENSOR.name: _fake,
    SYMBOLIC_FAKE.name: _symbolic,
    FAKE_DEVICE.name: _device,
    LAYOUT_CONSISTENCY.name: _layout,
    GRADIENT.name: _gradient,
    AOT_DISPATCH_DYNAMIC.name: _aot,
    INDUCTOR_DYNAMIC.name: _inductor,
}


def crash_repro(op, case: Case) -> str:
    """A snippet that calls the real kernel on ``case``: run it in a fresh
    process; the process dies if the kernel crashes on this input."""
    return _snippet(op, case, "out = op(*args, **kwargs)  # a kernel crash kills the process here\n"
                    "print('the kernel returned normally on this input')", "a kernel crash")
