"""A Case: one Program plus the Schedule of calls made to its compiled form."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from symfuzz.fuzz.ir import BranchNode, CondNode, ExprNode, OpNode, Program

# Dynamism marks a dim may carry in a call. "auto" means none: automatic dynamic.
MARKS = ("auto", "dynamic", "maybe_dynamic", "static", "unbacked")


@dataclass(frozen=True)
class ArgSpec:
    """One tensor argument of one call: everything needed to rebuild it."""

    shape: tuple[int, ...]
    dtype: str
    seed: int
    layout: dict = field(default_factory=lambda: {"kind": "contiguous"}, hash=False)
    marks: dict = field(default_factory=dict, hash=False)  # dim -> {"mark": ..., "min":, "max":}

    def to_json(self) -> dict:
        data = {"shape": list(self.shape), "dtype": self.dtype, "seed": self.seed, "layout": self.layout}
        if self.marks:
            data["marks"] = {str(k): v for k, v in self.marks.items()}
        return data

    @staticmethod
    def from_json(data: dict) -> "ArgSpec":
        marks = {int(k): v for k, v in data.get("marks", {}).items()}
        return ArgSpec(tuple(data["shape"]), data["dtype"], int(data["seed"]), data.get("layout") or {"kind": "contiguous"}, marks)


@dataclass(frozen=True)
class Call:
    args: tuple[ArgSpec, ...]
    symbols: dict = field(default_factory=dict, hash=False)  # size symbol -> value, for readers

    def to_json(self) -> dict:
        return {"args": [a.to_json() for a in self.args], "symbols": dict(self.symbols)}

    @staticmethod
    def from_json(data: dict) -> "Call":
        return Call(tuple(ArgSpec.from_json(a) for a in data["args"]), dict(data.get("symbols", {})))


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

    def to_json(self) -> dict:
        data = {"dynamic": self.dynamic, "calls": [c.to_json() for c in self.calls]}
        if self.config:
            data["config"] = self.config
        return data

    @staticmethod
    def from_json(data: dict) -> "Schedule":
        return Schedule(data.get("dynamic"), tuple(Call.from_json(c) for c in data["calls"]), dict(data.get("config") or {}))


@dataclass(frozen=True)
class Case:
    program: Program
    schedule: Schedule
    origin: dict = field(default_factory=dict, hash=False)  # seed, index, hypothesis choices

    def to_json(self) -> dict:
        return {"program": self.program.to_json(), "schedule": self.schedule.to_json(), "origin": self.origin}

    @staticmethod
    def from_json(data: dict) -> "Case":
        return Case(Program.from_json(data["program"]), Schedule.from_json(data["schedule"]), dict(data.get("origin", {})))

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
