"""A Case: one Program plus the Schedule of calls made to its compiled form."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from symfuzz.fuzz.ir import (SCALAR_KINDS, BranchNode, CheckNode, CondNode, EffectNode, ExprNode, OpNode, Program,
                             SizeNode, node_reads)
from symfuzz.fuzz.specs.base import DTYPE_KIND, FLOAT

# Dynamism marks a dim may carry in a call. "auto" means none: automatic dynamic.
MARKS = ("auto", "dynamic", "maybe_dynamic", "static", "unbacked")

# What a case read from a file may hold is checked as it is read (``from_json``): the
# repro scripts paste dtypes, shapes, seeds, layouts, marks and flag names into source,
# so each must be what the generator writes. A ValueError names the field.
LAYOUTS = {"contiguous": (), "transposed": ("dims",), "strided": ("dim", "step"), "sliced": ("dim",),
           "expanded": ("dim",)}
CONFIG_GROUPS = ("dynamo", "fx", "compiler")  # torch._dynamo.config, torch.fx.experimental._config, torch.compiler.config
_FLAG = re.compile(r"[a-z][a-z0-9_]*")


def _whole(value, minimum: Optional[int] = None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (minimum is None or value >= minimum)


def _check_layout(layout, where: str) -> None:
    if isinstance(layout, str) and layout in LAYOUTS:
        return  # a kind's name alone (script_runtime.normal_layout)
    if not isinstance(layout, dict) or layout.get("kind", "contiguous") not in LAYOUTS:
        raise ValueError(f"{where}: layout {layout!r:.80} is not one of the layouts symfuzz makes ({', '.join(LAYOUTS)})")
    wanted = LAYOUTS[layout.get("kind", "contiguous")]
    extra = sorted(set(layout) - {"kind", *wanted})
    if extra:
        raise ValueError(f"{where}: layout {layout!r:.80} has the unknown key {extra[0]!r:.40}")
    for key in wanted:
        value = layout.get(key)
        ok = (isinstance(value, list) and len(value) == 2 and all(_whole(v) for v in value)) if key == "dims" else \
            _whole(value, 1 if key == "step" else None)
        if not ok:
            raise ValueError(f"{where}: layout {key} {value!r:.40} is not " + ("two dims" if key == "dims" else "a whole number"))


def _check_marks(marks, where: str) -> dict:
    if not isinstance(marks, dict):
        raise ValueError(f"{where}: marks must be an object, got {type(marks).__name__}")
    out = {}
    for key, mark in marks.items():
        if not (_whole(key, 0) or (isinstance(key, str) and key.isascii() and key.isdigit())):
            raise ValueError(f"{where}: marks: {key!r:.40} is not a dim (a whole number)")
        if not isinstance(mark, dict) or mark.get("mark", "auto") not in MARKS or set(mark) - {"mark", "min", "max"}:
            raise ValueError(f"{where}: marks[{key}]: {mark!r:.80} is not a mark ({', '.join(MARKS)}, with "
                             "optional min and max)")
        for bound in ("min", "max"):
            if mark.get(bound) is not None and not _whole(mark[bound], 0):
                raise ValueError(f"{where}: marks[{key}].{bound} {mark[bound]!r:.40} is not a whole number")
        out[int(key)] = mark
    return out


def _check_config(config) -> dict:
    if not isinstance(config, dict):
        raise ValueError(f"schedule: config must be an object, got {type(config).__name__}")
    for group, flags in config.items():
        if group not in CONFIG_GROUPS or not isinstance(flags, dict):
            raise ValueError(f"schedule: config {group!r:.40} is not one of {', '.join(CONFIG_GROUPS)} "
                             "holding an object of flags")
        for name, value in flags.items():
            if not _FLAG.fullmatch(name) or keyword.iskeyword(name):
                raise ValueError(f"schedule: config.{group}: {name!r:.60} is not a flag name (lowercase identifier)")
            if not (value is None or isinstance(value, (bool, int, float, str))):
                raise ValueError(f"schedule: config.{group}.{name} must be a number, a string, true/false or "
                                 f"null, got {type(value).__name__}")
    return dict(config)


def _check_scalar(kind, value, where: str) -> None:
    ok = {
        "int": lambda v: _whole(v),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf"),
        "bool": lambda v: isinstance(v, bool),
        "ints": lambda v: isinstance(v, list) and len(v) <= 8 and all(_whole(x) for x in v),
    }.get(kind)
    if ok is None:
        raise ValueError(f"{where}: scalar {kind!r:.40} is not one of {', '.join(SCALAR_KINDS)}")
    if not ok(value) or (kind in ("int", "ints") and any(abs(x) > 2**31 for x in (value if kind == "ints" else [value]))):
        raise ValueError(f"{where}: value {value!r:.60} is not a finite {kind}")


# A training step's optimizer and the keys its spec holds (see ``check_step``).
STEP_OPTIMIZERS = {"sgd": ("lr", "momentum"), "adam": ("lr",)}


def check_step(step) -> dict:
    """``step`` as a training step's spec, or ValueError naming the field: {"optimizer":
    "sgd", "lr": r, "momentum": m} or {"optimizer": "adam", "lr": r}, 0 < r <= 1,
    0 <= m < 1 (repro scripts paste it)."""
    optimizer = step.get("optimizer") if isinstance(step, dict) else None
    if optimizer not in STEP_OPTIMIZERS:
        raise ValueError(f"schedule: step {step!r:.80} must be an object naming an optimizer "
                         f"({', '.join(STEP_OPTIMIZERS)})")
    keys = STEP_OPTIMIZERS[optimizer]
    if set(step) != {"optimizer", *keys}:
        raise ValueError(f"schedule: step for {optimizer} holds exactly optimizer, {', '.join(keys)}")
    for key in keys:
        value = step[key]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number and (value > 0 if key == "lr" else value >= 0) and value <= (1 if key == "lr" else 0.999)):
            raise ValueError(f"schedule: step {key} {value!r:.40} is out of range")
    return dict(step)


@dataclass(frozen=True)
class ArgSpec:
    """One argument of one call: everything needed to rebuild it.

    A tensor: shape, dtype, seed, layout, dynamism marks, and whether it
    requires grad (the gradient oracle then compares gradients with respect
    to it). A Python number or int list (``scalar`` is one of
    ``ir.SCALAR_KINDS``): ``value`` is the argument itself; shape is ().
    """

    shape: tuple[int, ...]
    dtype: str
    seed: int
    layout: dict = field(default_factory=lambda: {"kind": "contiguous"}, hash=False)
    marks: dict = field(default_factory=dict, hash=False)  # dim -> {"mark": ..., "min":, "max":}
    requires_grad: bool = False
    scalar: str = ""  # "" for a tensor
    value: Any = field(default=None, hash=False)

    @staticmethod
    def of_scalar(kind: str, value) -> "ArgSpec":
        return ArgSpec((), SCALAR_KINDS[kind], 0, scalar=kind, value=list(value) if kind == "ints" else value)

    def to_json(self) -> dict:
        if self.scalar:
            return {"scalar": self.scalar, "value": list(self.value) if self.scalar == "ints" else self.value}
        data = {"shape": list(self.shape), "dtype": self.dtype, "seed": self.seed, "layout": self.layout}
        if self.marks:
            data["marks"] = {str(k): v for k, v in self.marks.items()}
        if self.requires_grad:
            data["requires_grad"] = True
        return data

    @staticmethod
    def from_json(data: dict, where: str = "argument") -> "ArgSpec":
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be an object, got {type(data).__name__}")
        if "scalar" in data:
            if set(data) != {"scalar", "value"}:
                raise ValueError(f"{where}: a scalar argument has only scalar and value")
            _check_scalar(data["scalar"], data["value"], where)
            return ArgSpec.of_scalar(data["scalar"], data["value"])
        shape, dtype, seed = data["shape"], data["dtype"], data["seed"]
        if not isinstance(shape, list) or not all(_whole(s, 0) for s in shape):
            raise ValueError(f"{where}: shape {shape!r:.80} is not a list of sizes (whole numbers)")
        if dtype not in DTYPE_KIND:
            raise ValueError(f"{where}: dtype {dtype!r:.40} is not one symfuzz generates ({', '.join(DTYPE_KIND)})")
        if not _whole(seed):
            raise ValueError(f"{where}: seed {seed!r:.40} is not a whole number")
        layout = data.get("layout") or {"kind": "contiguous"}
        _check_layout(layout, where)
        marks = _check_marks(data.get("marks", {}), where)
        requires_grad = data.get("requires_grad", False)
        if not isinstance(requires_grad, bool) or (requires_grad and DTYPE_KIND[dtype] != FLOAT):
            raise ValueError(f"{where}: requires_grad {requires_grad!r:.40} must be true or false, and true only "
                             "for a floating dtype")
        return ArgSpec(tuple(shape), dtype, seed, layout, marks, requires_grad)


@dataclass(frozen=True)
class Call:
    args: tuple[ArgSpec, ...]
    symbols: dict = field(default_factory=dict, hash=False)  # size symbol -> value, for readers
    # A module program's mode for this call: model.train() (True) or model.eval()
    # (False); None leaves it as the previous call left it (a new model trains).
    training: Optional[bool] = None

    def to_json(self) -> dict:
        data = {"args": [a.to_json() for a in self.args], "symbols": dict(self.symbols)}
        if self.training is not None:
            data["training"] = self.training
        return data

    @staticmethod
    def from_json(data: dict, where: str = "call") -> "Call":
        if not isinstance(data, dict) or not isinstance(data["args"], list):
            raise ValueError(f"{where} must be an object with a list of args")
        symbols = data.get("symbols", {})
        if not isinstance(symbols, dict):
            raise ValueError(f"{where}: symbols must be an object, got {type(symbols).__name__}")
        training = data.get("training")
        if training not in (None, True, False):
            raise ValueError(f"{where}: training must be true, false or null, got {training!r:.40}")
        return Call(tuple(ArgSpec.from_json(a, f"{where}: args[{i}]") for i, a in enumerate(data["args"])),
                    dict(symbols), training)


@dataclass(frozen=True)
class Schedule:
    """The calls made, in order, to one compiled function.

    ``dynamic`` is the ``torch.compile(dynamic=...)`` argument: True, or None
    for the default automatic-dynamic behaviour (False is allowed too).
    """

    dynamic: Optional[bool]
    calls: tuple[Call, ...]
    # Config flags set around compile and calls: {"dynamo": {flag: value},
    # "fx": {flag: value}} for torch._dynamo.config and
    # torch.fx.experimental._config (see script_runtime.set_compile_config).
    config: dict = field(default_factory=dict, hash=False)
    # A module program's training step (``check_step``): each call is then one
    # step (forward, loss, backward, optimizer step, zero_grad) instead of a
    # forward call; None for forward calls.
    step: Optional[dict] = field(default=None, hash=False)

    def to_json(self) -> dict:
        data = {"dynamic": self.dynamic, "calls": [c.to_json() for c in self.calls]}
        if self.config:
            data["config"] = self.config
        if self.step is not None:
            data["step"] = dict(self.step)
        return data

    @staticmethod
    def from_json(data: dict) -> "Schedule":
        if not isinstance(data, dict) or not isinstance(data["calls"], list):
            raise ValueError("schedule must be an object with a list of calls")
        if data.get("dynamic") not in (None, True, False):
            raise ValueError(f"schedule: dynamic must be true, false or null, got {data['dynamic']!r:.40}")
        calls = tuple(Call.from_json(c, f"schedule: call {i}") for i, c in enumerate(data["calls"]))
        step = data.get("step")
        return Schedule(data.get("dynamic"), calls, _check_config(data.get("config") or {}),
                        None if step is None else check_step(step))


@dataclass(frozen=True)
class Case:
    program: Program
    schedule: Schedule
    origin: dict = field(default_factory=dict, hash=False)  # seed, index, hypothesis choices

    def to_json(self) -> dict:
        return {"program": self.program.to_json(), "schedule": self.schedule.to_json(), "origin": self.origin}

    @staticmethod
    def from_json(data: dict) -> "Case":
        """The case ``to_json`` wrote; ValueError (naming the field) for anything the generator
        would not write (``Program.from_json`` checks the program)."""
        if not isinstance(data, dict):
            raise ValueError(f"case must be an object, got {type(data).__name__}")
        case = Case(Program.from_json(data["program"]), Schedule.from_json(data["schedule"]), dict(data.get("origin", {})))
        if case.schedule.step is not None and not case.program.params:
            raise ValueError("schedule: a training step needs a module program (one with params)")
        return case

    @property
    def source(self) -> str:
        return self.program.render()

    def without_planned_calls(self) -> "Case":
        """The case as drawn: guard-directed calls (``symbols["planned"]``) removed, so that a
        stored case replays with calls planned from the guards the installed torch makes."""
        drawn = tuple(c for c in self.schedule.calls if "planned" not in c.symbols)
        return replace(self, schedule=replace(self.schedule, calls=drawn))

    def output_ops(self) -> list[str]:
        """For each returned value, the op that produced it ("input" for inputs)."""
        producer: dict[str, str] = {}
        for node in self.program.body:
            if isinstance(node, OpNode):
                producer[node.out] = node.op
            elif isinstance(node, BranchNode):
                producer[node.out] = "branch"
            elif isinstance(node, CondNode):
                producer[node.out] = "cond"
            elif isinstance(node, ExprNode):
                producer[node.out] = "expr"
        return [producer.get(name, "input") for name in self.program.outputs]

    def gradient_ops(self) -> list[str]:
        """For each gradient a call compares (``script_runtime.run_call``: the inputs that require
        grad, in order, then a module's trainable parameters), the ops that consume that input
        ("+"-joined, sorted; "input" where none does): a gradient mismatch is keyed by them, as a
        value mismatch is by the op that made the output (``script_runtime.failure_key``)."""
        calls = self.schedule.calls
        wanted = [inp.name for inp, arg in zip(self.program.inputs, calls[0].args) if arg.requires_grad] \
            if calls else []
        wanted += [p.name for p in self.program.params if p.trainable]
        return [_consumers(self.program, name) for name in wanted]


def _consumers(program: Program, name: str, through: frozenset = frozenset()) -> str:
    """The ops that read tensor ``name`` ("+"-joined, sorted), or "input" where none does.

    A branch, ``torch.cond`` or expression node counts by the ops its expressions call
    (``x1.abs()``, ``torch.relu(v2)``); one that calls none (``x0 * f1``) passes the
    input on, and the ops that read its result count instead."""
    ops = set()
    for node in program.body:
        if isinstance(node, (SizeNode, CheckNode)) or name not in node_reads(node):
            continue  # reading only its sizes, or stating a fact, passes no gradient
        if isinstance(node, (OpNode, EffectNode)):
            ops.add(node.op)
            continue
        text = " ".join(str(getattr(node, f, "")) for f in ("cond", "then", "orelse", "expr"))
        called = {op for receiver, op in _CALLED.findall(text) if receiver != "math"}
        if called:
            ops |= called
        elif node.out not in through:
            ops |= set(_consumers(program, node.out, through | {node.out}).split("+")) - {"input"}
    return "+".join(sorted(ops)) or "input"


# A call in an expression's text: ``x.abs(``, ``torch.relu(``, ``F.gelu(`` (sizes' methods and math aside).
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\.(?!size\b|shape\b|dim\b|numel\b)([a-z_]\w*)\(")
