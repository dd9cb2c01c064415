"""Hypothesis-driven generation of Cases (Program + Schedule).

Everything is drawn through one ``draw`` function, so a case is a pure
function of Hypothesis's choice sequence: it shrinks like any Hypothesis
example and replays from the recorded choices.

Validity across shapes. The schedule's size values are drawn *first*; each
call is a "world" with concrete sizes. Every statement the generator draws
is rendered to source and executed on meta tensors in every world; a
statement that raises in any world is discarded and another one is drawn.
So a program is built to be valid at every shape it will be called with,
while its source stays symbolic (sizes come from ``x.size(d)``, never from
constants baked in at one shape).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

import hypothesis.strategies as st
import torch
import torch.nn.functional as torch_F

from oracles.standalone import make_arg

from .case import ArgSpec, Call, Case, Schedule
from .ir import BranchNode, EffectNode, Input, OpNode, Program, SizeNode, render_node
from .specs import all_specs
from .specs.base import DTYPE_KIND, FLOAT, OpSpec, Operand, ParamContext

Draw = Callable[[st.SearchStrategy], Any]

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


def weighted(draw: Draw, pairs):
    """Draw a value by weight; shrinks toward the first pair."""
    total = sum(w for _, w in pairs)
    ticket = draw(st.integers(0, total - 1))
    for value, w in pairs:
        if ticket < w:
            return value
        ticket -= w
    raise AssertionError("unreachable")


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
        self.specs = [s for s in all_specs() if config.ops is None or s.name in config.ops]
        if not self.specs:
            raise ValueError(f"no op specs match {config.ops!r}")
        self.spec_weights = [(s, max(1, int(s.weight * 4))) for s in self.specs]

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
            self.envs[w][name] = make_arg(spec.to_json(), device="meta")
        operand = Operand(name, dtype, tuple(shapes))
        self.tensors.append(operand)
        return operand

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
        return tuple(dims)

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
            local = dict(env)
            try:
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
        self.envs = trial_envs
        self.body.append(node)
        return True

    def size_ref(self, operand: Operand, dim: int) -> str:
        """Source for a size of ``operand``: an int variable or an inline read."""
        values = operand.sizes(dim)
        existing = [n for n, v in self.ints.items() if v == values]
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
        return (list(self.body), list(self.envs), dict(self.ints), list(self.tensors), list(self.inputs), [list(a) for a in self.arg_specs])

    def restore(self, saved):
        self.body, self.envs, self.ints, self.tensors, self.inputs, self.arg_specs = saved

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
                           lambda name: [env[name] for env in self.envs if name in env])
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
        for w, actual in enumerate(result.shapes):
            shapes = [by_name[a].shapes[w] if a in by_name else () for a in args]
            try:
                expected = tuple(spec.shape(shapes, params))
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
            return repr(self.draw(st.sampled_from(SCALARS)))
        if callable(mode):
            shapes = mode(self.draw, first)
            if shapes is None:
                return None
        else:
            shapes = self._broadcast_variant(first) if mode != "same" else list(first.shapes)
        kinds = spec.partner_kinds or spec.kinds
        # Reuse a live value with exactly the needed shapes, or make a new input.
        live = [t for t in self.tensors if list(t.shapes) == list(shapes) and t.kind in kinds and t.name != first.name]
        if live and self.draw(st.booleans()):
            return self.draw(st.sampled_from(live))
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

    def draw_branch(self) -> bool:
        """An ``if`` on sizes whose arms give same-shaped tensors."""
        floats = [t for t in self.tensors if t.kind == FLOAT]
        sized = [t for t in self.tensors if t.rank > 0]
        if not floats or not sized:
            return False
        x = self.draw(st.sampled_from(floats))
        s = self.draw(st.sampled_from(sized))
        d = self.draw(st.integers(0, s.rank - 1))
        values = sorted(set(s.sizes(d)))
        # A threshold between the worlds' sizes makes calls take different arms.
        k = values[len(values) // 2] if len(values) > 1 else values[0]
        cond = self.draw(st.sampled_from([f"{s.name}.size({d}) > {k - 1}", f"{s.name}.shape[{d}] % 2 == 0", f"{s.name}.size({d}) == {k}", f"{s.name}.numel() >= {k}"]))
        arms = ["{x} * 2", "{x} - 1", "torch.relu({x})", "{x}.sin()", "{x} + {x}.sum()"]
        a = self.draw(st.sampled_from(arms))
        b = self.draw(st.sampled_from(arms))
        name = self.fresh("v")
        node = BranchNode(name, cond, a.format(x=x.name), b.format(x=x.name))
        snapshot = list(self.tensors)
        ok = self.try_statement(node, name)
        if ok and self.tensors[-1].shapes != x.shapes:
            self.tensors = snapshot
            self.body.pop()
            return False
        return ok


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
    _make_calls_differ(symbols, n_calls)
    dynamic = draw(st.sampled_from(list(config.dynamic_choices)))

    b = Builder(draw, config, symbols, n_calls)
    for _ in range(draw(st.integers(1, config.max_inputs))):
        b.add_input(b.draw_dims(weighted(draw, RANK_WEIGHTS)), weighted(draw, DTYPE_WEIGHTS))
    if not b.tensors:  # every drawn input was too big: fall back to a vector
        b.add_input(("s0",), "float32")

    n_ops = draw(st.integers(config.min_ops, config.max_ops))
    made = 0
    for _ in range(n_ops * ATTEMPTS_PER_STATEMENT):
        if made >= n_ops:
            break
        kind = draw(st.integers(0, 19))
        if kind == 0:
            ok = b.draw_size_arith()
        elif kind == 1:
            ok = b.draw_branch()
        else:
            ok = b.draw_op()
        made += ok and not isinstance(b.body[-1], SizeNode)

    program = Program(tuple(b.inputs), tuple(b.body), tuple(choose_outputs(b)))
    calls = tuple(
        Call(tuple(b.arg_specs[w]), {name: values[w] for name, values in symbols.items()}) for w in range(n_calls)
    )
    return Case(program, Schedule(dynamic, calls)), b


MAX_OUTPUTS = 4


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
    inputs = {i.name for i in b.inputs}
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
