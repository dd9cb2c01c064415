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

import re
from dataclasses import dataclass, replace
from typing import Optional

import hypothesis.strategies as st

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
    OpNode,
    Program,
    SizeNode,
)
from symfuzz.fuzz.gradients import GRADIENT_SHARE, draw_gradients
from symfuzz.fuzz.modules import draw_module_statement, finish_module, settle_module, start_module
from symfuzz.fuzz.motifs import draw_motif
from symfuzz.fuzz.op_statements import OpStatements
from symfuzz.fuzz.scalars import draw_int_dynamism, draw_late_scalar_uses, draw_scalar_inputs
from symfuzz.fuzz.schedule import apply_hint_mode, draw_config, draw_marks
from symfuzz.fuzz.size_forms import draw_conversion, draw_cross_check, draw_size_arguments, required_config
from symfuzz.fuzz.size_statements import SizeStatements
from symfuzz.fuzz.specs import all_specs, required_dynamo_config
from symfuzz.fuzz.specs.base import Operand
from symfuzz.fuzz.worlds import DTYPE_WEIGHTS, Worlds

# (value, weight). Small sizes first so that shrinking moves toward them.
SIZE_WEIGHTS = [(2, 10), (3, 10), (4, 9), (1, 6), (5, 8), (8, 7), (7, 6), (6, 5), (0, 2), (16, 4), (9, 3), (12, 3), (33, 2), (64, 1)]
RANK_WEIGHTS = [(2, 5), (1, 3), (3, 4), (0, 1), (4, 2), (5, 1)]

ATTEMPTS_PER_STATEMENT = 12
# build_case draws each statement's kind as integers(0, STATEMENT_KINDS - 1); see its branches.
STATEMENT_KINDS = 36
# Kinds that draw size-level Python or a real-model motif rather than a plain op (build_case):
# where guard forms, specializations and index arithmetic come from.
SIZE_LEVEL_KINDS = (0, 1, 22, 23, 24, 25, 26, 27, 28, 30, 31, 32, 33, 34, 35)


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
    # Share of schedules compiled under z3 translation validation (slow).
    translation_validation_rate: float = 0.02
    # Share of programs with a floating input whose calls check gradients too (fuzz/gradients.py).
    gradient_share: float = GRADIENT_SHARE
    # Python number and int-list inputs next to the tensors (fuzz/scalars.py); 0: none.
    max_scalar_inputs: int = 2
    # Share of programs drawn as nn.Module programs (parameters, buffers, train/eval;
    # fuzz/modules.py), and of those, the share whose calls are training steps.
    module_rate: float = 0.1
    train_step_rate: float = 0.5
    # Each real-model motif's weight (fuzz/motifs.py MOTIFS) where it differs from the table's:
    # name -> weight, 0 leaves a motif out (benchmarks/idioms.py compares weightings).
    motif_weights: Optional[dict] = None


class Builder(Worlds, OpStatements, SizeStatements):
    """Builds one Program while tracking each value's meta tensor per world.

    Its methods come by job from ``Worlds`` (inputs, running a statement in
    every world), ``OpStatements`` (op specs) and ``SizeStatements``
    (size-level Python)."""

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
        self.spec_weights = spec_weights(config)
        self.specs = [s for s, _ in self.spec_weights]
        self.spec_by_name = {s.name: s for s in all_specs()}

    # ------------------------------------------------------------ naming

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


def spec_weights(config: GenConfig) -> list:
    """(spec, weight) of each op spec the config allows, in ``draw_op``'s order."""
    specs = [s for s in all_specs() if config.ops is None or s.name in config.ops]
    if not specs:
        raise ValueError(f"no op specs match {config.ops!r}")
    return [(s, max(1, int(s.weight * 4))) for s in specs]


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
        kind = draw(st.integers(0, STATEMENT_KINDS - 1))
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
