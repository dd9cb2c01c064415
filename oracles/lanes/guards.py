"""Reading the guards a compile installed, and solving for the next calls.

After a compile, the ShapeEnv of that compile holds the shape guards as
sympy expressions (``shape_env.guards``), each symbol's value range (where
0/1 specialization and refinements by comparisons live), the symbols'
sources (``L['x0'].size()[1]``; one symbol with several sources is duck
sizing) and replacements (specializations, unifications). ``GuardModel``
turns all of that into z3 constraints over the program's input dims, and
``plan_calls`` asks z3 for sizes that:

- satisfy every guard (the cached graph must be reused, and be right);
- violate one guard at a time (it must recompile or fall back correctly);
- sit on a guard's boundary, at -1, 0 and +1;
- break the program's own validity (eager must raise; does compiled?).

A "guard region" is the vector of truth values of the guards at some sizes.
``GuardModel.regions`` enumerates the satisfiable ones (capped); a call
covers the region its sizes fall in.

Everything here runs in the worker, between calls of one compiled function.
The calls it plans are appended to the case as plain concrete calls, so a
finding replays from its JSON alone, without z3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import sympy
import torch
import torch._guards
import z3
from torch._dynamo.backends.registry import lookup_backend
from torch.fx.experimental.validator import SympyToZ3, TranslationValidator
from torch.utils._sympy.numbers import int_oo

from symfuzz.oracles.lanes.compile_features import FeatureCollector

SOURCE_RE = re.compile(r"^L\['(\w+)'\]\.size\(\)\[(\d+)\]$")
INT_SOURCE_RE = re.compile(r"^L\['(\w+)'\]$")  # a Python int argument's value
INT_LOW = -8  # the lowest int argument value the planner tries (when the drawn calls had negative ones)
# z3 work limits. Resource limits (rlimit) rather than wall-clock timeouts
# keep the planned calls a function of the case, not of machine load; the
# timeout is only a safety net.
SOLVER_RLIMIT = 3_000_000
IMPLIED_RLIMIT = 600_000
SOLVER_TIMEOUT_MS = 20000
MAX_REGIONS = 32
MAX_SIZE = 64
MAX_NUMEL = 1 << 16


# ---------------------------------------------------------------- recording compiles


@dataclass
class CompileRecord:
    """One backend call: its ShapeEnv, its graph's code, and when it happened."""

    call_index: int
    shape_env: Any
    graph_code: str
    symbolic: bool
    frame_id: Optional[int] = None  # Dynamo's frame; resume functions get their own
    code_name: Optional[str] = None  # the compiled frame's function, e.g. "fn" or "torch_dynamo_resume_in_fn_at_9"


class GuardRecorder:
    """A backend that records each compile's ShapeEnv, then delegates.

    Wraps the lane's real backend (``inner``), so the graph is compiled
    exactly as before; only a reference to the ShapeEnv is kept, and read
    after the call has finished (Inductor adds guards during its compile).
    ``features`` collects what each compile produced (``compile_features``).
    """

    def __init__(self, inner, name: str = "?"):
        self.inner = inner
        # What Dynamo's errors call the backend (BackendCompilerFailed: "backend='inductor' raised:"):
        # the lane's, as a user's torch.compile(backend=...) would show it, not this wrapper's repr.
        self.__name__ = name
        self.compiles: list[CompileRecord] = []
        self.call_index = 0
        self.features = FeatureCollector()

    def __call__(self, gm, example_inputs):
        fake_mode = torch._guards.detect_fake_mode(example_inputs)
        shape_env = getattr(fake_mode, "shape_env", None)
        symbolic = bool(shape_env is not None and shape_env.backed_var_to_val)
        code = re.sub(r"\b[su]\d+\b", "s?", gm.code)
        compile_id = torch._guards.CompileContext.current_compile_id()
        frame_id = getattr(compile_id, "frame_id", None)
        self.compiles.append(CompileRecord(self.call_index, shape_env, code, symbolic, frame_id, _tracing_code_name()))
        try:
            with self.features.active():
                return self.inner(gm, example_inputs)
        finally:
            self.features.after_compile(gm, example_inputs, shape_env, frame_id)


def _tracing_code_name() -> Optional[str]:
    """The name of the function whose frame Dynamo is compiling now (None if unknown)."""
    try:
        # private torch API, looked up at use: a torch that moved it loses the name, not the compile
        from torch._dynamo.symbolic_convert import InstructionTranslator

        return InstructionTranslator.current_tx().f_code.co_name
    except Exception:  # noqa: BLE001 - internals moved in some torch version
        return None


def recording_backend(lane, dynamic):
    """(GuardRecorder, extra torch.compile kwargs) wrapping ``lane``'s backend."""
    if lane.backend == "inductor":
        inner = torch._TorchCompileInductorWrapper(lane.mode, None, dynamic)
    else:
        inner = lookup_backend(lane.backend)
    return GuardRecorder(inner, lane.backend)


def over_guards(compiles: list[CompileRecord]) -> int:
    """Recompiles whose new graph is the same code as an earlier dynamic graph.

    The guard that failed changed nothing the graph computes, so the old
    graph would have been right: Dynamo guarded more than it needed to.
    """
    seen: set[str] = set()
    count = 0
    for record in compiles:
        if record.symbolic and record.graph_code in seen:
            count += 1
        if record.symbolic:
            seen.add(record.graph_code)
    return count


# ---------------------------------------------------------------- the z3 model


@dataclass
class Item:
    """One constraint: ``kind`` is guard, range, duck, static or validity."""

    kind: str
    text: str
    expr: Any  # z3 BoolRef over the dim variables
    relation: Optional[tuple] = None  # (lhs - rhs) z3 term for boundary queries


class FreshSolver:
    """A z3 solver in a context of its own, its constraints copied in as they are added.

    z3's answers depend on the terms its context already holds (their ids order its
    choices), and the global context holds every earlier case's: solved there, a case's
    planned sizes would depend on which cases its worker ran before it. Here they depend
    only on the constraints."""

    def __init__(self):
        self.ctx = z3.Context()
        self.solver = z3.Solver(ctx=self.ctx)

    def set(self, *args) -> None:
        self.solver.set(*args)

    def add(self, *exprs) -> None:
        self.solver.add(*[e.translate(self.ctx) for e in exprs])

    def check(self):
        return self.solver.check()

    def model(self) -> "_FreshModel":
        return _FreshModel(self.solver.model(), self.ctx)


class _FreshModel:
    def __init__(self, model, ctx):
        self.inner, self.ctx = model, ctx

    def eval(self, expr, model_completion: bool = False):
        return self.inner.eval(expr.translate(self.ctx), model_completion=model_completion)


@dataclass
class GuardModel:
    """The guards of one compile, as z3 constraints over input dims."""

    inputs: list  # fuzz.ir.Input
    dims: dict  # (arg index, dim) -> z3 Int
    guards: list[Item] = field(default_factory=list)
    validity: list[Item] = field(default_factory=list)
    untranslated: list[str] = field(default_factory=list)
    call_index: int = 0  # the schedule call whose compile these guards come from
    # Per int argument (input index), the (lowest, highest) value planned calls may give
    # it: not below 0 unless the drawn calls gave it negative values, and not far past the
    # drawn magnitudes. The generator checked the program's validity only on the values it
    # drew (``math.sqrt(k)`` of a negative k raises in eager where a compiled graph
    # computes a NaN; an exponent 3 is fine where 64 overflows).
    int_bounds: dict = field(default_factory=dict)

    def domain(self):

        out = []
        for (arg, dim), var in self.dims.items():
            if not self.inputs[arg].is_tensor:  # an int argument's value
                low, high = self.int_bounds.get(arg, (0, MODERATE))
                out += [var >= low, var <= high]
                continue
            rank = len(self.inputs[arg].dims)
            cap = max(2, min(MAX_SIZE, int(MAX_NUMEL ** (1.0 / max(rank, 1)))))
            out += [var >= 0, var <= cap]
        return out

    def solver(self):
        solver = FreshSolver()
        solver.set("timeout", SOLVER_TIMEOUT_MS)
        solver.set("rlimit", SOLVER_RLIMIT)
        solver.add(*self.domain())
        return solver

    def shapes_of(self, model) -> list[tuple[int, ...]]:
        shapes = []
        for arg, inp in enumerate(self.inputs):
            shapes.append(tuple(model.eval(self.dims[(arg, d)], model_completion=True).as_long() for d in range(_width(inp))))
        return shapes

    def substitution(self, shapes):
        return [(var, z3.IntVal(shapes[arg][dim])) for (arg, dim), var in self.dims.items()]

    def holds(self, item: Item, shapes) -> bool:
        value = z3.simplify(z3.substitute(item.expr, *self.substitution(shapes)))
        return z3.is_true(value)

    def region_of(self, shapes) -> tuple[bool, ...]:
        return tuple(self.holds(item, shapes) for item in self.guards)

    def valid(self, shapes) -> bool:
        return all(self.holds(item, shapes) for item in self.validity)

    def regions(self, limit: int = MAX_REGIONS) -> tuple[set, bool]:
        """Satisfiable guard regions among valid sizes; (regions, complete)."""
        solver = self.solver()
        solver.add(*[i.expr for i in self.validity])
        flags = [z3.Bool(f"g{i}") for i in range(len(self.guards))]
        for flag, item in zip(flags, self.guards):
            solver.add(flag == item.expr)
        found: set = set()
        while len(found) < limit:
            result = solver.check()
            if result != z3.sat:
                return found, result == z3.unsat
            model = solver.model()
            vector = tuple(z3.is_true(model.eval(f, model_completion=True)) for f in flags)
            found.add(vector)
            solver.add(z3.Or(*[f != z3.BoolVal(v) for f, v in zip(flags, vector)]) if flags else z3.BoolVal(False))
        return found, False


def build_model(shape_env, inputs, compiling_shapes) -> Optional[GuardModel]:
    """The GuardModel of one compile, or None if it has no symbolic sizes.

    ``inputs`` are the program's inputs (names x0, x1, ... and dims tied to
    program size symbols); ``compiling_shapes`` are the shapes of the call
    that made this compile (static dims are guarded to those values).
    """
    if shape_env is None or not shape_env.backed_var_to_val:
        return None
    index = {inp.name: i for i, inp in enumerate(inputs)}
    dims = {(a, d): z3.Int(f"{inp.name}_{d}") for a, inp in enumerate(inputs) for d in range(_width(inp))}
    model = GuardModel(list(inputs), dims)

    # Which input dims (or int arguments) each backed symbol stands for.
    sources: dict[Any, list[tuple[int, int]]] = {}
    for sym, srcs in shape_env.var_to_sources.items():
        for src in srcs:
            name = getattr(src, "name", "") if not callable(getattr(src, "name", None)) else src.name()
            m = SOURCE_RE.match(name)
            if m and m.group(1) in index:
                sources.setdefault(sym, []).append((index[m.group(1)], int(m.group(2))))
            m = INT_SOURCE_RE.match(name)
            if m and m.group(1) in index and _width(inputs[index[m.group(1)]]) == 1 and \
                    not inputs[index[m.group(1)]].is_tensor:
                sources.setdefault(sym, []).append((index[m.group(1)], 0))
    if not sources:
        return None  # another frame's compile (e.g. a resume function after a graph break)
    backed = [s for s in shape_env.backed_var_to_val if s in sources]
    validator = TranslationValidator()
    for sym in backed:
        validator.add_var(sym, int)
    substitution = [(validator.z3var(s), dims[sources[s][0]]) for s in backed]

    def translate(expr, boolean=True):
        free = expr.free_symbols
        if any(s not in sources for s in free):
            raise ValueError(f"symbols without an input source: {sorted(map(str, free - set(sources)))}")
        for s in free:
            if s not in validator.symbols:
                validator.add_var(s, int)
                substitution.append((validator.z3var(s), dims[sources[s][0]]))
        term = validator.to_z3_boolean_expr(expr) if boolean else SympyToZ3(validator).run(expr)
        return z3.substitute(term, *substitution) if substitution else term

    def to_z3(expr):
        return translate(expr, True)

    def to_z3_term(expr):
        return translate(expr, False)

    covered = set()
    for sym in backed:
        first, *others = sources[sym]
        covered.update(sources[sym])
        replacement = shape_env.replacements.get(sym)
        for other in others:
            # Duck sizing (or the program's own equal dims): one symbol, several dims.
            model.guards.append(Item("duck", f"{_dim_name(inputs, other)} == {_dim_name(inputs, first)}",
                                     dims[other] == dims[first], dims[other] - dims[first]))
        if replacement is not None:
            try:
                model.guards.append(Item("guard", f"{sym} == {replacement}", to_z3(sympy.Eq(sym, replacement))))
            except Exception as exc:  # noqa: BLE001 - keep going without it
                model.untranslated.append(f"{sym} == {replacement}: {exc}")
            continue
        bounds = shape_env.var_to_range.get(sym)
        if bounds is not None:
            var = dims[first]
            if bounds.lower not in (-int_oo,) and int(bounds.lower) > 0:
                model.guards.append(Item("range", f"{_dim_name(inputs, first)} >= {bounds.lower}", var >= int(bounds.lower), var - int(bounds.lower)))
            if bounds.upper is not int_oo and bounds.upper != int_oo:
                model.guards.append(Item("range", f"{_dim_name(inputs, first)} <= {bounds.upper}", var <= int(bounds.upper), var - int(bounds.upper)))
    for (a, d), var in dims.items():
        if (a, d) not in covered:
            # Static in the graph: Dynamo checks the exact size.
            value = compiling_shapes[a][d]
            model.guards.append(Item("static", f"{_dim_name(inputs, (a, d))} == {value}", var == value, var - value))
    seen_text = set()
    for guard in shape_env.guards:
        text = str(guard.expr)
        if text in seen_text:
            continue
        seen_text.add(text)
        try:
            model.guards.append(Item("guard", text, to_z3(guard.expr), _relation(to_z3_term, guard.expr)))
        except Exception as exc:  # noqa: BLE001 - an expression z3 cannot take
            model.untranslated.append(f"{text}: {exc}")

    # The program's own validity: dims tied to one program symbol are equal,
    # literal dims are fixed. Eager rejects sizes that break these.
    by_symbol: dict[str, list[tuple[int, int]]] = {}
    for a, inp in enumerate(inputs):
        for d, sym in enumerate(inp.dims):
            if isinstance(sym, int):
                model.validity.append(Item("validity", f"{inp.name}.size({d}) == {sym}", dims[(a, d)] == sym, dims[(a, d)] - sym))
            else:
                by_symbol.setdefault(sym, []).append((a, d))
    for sym, members in sorted(by_symbol.items()):
        for other in members[1:]:
            model.validity.append(Item("validity", f"{_dim_name(inputs, other)} == {_dim_name(inputs, members[0])} ({sym})",
                                       dims[other] == dims[members[0]], dims[other] - dims[members[0]]))
    model.guards = _irredundant(model, model.guards)
    return model


def _irredundant(model: GuardModel, items: list[Item]) -> list[Item]:
    """Drop items implied by the others (ShapeEnv guards repeat themselves a lot:
    ``s0 > 4`` next to the range ``s0 >= 5``, chains of Mod guards for a view),
    so that regions count real distinctions. Duck and static items are kept:
    they are exactly the guards the planted-fault tests drop."""
    kept = list(items)
    for item in list(items):
        if item.kind in ("duck", "static"):
            continue
        others = [i.expr for i in kept if i is not item]
        solver = model.solver()
        solver.set("rlimit", IMPLIED_RLIMIT)
        solver.add(*[v.expr for v in model.validity], *others, z3.Not(item.expr))
        if solver.check() == z3.unsat:
            kept.remove(item)
    return kept


def _dim_name(inputs, key) -> str:
    inp = inputs[key[0]]
    return f"{inp.name}.size({key[1]})" if inp.is_tensor else inp.name


def _width(inp) -> int:
    """How many model variables an input has: a tensor's dims; an int argument, one
    (its value: the compiling call's value is what a specialized int is guarded to);
    other Python numbers and int lists, none (their values stay as the calls drew them)."""
    return len(inp.dims) if inp.is_tensor else int(inp.kind == "int")


def model_shapes(call) -> list[tuple]:
    """A call's arguments as the model sees them: a tensor's shape, ``(value,)`` for an
    int argument, () for other numbers (``case.Call``)."""
    return [(a.value,) if a.scalar == "int" else tuple(a.shape) for a in call.args]


def _relation(to_z3_term, expr):
    """lhs - rhs of a relational sympy guard, as a z3 term (None otherwise)."""
    if not isinstance(expr, sympy.core.relational.Relational):
        return None
    try:
        return to_z3_term(expr.lhs) - to_z3_term(expr.rhs)
    except Exception:  # noqa: BLE001 - no boundary queries for this guard
        return None


# ---------------------------------------------------------------- planning calls


@dataclass
class PlannedCall:
    shapes: list[tuple[int, ...]]
    purpose: str  # "reuse", "violate: <guard>", "boundary: <guard> <k>", "invalid: <item>"
    expect_reuse: bool
    region: tuple


# How many planned calls of each purpose, in the order they are asked for.
# Reuse calls are cheap (no compile); the others usually recompile.
PLAN_BUDGET = {"reuse": 2, "invalid": 1, "violate": 2, "boundary": 2}
MODERATE = 12  # try sizes up to this first: readable repros, fast runs


def solve_new_shapes(model: GuardModel, constraints: list, seen: list):
    """Shapes satisfying ``constraints`` that differ from every shape in ``seen``, moderate
    sizes first (readable repros, fast runs), or None."""
    for moderate in (True, False):
        solver = model.solver()
        solver.add(*constraints)
        if moderate:
            solver.add(*[var <= MODERATE for var in model.dims.values()])
        for shapes in seen:
            solver.add(z3.Or(*[var != shapes[a][d] for (a, d), var in model.dims.items()]) if model.dims else z3.BoolVal(False))
        if solver.check() == z3.sat:
            return model.shapes_of(solver.model())
    return None


def plan_calls(model: GuardModel, previous: list[list[tuple[int, ...]]], budget: Optional[dict] = None) -> list[PlannedCall]:
    """Sizes for the next calls, at most ``budget[purpose]`` of each purpose.

    ``previous`` are the shapes already called; new calls differ from them.
    """
    budget = dict(PLAN_BUDGET if budget is None else budget)
    planned: list[PlannedCall] = []
    seen = [tuple(map(tuple, p)) for p in previous]
    valid = [i.expr for i in model.validity]
    everything = [i.expr for i in model.guards]

    def solve(constraints):
        return solve_new_shapes(model, constraints, seen)

    def take(purpose, constraints, label):
        if budget.get(purpose, 0) <= 0:
            return False
        shapes = solve(constraints)
        if shapes is None:
            return False
        budget[purpose] -= 1
        region = model.region_of(shapes)
        # Guards z3 could not take are real guards the model lacks: no promise of reuse then.
        expect = all(region) and model.valid(shapes) and not model.untranslated
        planned.append(PlannedCall(shapes, label, expect, region))
        seen.append(tuple(shapes))
        return True

    # Inside every guard: the cached graph must be reused, and be right.
    take("reuse", valid + everything, "reuse")
    # Break the program's own validity once (eager must raise; does compiled?).
    for item in model.validity:
        if take("invalid", [v.expr for v in model.validity if v is not item] + [z3.Not(item.expr)] + everything,
                f"invalid: {item.text}"):
            break
    # Violate one guard at a time: each lands in another region.
    for i, item in enumerate(model.guards):
        others = [g.expr for j, g in enumerate(model.guards) if j != i]
        if not take("violate", valid + others + [z3.Not(item.expr)], f"violate: {item.text}"):
            take("violate", valid + [z3.Not(item.expr)], f"violate: {item.text}")
    # Boundaries of relational guards, just inside and just outside.
    for item in model.guards:
        if item.relation is None:
            continue
        for k in (0, 1, -1):
            take("boundary", valid + [item.relation == k], f"boundary: {item.text} at {k:+d}")
    take("reuse", valid + everything, "reuse")
    return planned


def plan_reuse(model: GuardModel, previous: list[list[tuple[int, ...]]], count: int, label: str = "reuse") -> list[PlannedCall]:
    """Up to ``count`` more sizes inside every guard of ``model`` (and the program's own
    validity), each new: none equals a shape in ``previous`` or an earlier one of these.

    A call at such sizes runs the cached graph without compiling, so it is the cheapest
    check there is: every one is judged against eager like any other call. Moderate sizes
    come first (readable repros, fast runs); the answers depend only on the model and
    ``previous`` (z3 under resource limits), so they are a function of the case.
    """
    if count <= 0:
        return []
    constraints = [i.expr for i in model.validity] + [i.expr for i in model.guards]
    seen = [tuple(map(tuple, p)) for p in previous]
    planned: list[PlannedCall] = []
    while len(planned) < count:
        shapes = solve_new_shapes(model, constraints, seen)
        if shapes is None:
            break  # no other sizes inside these guards (e.g. every dim is static)
        region = model.region_of(shapes)
        expect = all(region) and model.valid(shapes) and not model.untranslated
        planned.append(PlannedCall(shapes, label, expect, region))
        seen.append(tuple(shapes))
    return planned
