"""Schedule efficiency: guard-directed schedules against one call per program.

For the same generated programs, in one process and one run, this compares:

- "one call": each program called once (PyTorch's own fuzzer does this);
- "drawn": the generator's drawn schedule (2-4 calls, new shapes each);
- "guided": the drawn schedule plus the calls solved from the guards.

It prints checked calls per compile (how much checking each expensive
compile buys), guard regions covered against the regions the first dynamic
compile's guards define, and how often a planned reuse call did reuse.

    python benchmarks/schedules.py [--cases 30] [--lane eager] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def measure(cases, lane, mode):
    from symfuzz.oracles.lanes.execute import execute

    totals = {"checked": 0, "compiles": 0, "regions": 0, "covered": 0, "seconds": 0.0, "reuse_planned": 0, "reused": 0}
    for case in cases:
        if mode == "one call":
            case = replace(case, schedule=replace(case.schedule, calls=case.schedule.calls[:1]))
        t0 = time.perf_counter()
        run = execute(case, lane, plan=(mode == "guided"))
        totals["seconds"] += time.perf_counter() - t0
        totals["checked"] += sum(1 for c in run.calls if "error" not in c.eager and "error" not in c.compiled)
        totals["compiles"] += sum(max(c.graphs, 0) for c in run.calls)
        totals["regions"] += run.guards.get("regions", 0)
        totals["covered"] += run.guards.get("covered", 0) if run.guards.get("regions") else 0
        totals["reuse_planned"] += sum(1 for c in run.calls if c.expect_reuse)
        totals["reused"] += sum(1 for c in run.calls if c.expect_reuse and c.graphs == 0)
    return totals


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument("--lane", default="eager")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from symfuzz.oracles.lanes.lane import get_lane, prepare_process

    lane = get_lane(args.lane)
    prepare_process(lane)
    from symfuzz.fuzz.drawing import generate
    from symfuzz.fuzz.generate import GenConfig

    cases = [generate(args.seed, i, GenConfig(max_ops=6)) for i in range(args.cases)]
    # Regions are counted from the guards of the newest dynamic compile, so a
    # one-call run (a single static compile under dynamic=None) has none of
    # its own; it covers exactly one region of what the guided run counts.
    results = {mode: measure(cases, lane, mode) for mode in ("one call", "drawn", "guided")}
    one = results["one call"]
    print(f"{args.cases} programs, lane {lane.name}, seed {args.seed}")
    print(f"{'schedule':10} {'checked':>8} {'compiles':>9} {'checked/compile':>16} {'regions':>8} {'covered':>8} {'coverage':>9} {'reuse ok':>9} {'seconds':>8}")
    for mode, r in results.items():
        per = r["checked"] / r["compiles"] if r["compiles"] else 0.0
        regions = r["regions"] if mode != "one call" else results["guided"]["regions"]
        covered = r["covered"] if mode != "one call" else min(r["checked"], regions)
        cover = covered / regions if regions else 0.0
        reuse = f"{r['reused']}/{r['reuse_planned']}" if r["reuse_planned"] else "-"
        print(f"{mode:10} {r['checked']:8d} {r['compiles']:9d} {per:16.2f} {regions:8d} {covered:8d} {cover:9.1%} {reuse:>9} {r['seconds']:8.1f}")
    g = results["guided"]
    if one["checked"]:
        print(f"guided/one-call: {g['checked'] / one['checked']:.1f}x checked calls, "
              f"{(g['checked'] / max(g['compiles'], 1)) / (one['checked'] / max(one['compiles'], 1)):.2f}x checked per compile, "
              f"{g['seconds'] / max(one['seconds'], 1e-9):.1f}x time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
