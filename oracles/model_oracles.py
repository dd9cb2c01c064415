"""Model cases on a lane: run a real architecture's schedule, and judge it as verdicts.

``run_model_case`` is a model case's ``worker.run_case``: it compiles the case's model on the
lane (``torch.compile(model, backend=..., dynamic=...)`` under the lane's Inductor config),
makes every call on eager and compiled (``fuzz/model_runtime.py``), judges the run with the
runtime's one judging function (the one a model repro.py pastes, so the script prints the
signature its finding is stored under) and returns the result message body, counted like a
program case's. The model's own guards, which are its business, travel as notes (the result's
``features["notes"]``), never as verdicts.
"""

from __future__ import annotations

import time

from symfuzz.fuzz.model_case import check_model_case
from symfuzz.fuzz.model_judge import judge_model_run, model_signature
from symfuzz.fuzz.model_runtime import run_model_schedule
from symfuzz.oracles.lanes.lane import Lane, config_patch
from symfuzz.oracles.verdict import ExcessRecompile, OutputMismatch, RaisedError, Verdict

NAME = "model"  # the oracle name model verdicts carry

# What a failure of the runtime's judging becomes: its symptom's evidence record.
_RAISED = ("crash", "over-specialization")
_OUTPUT = ("value-mismatch", "metadata-mismatch", "gradient-mismatch")
_RECOMPILE = ("excess-recompiles", "lost-dynamism")


def to_verdict(case: dict, failure: dict, lane: str) -> Verdict:
    """A runtime failure (``judge_model_run``) as the campaign's verdict."""
    symptom = failure["symptom"]
    if symptom in _RAISED:
        evidence = RaisedError(error=failure["error"], detail=failure.get("detail", ""))
    elif symptom in _OUTPUT:
        evidence = OutputMismatch(path=failure["path"], detail=failure["detail"])
    elif symptom in _RECOMPILE:
        evidence = ExcessRecompile(detail=failure["detail"], recompile_reason=failure["guard"],
                                   guards=[failure["origin"]])
    else:  # pragma: no cover - the runtime names only the symptoms above
        raise ValueError(f"model failure of unknown symptom {symptom!r}")
    return Verdict(ok=False, oracle=NAME, symptom=symptom, stage=failure.get("stage") or "unknown",
                   signature=model_signature(case, failure, lane), call_index=failure["call"], evidence=evidence)


def run_model_case(case: dict, lane: Lane) -> dict:
    """Run and judge one model case on ``lane``; the worker's result message body."""
    import torch  # deferred: the worker imports torch only after its lane has set the environment

    check_model_case(case)
    device = lane.device

    torch._dynamo.reset()
    t0 = time.perf_counter()
    with config_patch(lane):
        entries = run_model_schedule(case, lane.backend, lane.mode, device=device)
    t1 = time.perf_counter()
    failures, notes = judge_model_run(case, entries, device=device)
    t2 = time.perf_counter()
    verdicts = [to_verdict(case, f, lane.name) for f in failures]
    compiled = [e["compiled"] for e in entries]
    both = [e for e in entries if "error" not in e["eager"] and "error" not in e["compiled"]]
    graphs = [c.get("graphs", -1) for c in compiled]
    first = verdicts[0] if verdicts else None
    return {
        "valid": all("error" not in e["eager"] for e in entries),
        "compiled": not any("error" in e["compiled"] and "error" not in e["eager"] for e in entries),
        "calls": len(entries),
        "checked": len(both),
        "recompiles": sum(1 for g in graphs[1:] if g > 0),
        "graphs": graphs,
        # Compiles happen inside the calls: a model's run time is its compiles and its calls together.
        "seconds": {"compile": 0.0, "run": t1 - t0, "oracle": t2 - t1, "execute_other": 0.0},
        "verdicts": [v.to_json() for v in verdicts],
        "triage": {"stage": first.stage} if first is not None else {},
        "case": case,
        "features": {
            "architecture": case["arch"],
            "model_calls": [c["kind"] for c in case["calls"]],
            "gradient_calls": sum(1 for e in both if e["kind"] == "train"),
            "notes": [n["detail"] for n in notes][:10],
            "graph_breaks": _graph_breaks(),
        },
        "first_errors": _first_errors(entries),
    }


def _graph_breaks() -> int:
    try:
        from torch._dynamo.utils import counters  # private torch API, looked up at use

        return sum(counters["graph_break"].values())
    except Exception:  # noqa: BLE001 - a counter moved in some torch version
        return -1


def _first_errors(entries) -> dict:
    found = {}
    for entry in entries:
        for side in ("eager", "compiled"):
            error = entry[side].get("error")
            if error and side not in found:
                found[side] = f"{error.get('type', '?')}: {str(error.get('message', ''))[:300]}"
    return found
