"""A campaign's settings: how it runs (``CampaignConfig``), and the record that fixes what it
draws and checks (``RunSettings``).

``RunSettings`` is one typed record: the lane, the seed, the generator's settings, guard
planning, the calls reused per compile, the shard and the per-case limits. It is serialized
once, the same JSON everywhere: a worker gets it as its one argument (``symfuzz.worker``),
stats.json shows it under "settings", and ``--resume`` compares the part that fixes case i
(``RunSettings.identity``) with the run it continues (``symfuzz.resume``).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from symfuzz.oracles.lanes.lane import Lane

# The shortest --case-timeout accepted: one case compiles its program once per
# recompile (a first compile alone takes ~20 s here), so a shorter limit kills
# programs that are merely slow. A timeout is a finding only once it also runs past
# a longer limit in confirmation (corpus/replay.py: hang_limit).
CASE_TIMEOUT_FLOOR = 30.0

CANARY_TIMEOUT = 120.0

# The case timeout of campaigns whose source includes real models (--source models): a model case
# compiles a 1-2 layer transformer several times (its first sizes, a batch of 1, a decode step's
# cache, a training step's backward), each 10-30 s with Inductor on 2 cores; 3 minutes cut such
# cases as "hangs" that confirmation then found merely slow.
MODEL_CASE_TIMEOUT = 600.0

# More calls per symbolic compile, at new sizes inside its guards, and per call that compiled, at
# its sizes with new tensor values (CampaignConfig.reuse_calls): a cached graph runs them without
# compiling, so each is a check at the cost of two small runs (eager and compiled) while a
# compile costs a second or more on inductor-cpp.
REUSE_CALLS = 3

# The share of generated cases that are guided (symfuzz.case_source): mutants of cases that reached
# a new compiler feature, or draws steered toward the ops the run used least (fuzz/steer.py); the
# rest are fresh draws, which keep finding new ground of their own. Off by default until it
# reaches more than fresh draws do in a CI-sized budget: in 300 s on 2 cores, with steered draws
# leaning to size-level Python and motifs too and the mutant share following recent yields, 1.02x
# and 1.07x the distinct features of fresh draws (two runs) at 1.18x and 1.27x the checked calls
# per CPU-minute; most features (444 of 731) are guard texts only one case reached. Before, with
# steered draws and a fixed 30% of mutants, 0.98x the distinct features of fresh draws in 200 s
# (steered draws reached new features as fast as fresh ones, mutants a third as fast) at 1.55x
# the checked calls per CPU-minute. Earlier, measured with
# benchmarks/features.py (5 minutes, 2 workers): 0.74x and 1.07x the distinct features of fresh
# draws with a parent weighted by the features it reached first; 0.85x with rarity and energy
# (case_source.Parent.weight), where the rare families came out ahead (264 against 247) but fresh
# draws kept reaching new guard texts (343 against 239), at 2.1x the checked calls per CPU-minute.
GUIDANCE = 0.0

# Where generated cases come from: "random" programs (fuzz/generate.py), "models" (real
# architectures from transformers, fuzz/model_draw.py), or both, each case i drawing which from
# (seed, i) with MODEL_SHARE the share of model cases.
SOURCES = ("random", "models")
MODEL_SHARE = 0.5


def parse_source(text: str) -> str:
    """``--source``'s value in its one spelling ("random", "models" or "random,models"), or
    ValueError saying what is accepted."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    unknown = [p for p in parts if p not in SOURCES]
    if not parts or unknown:
        raise ValueError(f"unknown source {', '.join(unknown) or repr(text)}: use random, models or random,models")
    return ",".join(s for s in SOURCES if s in parts)


def source_of(source: str, seed: int, index: int) -> str:
    """Which source generated case ``index`` comes from: a pure function of the run's source
    setting, the seed and the index."""
    kinds = source.split(",")
    if len(kinds) == 1:
        return kinds[0]
    return "models" if random.Random(f"symfuzz-source:{seed}:{index}").random() < MODEL_SHARE else "random"


@dataclass(frozen=True)
class RunSettings:
    """What decides a campaign's cases and how each is checked, whoever runs it."""

    lane: str  # the lane's name (oracles.lanes.get_lane)
    seed: int
    gen_config: dict = field(default_factory=dict)  # fuzz.generate.GenConfig's fields, as given
    guard_planning: bool = True  # guard-directed calls after the drawn ones (oracles/lanes/guards.py)
    reuse_calls: int = REUSE_CALLS  # more calls per symbolic compile, inside its guards
    guidance: float = GUIDANCE  # the share of generated cases that mutate a case that reached something new
    shard: Optional[tuple[int, int]] = None
    max_cases: Optional[int] = None
    case_timeout: float = 180.0
    memory_limit_mb: int = 6144
    confirm: bool = True
    source: str = "random"  # where generated cases come from (SOURCES, parse_source)
    models: tuple = ()  # the model source's architectures (empty: all of fuzz.model_case.ARCHS)

    # The keys that fix case i and the checks made on it: a resumed run must match them.
    IDENTITY = ("seed", "lane", "shard", "gen_config", "guard_planning", "reuse_calls", "guidance", "confirm",
                "source", "models")

    def to_json(self) -> dict:
        data = asdict(self)
        data["shard"] = list(self.shard) if self.shard else None
        data["models"] = list(self.models)
        # sorted and plain: the same settings always give the same text
        data["gen_config"] = json.loads(json.dumps(self.gen_config, sort_keys=True))
        return data

    @classmethod
    def from_json(cls, data: dict) -> "RunSettings":
        data = dict(data)
        if data.get("shard") is not None:
            data["shard"] = tuple(data["shard"])
        data["models"] = tuple(data.get("models") or ())
        return cls(**data)

    def identity(self) -> dict:
        data = self.to_json()
        return {key: data[key] for key in self.IDENTITY}


@dataclass(frozen=True)
class CampaignConfig:
    out: Path
    lane: Lane
    budget: float = 120.0  # seconds of fuzzing, from when the canary passes (confirmation may run past it)
    seed: int = 0
    jobs: int = 2
    case_timeout: float = 180.0  # one case, compile included (a first compile takes ~20 s)
    # The canary: a fresh worker's first compile, which pays for imports and a cold C++
    # toolchain (20-60 s on a busy 2-core machine). None: the larger of case_timeout and
    # CANARY_TIMEOUT, so that a short --case-timeout does not fail a healthy canary.
    canary_timeout: Optional[float] = None
    memory_limit_mb: int = 6144  # per worker, resident
    confirm: bool = True
    confirm_timeout: float = 300.0
    confirm_grace: float = 240.0  # extra time after the budget for pending confirmations
    max_cases: Optional[int] = None  # stop after this many cases (tests, benchmarks)
    max_findings: Optional[int] = None  # stop once this many findings are confirmed
    gen_config: dict = field(default_factory=dict)
    quiet: bool = False
    # Seconds to minify each confirmed finding after fuzzing (None: don't);
    # the repro goes to findings/<sig>/minified/repro.py.
    minify_budget: Optional[float] = None
    # (K, N): run only shard K of N: case indices i with i % N == K - 1 (and the
    # corpus cases with that position), so N jobs on one seed run disjoint cases.
    shard: Optional[tuple[int, int]] = None
    corpus: Optional[Path] = None  # replay this case corpus first, and append to it
    executor: str = "local"  # "local" worker processes, or "ray" (symfuzz.ray_executor)
    ray_address: Optional[str] = None
    # Continue the campaign already in ``out`` (same seed, the next case indices, stats
    # carried over); without it a folder holding an earlier run is refused.
    resume: bool = False
    # With guard planning, this many more calls per symbolic compile of the program, at new
    # sizes inside that compile's guards, after every other call (oracles/lanes/execute.py);
    # 0: none (the behaviour before they existed).
    reuse_calls: int = REUSE_CALLS
    # Worker settings chosen for throughput (worker_slot.THROUGHPUT_ENV), and workers that
    # warm up while the canary runs; False: neither (the behaviour before them).
    throughput_settings: bool = True
    # Guard-directed calls after the drawn ones (--no-guard-planning: off).
    guard_planning: bool = True
    # The share of generated cases that are guided: mutants of cases that reached a new feature, or
    # draws steered toward the least-used ops (--guidance).
    guidance: float = GUIDANCE
    # Where generated cases come from: "random", "models" or "random,models" (--source), and the
    # model source's architectures (--models; empty: all).
    source: str = "random"
    models: tuple = ()

    @property
    def settings(self) -> RunSettings:
        """The record that fixes this campaign's cases and checks (sent to workers, in stats.json)."""
        return RunSettings(lane=self.lane.name, seed=self.seed, gen_config=dict(self.gen_config),
                           guard_planning=self.guard_planning, reuse_calls=self.reuse_calls,
                           guidance=self.guidance, shard=self.shard,
                           max_cases=self.max_cases, case_timeout=self.case_timeout,
                           memory_limit_mb=self.memory_limit_mb, confirm=self.confirm, source=self.source,
                           models=tuple(self.models))


def shard_indices(shard: Optional[tuple[int, int]], max_cases: Optional[int]):
    """The case indices a (sharded) run generates, in order: case i is a pure
    function of (seed, i), so shards of one seed are disjoint and together are
    the unsharded run."""
    k, n = shard or (1, 1)
    index = k - 1
    while max_cases is None or index < max_cases:
        yield index
        index += n
