#!/usr/bin/env python
"""The CI gate's costs, measured side by side in one run.

1. Sharding: one unsharded run of ``--max-cases N`` against shards 1/2 and 2/2 of
   the same seed run one after the other, plus ``symfuzz merge``: wall time and
   checked calls of each (the shards pay start-up and the canary twice; on CI they
   run side by side on two machines, so their wall time there is the longer shard's).
2. Corpus replay: the time from the start of a run to the first verdict on a
   replayed corpus case (the time a fixed bug that came back takes to be seen
   again), beside the time to the first verdict on a generated case of a run
   without a corpus.

Each run is a real ``symfuzz fuzz`` process (fresh-process confirmation on, as in CI).

    python benchmarks/ci.py                       # eager lane, 8 cases
    python benchmarks/ci.py --lane inductor-cpp --max-cases 12
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def symfuzz(*args) -> tuple[float, int]:
    """(wall seconds, exit code) of one symfuzz command."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "symfuzz.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0"))
    if done.returncode not in (0, 1):
        sys.exit(f"symfuzz {' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return time.monotonic() - start, done.returncode


def stats(out: Path) -> dict:
    return json.loads((out / "stats.json").read_text())


def first_verdict_seconds(out: Path) -> float | None:
    """Seconds from the run's start to its first finished case, from the timeline."""
    for line in (out / "timeline.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["programs"] > 0:
            return entry["t"]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lane", default="eager")
    parser.add_argument("--max-cases", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    def fuzz(max_cases: int) -> list:
        return ["fuzz", "--lane", args.lane, "--seed", args.seed, "--jobs", args.jobs, "--max-cases", max_cases,
                "--budget", "1h", "--quiet"]

    common = fuzz(args.max_cases)

    with tempfile.TemporaryDirectory(prefix="symfuzz-bench-ci-") as tmp:
        tmp = Path(tmp)
        whole_s, _ = symfuzz(*common, "--out", tmp / "whole", "--corpus", tmp / "corpus")
        shard_s = [symfuzz(*common, "--shard", f"{k}/2", "--out", tmp / f"shard-{k}")[0] for k in (1, 2)]
        merge_s, _ = symfuzz("merge", tmp / "shard-1", tmp / "shard-2", "--out", tmp / "merged")
        whole, merged = stats(tmp / "whole"), stats(tmp / "merged")

        # The corpus the first run kept, replayed first by a run of one generated case.
        replay_s, _ = symfuzz(*fuzz(1), "--out", tmp / "replayed", "--corpus", tmp / "corpus")
        replay = stats(tmp / "replayed")["replay"]
        no_corpus_first = first_verdict_seconds(tmp / "whole")

    print(f"lane {args.lane}, seed {args.seed}, --max-cases {args.max_cases}, --jobs {args.jobs}")
    print()
    print(f"{'':38}{'unsharded':>12}{'2 shards + merge':>20}{'ratio':>8}")
    sharded_s = sum(shard_s) + merge_s
    print(f"{'wall seconds (one after the other)':38}{whole_s:12.1f}{sharded_s:20.1f}{sharded_s / whole_s:8.2f}")
    print(f"{'  of which: shard 1, shard 2, merge':38}{'':12}{f'{shard_s[0]:.1f}, {shard_s[1]:.1f}, {merge_s:.1f}':>20}")
    print(f"{'wall seconds (shards side by side)':38}{whole_s:12.1f}{max(shard_s) + merge_s:20.1f}"
          f"{(max(shard_s) + merge_s) / whole_s:8.2f}")
    for label, path in (("programs", ("programs", "generated")), ("checked calls", ("calls", "checked"))):
        a, b = whole[path[0]][path[1]], merged[path[0]][path[1]]
        print(f"{label:38}{a:12d}{b:20d}{(b / a if a else float('nan')):8.2f}")
    same = whole["findings"]["signatures"] == merged["findings"]["signatures"]
    print(f"{'findings':38}{len(whole['findings']['signatures']):12d}{len(merged['findings']['signatures']):20d}"
          f"{'  same' if same else '  DIFFERENT'}")
    print()
    print(f"corpus replay: {replay['cases']} stored cases; first replayed verdict "
          f"{replay['first_verdict_seconds']}s after start, all replayed by {replay['seconds']}s "
          f"(run of {replay_s:.1f}s); first generated verdict without a corpus: {no_corpus_first}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
