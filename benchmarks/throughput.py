#!/usr/bin/env python
"""Fuzzing throughput per lane, measured side by side in one run.

For a fixed seed and budget, runs a campaign on each available lane (fresh
confirmation is off: this measures the fuzz loop) and prints, per lane:
programs per minute, checked calls per minute, the share of worker time
spent inside torch.compile and kernels, the share that is symfuzz's own
overhead (generating, judging, process start-up, IPC, idle), and the
validity rate.

    python benchmarks/throughput.py --budget 120 --jobs 2
    python benchmarks/throughput.py --lanes inductor-cpp,eager --budget 60
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from symfuzz.campaign import Campaign, CampaignConfig, CampaignError  # noqa: E402
from symfuzz.oracles.lanes.lane import LANES, get_lane  # noqa: E402


def measure(lane_name: str, budget: float, jobs: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"symfuzz-bench-{lane_name}-") as tmp:
        config = CampaignConfig(out=Path(tmp), lane=get_lane(lane_name), budget=budget, seed=seed, jobs=jobs,
                                confirm=False, quiet=True)
        stats = Campaign(config).run()
    minutes = stats["wall_seconds"] / 60
    t = stats["time_seconds"]
    worker_seconds = sum(t.values())
    torch_share = (t["compiling"] + t["running"]) / worker_seconds
    ours = (t["generating"] + t["oracles"] + t["overhead"]) / worker_seconds
    return {
        "programs/min": stats["programs"]["generated"] / minutes,
        "checked calls/min": stats["calls"]["checked"] / minutes,
        "torch.compile+kernels": torch_share,
        "symfuzz overhead": ours,
        "  generating": t["generating"] / worker_seconds,
        "  oracles": t["oracles"] / worker_seconds,
        "  start-up, IPC, idle": t["overhead"] / worker_seconds,
        "validity rate": stats["programs"]["validity_rate"],
        "programs": stats["programs"]["generated"],
        "candidates (unconfirmed)": stats["findings"]["confirmed"],
        "wall seconds": stats["wall_seconds"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per lane")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lanes", default=None, help="comma-separated; default: every available lane")
    args = parser.parse_args()
    names = args.lanes.split(",") if args.lanes else [n for n, lane in LANES.items() if lane.unavailable_reason() is None]
    skipped = {n: lane.unavailable_reason() for n, lane in LANES.items() if n not in names}
    results = {}
    for name in names:
        print(f"measuring {name} for {args.budget:.0f}s with {args.jobs} workers ...", file=sys.stderr, flush=True)
        try:
            results[name] = measure(name, args.budget, args.jobs, args.seed)
        except CampaignError as exc:  # the lane's canary failed: nothing was measured there
            skipped[name] = f"the campaign could not run: {exc}"
    if not results:
        print("nothing measured: " + "; ".join(f"{n}: {why}" for n, why in skipped.items() if why), file=sys.stderr)
        return 3
    rows = list(next(iter(results.values())).keys())
    width = max(len(r) for r in rows)
    print(f"seed {args.seed}, budget {args.budget:.0f}s per lane, {args.jobs} workers")
    print(f"{'':<{width}}  " + "  ".join(f"{n:>26}" for n in results))
    for row in rows:
        cells = []
        for name in results:
            value = results[name][row]
            is_share = row.startswith(" ") or "rate" in row or row in ("torch.compile+kernels", "symfuzz overhead")
            cells.append(f"{value:>26.1%}" if is_share else f"{value:>26.1f}")
        print(f"{row:<{width}}  " + "  ".join(cells))
    for name, why in skipped.items():
        if why:
            print(f"{name}: not measured ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
