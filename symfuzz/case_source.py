"""Which case a worker runs next, and the case corpus a campaign replays and grows.

Stored corpus cases come first (this shard's share of them), then generated cases in
index order (``settings.shard_indices``: case i is a pure function of the seed and i).
A finished case that reached something no earlier case of the run did (an op, a guard
form, a kind of call that recompiled) joins the corpus, and so does a confirmed
finding's case.
"""

from __future__ import annotations

from typing import Optional

from symfuzz.corpus.case_corpus import CaseCorpus
from symfuzz.corpus.finding import Finding, environment
from symfuzz.messages import CORPUS_PREFIX, CaseResult, is_corpus_index
from symfuzz.progress import Progress
from symfuzz.settings import CampaignConfig, shard_indices
from symfuzz.stats import Stats


class CaseSource:
    def __init__(self, config: CampaignConfig, stats: Stats, progress: Progress):
        self.config = config
        self.stats = stats
        self.progress = progress
        self.indices = shard_indices(config.shard, config.max_cases)
        self.next_index: Optional[int] = next(self.indices, None)
        self.corpus = CaseCorpus(config.corpus) if config.corpus else None
        self.reached = {"op": set(), "guards": set(), "recompile": set()}  # what earlier cases reached
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
        if self.next_index is not None and worker.assign(self.next_index):
            self.next_index = next(self.indices, None)

    def add_to_corpus(self, case: Optional[dict], index, result: CaseResult) -> None:
        """Keep a finished case that reached something no earlier case of this run did."""
        if self.corpus is None or not case:
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
        if why and not is_corpus_index(index):
            self.corpus.add(case, self.config.lane.name, why, environment().get("torch"))

    def finding_to_corpus(self, finding: Finding) -> None:
        """A confirmed finding's case joins the corpus; one found by a replayed case is noted
        (its case is in the corpus already)."""
        sig = finding.signature
        if sig in self.replayed_candidates:
            if sig not in self.stats.replay["signatures"]:
                self.stats.replay["signatures"].append(sig)
        elif self.corpus is not None and finding.case:
            self.corpus.add(finding.case, self.config.lane.name, [f"finding:{sig}"], environment().get("torch"))
