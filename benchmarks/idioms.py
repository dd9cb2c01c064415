#!/usr/bin/env python
"""The generator's idioms before and after: how often a campaign reaches the compiler's rare paths.

For a fixed seed, lane, budget and number of workers, runs one campaign with the
generator weighted as it was before the rare-path idioms (``BEFORE``: no strided-reshape
or buffer-slice motif, 30% of module programs training steps) and one with today's
defaults, one after the other in this process, and prints for each: the cases that
reached each rare compiler path (``symfuzz.coverage.RARE_CLASSES``), as a share of the
cases and per CPU-minute, distinct features (total and per family), programs and checked
calls per CPU-minute. Confirmation is off: what is measured is what the cases reach.

    python benchmarks/idioms.py --budget 240 --jobs 2
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
from symfuzz.coverage import RARE_CLASSES  # noqa: E402
from symfuzz.fuzz_run import run_fuzz  # noqa: E402
from symfuzz.oracles.lanes.lane import get_lane  # noqa: E402
from symfuzz.settings import CampaignConfig  # noqa: E402

# GenConfig fields as they were before the rare-path idioms (fuzz/motifs.py strided_reshape and
# buffer_slice; fuzz/generate.py train_step_rate).
BEFORE = {"motif_weights": {"strided_reshape": 0, "buffer_slice": 0}, "train_step_rate": 0.3}


def measure(gen_config: dict, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="symfuzz-idioms-") as tmp:
        config = CampaignConfig(out=Path(tmp), lane=get_lane(args.lane), budget=args.budget, seed=args.seed,
                                jobs=args.jobs, confirm=False, quiet=True, gen_config=gen_config)
        with contextlib.redirect_stdout(io.StringIO()):  # the app's summary: the table below says it
            outcome = run_fuzz(config)
        if outcome.stats is None:
            raise CampaignError(f"the campaign with {gen_config} could not test anything (exit {outcome.code})")
        return outcome.stats


def rows(stats: dict) -> dict:
    features = stats.get("features") or {}
    cases, classes = features.get("cases") or 0, features.get("classes") or {}
    cpu = stats["throughput"]["cpu_minutes"] or float("nan")
    out: dict = {"cases": cases}
    for name in RARE_CLASSES:
        n = classes.get(name, 0)
        out[name] = f"{n} ({n / cases:.0%}, {n / cpu:.1f}/CPU-min)" if cases else "0"
    out["distinct features"] = features.get("distinct", 0)
    out.update({f"  {family}": n for family, n in sorted((features.get("by_family") or {}).items())})
    out["programs/CPU-min"] = f"{stats['programs']['generated'] / cpu:.2f}"
    out["checked calls/CPU-min"] = f"{stats['throughput']['checked_calls_per_cpu_minute']:.1f}"
    out["CPU minutes"] = f"{cpu:.2f}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=240.0, help="seconds of fuzzing per campaign (default 240)")
    parser.add_argument("--jobs", type=int, default=2, help="workers per campaign (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lane", default="inductor-cpp")
    args = parser.parse_args()
    print(f"symfuzz idioms: lane {args.lane}, seed {args.seed}, {args.jobs} workers, {args.budget:.0f}s each; "
          f"the weights before ({BEFORE}), then today's", file=sys.stderr, flush=True)
    before, after = rows(measure(BEFORE, args)), rows(measure({}, args))
    width = max(len(k) for k in (*before, *after))
    cell = max(len(str(v)) for v in (*before.values(), *after.values()))
    print(f"{'':{width}}  {'before':>{cell}}  {'after':>{cell}}")
    for key in dict.fromkeys([*before, *after]):
        print(f"{key:{width}}  {str(before.get(key, '')):>{cell}}  {str(after.get(key, '')):>{cell}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
