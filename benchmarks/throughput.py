#!/usr/bin/env python
"""Fuzzing throughput, the previous method against the new one, side by side in one run.

For a fixed seed and budget, runs a campaign per lane and method (fresh confirmation
is off: this measures the fuzz loop) and prints, per lane and method: programs per
minute, checked calls and guard regions covered per CPU-minute (a CPU-minute is a
minute of one worker: stats.json "throughput"), checked calls per compile, and the
share of worker time in each phase (generating, compiling, running, planning,
oracles, overhead: start-up, IPC, idle), and what the oracles' share went to (each
oracle with the fp64 references and rounding explanations it asked for, triage on
cheaper lanes, fresh recompiles of a reused graph's failure).

The methods:

- previous: no extra calls inside the guards (``--reuse-calls 0``), Inductor's
  default compile settings, workers idle while the canary runs
  (``--no-throughput-settings``);
- new: the defaults (``CampaignConfig.reuse_calls`` more calls per symbolic compile,
  ``worker_slot.THROUGHPUT_ENV``, workers warming up beside the canary).

Both draw the same programs and schedules (case i is a function of the seed); the
new method adds calls after them.

    python benchmarks/throughput.py --budget 90 --jobs 2
    python benchmarks/throughput.py --lanes inductor-cpp,eager --budget 60
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symfuzz.campaign import CampaignError  # noqa: E402
from symfuzz.fuzz_run import run_fuzz  # noqa: E402
from symfuzz.settings import REUSE_CALLS, CampaignConfig  # noqa: E402
from symfuzz.oracles.lanes.lane import get_lane  # noqa: E402
from symfuzz.oracles.registry import ORACLES  # noqa: E402

METHODS = {
    "previous": {"reuse_calls": 0, "throughput_settings": False},
    "new": {"reuse_calls": REUSE_CALLS, "throughput_settings": True},
}
PHASES = ("generating", "compiling", "running", "planning", "oracles", "overhead")
# The oracles' share, by what it is spent on: each oracle (with the fp64 references and rounding
# explanations it asks for), triage on cheaper lanes, fresh recompiles of a reused graph's failure.
ORACLE_PART = "oracles: "
ORACLE_PARTS = (*ORACLES, "triage", "fresh-recompile", "confirmation")


def measure(lane_name: str, method: dict, budget: float, jobs: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"symfuzz-bench-{lane_name}-") as tmp:
        config = CampaignConfig(out=Path(tmp), lane=get_lane(lane_name), budget=budget, seed=seed, jobs=jobs,
                                confirm=False, quiet=True, **method)
        with contextlib.redirect_stdout(io.StringIO()):  # the app's summary: the table below says it
            outcome = run_fuzz(config)
        if outcome.stats is None:
            raise CampaignError(f"the {lane_name} campaign could not test anything (exit {outcome.code})")
        stats = outcome.stats
    rate, calls, share = stats["throughput"], stats["calls"], stats["time_share"]
    row = {
        "programs/min": rate["programs_per_minute"],
        "checked calls/CPU-min": rate["checked_calls_per_cpu_minute"],
        "guard regions/CPU-min": rate["guard_regions_per_cpu_minute"],
        "checked calls/compile": calls["checked_per_compile"],
    }
    row.update({f"  {phase}": share.get(phase, 0.0) for phase in PHASES})
    # What the oracles' share went to (stats.json "oracle_seconds"), as shares of all worker time.
    worker_seconds = sum(stats["time_seconds"].values()) or 1.0
    parts = stats.get("oracle_seconds") or {}
    row.update({f"    {ORACLE_PART}{part}": parts.get(part, 0.0) / worker_seconds for part in ORACLE_PARTS})
    row.update({
        "programs": stats["programs"]["generated"],
        "checked calls": calls["checked"],
        "graphs compiled": calls["graphs_compiled"],
        "extra reuse calls": stats["guards"]["planned_calls"].get("reuse-more", 0),
        "  of which reused": stats["guards"].get("reuse_more_calls_reused", 0),
        "candidates (unconfirmed)": stats["findings"]["reported_unconfirmed"],
        "wall seconds": stats["wall_seconds"],
    })
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=90.0, help="seconds per lane and method")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lanes", default="inductor-cpp", help="comma-separated (default inductor-cpp)")
    args = parser.parse_args()
    results, skipped = {}, {}
    for name in args.lanes.split(","):
        why = get_lane(name).unavailable_reason()
        if why:
            skipped[name] = why
            continue
        for method, settings in METHODS.items():
            print(f"measuring {name}, {method} method, for {args.budget:.0f}s with {args.jobs} workers ...",
                  file=sys.stderr, flush=True)
            try:
                results[f"{name} {method}"] = measure(name, settings, args.budget, args.jobs, args.seed)
            except CampaignError as exc:  # the lane's canary failed: nothing was measured there
                skipped[name] = f"the campaign could not run: {exc}"
                break
    if not results:
        print("nothing measured: " + "; ".join(f"{n}: {why}" for n, why in skipped.items()), file=sys.stderr)
        return 3
    rows = list(next(iter(results.values())).keys())
    width = max(len(r) for r in rows)
    cell = max(24, *(len(n) + 2 for n in results))
    print(f"seed {args.seed}, budget {args.budget:.0f}s per lane and method, {args.jobs} workers; "
          f"previous: reuse calls 0, default compile settings; new: reuse calls {REUSE_CALLS}, throughput settings")
    print(f"{'':<{width}}  " + "".join(f"{n:>{cell}}" for n in results))
    for row in rows:
        cells = []
        for name in results:
            value = results[name][row]
            if row.startswith("  ") and (row.strip() in PHASES or row.strip().startswith(ORACLE_PART)):
                cells.append(f"{value:>{cell}.1%}")
            elif isinstance(value, int):
                cells.append(f"{value:>{cell}d}")
            else:
                cells.append(f"{value:>{cell}.2f}")
        print(f"{row:<{width}}  " + "".join(cells))
    for name, why in skipped.items():
        print(f"{name}: not measured ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
