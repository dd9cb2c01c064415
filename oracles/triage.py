"""Say which layer is at fault by re-running a failing case on cheaper lanes."""

from __future__ import annotations

from symfuzz.oracles.lanes.execute import execute
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.registry import judge

# The layer a lane adds on top of the cheaper ones.
LAYER_OF_LANE = {"eager": "dynamo", "aot_eager": "aot", "inductor-cpp": "inductor"}


def triage(case, lane, verdict) -> dict:
    """{"stage": layer at fault, "lanes": {lane: headline}} for a failing verdict.

    The first cheaper lane (cheapest first) that fails with the same symptom
    names the layer. If none does, the fault is in ``lane``'s own layer:
    Inductor codegen for a mismatch, or the stage the exception names.
    """
    seen = {}
    for name in lane.cheaper:
        cheaper = get_lane(name)
        if cheaper.unavailable_reason():
            continue
        try:
            verdicts = judge(case, execute(case, cheaper))
        except Exception as exc:  # noqa: BLE001 - triage must not lose the finding
            seen[name] = f"triage run failed: {type(exc).__name__}: {exc}"[:300]
            continue
        failures = [v for v in verdicts if not v.ok]
        seen[name] = failures[0].headline() if failures else "pass"
        if any(v.symptom == verdict.symptom for v in failures):
            return {"stage": LAYER_OF_LANE.get(name, verdict.stage), "lanes": seen}
    stage = verdict.stage
    if verdict.symptom in ("value-mismatch", "metadata-mismatch", "gradient-mismatch") and lane.backend == "inductor":
        stage = "inductor"
    return {"stage": stage, "lanes": seen}
