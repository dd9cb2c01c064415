"""Hypothesis-driven generation of Cases (Program + Schedule).

Everything is drawn through one ``draw`` function, so a case is a pure
function of Hypothesis's choice sequence: it shrinks like any Hypothesis
example and replays from the recorded choices.

Validity across shapes. The schedule's size values are drawn *first*; each
call is a "world" with concrete sizes. Every statement the generator draws
is rendered to source and executed in every world, on that call's own
inputs (real CPU tensors, seeded exactly as the run will make them); a
statement that raises in any world is discarded and another one is drawn.
So a program is built to be valid at every shape it will be called with,
while its source stays symbolic (sizes come from ``x.size(d)``, never from
constants baked in at one shape). Real values (rather than meta tensors)
are what data-dependent ops need: ``nonzero`` or ``.item()`` give each world
the sizes that call will see.

Besides tensor ops, the builder draws size-level Python: arithmetic on
sizes, sizes passed through plain Python (``len(range(n))``, ``max(x.shape)``),
branches and ``torch.cond`` on size predicates, ``assert``/``torch._check``
facts, ``math.sqrt`` scales, views shaped by size variables, and explicit
graph breaks.
"""

from __future__ import annotations

import copy
import math
import re
import warnings
from dataclasses import dataclass, replace
from typing import Optional

import hypothesis.strategies as st
import torch
import torch.nn.functional as torch_F

from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.choices import Draw, weighted
from symfuzz.fuzz.ir import (
    BranchNode,
    CheckNode,
    CondNode,
    EffectNode,
    ExprNode,
    GraphBreakNode,
    Input,
    SCALAR_KINDS,
    OpNode,
    Program,
    SizeNode,
    node_reads,
    render_node,
)
from symfuzz.fuzz.gradients import GRADIENT_SHARE, draw_gradients
from symfuzz.fuzz.modules import (draw_module_statement, finish_module, settle_module, start_module, state_partner,
                                  tie_dims)
from symfuzz.fuzz.motifs import draw_motif
from symfuzz.fuzz.scalars import draw_int_dynamism, draw_late_scalar_uses, draw_scalar_inputs, number_partner
from symfuzz.fuzz.schedule import apply_hint_mode, draw_config, draw_marks
from symfuzz.fuzz.script_runtime import make_arg
from symfuzz.fuzz.size_forms import draw_conversion, draw_cross_check, draw_size_arguments, required_config
from symfuzz.fuzz.specs import all_specs, required_dynamo_config
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT, SCALAR_VALUES, Operand, OpSpec, ParamContext, ScalarInput

# (value, weight). Small sizes first so that shrinking moves toward them.
SIZE_WEIGHTS = [(2, 10), (3, 10), (4, 9), (1, 6), (5, 8), (8, 7), (7, 6), (6, 5), (0, 2), (16, 4), (9, 3), (12, 3), (33, 2), (64, 1)]
RANK_WEIGHTS = [(2, 5), (1, 3), (3, 4), (0, 1), (4, 2), (5, 1)]
DTYPE_WEIGHTS = [("float32", 12), ("float64", 2), ("float16", 2), ("bfloat16", 2), ("int64", 2), ("int32", 2), ("bool", 1)]
LAYOUT_WEIGHTS = [("contiguous", 14), ("transposed", 3), ("strided", 3), ("expanded", 2)]
SCALARS = [2, 3, -1, 0.5, 1.5, -2.5]

MAX_NUMEL = 1 << 16  # per value per world: keeps each run fast and memory small
ATTEMPTS_PER_STATEMENT = 12


@dataclass(frozen=True)
class GenConfig:
    min_ops: int = 1
    max_ops: int = 12
    max_symbols: int = 4
    min_calls: int = 2
    max_calls: int = 4
    max_inputs: int = 3
    dynamic_choices: tuple = (None, True)
    ops: Optional[tuple[str, ...]] = None  # restrict to these spec names
    # Unrepresentative first sizes, dynamism marks and config flags
    # (fuzz/schedule.py). Off gives plain schedules: automatic dynamic only.
    schedule_knobs: bool = True
    # After the drawn calls, add calls solved from the installed guards
    # (oracles/lanes/guards.py). Read by the worker, not by the generator.
    guard_planning: bool = True
    # Share of schedules compiled under z3 translation validation (slow).
    translation_validation_rate: float = 0.02
    # Share of programs with a floating input whose calls check gradients too (fuzz/gradients.py).
    gradient_share: float = GRADIENT_SHARE
    # Python number and int-list inputs next to the tensors (fuzz/scalars.py); 0: none.
    max_scalar_inputs: int = 2
    # Share of programs drawn as nn.Module programs (parameters, buffers, train/eval;
    # fuzz/modules.py), and of those, the share whose calls are training steps.
    module_rate: float = 0.1
    train_step_rate: float = 0.3


GLOBALS = {"torch": torch, "F": torch_F, "math": math}


class Builder:
    """Builds one Program while tracking each value's meta tensor per world."""

    def __init__(self, draw: Draw, config: GenConfig, symbols: dict[str, tuple[int, ...]], n_worlds: int):
        self.draw = draw
        self.config = config
        self.symbols = symbols
        self.n_worlds = n_worlds
        self.inputs: list[Input] = []
        self.arg_specs: list[list[ArgSpec]] = [[] for _ in range(n_worlds)]
        self.body: list = []
        self.envs: list[dict] = [{} for _ in range(n_worlds)]
        self.tensors: list[Operand] = []
        self.ints: dict[str, tuple[int, ...]] = {}
        self.counter = 0
        self.shape_rule_mismatches: list = []
        # Values (tensors, ints) whose sizes come from tensor values: compiled,
        # they are unbacked symbols, so size-level Python leaves them alone.
        self.unbacked: set[str] = set()
        self.motifs: list[str] = []  # names of the real-model motifs drawn (fuzz/motifs.py), in order
        # A module program's state (ir.Param), and what drawing one needs (fuzz/modules.py; None: a function).
        self.params: list = []
        self.module = None
        self.specs = [s for s in all_specs() if config.ops is None or s.name in config.ops]
        if not self.specs:
            raise ValueError(f"no op specs match {config.ops!r}")
        self.spec_weights = [(s, max(1, int(s.weight * 4))) for s in self.specs]
        self.spec_by_name = {s.name: s for s in all_specs()}

    # ------------------------------------------------------------ naming

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # ------------------------------------------------------------ inputs

    def add_input(self, dims: tuple, dtype: str) -> Optional[Operand]:
        name = f"x{len(self.inputs)}"
        shapes = []
        for w in range(self.n_worlds):
            shapes.append(tuple(d if isinstance(d, int) else self.symbols[d][w] for d in dims))
        if any(math.prod(s) > MAX_NUMEL for s in shapes):
            return None
        self.inputs.append(Input(name, dtype, tuple(dims)))
        # Mostly one layout for all calls (so graphs get reused and guards are
        # tested); sometimes a new layout per call (stride guards, recompiles).
        per_call = self.draw(st.integers(0, 3)) == 0
        layout = self.draw_layout(shapes[0])
        for w, shape in enumerate(shapes):
            if per_call and w > 0:
                layout = self.draw_layout(shape)
            spec = ArgSpec(shape, dtype, self.draw(st.integers(0, 2**31 - 1)), layout)
            self.arg_specs[w].append(spec)
            self.envs[w][name] = make_arg(spec.to_json(), device="cpu")
        operand = Operand(name, dtype, tuple(shapes))
        self.tensors.append(operand)
        return operand

    def add_scalar_input(self, kind: str, values: tuple, prefix: str) -> str:
        """A Python number or int-list input (``ir.SCALAR_KINDS``) taking
        ``values[w]`` in world ``w``; its name. An int input is an int
        variable like a size read (``self.ints``), so sizes may use it."""
        name = f"{prefix}{len(self.inputs)}"
        self.inputs.append(Input(name, SCALAR_KINDS[kind], (), kind))
        for w, value in enumerate(values):
            spec = ArgSpec.of_scalar(kind, value)
            self.arg_specs[w].append(spec)
            self.envs[w][name] = make_arg(spec.to_json())
        if kind == "int":
            self.ints[name] = tuple(values)
        return name

    def scalar_inputs(self) -> list[ScalarInput]:
        """The program's Python number and int-list inputs, with their values per world."""
        return [ScalarInput(i.name, i.kind, tuple(env[i.name] for env in self.envs))
                for i in self.inputs if not i.is_tensor]

    def draw_dims(self, rank: int) -> tuple:
        names = sorted(self.symbols)
        dims = []
        for _ in range(rank):
            choice = self.draw(st.integers(0, 9))
            if choice < 8:
                dims.append(self.draw(st.sampled_from(names)))
            elif choice == 8:
                dims.append(1)
            else:
                dims.append(self.draw(st.sampled_from([2, 3, 5])))
        return tie_dims(self, tuple(dims)) if self.module is not None else tuple(dims)

    def draw_layout(self, shape) -> dict:
        kind = weighted(self.draw, LAYOUT_WEIGHTS)
        rank = len(shape)
        if kind == "transposed" and rank >= 2:
            a = self.draw(st.integers(0, rank - 2))
            return {"kind": "transposed", "dims": [a, self.draw(st.integers(a + 1, rank - 1))]}
        if kind == "strided" and rank >= 1:
            return {"kind": "strided", "dim": self.draw(st.integers(0, rank - 1)), "step": self.draw(st.sampled_from([2, 3]))}
        if kind == "expanded" and rank >= 1:
            return {"kind": "expanded", "dim": self.draw(st.integers(0, rank - 1))}
        return {"kind": "contiguous"}

    def dims_for(self, shapes_per_world: list[tuple[int, ...]]) -> Optional[tuple]:
        """Input dims (symbols or ints) reproducing these per-world shapes, if any."""
        rank = len(shapes_per_world[0])
        dims = []
        for d in range(rank):
            values = tuple(s[d] for s in shapes_per_world)
            if len(set(values)) == 1 and (values[0] in (1, 2, 3, 5) or not self._symbol_for(values)):
                dims.append(values[0])
                continue
            sym = self._symbol_for(values)
            if sym is None:
                return None
            dims.append(sym)
        return tuple(dims)

    def _symbol_for(self, values):
        for name in sorted(self.symbols):
            if self.symbols[name] == values:
                return name
        return None

    # ------------------------------------------------------------ statements

    def try_statement(self, node, new_value: Optional[str]) -> bool:
        """Execute ``node`` in every world; keep it only if all succeed."""
        code = "\n".join(render_node(node))
        results = []
        try:
            compiled = compile(code, "<fuzz>", "exec")
        except SyntaxError as exc:  # a spec bug: fail loudly
            raise AssertionError(f"spec rendered invalid Python:\n{code}") from exc
        trial_envs = []
        for env in self.envs:
            # An in-place statement runs on a copy of the world (deepcopy keeps
            # views aliased): if a later world rejects it, no values changed.
            local = copy.deepcopy(env) if isinstance(node, EffectNode) else dict(env)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exec(compiled, GLOBALS, local)
            except Exception:
                return False
            if new_value is not None:
                value = local.get(new_value)
                if isinstance(value, torch.Tensor):
                    if value.numel() > MAX_NUMEL or value.is_complex():
                        return False
                elif not isinstance(value, int) or isinstance(value, bool) or abs(value) > 4096:
                    return False
                results.append(value)
            trial_envs.append(local)
        if new_value is not None and isinstance(results[0], torch.Tensor):
            if any(not isinstance(r, torch.Tensor) or r.dtype != results[0].dtype or r.dim() != results[0].dim() for r in results):
                return False
            dtype = str(results[0].dtype).removeprefix("torch.")
            if dtype not in DTYPE_KIND:
                return False
            self.tensors.append(Operand(new_value, dtype, tuple(tuple(r.shape) for r in results)))
        elif new_value is not None:
            self.ints[new_value] = tuple(results)
        if new_value is not None and self._reads_unbacked(node):
            self.unbacked.add(new_value)
        self.envs = trial_envs
        self.body.append(node)
        return True

    def _reads_unbacked(self, node) -> bool:
        if isinstance(node, OpNode) and self.spec_by_name[node.op].value_sized:
            return True
        return bool(node_reads(node) & self.unbacked)

    def size_ref(self, operand: Operand, dim: int) -> str:
        """Source for a size of ``operand``: an int variable or an inline read."""
        values = operand.sizes(dim)
        # An int read from values (unbacked) may equal this size in every world
        # by chance; compiled, the two would not be known equal.
        unbacked = operand.name in self.unbacked
        existing = [n for n, v in self.ints.items() if v == values and (n in self.unbacked) == unbacked]
        mode = self.draw(st.integers(0, 3))
        if existing and mode == 0:
            return self.draw(st.sampled_from(existing))
        if mode == 1:
            name = self.fresh("n")
            form = self.draw(st.sampled_from(["{v}.size({d})", "{v}.shape[{d}]"]))
            if self.try_statement(SizeNode(name, form.format(v=operand.name, d=dim)), name):
                return name
        return f"{operand.name}.size({dim})" if mode != 3 else f"{operand.name}.shape[{dim}]"

    def save(self):
        return (list(self.body), list(self.envs), dict(self.ints), list(self.tensors), list(self.inputs),
                [list(a) for a in self.arg_specs], set(self.unbacked))

    def restore(self, saved):
        self.body, self.envs, self.ints, self.tensors, self.inputs, self.arg_specs, self.unbacked = saved

    def draw_op(self) -> bool:
        saved = self.save()
        spec: OpSpec = weighted(self.draw, self.spec_weights)
        if spec.arity == 0:
            operands: list[Operand] = []
        else:
            candidates = [t for t in self.tensors if spec.accepts(t)]
            if not candidates:
                return False
            first = candidates[-1 - self.draw(st.integers(0, len(candidates) - 1))]
            operands = [first]
        args = [o.name for o in operands]
        for _ in range(1, spec.arity):
            partner = self.draw_partner(spec, operands[0])
            if partner is None:
                self.restore(saved)
                return False
            if isinstance(partner, Operand):
                operands.append(partner)
                args.append(partner.name)
            else:
                args.append(partner)
        ctx = ParamContext(self.draw, operands, self.size_ref, self.ints,
                           lambda name: [env[name] for env in self.envs if name in env], self.scalar_inputs())
        params = spec.params(ctx)
        if spec.effect:
            node = EffectNode(spec.name, tuple(args), params)
            ok = self.try_statement(node, None)
            if ok:
                self._refresh_shapes()
        else:
            name = self.fresh("v")
            ok = self.try_statement(OpNode(name, spec.name, tuple(args), params), name)
            if ok and spec.shape is not None:
                self.check_shape_rule(spec, operands, args, params)
        if not ok:
            self.restore(saved)
        return ok

    def check_shape_rule(self, spec: OpSpec, operands: list[Operand], args: list[str], params: dict) -> None:
        """Record where a spec's declared shape rule disagrees with meta execution."""
        result = self.tensors[-1]
        by_name = {o.name: o for o in operands}
        scalars = self.scalar_inputs()
        for w, actual in enumerate(result.shapes):
            shapes = [by_name[a].shapes[w] if a in by_name else () for a in args]
            try:
                # A shape rule reads the world's values of the scalar inputs its params name.
                world = {**params, SCALAR_VALUES: {s.name: s.values[w] for s in scalars}} if scalars else params
                expected = tuple(spec.shape(shapes, world))
            except Exception as exc:  # noqa: BLE001 - a spec bug, recorded
                expected = f"shape rule raised {exc!r}"
            if expected != actual:
                self.shape_rule_mismatches.append((spec.name, shapes, params, expected, actual))

    def _refresh_shapes(self):
        """After an in-place op, re-read shapes (resize_-free ops keep them)."""
        self.tensors = [
            Operand(t.name, t.dtype, tuple(tuple(env[t.name].shape) for env in self.envs)) for t in self.tensors
        ]

    def draw_partner(self, spec: OpSpec, first: Operand):
        mode = spec.partner
        if mode in ("scalar", "scalar-ok") and (mode == "scalar" or self.draw(st.integers(0, 3)) == 0):
            number = repr(self.draw(st.sampled_from(SCALARS)))
            return number_partner(self, divides=mode == "scalar") or number
        if first.name in self.unbacked:
            # Sizes read from values: another tensor matches them only by
            # chance in every world, which compiled code cannot know. Pair
            # the value with itself, or with a scalar.
            if mode in ("broadcast", "same", "scalar-ok") and first.kind in (spec.partner_kinds or spec.kinds):
                return first
            return repr(self.draw(st.sampled_from(SCALARS))) if mode == "scalar-ok" else None
        if callable(mode):
            shapes = mode(self.draw, first)
            if shapes is None:
                return None
        else:
            shapes = self._broadcast_variant(first) if mode != "same" else list(first.shapes)
        kinds = spec.partner_kinds or spec.kinds
        # Reuse a live value with exactly the needed shapes, or make a new input.
        live = [t for t in self.tensors if list(t.shapes) == list(shapes) and t.kind in kinds and t.name != first.name
                and t.name not in self.unbacked]
        if live and self.draw(st.booleans()):
            return self.draw(st.sampled_from(live))
        if self.module is not None and DTYPE_KIND[first.dtype] in kinds:
            state = state_partner(self, list(shapes), first.dtype)  # a parameter or buffer of fixed shape
            if state is not None:
                return state
        dims = self.dims_for(list(shapes))
        if dims is None or len(self.inputs) >= self.config.max_inputs + 2:
            return live[0] if live else None
        dtype = first.dtype
        if DTYPE_KIND[dtype] not in kinds or self.draw(st.integers(0, 3)) == 0:
            # A different dtype exercises type promotion; it must suit the spec.
            dtype = weighted(self.draw, [(d, w) for d, w in DTYPE_WEIGHTS if DTYPE_KIND[d] in kinds])
        return self.add_input(dims, dtype)

    def _broadcast_variant(self, first: Operand) -> list[tuple[int, ...]]:
        """``first``'s shapes, with some dims set to 1 and maybe leading dims dropped."""
        rank = first.rank
        drop = self.draw(st.integers(0, rank)) if rank and self.draw(st.integers(0, 3)) == 0 else 0
        ones = [self.draw(st.integers(0, 4)) == 0 for _ in range(rank)]
        out = []
        for shape in first.shapes:
            s = [1 if ones[i] else shape[i] for i in range(rank)]
            out.append(tuple(s[drop:]))
        return out

    def draw_size_arith(self) -> bool:
        """``n = <arithmetic on sizes>``: size-level Python feeding later ops."""
        tensors = [t for t in self.tensors if t.rank > 0]
        if not tensors:
            return False
        t = self.draw(st.sampled_from(tensors))
        a = self.size_ref(t, self.draw(st.integers(0, t.rank - 1)))
        form = self.draw(st.sampled_from(["{a} * 2", "{a} + 1", "{a} // 2 + 1", "max({a}, 1)", "{a} * {b}", "{a} + {b}", "min({a}, 3)"]))
        b = a
        if "{b}" in form:
            u = self.draw(st.sampled_from(tensors))
            b = self.size_ref(u, self.draw(st.integers(0, u.rank - 1)))
        name = self.fresh("n")
        return self.try_statement(SizeNode(name, form.format(a=a, b=b)), name)

    # ------------------------------------------------------ size-level Python

    def backed_sized(self) -> list[Operand]:
        """Tensors with a dim whose sizes are plain inputs' sizes (not read from values)."""
        return [t for t in self.tensors if t.rank > 0 and t.name not in self.unbacked]

    def draw_size_predicate(self) -> Optional[str]:
        """A comparison on sizes, sometimes two chained with ``and``/``or``.

        Thresholds come from the worlds' sizes: between them (calls take
        different sides), equal to one world's size (``== k`` specializes
        one call), or past all of them.
        """
        sized = self.backed_sized()
        if not sized:
            return None
        s = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, s.rank - 1))
        values = s.sizes(d)
        distinct = sorted(set(values))
        k = distinct[len(distinct) // 2]
        one = self.draw(st.sampled_from(values))
        ref = self.draw(st.sampled_from([f"{s.name}.size({d})", f"{s.name}.shape[{d}]", None]))
        ref = ref or self.size_ref(s, d)
        forms = [
            f"{ref} > {k - 1}", f"{ref} % 2 == 0", f"{ref} == {k}", f"{s.name}.numel() >= {k}",
            f"{ref} == {one}", f"{ref} != {one}", f"{ref} < {k}", f"{ref} <= {distinct[0]}",
            f"{ref} >= {distinct[-1]}", f"{ref} * 2 > {k} + 1",
        ]
        same = [(t, e) for t in sized for e in range(t.rank) if t.sizes(e) == values and (t.name, e) != (s.name, d)]
        if same:  # two sizes equal in every world (duck sizing makes them one symbol)
            t, e = self.draw(st.sampled_from(same))
            forms.append(f"{ref} == {t.name}.size({e})")
        other = self.draw(st.sampled_from(sized))
        e = self.draw(st.integers(0, other.rank - 1))
        if (other.name, e) != (s.name, d):
            forms.append(f"{ref} < {other.name}.size({e})")
        cond = self.draw(st.sampled_from(forms))
        if self.draw(st.integers(0, 3)) == 0:
            rest = self.draw_size_predicate()
            if rest is not None and " and " not in rest and " or " not in rest:
                cond = f"{cond} {self.draw(st.sampled_from(['and', 'and', 'or']))} {rest}"
        return cond

    def draw_branch(self) -> bool:
        """An ``if`` on sizes whose arms give same-shaped tensors."""
        floats = [t for t in self.tensors if t.kind == FLOAT]
        if not floats or not self.backed_sized():
            return False
        saved = self.save()
        x = self.draw(st.sampled_from(floats))
        cond = self.draw_size_predicate()
        arms = ["{x} * 2", "{x} - 1", "torch.relu({x})", "{x}.sin()", "{x} + {x}.sum()",
                "{x} / math.sqrt({x}.numel() + 1)", "{x} * {x}.dim()"]
        a = self.draw(st.sampled_from(arms))
        b = self.draw(st.sampled_from(arms))
        name = self.fresh("v")
        node = BranchNode(name, cond, a.format(x=x.name), b.format(x=x.name))
        ok = self.try_statement(node, name)
        if not ok or self.tensors[-1].shapes != x.shapes:
            self.restore(saved)
            return False
        return ok

    def draw_check(self) -> bool:
        """``assert`` / ``torch._check`` / ``torch._check_is_size`` of a size fact
        that holds at every call (so the program stays valid)."""
        sized = self.backed_sized()
        if not sized:
            return False
        saved = self.save()
        s = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, s.rank - 1))
        values = s.sizes(d)
        lo, hi = min(values), max(values)
        ref = self.size_ref(s, d)
        absent = [v for v in (0, 1, hi + 1) if v not in values]
        forms = [
            ("assert", f"{ref} > {lo - 1 - self.draw(st.integers(0, 2))}"),
            ("assert", f"{ref} >= {lo}"),
            ("check", f"{ref} >= {lo}"),
            ("check", f"{ref} <= {hi + self.draw(st.sampled_from([0, 1, 8]))}"),
            ("check_is_size", ref),
            ("assert", f"{s.name}.numel() >= {min(s.numels())}"),
        ]
        if absent:
            forms.append((self.draw(st.sampled_from(["assert", "check"])), f"{ref} != {self.draw(st.sampled_from(absent))}"))
        same = [(t, e) for t in sized for e in range(t.rank) if t.sizes(e) == values and (t.name, e) != (s.name, d)]
        if same:
            t, e = self.draw(st.sampled_from(same))
            forms.append((self.draw(st.sampled_from(["assert", "check"])), f"{ref} == {t.name}.shape[{e}]"))
        form, cond = self.draw(st.sampled_from(forms))
        if not self.try_statement(CheckNode(form, cond), None):
            self.restore(saved)
            return False
        return True

    def draw_scale(self) -> bool:
        """``v = x / math.sqrt(x.shape[-1])`` and friends: a size through ``math`` as a float scale."""
        floats = [t for t in self.tensors if t.kind == FLOAT]
        sized = self.backed_sized()
        if not floats or not sized:
            return False
        saved = self.save()
        x = self.draw(st.sampled_from(floats))
        s = x if x in sized and self.draw(st.integers(0, 2)) else self.draw(st.sampled_from(sized))
        d = s.rank - 1 if self.draw(st.booleans()) else self.draw(st.integers(0, s.rank - 1))
        ref = self.draw(st.sampled_from([f"{s.name}.shape[-1]" if d == s.rank - 1 else f"{s.name}.shape[{d}]", None]))
        ref = ref or self.size_ref(s, d)
        form = self.draw(st.sampled_from([
            "{x} / math.sqrt({n})",
            "{x} / math.sqrt({n})",
            "{x} * (1.0 / math.sqrt(max({n}, 1)))",
            "{x} * math.sqrt({n} + 1)",
            "{x} * {n} ** -0.5",
            "{x} / math.log2({n} + 2)",
            "torch.softmax({x} / math.sqrt({n}), dim=-1)",
        ]))
        name = self.fresh("v")
        if not self.try_statement(ExprNode(name, form.format(x=x.name, n=ref)), name) or self.tensors[-1].dtype != x.dtype:
            self.restore(saved)
            return False
        return True

    # Sizes through plain Python: what Dynamo must trace without torch's help.
    SIZE_PYTHON_FORMS = [
        "len(range({n}))",
        "int(sum([{n}, 2]))",
        "max({t}.shape)",
        "min({t}.shape)",
        "sum({t}.shape)",
        "math.prod({t}.shape)",
        "len({t})",
        "sorted({t}.shape)[-1]",
        "list({t}.shape)[{d}]",
        "{t}.shape[{d}:].numel()",
        "abs({n} - {t}.size(-1))",
        "math.ceil({n} / 2)",
        "divmod({n}, 3)[0]",
        "int(math.sqrt({n}))",
        "({n} + 1) // 2 * 2",
    ]

    def draw_size_python(self) -> bool:
        """``n = len(range(x.size(0)))``, ``n = max(x.shape)``...; then maybe a use of ``n``."""
        sized = self.backed_sized()
        if not sized:
            return False
        saved = self.save()
        t = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, t.rank - 1))
        form = self.draw(st.sampled_from(self.SIZE_PYTHON_FORMS))
        n = self.size_ref(t, d) if "{n}" in form else ""
        name = self.fresh("n")
        if not self.try_statement(SizeNode(name, form.format(n=n, t=t.name, d=d)), name):
            self.restore(saved)
            return False
        if self.draw(st.integers(0, 2)):
            self.draw_int_use(name)
        return True

    def draw_int_use(self, n: str) -> bool:
        """A tensor from an int variable: ``x * n``, ``x[..., :n]``, ``x.new_zeros(n)``..."""
        candidates = [t for t in self.tensors if t.name not in self.unbacked]
        if not candidates:
            return False
        x = self.draw(st.sampled_from(candidates))
        form = self.draw(st.sampled_from([
            "{x} * {n}", "{x} + {n}", "{x}[..., :{n}]", "torch.full_like({x}, {n})", "{x}.new_zeros({n})",
            "torch.arange({n}, device={x}.device) + {x}.sum()",
        ]))
        name = self.fresh("v")
        return self.try_statement(ExprNode(name, form.format(x=x.name, n=n)), name)

    def draw_size_view(self) -> bool:
        """A view/reshape whose target is computed from a size variable:
        ``n = x.size(0)`` then ``x.view(n // 2, -1)`` (and ``-1, n``; ``n, -1``
        with ``n`` a product; ``numel // k, k``)."""
        sized = self.backed_sized()
        if not sized or not any(s.name in ("view", "reshape") for s in self.specs):
            return False
        x = self.draw(st.sampled_from(sized))
        r = x.rank
        forms = []
        for d in range(r):
            if all(v >= 2 and v % 2 == 0 for v in x.sizes(d)):
                forms.append(("half", d))
        if all(v > 0 for v in x.sizes(r - 1)):
            forms.append(("last", r - 1))
        if r >= 2 and all(v > 0 for v in x.numels()):
            forms.append(("prod", 0))
        for k in (2, 3, 4):
            if all(v > 0 and v % k == 0 for v in x.numels()):
                forms.append(("numel", k))
        if not forms:
            return False
        saved = self.save()
        kind, d = self.draw(st.sampled_from(forms))
        n = self.fresh("n")
        if kind == "half":
            expr = self.draw(st.sampled_from([f"{x.name}.size({d})", f"{x.name}.shape[{d}]"] + (["len({t})"] if d == 0 else [])))
            expr = expr.format(t=x.name)
            shape, descs = f"{n} // 2, -1", [["div", 0, d, 2], ["rest"]]
            if d == 0 and r == 1:
                shape, descs = f"{n} // 2, 2", [["div", 0, 0, 2], ["c", 2]]
            elif d != 0:  # keep the dims before d, split d in half, infer the rest
                lead = ", ".join(f"{x.name}.size({e})" for e in range(d))
                shape, descs = f"{lead}, {n} // 2, -1", [["d", 0, e] for e in range(d)] + [["div", 0, d, 2], ["rest"]]
        elif kind == "last":
            expr = self.draw(st.sampled_from([f"{x.name}.shape[-1]", f"{x.name}.size(-1)"]))
            shape, descs = f"-1, {n}", [["rest"], ["d", 0, d]]
        elif kind == "prod":
            expr = f"{x.name}.size(0) * {x.name}.size(1)"
            if r == 2:
                shape, descs = f"{n}", [["prod", [[0, 0], [0, 1]]]]
            else:
                shape, descs = f"{n}, -1", [["prod", [[0, 0], [0, 1]]], ["rest"]]
        else:
            expr = f"{x.name}.numel()"
            shape, descs = f"{n} // {d}, {d}", [["rest"], ["c", d]]
        if not self.try_statement(SizeNode(n, expr), n):
            self.restore(saved)
            return False
        allowed = [s.name for s in self.specs if s.name in ("view", "reshape")]  # GenConfig.ops may exclude them
        if not all(env[x.name].is_contiguous() for env in self.envs) and "reshape" in allowed:
            allowed = ["reshape"]
        op = self.draw(st.sampled_from(allowed))
        params = {"shape": shape, "descs": descs}
        name = self.fresh("v")
        if not self.try_statement(OpNode(name, op, (x.name,), params), name):
            self.restore(saved)
            return False
        self.check_shape_rule(self.spec_by_name[op], [x], [x.name], params)
        return True

    def draw_graph_break(self) -> bool:
        """``torch._dynamo.graph_break()`` between statements (a no-op in eager)."""
        if not self.body or isinstance(self.body[-1], GraphBreakNode):
            return False
        return self.try_statement(GraphBreakNode(), None)

    COND_ARMS = ["{a} * 2", "{a} - 1", "torch.relu({a})", "{a}.sin()", "{a}.cos() + {a}.sum()",
                 "{a} * {a}.size(-1)", "{a} / math.sqrt({a}.numel() + 1)", "torch.tanh({a}) * 0.5", "{a}.abs()"]
    COND_PAIR_ARMS = ["{a} + {b}", "{a} * {b}", "{a} - {b}.sin()", "torch.maximum({a}, {b})"]

    def draw_cond(self) -> bool:
        """``torch.cond(<size predicate>, true_fn, false_fn, (x,))`` with both
        branches giving the same shape, dtype and strides in every world."""
        floats = [t for t in self.tensors if t.kind == FLOAT and t.rank > 0 and t.name not in self.unbacked]
        if not floats:
            return False
        saved = self.save()
        x = self.draw(st.sampled_from(floats))
        pred = self.draw_size_predicate()
        # Operands of a higher-order op must not alias each other.
        partners = [t for t in floats if t.shapes == x.shapes and t.dtype == x.dtype and t.name != x.name
                    and not any(_share_storage(env[t.name], env[x.name]) for env in self.envs)]
        operands = (x.name,)
        arms = list(self.COND_ARMS)
        if partners and self.draw(st.booleans()):
            operands += (self.draw(st.sampled_from(partners)).name,)
            arms += self.COND_PAIR_ARMS * 2
        then = self.draw(st.sampled_from(arms)).format(a="a0", b="a1")
        orelse = self.draw(st.sampled_from(arms)).format(a="a0", b="a1")
        style = self.draw(st.sampled_from(["lambda", "def"]))
        if pred is None or not self._arms_agree(operands, then, orelse):
            self.restore(saved)
            return False
        name = self.fresh("v")
        if not self.try_statement(CondNode(name, pred, operands, then, orelse, style), name):
            self.restore(saved)
            return False
        return True

    def _arms_agree(self, operands, then: str, orelse: str) -> bool:
        """Both branches of a cond run in every world and agree on metadata."""
        params = ", ".join(f"a{i}" for i in range(len(operands)))
        try:
            branches = [eval(f"lambda {params}: {arm}", GLOBALS) for arm in (then, orelse)]
            for env in self.envs:
                args = [env[o] for o in operands]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    a, b = (f(*args) for f in branches)
                if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                    return False
                if a.shape != b.shape or a.dtype != b.dtype or a.stride() != b.stride() or a.dtype != args[0].dtype:
                    return False
        except Exception:
            return False
        return True


def _share_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def draw_case(draw: Draw, config: GenConfig = GenConfig()) -> Case:
    """Draw one Case. ``draw`` is a Hypothesis draw function."""
    return build_case(draw, config)[0]


def build_case(draw: Draw, config: GenConfig = GenConfig()) -> tuple[Case, Builder]:
    """Draw one Case, and return the Builder too (tests read its bookkeeping)."""
    n_calls = draw(st.integers(config.min_calls, config.max_calls))
    n_symbols = draw(st.integers(1, config.max_symbols))
    symbols: dict[str, tuple[int, ...]] = {}
    for i in range(n_symbols):
        symbols[f"s{i}"] = tuple(weighted(draw, SIZE_WEIGHTS) for _ in range(n_calls))
    hint_mode = apply_hint_mode(draw, symbols) if config.schedule_knobs else "none"
    _make_calls_differ(symbols, n_calls)
    dynamic = draw(st.sampled_from(list(config.dynamic_choices)))

    b = Builder(draw, config, symbols, n_calls)
    start_module(b, config.module_rate)
    for _ in range(draw(st.integers(1, config.max_inputs))):
        b.add_input(b.draw_dims(weighted(draw, RANK_WEIGHTS)), weighted(draw, DTYPE_WEIGHTS))
    if not b.tensors:  # every drawn input was too big: fall back to a vector
        b.add_input(("s0",), "float32")
    draw_scalar_inputs(b, config.max_scalar_inputs)

    n_ops = draw(st.integers(config.min_ops, config.max_ops))
    made = 0
    for _ in range(n_ops * ATTEMPTS_PER_STATEMENT):
        if made >= n_ops:
            break
        # The newer size-level statements sit above the ops, so that shrinking
        # (toward 0) turns those a failure does not need into plain ops.
        kind = draw(st.integers(0, 35))
        if b.module is not None and 2 <= kind < 6:  # a module program: some plain ops become module statements
            ok = draw_module_statement(b)
        elif kind == 0:
            ok = b.draw_size_arith()
        elif kind == 1:
            ok = b.draw_branch()
        elif kind < 22:
            ok = b.draw_op()
        elif kind == 22:
            ok = b.draw_cond()
        elif kind == 23:
            ok = b.draw_scale()
        elif kind in (24, 25):
            ok = b.draw_check()
        elif kind == 26:
            ok = b.draw_size_python()
        elif kind == 27:
            ok = b.draw_size_view()
        elif kind == 28:
            ok = b.draw_size_python()
        elif kind == 29:
            ok = b.draw_graph_break() if draw(st.booleans()) else b.draw_op()
        elif kind < 33:
            # Real-model motifs and wider size-level Python; motifs add unrelated ops, so not under --ops.
            ok = draw_motif(b) if config.ops is None else b.draw_op()
        elif kind == 33:
            ok = draw_conversion(b)
        elif kind == 34:
            ok = draw_cross_check(b)
        else:
            ok = draw_size_arguments(b) if config.ops is None else b.draw_op()
        made += ok and not isinstance(b.body[-1], (SizeNode, CheckNode, GraphBreakNode))
    draw_late_scalar_uses(b)
    if b.module is not None:
        finish_module(b)

    program = Program(tuple(b.inputs), tuple(b.body), tuple(choose_outputs(b)), tuple(b.params))
    marks = draw_marks(draw, b.inputs, symbols) if config.schedule_knobs else [{} for _ in b.inputs]
    scalars = any(not i.is_tensor for i in program.inputs)
    schedule_config = draw_config(draw, config.translation_validation_rate, scalars) if config.schedule_knobs else {}
    if config.schedule_knobs:
        draw_int_dynamism(draw, b.scalar_inputs(), schedule_config)
    _merge_required_config(schedule_config, program)
    if len(program.body) > MAX_VALIDATED_STATEMENTS:
        # Translation validation costs 30-100x per compile: keep it to small programs.
        schedule_config.get("fx", {}).pop("translation_validation", None)
        if schedule_config.get("fx") == {}:
            del schedule_config["fx"]
    calls = tuple(
        Call(
            tuple(replace(spec, marks=dict(marks[i])) for i, spec in enumerate(b.arg_specs[w])),
            {name: values[w] for name, values in symbols.items()},
        )
        for w in range(n_calls)
    )
    step = None
    if program.params:  # inputs of module programs do not require grad; their parameters may
        program, calls, step = settle_module(draw, program, calls, b.module.modes, schedule_config,
                                             config.train_step_rate)
    else:
        calls = draw_gradients(draw, program, calls, config.gradient_share)
    origin = {"hint_mode": hint_mode} if hint_mode != "none" else {}
    if b.motifs:
        origin["motifs"] = list(b.motifs)
    return Case(program, Schedule(dynamic, calls, schedule_config, step), origin), b


def _merge_required_config(schedule_config: dict, program: Program) -> None:
    """Flags the program's ops need (e.g. capturing data-dependent sizes)."""
    for flag, value in {**required_config(program), **required_dynamo_config(program)}.items():
        schedule_config.setdefault("dynamo", {})[flag] = value


MAX_OUTPUTS = 4
MAX_VALIDATED_STATEMENTS = 6  # largest program compiled under translation validation


def choose_outputs(b: Builder) -> list[str]:
    """Return the sinks (values nothing else consumed), newest first.

    Dead values would be removed by the compiler and so never tested.
    """
    consumed = set()
    for node in b.body:
        if isinstance(node, (OpNode, EffectNode)):
            consumed.update(node.args)
        elif isinstance(node, BranchNode):
            consumed.update(re.findall(r"\w+", node.then + " " + node.orelse))
        elif isinstance(node, ExprNode):
            consumed.update(re.findall(r"\w+", node.expr))
        elif isinstance(node, CondNode):
            consumed.update(node.operands)
    inputs = {i.name for i in b.inputs} | {p.name for p in b.params}  # a module's state is no result
    produced = [t.name for t in b.tensors if t.name not in inputs]
    sinks = [n for n in reversed(produced) if n not in consumed][:MAX_OUTPUTS]
    return sinks or [b.tensors[-1].name]


def _make_calls_differ(symbols: dict[str, tuple[int, ...]], n_calls: int) -> None:
    """Each call must change some size, or it would not exercise guards."""
    first = sorted(symbols)[0]
    values = list(symbols[first])
    for w in range(1, n_calls):
        if all(symbols[s][w] == symbols[s][w - 1] for s in symbols if s != first) and values[w] == values[w - 1]:
            values[w] = values[w] + 1
    symbols[first] = tuple(values)


def cases(config: GenConfig = GenConfig()) -> st.SearchStrategy[Case]:
    """The Hypothesis strategy of Cases, for use in ``@given`` tests."""
    return st.composite(lambda draw: draw_case(draw, config))()
