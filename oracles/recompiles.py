"""Recompile and specialization oracle.

Two findings, both about dynamism the schedule asked for and did not get:

- over-specialization: a dim marked dynamic (``mark_dynamic``) was
  specialized to a constant although the program never compares or branches
  on a size (``script_runtime.rejection`` decides, identically in repro scripts);
- excess recompiles: under ``torch.compile(dynamic=True)``, a call that our
  model of the installed guards says must reuse the cached graph (every
  ShapeEnv guard, range, duck-size equality and static size holds, same
  layouts and dtypes as the compiling call) recompiled anyway.

and one about the guards themselves:

- unsound recompile: the program's own frame recompiled at a call that a
  cached graph's guard manager, asked just before with the same arguments,
  accepted (``oracles.lanes.recompile_reasons``; the repro asks and judges
  the same way).

Over-guards (a recompile that produced the same graph again) and the other
recompiles the guard managers did not predict (another frame compiled: a
resume function after a graph break, a nested function) are counted in
stats only.
"""

from __future__ import annotations

from symfuzz.fuzz import script_runtime
from symfuzz.oracles.verdict import ExcessRecompile, RaisedError, UnsoundRecompile, Verdict, passed


def _comparable(case, index, other) -> bool:
    """Same dtypes, layouts and marks as the compiling call, and no size
    below 2 in either: the guards we model are the shape guards, and
    tensors with a 0 or 1 dim have strides that do not follow their sizes
    (so Dynamo's stride guards, which we do not model, may fail by design)."""
    a, b = case.schedule.calls[index].args, case.schedule.calls[other].args
    return all(
        x.dtype == y.dtype and x.layout == y.layout and x.marks == y.marks and min(x.shape + y.shape, default=2) >= 2
        for x, y in zip(a, b)
    )


def recompiles_oracle(case, run) -> Verdict:
    for index, call in enumerate(run.calls):
        if "error" in call.compiled and "error" not in call.eager:
            failure = script_runtime.judge_call(call.eager, call.compiled, None, run.context)
            if failure is not None and failure["symptom"] == "over-specialization":
                key = script_runtime.failure_key(failure, run.output_ops)
                return Verdict(False, "recompiles", "over-specialization", "dynamo",
                               script_runtime.signature("over-specialization", run.lane, key), index,
                               RaisedError(error=failure["error"], detail=failure["detail"]))
    for index, call in enumerate(run.calls):
        explanation = call.compiled.get("recompile") or {}
        if explanation.get("unsound"):
            return Verdict(False, "recompiles", "unsound-recompile", "guard",
                           script_runtime.signature("unsound-recompile", run.lane, explanation["key"]), index,
                           UnsoundRecompile(
                               detail=explanation["detail"],
                               recompile_reason=explanation["reason"], admitted_by=explanation["admitted_by"],
                               reasons=explanation["reasons"]))
    the_case = run.case or case
    compiling = run.guards.get("model_call")
    if run.dynamic is True and compiling is not None:
        for index, call in enumerate(run.calls):
            # The program's own frame recompiled (not a resume frame after a graph break).
            recompiled = call.compiled.get("new_entries", 0) > 0
            if call.expect_reuse and recompiled and "error" not in call.eager and _comparable(the_case, index, compiling):
                reason = call.compiled.get("recompile_reason", "")
                if "stride" in reason:
                    continue
                return Verdict(False, "recompiles", "excess-recompiles", "guard",
                               script_runtime.signature("excess-recompiles", run.lane, reason), index,
                               ExcessRecompile(
                                   detail=f"recompiled although every guard of the graph compiled at call {compiling} holds",
                                   recompile_reason=reason, guards=run.guards.get("guards", [])))
    return passed("recompiles")
