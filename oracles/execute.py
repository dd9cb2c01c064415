"""Run one Case through one Lane, in this process: the Run that oracles judge."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from . import standalone
from .lanes import Lane, config_patch

PROGRAM_GLOBALS_SOURCE = "import math\nimport torch\nimport torch.nn.functional as F\n"


@dataclass
class CallResult:
    eager: dict
    compiled: dict
    reference: Callable[[], Any]  # fp64 reference tree, computed on demand

    @property
    def graphs(self) -> int:
        return self.compiled.get("graphs", 0)


@dataclass
class Run:
    lane: str
    calls: list[CallResult]
    output_ops: list[str]
    seconds: dict = field(default_factory=dict)  # compile / run / eager

    @property
    def recompiles(self) -> int:
        """Graphs compiled after the first call (guards failed, or new frames)."""
        return sum(max(c.graphs, 0) for c in self.calls[1:])


def load_function(source: str) -> Callable:
    namespace: dict = {}
    exec(compile(PROGRAM_GLOBALS_SOURCE + source, "<symfuzz program>", "exec"), namespace)
    return namespace["fn"]


def execute(case, lane: Lane) -> Run:
    """Compile ``case``'s program on ``lane`` and make every call of its schedule."""
    import torch

    fn = load_function(case.source)
    torch._dynamo.reset()
    calls = [c.to_json() for c in case.schedule.calls]
    seconds = {"compile": 0.0, "run": 0.0, "eager": 0.0}

    def account(index, eager, compiled):
        seconds["eager"] += eager["seconds"]
        seconds["compile" if compiled.get("graphs", 0) > 0 or index == 0 else "run"] += compiled["seconds"]

    restore = standalone.set_compile_config(case.schedule.config)
    try:
        with config_patch(lane):
            compiled_fn = make_compiled(fn, case, lane)
            records = standalone.run_schedule(fn, compiled_fn, calls, lane.device, on_call=account)
    finally:
        restore()
        torch._dynamo.reset()

    results = []
    for call, (eager, compiled) in zip(calls, records):
        results.append(CallResult(eager, compiled, _memo(lambda call=call: standalone.reference_output(fn, call, lane.device))))
    return Run(lane.name, results, case.output_ops(), seconds)


def make_compiled(fn, case, lane: Lane) -> Callable:
    """The compiled side of a run: ``torch.compile``, or the lane's own runner
    (e.g. torch.export) for lanes that compile some other way."""
    import torch

    if lane.runner:
        from .runners import build_runner

        return build_runner(lane, fn, case)
    return torch.compile(fn, **lane.compile_kwargs(case.schedule.dynamic))


def _memo(thunk):
    cache = []

    def get():
        if not cache:
            cache.append(thunk())
        return cache[0]

    return get
