"""Reuse-soundness oracle: a cached graph reused for new shapes must be right.

This is the central dynamic-shape oracle. A call that ran a graph compiled
for earlier shapes (no compile during the call) and got a wrong result,
while a fresh compile at the same shapes gets it right, shows that the
cached graph was wrong for these shapes and that its guards let the call
through: a guard is missing or too weak.
"""

from __future__ import annotations

from symfuzz.fuzz import script_runtime
from symfuzz.oracles.verdict import UnsoundGuard, Verdict, passed


def reuse_oracle(case, run) -> Verdict:
    """Fails on the first reused call whose fresh-compile recheck passed.

    The recheck is made by ``execute`` (oracles never compile); calls
    without one are not this oracle's business.
    """
    for index, call in enumerate(run.calls):
        if call.fresh is None or call.fresh.get("failure") is not None:
            continue
        failure = script_runtime.judge_call(call.eager, call.compiled, call.reference, run.context)
        if failure is None:
            continue
        key = "reuse|" + script_runtime.failure_key(failure, run.output_ops, run.gradient_ops)
        return Verdict(
            ok=False,
            oracle="reuse-soundness",
            symptom="unsound-guard",
            stage="guard",
            signature=script_runtime.signature("unsound-guard", run.lane, key),
            call_index=index,
            evidence=UnsoundGuard(detail=failure.get("detail", ""), path=failure.get("path"),
                                  reused_symptom=failure["symptom"], purpose=call.purpose,
                                  guard_manager_accepted=call.predicted_reuse, error=failure.get("error"),
                                  gradient_of=script_runtime.gradient_of(failure.get("path"), run.gradient_ops)),
        )
    return passed("reuse-soundness")
