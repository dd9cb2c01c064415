"""Fake (meta) kernel checks: fake vs real at concrete sizes, and with symbolic sizes.

``faketensor`` runs the fake kernel on FakeTensors with the input's concrete
sizes and compares every output's shape, dtype, device and strides with the
real kernel's, and whether it is a view of an input. The ShapeEnv refuses scalar outputs, so ``.item()`` and
friends in a fake kernel raise: a fake kernel must never read data, while
``ctx.new_dynamic_size()`` (which needs no data) still works.

``symbolic_fake`` runs it with every dim symbolic and equal sizes sharing a
symbol (as Dynamo does with ``dynamic=True``), then reports the guards it installed, fails on guards that
pin a size, checks that the sizes it returns evaluate to the real ones, and
that an output size that depends on the input *values* is an unbacked size.
"""

from __future__ import annotations

import re
from dataclasses import replace

import sympy
import torch
import torch.utils._pytree as pytree
from torch._dynamo.source import LocalSource
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
    free_unbacked_symbols,
)
from torch.multiprocessing.reductions import StorageWeakRef

from symfuzz.opcheck.checklist import FAKETENSOR
from symfuzz.opcheck.checks.common import (
    Machinery,
    Problem,
    first_line,
    not_checked,
    raised_by_machinery,
    run_real,
    tensor_leaves,
)
from symfuzz.opcheck.inputs import Case, TensorInput
from symfuzz.opcheck.variants import REJECTED, UNJUDGED, value_classes

_READS_DATA = re.compile(
    r"DataDependentOutputException|GuardOnDataDependentSymNode|data.?ptr|local_scalar_dense|\.item\(\)|"
    r"numpy|tolist|Cannot access (data|storage)|data-dependent",
    re.IGNORECASE,
)
_NO_FAKE = re.compile(r"no fake impl|no abstract impl|UnsupportedOperatorException|register_fake", re.IGNORECASE)


def _source(n: int):
    return LocalSource(f"x{n}")


def fake_inputs(mode: FakeTensorMode, args, kwargs, *, symbolic: bool):
    counter = iter(range(10**6))

    def convert(t):
        n = next(counter)
        if symbolic and t.dim():
            ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DUCK] * t.dim())
            return mode.from_tensor(t, source=_source(n), symbolic_context=ctx)
        return mode.from_tensor(t, static_shapes=True, source=_source(n))

    return pytree.tree_map_only(torch.Tensor, convert, (tuple(args), dict(kwargs)))


def run_fake(op, case: Case, *, symbolic: bool, inputs_out=None):
    """(output or a Problem when the fake kernel raises, shape_env, guards
    that the op call itself installed). ``inputs_out``, a list, receives the
    fake input tensors."""
    shape_env = ShapeEnv(allow_scalar_outputs=False)
    mode = FakeTensorMode(shape_env=shape_env)
    args, kwargs = case.build()
    with torch.no_grad():
        try:
            fargs, fkwargs = fake_inputs(mode, args, kwargs, symbolic=symbolic)
        except Exception as exc:  # noqa: BLE001 - FakeTensorMode can't hold these inputs: torch's, not the op's
            return Machinery("torch's FakeTensorMode, converting the inputs,", exc), shape_env, []
        if inputs_out is not None:
            inputs_out.extend(t for t in pytree.tree_leaves((fargs, fkwargs)) if isinstance(t, torch.Tensor))
        before = len(shape_env.guards)
        try:
            with mode:
                out = op(*fargs, **fkwargs)
        except Exception as exc:  # noqa: BLE001 - the fake kernel failing where the real one works is the finding
            problem = classify_fake_error(exc)
            if problem.kind == "fake-raised" and raised_by_machinery(exc):
                return Machinery("torch's FakeTensorMode", exc), shape_env, []
            return problem, shape_env, []
    return out, shape_env, shape_env.guards[before:]


def classify_fake_error(exc: BaseException) -> Problem:
    text = f"{type(exc).__name__}: {exc}"
    if _NO_FAKE.search(text):
        return Problem("no-fake-kernel", "the op has no fake (meta) kernel: " + first_line(exc)
                       + "\nregister one with torch.library.register_fake")
    if type(exc).__name__ == "DynamicOutputShapeException":
        return Problem("fake-raised", "the fake kernel raised DynamicOutputShapeException: an output size depends on "
                       "the data; build it with torch.library.get_ctx().new_dynamic_size()")
    if _READS_DATA.search(text):
        return Problem("fake-reads-data", "the fake kernel reads tensor data (" + first_line(exc, 200) + ").\n"
                       "A fake kernel sees no data: compute sizes from shapes, or use "
                       "torch.library.get_ctx().new_dynamic_size() for data-dependent sizes")
    return Problem("fake-raised", "the fake kernel raised where the real kernel succeeded: " + first_line(exc))


def _value(s):
    """An int for a concrete or backed size, None for an unbacked one."""
    if isinstance(s, torch.SymInt):
        if free_unbacked_symbols(s.node.expr):
            return None
        hint = s.node.hint
        return int(hint) if hint is not None else None
    return int(s)


def _storage(t):
    return StorageWeakRef(t.untyped_storage())


def aliased_inputs(out, inputs) -> list:
    """For each output leaf, the indices of the inputs it shares storage with."""
    stores = [_storage(t) for t in inputs]
    return [[n for n, s in enumerate(stores) if isinstance(o, torch.Tensor) and _storage(o) == s]
            for _, o in tensor_leaves(out)]


def compare_aliasing(real_out, real_inputs, fake_out, fake_inputs) -> Problem | None:
    """A fake kernel must alias inputs exactly where the real kernel does:
    functionalization decides copies and views from the fake result."""
    real_alias, fake_alias = aliased_inputs(real_out, real_inputs), aliased_inputs(fake_out, fake_inputs)
    for (path, _), r, f in zip(tensor_leaves(real_out), real_alias, fake_alias):
        if bool(r) != bool(f):
            def what(aliases):
                return "a view of " + ", ".join(f"x{n}" for n in aliases) if aliases else "a new tensor"

            return Problem("wrong-aliasing", f"{path}: the fake kernel's output is {what(f)}; the real kernel's is "
                           f"{what(r)}")
    return None


def compare_outputs(real, fake, *, skip_dims=frozenset(), symbolic=False) -> Problem | None:
    where = "the symbolic fake kernel" if symbolic else "the fake kernel"
    rl, fl = tensor_leaves(real), tensor_leaves(fake)
    if len(rl) != len(fl):
        return Problem("wrong-output-count", f"{where} returned {len(fl)} outputs, the real kernel {len(rl)}")
    for (path, r), (_, f) in zip(rl, fl):
        if isinstance(r, torch.Tensor) != isinstance(f, torch.Tensor):
            return Problem("wrong-output-type", f"{path}: {where} returned {type(f).__name__}, the real kernel {type(r).__name__}")
        if not isinstance(r, torch.Tensor):
            continue
        if r.dtype != f.dtype:
            return Problem("wrong-dtype", f"{path}: {where} returned dtype {f.dtype}, the real kernel {r.dtype}")
        if r.device.type != f.device.type:
            return Problem("wrong-device", f"{path}: {where} returned device {f.device}, the real kernel {r.device}")
        fshape = [_value(s) for s in f.shape]
        if len(fshape) != r.dim() or any(
            fs is not None and fs != rs and (path, d) not in skip_dims for d, (fs, rs) in enumerate(zip(fshape, r.shape))
        ):
            shown = [s if v is None else v for s, v in zip(f.shape, fshape)]
            return Problem("wrong-shape", f"{path}: {where} returned shape {_fmt(shown)}, the real kernel {list(r.shape)}")
        if None in fshape or r.numel() == 0 or any((path, d) in skip_dims for d in range(r.dim())):
            continue
        fstride = [_value(s) for s in f.stride()]
        bad = [d for d in range(r.dim()) if r.shape[d] > 1 and fstride[d] is not None and fstride[d] != r.stride(d)]
        if bad:
            return Problem("wrong-strides", f"{path}: {where} returned strides {fstride}, the real kernel {list(r.stride())} "
                           f"(shape {list(r.shape)})")
    return None


def _fmt(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


class DataDependence:
    """Which output dims change with the input *values* at fixed input shapes.

    Runs the real kernel again on redrawn values, on inputs filled with the
    low and the high end of the sample's range (a filter like ``x[x > 0]``
    then returns nothing and everything), and on the value classes zeros and
    ties (a count of nonzeros, of distinct values, moves only there)."""

    def __init__(self, op):
        self.op = op
        self.memo: dict = {}
        self.revealed: dict = {}  # memo key -> {(path, dim): the redraw that first moved it}

    def dims(self, case: Case, real_out) -> dict:
        """{(path, dim): [sizes seen]} for dims that varied."""
        # Two samples of one op may differ only in non-tensor arguments: their
        # cases have equal specs, so the template is part of the key. Which sizes follow
        # the values is a matter of the shapes and dtypes, not of a layout or of which
        # values were drawn (the redraws below draw their own): one answer for all those.
        key = (id(case.template), tuple((tuple(i.shape), i.dtype) for i in case.tensor_inputs()))
        if key in self.memo:
            return self.memo[key]
        seen: dict = {}
        for path, leaf in tensor_leaves(real_out):
            if isinstance(leaf, torch.Tensor):
                for d, size in enumerate(leaf.shape):
                    seen[(path, d)] = [int(size)]
        specs = case.tensor_inputs()
        slots = case.template.slots
        redraws = [("values redrawn", [_reseed(s, 7919 + k) for s in specs]) for k in range(2)]
        redraws += [("value low end", [_fill(s, "lo") for s in specs]), ("value high end", [_fill(s, "hi") for s in specs])]
        for values in ("zeros", "ties"):
            redraws.append((f"value {values}", [replace(s, values=values) if values in value_classes(slot, s.dtype)
                                                 else s for s, slot in zip(specs, slots)]))
        revealed = {}
        for label, inputs in redraws:
            outcome = run_real(self.op, case.template.case(inputs))
            if outcome is REJECTED:
                continue
            for path, leaf in tensor_leaves(outcome[2]):
                if isinstance(leaf, torch.Tensor):
                    for d, size in enumerate(leaf.shape):
                        if (path, d) in seen and int(size) not in seen[(path, d)]:
                            seen[(path, d)].append(int(size))
                            revealed.setdefault((path, d), label)
        varied = {k: v for k, v in seen.items() if len(v) > 1}
        self.memo[key] = varied
        self.revealed[key] = revealed
        return varied

    def revealed_by(self, case: Case, path, dim) -> str:
        """The redraw that first showed (path, dim) depends on values ("value zeros"), after dims()."""
        key = (id(case.template), tuple((tuple(i.shape), i.dtype) for i in case.tensor_inputs()))
        return self.revealed.get(key, {}).get((path, dim), "")


def _reseed(spec: TensorInput, seed: int) -> TensorInput:
    return replace(spec, seed=spec.seed + seed, requires_grad=False, values="")


def _fill(spec: TensorInput, end: str) -> TensorInput:
    v = spec.lo if end == "lo" else spec.hi
    return replace(spec, lo=v, hi=v, requires_grad=False, values="")


# ------------------------------------------------------------------ judges


class FakeTensorCheck:
    def __init__(self, op, dependence: DataDependence):
        self.op, self.dependence = op, dependence
        self.notes: list[str] = []

    def __call__(self, case: Case):
        real = run_real(self.op, case)
        if real is REJECTED:
            return REJECTED
        fake_inputs_seen = []
        out, _, _ = run_fake(self.op, case, symbolic=False, inputs_out=fake_inputs_seen)
        if isinstance(out, Machinery):
            not_checked(self.notes, case, out.why)
            return UNJUDGED
        if isinstance(out, Problem):
            return out
        real_inputs = [t for t in pytree.tree_leaves((tuple(real[0]), dict(real[1]))) if isinstance(t, torch.Tensor)]
        problem = (compare_aliasing(real[2], real_inputs, out, fake_inputs_seen)
                   or compare_outputs(real[2], out, skip_dims=set()))
        if problem is not None and problem.kind in ("wrong-shape", "wrong-strides"):
            # Sizes that depend on values are symbolic_fake's business (it checks they are
            # unbacked); here they must not be compared. Asked only when sizes differ: it
            # reruns the real kernel on six redraws of the input.
            skip = self.dependence.dims(case, real[2])
            if skip:
                problem = compare_outputs(real[2], out, skip_dims=set(skip))
        if problem is not None and problem.kind == "wrong-dtype" and _retyped(case):
            problem.message += (f"\nThe real kernel accepts {_retyped(case)} inputs. If it should not, refuse them "
                                "(torch._check(x.is_floating_point()), say); else the fake kernel must give the "
                                "dtype the real one does (torch.result_type, promotion)")
        return problem


def _retyped(case: Case) -> str:
    """The dtypes ``case`` gave tensors in place of the sample's, e.g. "int64" ("" if none)."""
    if case.inputs is None:
        return ""
    return ", ".join(dict.fromkeys(i.dtype for i, s in zip(case.inputs, case.template.slots) if i.dtype != s.dtype))


class SymbolicFakeCheck:
    def __init__(self, op, dependence: DataDependence, *, compare_sizes: bool = True):
        self.op, self.dependence = op, dependence
        # False when faketensor already failed: wrong sizes and a raising fake
        # kernel are its finding; this check then looks only at guards and
        # data-dependent sizes.
        self.compare_sizes = compare_sizes
        self.notes: list[str] = []
        self.last_info: set = set()  # the guards the last input installed: what the sweep learns (variants.Novelty)

    def __call__(self, case: Case):
        self.last_info = set()
        real = run_real(self.op, case)
        if real is REJECTED:
            return REJECTED
        out, shape_env, guards = run_fake(self.op, case, symbolic=True)
        if isinstance(out, Machinery):
            not_checked(self.notes, case, out.why)
            return UNJUDGED
        self.last_info = {("guard", _pretty(guard.expr, shape_env)) for guard in guards}
        varied = self.dependence.dims(case, real[2])
        if isinstance(out, Problem):
            if not self.compare_sizes:
                return None  # faketensor failed and reports why the fake kernel raises
            if out.kind == "fake-raised":
                return Problem("symbolic-fake-raised", "with symbolic sizes, " + out.message)
            return out
        fleaves = dict(tensor_leaves(out))
        for (path, d), sizes in varied.items():
            f = fleaves.get(path)
            if not isinstance(f, torch.Tensor) or d >= f.dim():
                continue
            size = f.shape[d]
            if not (isinstance(size, torch.SymInt) and free_unbacked_symbols(size.node.expr)):
                return Problem(
                    "data-dependent-size-not-unbacked",
                    f"{path} dim {d} depends on the input values (the real kernel gave sizes {sizes} for the same "
                    f"input shapes) but the fake kernel returned {_pretty(size, shape_env)}, which is not an unbacked "
                    f"size.\nUse torch.library.get_ctx().new_dynamic_size() for it.",
                    axis=self.dependence.revealed_by(case, path, d),
                )
        pinning, others = [], []
        for guard in guards:
            if not _about_input_sizes(guard.expr, shape_env):
                continue  # about strides or a view's base: how the input was laid out, not the op's logic
            excluded = _excluded_sizes(guard.expr, shape_env)
            # A guard that rules out sizes the real kernel refuses anyway is the op's
            # contract (torch._check(n % 4 == 0), a size fixed by an int argument);
            # one that rules out sizes the real kernel accepts over-specializes.
            if excluded and self._real_accepts_any(case, shape_env, excluded):
                pinning.append(_pretty(guard.expr, shape_env))
            else:
                others.append(_pretty(guard.expr, shape_env))
        if pinning:
            return Problem(
                "specializes",
                "the fake kernel specializes on sizes: it installed guard(s) " + "; ".join(pinning)
                + ".\nUnder torch.compile every new size recompiles. Keep sizes symbolic (no int(), no Python "
                "branches on sizes; use torch._check for constraints).",
            )
        for text in others:
            note = f"the fake kernel installs guard {text}"
            if note not in self.notes:
                self.notes.append(note)
        if not self.compare_sizes:
            return None
        return compare_outputs(real[2], out, skip_dims=set(varied), symbolic=True)

    def _real_accepts_any(self, case: Case, shape_env, excluded) -> bool:
        sym, values = excluded
        dims = _dims_of(sym, shape_env)
        if not dims:
            return False
        specs = case.tensor_inputs()
        for value in values:
            inputs = [
                TensorInput(tuple(value if (n, d) in dims else size for d, size in enumerate(s.shape)),
                            s.dtype, s.layout, s.lo, s.hi, s.seed, False)
                for n, s in enumerate(specs)
            ]
            if run_real(self.op, case.template.case(inputs)) is not REJECTED:
                return True
        return False


def faketensor_judge(op, runner, template):
    """The faketensor check's judge (opcheck.checklist)."""
    return FakeTensorCheck(op, runner.dependence)


def symbolic_fake_judge(op, runner, template):
    """The symbolic_fake check's judge (opcheck.checklist): it compares sizes only while faketensor has not failed."""
    return SymbolicFakeCheck(op, runner.dependence, compare_sizes=FAKETENSOR.name not in runner.failed)


_SIZE_SOURCE = re.compile(r"^L\['x\d+'\]\.size\(\)\[\d+\]$")


def _about_input_sizes(expr, shape_env) -> bool:
    sources = getattr(shape_env, "var_to_sources", {})
    for sym in expr.free_symbols:
        names = [s.name for s in sources.get(sym, [])]
        if names and not any(_SIZE_SOURCE.match(n) for n in names):
            return False
    return True


def _hints(shape_env) -> dict:
    values = getattr(shape_env, "backed_var_to_val", None)
    if values is None:
        values = shape_env.var_to_val
    return {s: sympy.Integer(v) for s, v in values.items()}


def _dims_of(sym, shape_env) -> set:
    """{(tensor index, dim)} whose size is ``sym`` (duck sizing shares symbols)."""
    dims = set()
    for source in getattr(shape_env, "var_to_sources", {}).get(sym, []):
        m = re.match(r"^L\['x(\d+)'\]\.size\(\)\[(\d+)\]$", source.name)
        if m:
            dims.add((int(m.group(1)), int(m.group(2))))
    return dims


def _excluded_sizes(expr, shape_env):
    """(symbol, nearby larger sizes the guard rules out) when the guard, on one
    size, rules out all of them; else None. Eq(s0, 4) and s0 <= 4 do;
    s0 > 1, Ne(s0, 0) and Eq(s0, s1) don't. Whether that over-specializes is
    for the real kernel to say (SymbolicFakeCheck._real_accepts_any)."""
    hints = _hints(shape_env)
    if len(expr.free_symbols) != 1:
        return None
    (sym,) = expr.free_symbols
    if sym not in hints:
        return None
    h = int(hints[sym])
    values = (h + 1, h + 2, h + 3, 2 * h + 1)
    truths = [expr.xreplace({**hints, sym: sympy.Integer(v)}) for v in values]
    if all(t in (sympy.false, False) for t in truths):
        return sym, values
    return None


def _pretty(expr, shape_env) -> str:
    """Show sizes by source: x0.size(1) rather than s40."""
    text = str(expr.node.expr if isinstance(expr, torch.SymInt) else expr)
    names = {}
    for sym, sources in getattr(shape_env, "var_to_sources", {}).items():
        if sources:
            # An input's own size rather than its view base's, when the symbol is both.
            best = next((s for s in sources if _SIZE_SOURCE.match(s.name)), sources[0])
            name = re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.size(\2)", best.name)
            name = re.sub(r"L\['(\w+)'\]\.stride\(\)\[(\d+)\]", r"\1.stride(\2)", name)
            names[str(sym)] = name
    return re.sub(r"\b[su]\d+\b", lambda m: names.get(m.group(0), m.group(0)), text)
