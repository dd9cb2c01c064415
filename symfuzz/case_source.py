"""Which case a worker runs next, and the case corpus a campaign replays and grows.

Stored corpus cases come first (this shard's share of them), then generated cases in
index order (``settings.shard_indices``). A finished case that reached something no
earlier case of the run did (an op, a guard form, a kind of call that recompiled, a
compiler feature: ``symfuzz.coverage``) joins the corpus, and so does a confirmed
finding's case.

Guidance: such a case, if what it reached first is of a steering family (``STEERING_FAMILIES``),
also joins the run's pool of parents. A share of the generated cases (``--guidance``) are
guided: some of them mutants of a pool case, its recorded Hypothesis choices replayed with a
small edit (``fuzz/mutate.py``), so a case that reached a rare compiler path is explored
around; the rest (all of them while the pool is empty) draws steered toward the ops the run's
finished cases used least (``fuzz/steer.py``), so a short run does not spend its op
statements on matmul and add again and again. How many are mutants follows what each kind
reached (``GuideYield``): the new features per second each kind's finished cases reached,
so the kind that finds more new ground gets more of the guided cases, and neither starves.
Which parent is drawn depends on its weight *now* (``Parent.weight``):
how rare its features are among the cases counted so far (a feature every tenth case
reaches counts a tenth of one only it reached: FairFuzz's rare-branch targeting), how
often its mutants reached something new against how often it was mutated (AFLFast's
power schedule: an exhausted parent fades), and how fast it ran. Whether case i is
guided follows from (seed, i), and so do the random draws that pick its kind and parent; but
the mutant share (``GuideYield``), the weights and the op counts a steered draw leans by hold
what earlier cases reached and the seconds they took, so whether case i is a mutant, and of
which parent, can differ between two runs of one seed
(with several workers, also by the order cases finished in). What reproduces is the case
itself: a mutant or a steered draw is a pure function of its recorded choices (the worker
records them in ``case.origin``), so its findings replay from their JSON alone like any other.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from symfuzz.corpus.case_corpus import CaseCorpus
from symfuzz.corpus.finding import Finding, environment
from symfuzz.fuzz.model_case import is_model_case
from symfuzz.coverage import family_of, feature_keys, guide_kind
from symfuzz.messages import CORPUS_PREFIX, CaseResult, is_corpus_index
from symfuzz.progress import Progress
from symfuzz.settings import CampaignConfig, shard_indices
from symfuzz.stats import Stats


# Of the guided cases, the share that are mutants of a pool parent before any guided case finished
# (the rest are steered draws), and the bounds the share moves in after (GuideYield).
MUTANT_SHARE = 0.3
MUTANT_SHARE_BOUNDS = (0.1, 0.7)
# What each kind of guided case counts as having reached before any finished: MUTANT_SHARE's split
# of this many new features per this many seconds, so the first few cases do not swing the share.
PRIOR_FEATURES, PRIOR_SECONDS = 10.0, 20.0
# Each finished guided case first scales its kind's totals by this: the rates are recent ones.
# Mutants only start once some case reached something new, when new ground is already scarcer
# than at the start, where steered draws' first cases reaped the easy features; cumulative rates
# would hold that early harvest against mutants for the whole run.
YIELD_MEMORY = 0.9
# A parent's rarity is capped at this many features only it reached (Parent.weight).
MAX_PARENT_WEIGHT = 8
# Families whose new features make a parent. Nearly every fresh case reaches a guard text or a
# Dynamo guard kind no earlier one did (measured: 45 of 47 cases in a 4-minute campaign), so
# those alone say nothing rare; a new index form, specialization, unbacked symbol, AOT
# mutation, recompile class, assert or lowering does.
STEERING_FAMILIES = ("index", "specialize", "unbacked", "aot", "recompile", "assert", "lowering")


@dataclass
class Parent:
    name: str  # a generated case's index, or the stored corpus case's name
    choices: list  # its Hypothesis choice sequence (case.origin["choices"])
    features: tuple  # the steering features it reached ("family:feature")
    seconds: float  # what it took to run
    mutated: int = 0  # its mutants assigned so far
    fruitful: int = 0  # of those, the ones that reached a feature no earlier case had

    def weight(self, reached) -> float:
        """Its share of the draw. ``reached``: cases per feature so far (``Coverage.cases``).

        Rarity: each feature counts one over the cases that reached it (one only this
        parent reached counts 1), capped. Energy: the square root of (1 + fruitful mutants)
        over (1 + mutants), at most 1: a parent whose every mutant reached something new
        keeps its share, one whose mutants find nothing fades as one over the square root
        of their number. Per second it took, from one (a fast case is explored around more
        cheaply: AFL's favouring of fast inputs)."""
        rarity = min(sum(1.0 / max(reached.get(f, 0), 1) for f in self.features), MAX_PARENT_WEIGHT)
        energy = ((1 + self.fruitful) / (1 + self.mutated)) ** 0.5
        return max(rarity, 1.0 / MAX_PARENT_WEIGHT) * energy / max(self.seconds, 1.0)


@dataclass
class GuideYield:
    """New features per second that each kind of guided case reached lately (a multi-armed
    bandit's rates, each case weighing ``YIELD_MEMORY`` times the one after it: MOpt-AFL
    schedules its mutation operators so). Mutants pay off where fresh ground is
    scarce, steered draws where it is not: measured here, a 200 s campaign's mutants reached a
    third as many new features per second as steered draws."""

    features: dict
    seconds: dict

    @classmethod
    def prior(cls) -> "GuideYield":
        share = {"mutant": MUTANT_SHARE, "steered": 1.0 - MUTANT_SHARE}
        return cls({k: PRIOR_FEATURES * s for k, s in share.items()}, {k: PRIOR_SECONDS * 0.5 for k in share})

    def count(self, kind: str, new: int, seconds: float) -> None:
        self.features[kind] = self.features[kind] * YIELD_MEMORY + new
        self.seconds[kind] = self.seconds[kind] * YIELD_MEMORY + max(seconds, 0.0)

    def mutant_share(self) -> float:
        rate = {k: self.features[k] / max(self.seconds[k], 1e-9) for k in self.features}
        share = rate["mutant"] / max(rate["mutant"] + rate["steered"], 1e-9)
        low, high = MUTANT_SHARE_BOUNDS
        return min(max(share, low), high)


def _steering(keys) -> tuple:
    """Of ``keys`` ("family:feature"), those of a steering family, sorted."""
    return tuple(sorted(k for k in keys if family_of(k) in STEERING_FAMILIES))


class CaseSource:
    def __init__(self, config: CampaignConfig, stats: Stats, progress: Progress):
        self.config = config
        self.stats = stats
        self.progress = progress
        self.indices = shard_indices(config.shard, config.max_cases)
        self.next_index: Optional[int] = next(self.indices, None)
        self.corpus = CaseCorpus(config.corpus) if config.corpus else None
        self.reached = {"op": set(), "guards": set(), "recompile": set()}  # what earlier cases reached
        self.pool: list[Parent] = []  # cases that reached something new: guidance mutates them
        self.assigned_mutants: dict[int, Parent] = {}  # generated cases assigned as mutants, not yet finished
        self.mutants = 0  # generated cases assigned as mutants
        self.steered = 0  # generated cases assigned as steered draws
        # Ops finished steered draws answered with, placed or not: an op whose statement is never
        # valid would otherwise keep a use count of 0 and draw every steered answer to itself.
        self.steer_tries: Counter = Counter()
        self.yields = GuideYield.prior()  # what each kind of guided case reached per second
        self.replay_queue = self._corpus_cases()
        self.stats.replay["stored"] = len(self.replay_queue)
        self.replayed_candidates: set[str] = set()  # signatures that corpus replays failed with

    def resume(self) -> None:
        """Skip what the run in --out finished: its case indices and its corpus replays."""
        done = set(self.stats.indices)
        self.indices = (i for i in shard_indices(self.config.shard, self.config.max_cases) if i not in done)
        self.next_index = next(self.indices, None)
        self.replay_queue = [c for c in self.replay_queue if c.name not in set(self.stats.replayed)]

    @property
    def exhausted(self) -> bool:
        return not self.replay_queue and self.next_index is None

    def _corpus_cases(self) -> list:
        """This shard's share of the stored corpus cases, replayed before any generated case.

        A case's share follows from its digest, not its place in the list: shard jobs that
        restored slightly different corpora still split the cases they share. What every
        stored case reached counts as reached, so that a shard does not store again what
        another shard's share holds."""
        if self.corpus is None:
            return []
        k, n = self.config.shard or (1, 1)
        # A stored file that is not a case this symfuzz can parse is skipped, left as it is,
        # and counted (stats.json replay.unreadable); it never reaches a worker.
        stored = [c for c in self.corpus.replayable() if c.lane in ("", self.config.lane.name)]
        self.stats.replay["unreadable"] = len(self.corpus.unreadable)
        for case in stored:
            for why in case.why:
                kind, _, what = why.partition(":")
                if kind in self.reached:
                    self.reached[kind].add(what)
            reached = set(case.features) | {w.removeprefix("feature:") for w in case.why if w.startswith("feature:")}
            self._add_parent(f"corpus:{case.name}", case.case, _steering(reached), 1.0)
        return [c for c in stored if int(c.name[:8], 16) % n == k - 1]

    def assign_next(self, worker) -> None:
        """Corpus replays first, then generated cases in index order."""
        if self.replay_queue:
            stored = self.replay_queue[0]
            if worker.assign(CORPUS_PREFIX + stored.name, stored.case):
                self.replay_queue.pop(0)
                if not self.replay_queue:
                    self.progress.note(f"replayed the corpus ({len(list(self.corpus))} cases stored); generating")
            return
        if self.next_index is not None and worker.assign(self.next_index, guide=self.guide_for(self.next_index)):
            self.next_index = next(self.indices, None)

    def guide_for(self, index: int) -> Optional[dict]:
        """How generated case ``index`` is guided (``messages.Assign``), or None: a fresh draw.

        A ``--guidance`` share of the cases are guided: of those, ``GuideYield.mutant_share``
        are mutants of a pool parent (while the pool has one), the rest draws steered toward the
        ops the run's finished cases used least (``fuzz/steer.py``; an op counts its uses and the
        times a steered draw answered with it, so one that is never valid is not favoured forever)."""
        share = self.config.guidance
        if share <= 0:
            return None
        if index in self.assigned_mutants:  # asked again (the worker it went to was gone): the same parent
            parent = self.assigned_mutants[index]
            return {"parent": parent.name, "choices": parent.choices}
        rng = random.Random(f"symfuzz-guidance:{self.config.seed}:{index}")
        if rng.random() >= share:
            return None
        if not self.pool or rng.random() >= self.yields.mutant_share():
            self.steered += 1
            counts = Counter(self.stats.ops)
            counts.update(self.steer_tries)
            return {"op_counts": dict(counts)}
        reached = self.stats.coverage.cases
        parent = rng.choices(self.pool, weights=[p.weight(reached) for p in self.pool])[0]
        parent.mutated += 1
        self.mutants += 1
        self.assigned_mutants[index] = parent
        return {"parent": parent.name, "choices": parent.choices}

    def _add_parent(self, name: str, case: Optional[dict], features: tuple, seconds: float) -> None:
        choices = ((case or {}).get("origin") or {}).get("choices")
        if self.config.guidance > 0 and choices and features:
            self.pool.append(Parent(name, choices, features, seconds))

    def _credit_parent(self, index, case: dict, new_features) -> None:
        """Case ``index`` finished: if this run assigned it as a mutant, its parent's energy
        counts whether it reached a steering feature first (a new guard text alone, which
        nearly every case reaches, is no fruit). A mutant whose edits all failed (a fresh
        draw stood in: its ``edit`` is None) counts for nothing."""
        parent = self.assigned_mutants.pop(index, None) if isinstance(index, int) else None
        if parent is None:
            return
        if (((case.get("origin") or {}).get("mutant") or {}).get("edit")) is None:
            parent.mutated -= 1  # no edit took: the case was no mutant of it
            return
        parent.fruitful += bool(_steering(new_features))

    def add_to_corpus(self, case: Optional[dict], index, result: CaseResult, new_features=()) -> None:
        """Keep a finished case that reached something no earlier case of this run did
        (``new_features``: the compiler features it reached first, ``Stats.new_features``)."""
        if not case or is_model_case(case):
            return  # a model case is no program: no mutant, no op counts; the case corpus holds programs
        self._credit_parent(index, case, new_features)
        kind = guide_kind(case)
        if isinstance(index, int) and kind != "fresh":
            self.yields.count(kind, len(new_features), result.total_seconds)
        if isinstance(index, int) and kind == "steered":
            self.steer_tries.update(case["origin"]["steered"].get("ops") or ())
        if not is_corpus_index(index) and _steering(new_features):  # it reached a steering feature first
            self._add_parent(str(index), case, _steering(set(feature_keys(result.reached)) | set(new_features)),
                             result.total_seconds)
        if self.corpus is None:
            return
        why = []
        for op in sorted(set(result.ops or {})):
            if op not in self.reached["op"]:
                self.reached["op"].add(op)
                why.append(f"op:{op}")
        for shape in result.guard_shapes or []:
            if shape not in self.reached["guards"]:
                self.reached["guards"].add(shape)
                why.append(f"guards:{shape}")
        graphs, planned = result.graphs or [], result.planned or []
        purposes = ["drawn"] * (len(graphs) - len(planned)) + list(planned)
        for purpose, count in list(zip(purposes, graphs))[1:]:
            # which kind of call recompiled: a drawn call, or a guard-directed one (outside a guard...)
            if count and count > 0 and purpose not in self.reached["recompile"]:
                self.reached["recompile"].add(purpose)
                why.append(f"recompile:{purpose}")
        why += [f"feature:{key}" for key in new_features]
        if why and not is_corpus_index(index):
            self.corpus.add(case, self.config.lane.name, why, environment().get("torch"), features=result.reached)

    def finding_to_corpus(self, finding: Finding) -> None:
        """A confirmed finding's case joins the corpus; one found by a replayed case is noted
        (its case is in the corpus already)."""
        sig = finding.signature
        if sig in self.replayed_candidates:
            if sig not in self.stats.replay["signatures"]:
                self.stats.replay["signatures"].append(sig)
        elif self.corpus is not None and finding.case and not is_model_case(finding.case):
            self.corpus.add(finding.case, self.config.lane.name, [f"finding:{sig}"], environment().get("torch"),
                            features=finding.features)
