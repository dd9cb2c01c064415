"""Differential oracle: compiled results against eager, on every call."""

from __future__ import annotations

from symfuzz.fuzz import script_runtime
from symfuzz.oracles.crash import fresh_compile_passed
from symfuzz.oracles.eager_meta import eager_side_note
from symfuzz.oracles.verdict import OutputMismatch, Verdict, passed


def differential_oracle(case, run) -> Verdict:
    """Fails when a call where both sides returned gives different results.

    Values are compared with dtype-aware tolerances; a value outside them
    still passes if compiled is no further from an fp64 reference than eager
    is (rounding, not a bug). Shapes, dtypes and output structure must match
    exactly. Final input states are compared too, which checks mutation.

    A discrete result (a comparison, all/any, argmax, sort indices ...) that
    differs only where its decision lies within rounding of the threshold is
    no bug either (``script_runtime.rounding_explains``). When nothing else
    fails, the first such flip is still reported, with its reason in the
    evidence's ``rounding``, so that the campaign keeps it in suspect/ rather
    than confirming it as a finding; a real mismatch on any call wins over it.
    """
    flips = []
    for index, call in enumerate(run.calls):
        if "error" in call.eager or "error" in call.compiled or fresh_compile_passed(call):
            continue
        explained = []
        diff = script_runtime.name_gradient(
            script_runtime.compare(call.eager["out"], call.compiled["out"], call.reference, explained))
        if diff is None:
            if explained and not flips:
                flips.append((index, call, explained[0]))
            continue
        if diff["symptom"] == "metadata-mismatch":  # compiled follows the meta functions: is eager the one off them?
            note = eager_side_note(run.case or case, index, run.lane)
            if note:
                diff = {**diff, "detail": f"{diff['detail']}; but {note}"}
        return _mismatch(run, index, call, diff)
    if flips:
        index, call, flip = flips[0]
        return _mismatch(run, index, call, flip, rounding=flip["reason"])
    return passed("differential")


def _mismatch(run, index, call, diff, rounding=None) -> Verdict:
    key = script_runtime.failure_key(diff, run.output_ops, run.gradient_ops)
    return Verdict(
        ok=False,
        oracle="differential",
        symptom=diff["symptom"],
        stage="runtime",
        signature=script_runtime.signature(diff["symptom"], run.lane, key),
        call_index=index,
        evidence=OutputMismatch(path=diff["path"], detail=diff["detail"], graphs_at_call=call.graphs,
                                rounding=rounding, gradient_of=script_runtime.gradient_of(diff["path"], run.gradient_ops)),
    )
