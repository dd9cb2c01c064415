#!/usr/bin/env python
"""Real architectures under dynamic shapes, one row each; then the random source beside the
model source at the same budget.

Part 1, a row per architecture of the model source (``fuzz/model_case.ARCHS``): the
architecture's default drawn config (case 0 of the model source for it alone), called through
one fixed schedule of lengths on one compiled model, ``dynamic=True``: a first forward, new
lengths inside its guards, a batch of 1, then a first forward whose length is marked dynamic on
a fresh compile. Columns: compiled (or the error), forwards checked against eager, recompiles per
new length (graphs compiled at a new length with nothing else new, over those lengths: 0 is
the promise of dynamic=True), specializations (the marked length refused), graph breaks,
recompiles the model's own code asked for, and findings (the runtime's verdicts).

Part 2 (skipped with ``--no-campaigns``): a campaign of the random source and one of the model
source, one after the other in this process, same seed, lane, budget and workers; for each,
cases, checked calls, checked calls per CPU-minute, and confirmed findings, total and per
CPU-minute (fresh-process confirmation runs beside the workers; its time counts).

    python benchmarks/models.py --lane aot_eager --budget 300
    python benchmarks/models.py --lane inductor-cpp --no-campaigns
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symfuzz.fuzz.model_case import ARCHS, model_source_unavailable_reason  # noqa: E402
from symfuzz.fuzz.model_draw import generate_model  # noqa: E402
from symfuzz.oracles.lanes.lane import config_patch, get_lane, prepare_process  # noqa: E402

# (batch, length) of the probe schedule's calls; the last call starts a fresh compile, its length marked.
PROBE = [(2, 6), (2, 9), (2, 13), (3, 7), (1, 6)]
MARKED = (2, 10)


def probe_case(arch: str) -> dict:
    case = generate_model(0, 0, [arch])
    kind = ARCHS[arch][2]
    scale = {"image": 4, "audio": 16}.get(kind, 1)  # whole patches; enough samples for a feature frame
    calls = [{"kind": "forward", "batch": b, "seq": s * scale + (24 if kind == "audio" else 0), "seed": i}
             for i, (b, s) in enumerate(PROBE)]
    return {**case, "dynamic": True, "step": None, "calls": calls, "origin": {}}


def probe(arch: str, lane) -> dict:
    import torch
    from torch._dynamo.utils import counters

    from symfuzz.fuzz.model_judge import judge_model_run
    from symfuzz.fuzz.model_runtime import run_model_schedule

    case = probe_case(arch)
    row = {"arch": arch, "compiled": "yes", "checked": 0, "per_length": "-", "specialized": "no", "breaks": 0,
           "model_guards": 0, "findings": 0}
    torch._dynamo.reset()
    counters.clear()
    t0 = time.perf_counter()
    try:
        with config_patch(lane):
            entries = run_model_schedule(case, lane.backend, lane.mode, lane.device)
            failures, notes = judge_model_run(case, entries, device=lane.device)
            # The same model, its length marked dynamic, on a fresh compile: refused if torch specializes it.
            b, s = MARKED
            scale = {"image": 4, "audio": 16}.get(ARCHS[arch][2], 1)
            marked = {**case, "calls": [{"kind": "forward", "batch": b, "seq": s * scale + (24 if scale == 16 else 0),
                                         "seed": 9, "marks": {"length": {"mark": "dynamic"}}}]}
            if ARCHS[arch][2] == "features":
                marked["calls"][0]["marks"] = {"batch": {"mark": "dynamic"}}
            torch._dynamo.reset()
            marked_entries = run_model_schedule(marked, lane.backend, lane.mode, lane.device)
            m_failures, m_notes = judge_model_run(marked, marked_entries, device=lane.device)
    except Exception as exc:  # noqa: BLE001 - a row says what stopped it
        row["compiled"] = f"no: {type(exc).__name__}: {str(exc).splitlines()[0][:60] if str(exc) else ''}"
        return row
    errors = [e["compiled"]["error"] for e in entries if "error" in e["compiled"]]
    if errors:
        row["compiled"] = f"no: {errors[0]['type'].rsplit('.', 1)[-1]}"
    row["checked"] = sum(1 for e in entries if "error" not in e["eager"] and "error" not in e["compiled"])
    # New lengths with the batch unchanged and every size 2 or more: calls 1 and 2 (calls 3, 4 change the batch).
    new_lengths = [e for e in entries[1:3] if "error" not in e["compiled"]]
    if new_lengths:
        row["per_length"] = f"{sum(1 for e in new_lengths if e['compiled'].get('graphs', 0) > 0) / len(new_lengths):.2f}"
    if any(f["symptom"] == "over-specialization" for f in m_failures) or \
            any(n["symptom"] == "over-specialization" for n in m_notes):
        row["specialized"] = "yes"
    row["breaks"] = sum(counters["graph_break"].values())
    row["model_guards"] = len(notes) + len(m_notes)
    row["findings"] = len(failures) + len(m_failures)
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def campaign(source: str, args) -> dict:
    from symfuzz.fuzz_run import run_fuzz
    from symfuzz.settings import MODEL_CASE_TIMEOUT, CampaignConfig

    # The timeouts `symfuzz fuzz --source models` takes: a model case compiles a real model several times.
    timeouts = {"case_timeout": MODEL_CASE_TIMEOUT, "confirm_timeout": MODEL_CASE_TIMEOUT} if "models" in source else {}
    with tempfile.TemporaryDirectory(prefix=f"symfuzz-models-{source}-") as tmp:
        config = CampaignConfig(out=Path(tmp), lane=get_lane(args.lane), budget=args.budget, seed=args.seed,
                                jobs=args.jobs, confirm=not args.no_confirm, quiet=True, source=source, **timeouts)
        with contextlib.redirect_stdout(io.StringIO()):
            outcome = run_fuzz(config)
        stats = outcome.stats or {}
    throughput = stats.get("throughput") or {}
    minutes = throughput.get("cpu_minutes") or 0
    confirmed = (stats.get("findings") or {}).get("confirmed", 0)
    return {"source": source, "cases": (stats.get("programs") or {}).get("generated", 0),
            "checked": (stats.get("calls") or {}).get("checked", 0),
            "checked_per_cpu_min": throughput.get("checked_calls_per_cpu_minute", 0),
            "findings": confirmed, "findings_per_cpu_min": round(confirmed / minutes, 3) if minutes else 0,
            "archs": len(stats.get("models") or {})}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lane", default="aot_eager")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of fuzzing per campaign (part 2)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-confirm", action="store_true")
    parser.add_argument("--no-campaigns", action="store_true", help="the per-architecture table only")
    parser.add_argument("--archs", default=",".join(ARCHS), help="comma-separated architectures (default all)")
    args = parser.parse_args(argv)
    why = model_source_unavailable_reason()
    if why:
        print(f"the model source cannot run here: {why}", file=sys.stderr)
        return 2
    lane = get_lane(args.lane)
    prepare_process(lane)
    archs = [a for a in args.archs.split(",") if a]
    print(f"lane {lane.name}; dynamic=True; lengths {[s for _, s in PROBE]} (batch {[b for b, _ in PROBE]}), "
          f"then a fresh compile with the length marked dynamic")
    head = ("arch", "compiled", "checked", "recompiles/new length", "specialized", "graph breaks", "model's guards",
            "findings", "s")
    rows = []
    for arch in archs:
        row = probe(arch, lane)
        rows.append([row["arch"], row["compiled"], row["checked"], row["per_length"], row["specialized"],
                     row["breaks"], row["model_guards"], row["findings"], row.get("seconds", "-")])
        print(f"  {arch}: done", file=sys.stderr, flush=True)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for line in [head, *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))
    if args.no_campaigns:
        return 0
    print(f"\ncampaigns: {args.budget:.0f}s each, {args.jobs} workers, seed {args.seed}, lane {lane.name}"
          + (", no confirmation" if args.no_confirm else ""))
    runs = [campaign(source, args) for source in ("random", "models")]
    for run in runs:
        print(f"  {run['source']:<7} cases {run['cases']:>4}  checked calls {run['checked']:>5} "
              f"({run['checked_per_cpu_min']:.1f}/CPU-min)  confirmed findings {run['findings']} "
              f"({run['findings_per_cpu_min']:.3f}/CPU-min)"
              + (f"  architectures {run['archs']}" if run["archs"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
