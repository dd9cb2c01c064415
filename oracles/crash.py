"""Crash oracle: compiled raises where eager does not, or the reverse."""

from __future__ import annotations

from . import standalone
from .registry import oracle
from .verdict import Verdict, passed


@oracle("crash")
def crash_oracle(case, run) -> Verdict:
    """Fails when exactly one of eager and compiled raised on some call.

    Compiled raising alone is a crash; compiled returning a result for input
    that eager rejects is "accepts-invalid" (the compiler skipped a check).
    """
    for index, call in enumerate(run.calls):
        e_err, c_err = "error" in call.eager, "error" in call.compiled
        if e_err == c_err:
            continue
        failure = standalone.judge_call(call.eager, call.compiled)
        key = standalone.failure_key(failure, run.output_ops)
        return Verdict(
            ok=False,
            oracle="crash",
            symptom=failure["symptom"],
            stage=failure["stage"],
            signature=standalone.signature(failure["symptom"], run.lane, key),
            call_index=index,
            evidence={"error": failure["error"], "detail": failure.get("detail", "")},
        )
    return passed("crash")
