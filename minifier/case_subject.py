"""A fuzzer finding as a minifier subject: its Case, shrunk at the IR level.

Each candidate is checked by rendering the finding's own repro script
(``corpus.scripts.render_repro``) for the candidate case and running it fresh:
the same judging code the campaign used, so "same signature" means the same
thing here as in ``symfuzz replay``. The user-facing repro is the short
script (``minifier.compact``) when it still shows the bug, with the judged
script beside it (``judge_script``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.scripts import render_repro
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.ir import OpNode
from symfuzz.minifier.case_eager import plausible
from symfuzz.minifier.compact import compact_matches, render_compact
from symfuzz.oracles.lanes.lane import LANES
from symfuzz.oracles.verdict import Verdict

# Marks that make a dim symbolic when the compile sees it.
DYNAMIC_MARKS = ("dynamic", "maybe_dynamic", "unbacked")


@dataclass(frozen=True)
class CaseSubject:
    case: Case
    verdict: Verdict
    lane: dict
    environment: dict
    kind: str = "case"
    # The lane the queries compile on, when it is a cheaper one than the finding's (``lane``):
    # eager or aot_eager instead of Inductor. Its scripts still sign failures under the
    # finding's lane name: the failure key is the bug, and the same key there is the same bug.
    run_lane: Optional[dict] = None
    triage: Optional[dict] = None  # the finding's triage: which cheaper lanes it passed on

    @staticmethod
    def from_finding(finding: Finding) -> "CaseSubject":
        return CaseSubject(Case.from_json(finding.case), finding.verdict, dict(finding.lane),
                           dict(finding.environment), triage=dict(finding.triage or {}))

    def with_case(self, case: Case, call_index=None) -> "CaseSubject":
        verdict = self.verdict if call_index is None else replace(self.verdict, call_index=call_index)
        return replace(self, case=case, verdict=verdict)

    def finding(self) -> Finding:
        lane = self.lane if self.run_lane is None else dict(self.run_lane, name=self.lane["name"])
        return Finding(case=self.case.to_json(), verdict=self.verdict, lane=lane, environment=self.environment)

    def to_json(self) -> dict:
        data = {"case": self.case.to_json(), "verdict": self.verdict.to_json(), "lane": self.lane,
                "environment": self.environment}
        if self.run_lane is not None:
            data["run_lane"] = self.run_lane  # the same case on another lane is another query
        return data

    @staticmethod
    def from_json(data: dict) -> "CaseSubject":
        return CaseSubject(Case.from_json(data["case"]), Verdict.from_json(data["verdict"]), data["lane"],
                           data.get("environment", {}), run_lane=data.get("run_lane"))

    # -- lanes

    def cheaper_variants(self) -> list["CaseSubject"]:
        """This subject compiled on each cheaper lane that might show the same bug, cheapest first.

        Only Inductor lanes that go through ``torch.compile`` have them (eager, aot_eager): an
        export lane's failure is another code path. A lane the finding's triage saw pass is left out.
        """
        if self.run_lane is not None or self.lane.get("backend") != "inductor" or self.lane.get("runner"):
            return []
        own = LANES.get(self.lane.get("name"))
        seen = (self.triage or {}).get("lanes", {})
        variants = []
        for name in (own.cheaper if own else ("eager", "aot_eager")):
            cheap = LANES.get(name)
            if cheap is None or cheap.backend == "inductor" or cheap.runner or seen.get(name) == "pass":
                continue
            lane = dict(cheap.to_json(), device=self.lane.get("device", "cpu"))
            variants.append(replace(self, run_lane=lane))
        return variants

    def on_own_lane(self) -> "CaseSubject":
        return replace(self, run_lane=None)

    @property
    def run_lane_name(self) -> str:
        return (self.run_lane or self.lane).get("name", "?")

    # -- size

    def measure(self) -> dict:
        program, calls = self.case.program, self.case.schedule.calls
        return {
            "ops": len(program.ops()),
            "nodes": len(program.body),
            "calls": len(calls),
            "elements": sum(math.prod(a.shape) for c in calls for a in c.args),
            "dynamic_dims": len(dynamic_dims(self.case)),
        }

    def cost(self) -> tuple:
        program, schedule = self.case.program, self.case.schedule
        m = self.measure()
        marks = sum(len(a.marks) for c in schedule.calls for a in c.args)
        grads = sum(a.requires_grad for c in schedule.calls for a in c.args)  # a backward to compile and compare
        config = sum(len(v) for v in schedule.config.values())
        odd_dtypes = sum(i.dtype != "float32" for i in program.inputs)
        odd_layouts = sum(a.layout.get("kind", "contiguous") != "contiguous" for c in schedule.calls for a in c.args)
        rank = sum(i.rank for i in program.inputs)
        params = sum(len(n.params) for n in program.body if isinstance(n, OpNode))
        # A module's parameters and buffers count first: one turned into an input or a constant
        # statement is progress (no pass adds any).
        return (len(program.params), m["nodes"], len(program.outputs), m["calls"], len(program.inputs), rank,
                m["elements"], marks, grads, config, odd_dtypes, odd_layouts, params) + scalar_cost(self.case) \
            + module_cost(self.case)

    # -- scripts

    def query_script(self) -> str:
        return render_repro(self.finding())

    def repro_script(self) -> str:
        return render_compact(self) or self.query_script()

    def judge_script(self) -> str:
        """The judged script on the finding's own lane (the queries' may be a cheaper one): judge.py."""
        return render_repro(Finding(case=self.case.to_json(), verdict=self.verdict, lane=self.lane,
                                    environment=self.environment))

    def plausible(self) -> bool:
        return plausible(self)

    def repro_matches(self, outcome) -> bool:
        """Does a run of ``repro_script()`` show this subject's bug?"""
        return compact_matches(self, outcome)


def module_cost(case: Case) -> tuple:
    """(training step, trainable parameters, eval calls, state elements) of a module
    program: each makes a query compile and compare more than plain forward calls in
    train mode, or makes its repro bigger."""
    return (case.schedule.step is not None, sum(p.trainable for p in case.program.params),
            sum(c.training is False for c in case.schedule.calls), sum(math.prod(p.dims) for p in case.program.params))


def scalar_cost(case: Case) -> tuple:
    """(values that differ from the call before, total magnitude) over the number
    inputs: fewer changes and smaller numbers make a simpler repro."""
    changes, magnitude = 0, 0.0
    for a, inp in enumerate(case.program.inputs):
        if inp.is_tensor:
            continue
        values = [c.args[a].value for c in case.schedule.calls if a < len(c.args)]
        changes += sum(x != y for x, y in zip(values, values[1:]))
        for v in values:
            magnitude += sum(abs(x) for x in v) if isinstance(v, list) else abs(v)
    return changes, magnitude


def dynamic_dims(case: Case) -> set:
    """(input, dim) pairs whose size the compile treats as symbolic.

    ``dynamic=True`` makes every dim of size 2 or more symbolic at the first
    compile; otherwise a dim is symbolic when marked dynamic (or unbacked),
    or, under automatic dynamic shapes, when its size changes between calls.
    """
    schedule = case.schedule
    found = set()
    for a, inp in enumerate(case.program.inputs):
        for d in range(inp.rank):
            sizes = [c.args[a].shape[d] for c in schedule.calls if a < len(c.args)]
            marks = {c.args[a].marks.get(d, {}).get("mark", "auto") for c in schedule.calls if a < len(c.args)}
            if "static" in marks:
                continue
            if schedule.dynamic is True and sizes and sizes[0] >= 2:
                found.add((a, d))
            elif marks & set(DYNAMIC_MARKS):
                found.add((a, d))
            elif schedule.dynamic is None and len(set(sizes)) > 1:
                found.add((a, d))
    return found
