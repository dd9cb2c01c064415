#!/usr/bin/env python
"""Guidance off against guidance on: the compiler features a campaign reaches in the same budget.

For a fixed seed, lane, budget and number of workers, runs one campaign with every
generated case a fresh draw (``--guidance 0``, a campaign's default) and one with guidance
on: a share of the cases (``--guidance``, here 0.5 unless given) mutants of cases that reached
a new compiler feature or draws steered toward the least-used ops (``symfuzz.case_source``),
one after the other in this process, and prints for each:
distinct features reached (total and per family: ``symfuzz.coverage``; how many only one
case reached; those of the families that steer guidance, ``case_source.STEERING_FAMILIES``), programs,
checked calls, checked calls per CPU-minute and per compile, the shares of worker time
the oracles and symfuzz's own overhead took, the guided run's mutants and how many of
them reached something new, the new features each kind of case (fresh, steered, mutant) reached
per minute of its own worker time, and confirmed findings (fresh-process confirmation is on
unless --no-confirm; it runs beside the workers and on past the budget, and its time
counts in the CPU-minutes: a run whose cases find more bugs pays for confirming them).
The last line is the ratio of distinct features, on to off.

With ``--ceiling K`` a third campaign runs guidance off for K times the budget, and a last line
says what K times the fuzzing time gives: a yardstick for the guided run's ratio. Most families
are bounded (the ops, lowerings, index forms and specializations a generator can reach), so
their counts flatten as a run goes on, while guard texts keep coming at about one a case.

    python benchmarks/features.py --budget 300 --jobs 2
    python benchmarks/features.py --budget 120 --seed 3 --lane eager --no-confirm
    python benchmarks/features.py --budget 300 --no-confirm --ceiling 3
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
from symfuzz.case_source import STEERING_FAMILIES  # noqa: E402
from symfuzz.fuzz_run import run_fuzz  # noqa: E402
from symfuzz.oracles.lanes.lane import get_lane  # noqa: E402
from symfuzz.settings import CampaignConfig  # noqa: E402

# The guided run's share of guided cases. Not settings.GUIDANCE: campaigns leave guidance off by
# default (it has not yet paid for itself), and this benchmark exists to measure it on.
GUIDED_SHARE = 0.5


def measure(guidance: float, budget: float, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="symfuzz-features-") as tmp:
        config = CampaignConfig(out=Path(tmp), lane=get_lane(args.lane), budget=budget, seed=args.seed,
                                jobs=args.jobs, confirm=not args.no_confirm, quiet=True, guidance=guidance)
        with contextlib.redirect_stdout(io.StringIO()):  # the app's summary: the table below says it
            outcome = run_fuzz(config)
        if outcome.stats is None:
            raise CampaignError(f"the campaign at --guidance {guidance} could not test anything (exit {outcome.code})")
        return outcome.stats


def per_minute(guided: dict, kind: str) -> float:
    seconds = (guided.get("seconds_by_kind") or {}).get(kind, 0.0)
    return round(60.0 * (guided.get("new_features_by_kind") or {}).get(kind, 0) / seconds, 1) if seconds else 0.0


def rows(stats: dict) -> dict:
    features, guided = stats.get("features") or {}, stats.get("guidance") or {}
    reached = features.get("reached") or {}
    out = {"distinct features": features.get("distinct", 0)}
    out.update({f"  {family}": n for family, n in sorted((features.get("by_family") or {}).items())})
    # Guard texts are nearly one per case (most are reached by that case alone): the families that
    # steer guidance (case_source.STEERING_FAMILIES) say more about rare ground than the total does.
    out["  reached by one case only"] = sum(1 for f in reached.values() for n in f.values() if n == 1)
    out["distinct features, steering families"] = sum(len(reached.get(f) or {}) for f in STEERING_FAMILIES)
    out.update({
        "programs": stats["programs"]["generated"],
        "checked calls": stats["calls"]["checked"],
        "checked calls/CPU-min": stats["throughput"]["checked_calls_per_cpu_minute"],
        "checked calls/compile": stats["calls"]["checked_per_compile"],
        "oracles' share of worker time": stats["time_share"].get("oracles", 0.0),
        "overhead's share of worker time": stats["time_share"].get("overhead", 0.0),
        "mutants": guided.get("mutants", 0),
        "  reaching something new": guided.get("mutants_with_new_features", 0),
        "steered draws": guided.get("steered", 0),
        "  reaching something new ": guided.get("steered_with_new_features", 0),
        "fresh draws reaching something new": guided.get("fresh_with_new_features", 0),
        # What each kind of case reached first per minute of its own worker time: whether the
        # guided kinds pay for their share (a kind with no cases in the run shows 0).
        "new features/CPU-min, fresh draws": per_minute(guided, "fresh"),
        "  steered draws": per_minute(guided, "steered"),
        "  mutants": per_minute(guided, "mutant"),
        "confirmed findings": stats["findings"]["confirmed"],
        "wall seconds": stats["wall_seconds"],
    })
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of fuzzing per campaign (default 300)")
    parser.add_argument("--jobs", type=int, default=2, help="workers per campaign (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lane", default="inductor-cpp")
    parser.add_argument("--guidance", type=float, default=GUIDED_SHARE,
                        help=f"the guided run's share, above 0 and at most 1 (default {GUIDED_SHARE})")
    parser.add_argument("--no-confirm", action="store_true", help="count candidates without fresh-process runs")
    parser.add_argument("--ceiling", type=float, default=0.0, metavar="K",
                        help="also run guidance off for K times the budget, as a yardstick (default: not run)")
    args = parser.parse_args()
    if not 0 < args.guidance <= 1:
        parser.error("--guidance must be above 0 and at most 1: the guided run is compared with one at 0")
    if args.ceiling and args.ceiling <= 1:
        parser.error("--ceiling must be more than 1 (times the budget)")
    print(f"symfuzz features: lane {args.lane}, seed {args.seed}, {args.jobs} workers, {args.budget:.0f}s each; "
          f"guidance off, then on ({args.guidance})"
          + (f", then off for {args.ceiling:g}x the budget" if args.ceiling else ""), file=sys.stderr, flush=True)
    columns = {"off": rows(measure(0.0, args.budget, args)), "on": rows(measure(args.guidance, args.budget, args))}
    if args.ceiling:
        columns[f"off, {args.ceiling:g}x"] = rows(measure(0.0, args.budget * args.ceiling, args))
    off, on = columns["off"], columns["on"]
    width = max(len(k) for column in columns.values() for k in column)
    print(f"{'':{width}}" + "".join(f"  {name:>10}" for name in columns))
    for key in dict.fromkeys(k for column in columns.values() for k in column):
        values = [column.get(key, 0) for column in columns.values()]
        fmt = (lambda v: f"{v:10.2f}") if any(isinstance(v, float) for v in values) else (lambda v: f"{v:10d}")
        print(f"{key:{width}}" + "".join(f"  {fmt(v)}" for v in values))
    rate = (on["checked calls/CPU-min"] / off["checked calls/CPU-min"] if off["checked calls/CPU-min"]
            else float("nan"))
    print(f"distinct features, on / off: {_ratios(on, off)}; checked calls per CPU-minute, on / off: {rate:.2f}x")
    if args.ceiling:
        print(f"distinct features, off at {args.ceiling:g}x the budget / off: {_ratios(columns[f'off, {args.ceiling:g}x'], off)}")
    return 0


def _ratios(a: dict, b: dict) -> str:
    """Distinct features of ``a`` over ``b``, in all and in the steering families."""
    def ratio(key):
        return a[key] / b[key] if b[key] else float("nan")
    return f"{ratio('distinct features'):.2f}x (steering families: {ratio('distinct features, steering families'):.2f}x)"


if __name__ == "__main__":
    sys.exit(main())
