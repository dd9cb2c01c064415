"""Crash oracle: compiled raises where eager does not, or the reverse."""

from __future__ import annotations

from symfuzz.fuzz import script_runtime
from symfuzz.oracles.dead_code import raised_only_in_dead_code
from symfuzz.oracles.eager_meta import eager_side_note
from symfuzz.oracles.verdict import RaisedError, Verdict, passed


def fresh_compile_passed(call) -> bool:
    """A fresh compile got this call right: the reuse oracle owns the failure."""
    return call.fresh is not None and call.fresh.get("failure") is None


def dead_code_calls(case, run, before: int) -> list[int]:
    """The calls before call ``before`` where eager raised only in dead code and compiled returned
    (``raised_only_in_dead_code``): the crash oracle passes over them. A finding at a later call
    carries them (its triage's ``dead_code_calls``) so that its scripts pass over them too: judge.py
    and repro.py cannot tell dead code from a skipped check, and would stop at such a call."""
    return [index for index, call in enumerate(run.calls[:before])
            if "error" in call.eager and "error" not in call.compiled and not fresh_compile_passed(call)
            and raised_only_in_dead_code(run.case or case, index, run.lane)]


def crash_oracle(case, run) -> Verdict:
    """Fails when exactly one of eager and compiled raised on some call.

    Compiled raising alone is a crash; compiled returning a result for input
    that eager rejects is "accepts-invalid" (the compiler skipped a check; or eager's
    kernel left its op's shape rule first, which the detail then says: ``eager_meta``).
    Torch refusing the schedule's own marks is not a crash (see
    ``script_runtime.rejection``); a refusal that is an over-specialization is
    the recompiles oracle's to report.
    """
    for index, call in enumerate(run.calls):
        e_err, c_err = "error" in call.eager, "error" in call.compiled
        if e_err == c_err or fresh_compile_passed(call):
            continue
        failure = script_runtime.judge_call(call.eager, call.compiled, None, run.context)
        if failure is None or failure["symptom"] == "over-specialization":
            continue
        if failure["symptom"] == "accepts-invalid" and raised_only_in_dead_code(run.case or case, index, run.lane):
            continue
        detail = failure.get("detail", "")
        if failure["symptom"] == "accepts-invalid":
            detail = eager_side_note(run.case or case, index, run.lane) or detail
        key = script_runtime.failure_key(failure, run.output_ops)
        return Verdict(
            ok=False,
            oracle="crash",
            symptom=failure["symptom"],
            stage=failure["stage"],
            signature=script_runtime.signature(failure["symptom"], run.lane, key),
            call_index=index,
            evidence=RaisedError(error=failure["error"], detail=detail),
        )
    return passed("crash")
