"""What stats.json reports: a campaign's counts, times and what its cases reached.

``Stats`` adds up the workers' results (``symfuzz.messages.CaseResult``) and writes the
counted sections as ``symfuzz.stats_schema`` declares them; ``--resume`` carries its
counters over (``Stats.restore``).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Optional

from symfuzz.corpus.finding import environment
from symfuzz.coverage import Coverage, guide_kind
from symfuzz.messages import CORPUS_PREFIX, CaseResult
from symfuzz.oracles.verdict import Verdict
from symfuzz.report import throughput
from symfuzz.settings import CampaignConfig
from symfuzz.stats_schema import section as stats_section

MOTIF_PREFIX = "motif:"
# Per kind of generated case (fresh, steered, mutant): the new features its cases reached first,
# and the worker seconds they took, in the counts (so --resume carries them), under prefixes.
KIND_FEATURES_PREFIX, KIND_SECONDS_PREFIX = "kind-features:", "kind-seconds:"
RECOMPILE_PREFIX = "recompile-class:"
# Per architecture of the model source (stats.json "models"): cases, calls made and checked, graphs
# compiled, the model's own recompiles noted, findings confirmed, worker seconds (compiles are most
# of them: what an architecture costs a campaign); in the counts under this prefix.
MODEL_PREFIX = "model:"
MODEL_COUNTS = ("cases", "calls", "checked", "graphs", "recompiles", "notes", "candidates", "findings", "seconds")


def model_table(counts) -> dict:
    """stats.json's "models" section from the counts: architecture -> MODEL_COUNTS."""
    table: dict = {}
    for key, value in sorted(counts.items()):
        if key.startswith(MODEL_PREFIX):
            arch, _, what = key[len(MODEL_PREFIX):].rpartition(":")
            table.setdefault(arch, dict.fromkeys(MODEL_COUNTS, 0))[what] = round(value, 1) if isinstance(value, float) \
                else value
    return table


class Stats:
    """What stats.json reports."""

    def __init__(self, config: CampaignConfig):
        self.started = time.time()
        self.config = config
        self.counts = Counter()
        self.seconds = Counter()
        self.ops = Counter()
        self.graphs_per_call = Counter()
        self.planned = Counter()
        self.indices: list[int] = []  # generated case indices that finished (stats.json "indices")
        self.replay = {"cases": 0, "first_verdict_seconds": None, "seconds": None, "signatures": []}
        self.prior_wall = 0.0  # the wall time of the runs this one resumes
        self.prior_workers_wall = 0.0  # of that, the time their workers were up
        self.replayed: list[str] = []  # names of the corpus cases replayed (for --resume)
        self.coverage = Coverage()  # the compiler features the cases reached
        self.new_features: list[str] = []  # those the last counted case reached first

    def restore(self, state: dict) -> None:
        """Carry over the counters of the run this one resumes (symfuzz.resume)."""
        self.counts.update(state["counts"])
        self.seconds.update(state["seconds"])
        self.ops.update(state["ops"])
        self.graphs_per_call.update(state["graphs_per_call"])
        self.planned.update(state["planned"])
        self.indices = list(state["indices"])
        self.replay.update(state["replay"])
        self.replayed = list(state["replayed"])
        self.prior_wall = float(state["wall_seconds"])
        # (a state written before workers_wall_seconds was kept: its whole wall)
        self.prior_workers_wall = float(state.get("workers_wall_seconds", self.prior_wall))
        self.coverage.restore(state.get("features") or {})

    def add_result(self, index, result: CaseResult, verdicts: list[Verdict]) -> None:
        """Count one finished case; ``verdicts``: its failing verdicts, parsed."""
        c = self.counts
        c["programs_generated"] += 1
        self.count_index(index)
        self.new_features = []
        if result.internal_error is not None:
            c["internal_errors"] += 1
            return
        elapsed = self.prior_wall + time.time() - self.started
        self.new_features = self.coverage.add(result.reached, elapsed)
        kind = guide_kind(result.case)
        if isinstance(index, int):  # a generated case (a corpus replay is none of them, whatever it was stored as)
            c["mutant_cases"] += kind == "mutant"
            c["steered_cases"] += kind == "steered"
            c[{"mutant": "mutants_with_new", "steered": "steered_with_new", "fresh": "fresh_with_new"}[kind]] += \
                bool(self.new_features)
            c[KIND_FEATURES_PREFIX + kind] += len(self.new_features)
            c[KIND_SECONDS_PREFIX + kind] += round(result.total_seconds, 3)
        c["programs_valid"] += result.valid
        c["programs_compiled"] += result.compiled
        c["programs_called"] += result.calls > 0
        c["calls"] += result.calls
        c["calls_checked"] += result.checked
        c["recompiles"] += result.recompiles
        c["candidates"] += bool(verdicts)
        for name, value in result.seconds.items():
            self.seconds[name] += value
        self.ops.update(result.ops)
        for g in result.graphs:
            self.graphs_per_call[str(g)] += 1
        c["graphs_compiled"] += sum(g for g in result.graphs if g > 0)
        guards = result.guards or {}
        if guards.get("regions"):
            c["programs_with_guards"] += 1
            c["guard_regions"] += guards["regions"]
            c["guard_regions_covered"] += guards.get("covered", 0)
        c["over_guards"] += guards.get("over_guards", 0)
        c["unexplained_recompiles"] += guards.get("unexplained_recompiles", 0)
        c["recompiles_explained"] += guards.get("recompiles_explained", 0)
        c["recompiles_unexplained"] += guards.get("recompiles_unexplained", 0)
        features = result.features or {}
        c["gradient_calls_checked"] += features.get("gradient_calls", 0)
        c["programs_with_gradients"] += features.get("gradient_calls", 0) > 0
        c["programs_with_scalar_inputs"] += bool(features.get("scalar_inputs"))
        c["programs_with_modules"] += bool(features.get("module"))
        arch = features.get("architecture")
        if arch:
            for what, value in (("cases", 1), ("calls", result.calls), ("checked", result.checked),
                                ("graphs", sum(g for g in result.graphs if g > 0)), ("recompiles", result.recompiles),
                                ("notes", len(features.get("notes") or [])), ("candidates", bool(verdicts)),
                                ("seconds", round(sum((result.seconds or {}).values()), 1))):
                c[f"{MODEL_PREFIX}{arch}:{what}"] += value
        # Per-motif counts ride in the counts (so --resume carries them), under a prefix.
        c.update(MOTIF_PREFIX + str(m) for m in features.get("motifs") or [])
        for name, count in (guards.get("recompile_classes") or {}).items():
            c[RECOMPILE_PREFIX + str(name)] += count
        c["rejected_calls"] += result.rejected
        c["planned_reused"] += result.planned_reused
        c["reuse_more_reused"] += result.reuse_more_reused
        self.planned.update(result.planned)
        for verdict in verdicts:
            if verdict.symptom == "over-specialization":
                c["over_specializations"] += 1

    def count_finding(self, finding) -> None:
        """A confirmed finding: counted under its architecture, for a model case's."""
        arch = (finding.case or {}).get("arch") if (finding.case or {}).get("kind") == "model" else None
        if arch:
            self.counts[f"{MODEL_PREFIX}{arch}:findings"] += 1

    def count_index(self, index) -> None:
        """Record a finished case: a generated index, or a corpus replay ("corpus:NAME")."""
        if isinstance(index, int):
            self.indices.append(index)
        elif isinstance(index, str) and index.startswith(CORPUS_PREFIX):
            self.replayed.append(index[len(CORPUS_PREFIX):])
            self.replay["cases"] += 1
            elapsed = round(time.time() - self.started, 2)
            if self.replay["first_verdict_seconds"] is None:
                self.replay["first_verdict_seconds"] = elapsed
            if self.replay["cases"] >= self.replay.get("stored", 0):
                self.replay["seconds"] = elapsed

    def timeline_line(self, wall: float, confirmed: int, tracked: dict) -> dict:
        c = self.counts
        wall += self.prior_wall
        return {"t": round(wall, 2), "programs": c["programs_generated"], "valid": c["programs_valid"],
                "calls": c["calls"], "checked": c["calls_checked"], "findings": confirmed,
                "candidates": c["candidates"], "distinct_ops": len(self.ops), "features": len(self.coverage.cases),
                "guard_regions": c["guard_regions"],
                "guard_regions_covered": c["guard_regions_covered"],
                "seconds": {k: round(v, 2) for k, v in tracked.items()}}

    def workers_seconds(self, wall: float, workers_wall: Optional[float]) -> float:
        """Wall seconds the workers were up, this run's and the runs' it resumes: ``wall`` is
        this run's so far, ``workers_wall`` the part the workers were up (None: all of it)."""
        return self.prior_workers_wall + (wall if workers_wall is None else workers_wall)

    def to_json(self, wall: float, extra: dict, workers_wall: Optional[float] = None) -> dict:
        """stats.json's content. ``wall``: seconds since the run started; ``workers_wall``: of
        those, the seconds the workers were up, a mean over them (None while they still are). Confirmations a
        run waits for after its budget, and minifying, come after the workers closed: that
        wall time is no worker's, and counting it as theirs would show it as overhead."""
        c = self.counts
        workers_wall = self.workers_seconds(wall, workers_wall)
        wall += self.prior_wall
        generated = max(c["programs_generated"], 1)
        # Workers run while the workers are up; fresh-process confirmations run beside them
        # (and on after them), so their time adds to the total rather than hiding in it.
        worker_seconds = workers_wall * self.config.jobs + self.seconds["confirm"]
        tracked = {
            "generating": self.seconds["generate"],
            "compiling": self.seconds["compile"],
            "running": self.seconds["run"],
            # reading the guards and solving for calls with z3, and the rest of a case's
            # execution around its calls (loading the program, resetting Dynamo)
            "planning": self.seconds["execute_other"],
            "oracles": self.seconds["oracle"] + self.seconds["confirm"],
        }
        tracked["overhead"] = max(0.0, worker_seconds - sum(tracked.values()))
        shard = self.config.shard
        return {
            "seed": self.config.seed,
            "lane": self.config.lane.name,
            "jobs": self.config.jobs,
            "max_cases": self.config.max_cases,
            "shard": {"index": shard[0], "count": shard[1]} if shard else None,
            "executor": self.config.executor,
            "indices": sorted(self.indices),
            "replay": dict(self.replay),
            "budget_seconds": self.config.budget,
            "settings": self.config.settings.to_json(),
            "wall_seconds": round(wall, 2),
            "environment": environment(),
            "programs": stats_section("programs", c, {"validity_rate": round(c["programs_valid"] / generated, 4)}),
            "calls": stats_section("calls", c, {
                "checked_per_compile": round(c["calls_checked"] / c["graphs_compiled"], 3) if c["graphs_compiled"] else 0,
                "graphs_compiled_per_call": dict(self.graphs_per_call)}),
            "guards": stats_section("guards", c, {
                "coverage": round(c["guard_regions_covered"] / c["guard_regions"], 4) if c["guard_regions"] else 0,
                "planned_calls": dict(self.planned),
                "recompile_classes": {k[len(RECOMPILE_PREFIX):]: v for k, v in sorted(c.items())
                                      if k.startswith(RECOMPILE_PREFIX)}}),
            "motifs": {k[len(MOTIF_PREFIX):]: v for k, v in sorted(c.items()) if k.startswith(MOTIF_PREFIX)},
            "models": model_table(c),
            "features": self.coverage.to_json(),
            "guidance": stats_section("guidance", c, {
                "new_features_by_kind": {k[len(KIND_FEATURES_PREFIX):]: v for k, v in sorted(c.items())
                                         if k.startswith(KIND_FEATURES_PREFIX)},
                "seconds_by_kind": {k[len(KIND_SECONDS_PREFIX):]: round(v, 3) for k, v in sorted(c.items())
                                    if k.startswith(KIND_SECONDS_PREFIX)}}),
            "findings": extra,
            "time_seconds": {k: round(v, 2) for k, v in tracked.items()},
            "throughput": throughput(c["programs_generated"], c["calls_checked"], c["guard_regions_covered"],
                                     wall, worker_seconds),
            "time_share": {k: round(v / worker_seconds, 4) if worker_seconds else 0 for k, v in tracked.items()},
            # What the oracles' time went to: each oracle (with the fp64 references and rounding
            # explanations it asked for), triage on cheaper lanes, fresh recompiles of reused
            # graphs' failures, and fresh-process confirmation.
            "oracle_seconds": {**{k.split(":", 1)[1]: round(v, 2) for k, v in sorted(self.seconds.items())
                                  if k.startswith("oracle:")}, "confirmation": round(self.seconds["confirm"], 2)},
            "ops": dict(sorted(self.ops.items())),
            "distinct_ops": len(self.ops),
        }
