"""Confirming candidates: every failure seen in a worker is run again in a fresh process.

A candidate is logged at once (candidates.jsonl), then either kept as suspect (a lane
artefact, a flip rounding explains, a timeout under translation validation), or queued
for its fresh-process run (``corpus.replay.replay_finding``) on a thread of its own.
What the run says decides its store: findings/ (it fails again, the same way or under
another signature), flaky/ (it passes), suspect/ (a timeout that was slow, not hung).
Later cases with a signature in flight wait for its verdict and share it; a signature
gets ``MAX_CONFIRM_TRIES`` runs per campaign. What never got a verdict (the budget or
an interruption came first) goes to unconfirmed/, and ``--resume`` confirms it then.
"""

from __future__ import annotations

import json
import queue
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

from symfuzz.corpus.atomic import DiskFullError, append_line
from symfuzz.corpus.finding import Finding, read_finding
from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.corpus.replay import ScriptRunner, replay_finding
from symfuzz.corpus.store import FindingStore
from symfuzz.oracles.verdict import Verdict
from symfuzz.progress import Progress
from symfuzz.settings import CampaignConfig
from symfuzz.signals import signals_deferred
from symfuzz.stats import Stats


class Confirmation:
    """The candidate stores of one campaign, and the queue and thread that confirm candidates."""

    MAX_CONFIRM_TRIES = 3  # per signature and run; later cases with it are kept as flaky

    def __init__(self, config: CampaignConfig, stats: Stats, summary: Counter, progress: Progress,
                 on_confirmed: Callable[[Finding], None]):
        self.config = config
        self.out = Path(config.out)
        self.stats = stats
        self.summary = summary  # shared with the campaign: stats.json's "findings" counts
        self.progress = progress
        self.on_confirmed = on_confirmed  # a confirmed finding (its case joins the corpus)
        self.findings = FindingStore(self.out / "findings")
        self.flaky = FindingStore(self.out / "flaky")
        self.unconfirmed = FindingStore(self.out / "unconfirmed")
        self.suspect = FindingStore(self.out / "suspect")
        self.queue: queue.Queue = queue.Queue()
        self.runner = ScriptRunner()
        self.lock = threading.Lock()
        # Per-signature bookkeeping for this run (with --resume, ``resume`` fills it in
        # from the folder: earlier findings count as confirmed).
        self.confirmed: set[str] = set()
        self.confirming: set[str] = set()
        self.tries: Counter = Counter()
        self.twins: dict[str, list[Finding]] = {}
        self.slow_reasons: dict[str, str] = {}  # timeout signatures judged slow, not hung: why
        self.in_confirmation: Optional[Finding] = None
        self.resumed_unconfirmed: list[Finding] = []  # an earlier run's unconfirmed candidates, confirmed now
        self.disk_full: Optional[DiskFullError] = None  # a write the full disk stopped (the campaign stops)
        self.thread: Optional[threading.Thread] = None  # the confirming thread, once started

    @property
    def running(self) -> bool:
        """Is the confirming thread there to decide the candidates in confirmation?"""
        return self.thread is not None and self.thread.is_alive()

    def resume(self) -> None:
        """Continue the confirmations of the run in --out: its findings count as confirmed,
        and its unconfirmed candidates are confirmed now."""
        self.confirmed = set(stored_signatures(self.out / "findings"))
        if self.config.confirm:
            self._shelve_orphans()
            # Every readable unconfirmed candidate, and the later cases with its signature
            # (its duplicates.jsonl), is confirmed again; unconfirmed/ keeps them until this run
            # has decided them (a kill before then loses nothing). Counted anew when shelved.
            self.resumed_unconfirmed = self._readable_with_twins(self.unconfirmed)
            left = set(stored_signatures(self.unconfirmed.root)) - {f.signature for f in self.resumed_unconfirmed}
            self.summary["unconfirmed"] = len(left)

    def start(self) -> threading.Thread:
        """Start the confirming thread, with the earlier run's unconfirmed candidates first."""
        confirmer = self.thread = threading.Thread(target=self.confirm_loop, daemon=True)
        confirmer.start()
        for sig in sorted({f.signature for f in self.resumed_unconfirmed}):
            self.progress.note(f"resuming: confirming {sig}, left unconfirmed by the earlier run")
        for finding in self.resumed_unconfirmed:
            self.to_confirm(finding)
        return confirmer

    def stop(self) -> None:
        """The campaign is over: the confirming thread ends after its current run."""
        self.queue.put(None)

    def _shelve_orphans(self, in_flight: frozenset = frozenset()) -> int:
        """Candidates that candidates.jsonl has and no store does go to unconfirmed/, to be
        confirmed with the rest; returns how many. A run killed outright (SIGKILL, a lost
        machine) leaves them, and so does a signal that lands between logging a candidate
        and queueing it. ``in_flight``: signatures whose confirmation may still be recorded."""
        stored = {sig for store in (self.findings, self.flaky, self.unconfirmed, self.suspect)
                  for sig in stored_signatures(store.root)} | set(in_flight)
        try:
            lines = (self.out / "candidates.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return 0
        shelved = 0
        for line in lines:
            try:
                finding = Finding.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # a line cut short by the kill
            if finding.signature in stored:
                continue
            stored.add(finding.signature)
            reason = self._suspect_reason(finding)  # (the kill may have come before candidate() judged it)
            if reason:
                finding.triage = {**finding.triage, "suspect": reason}
                self.suspect.add(finding)
                self.summary["suspect"] += 1
            else:
                self.unconfirmed.add(finding)
                shelved += 1
        return shelved

    @staticmethod
    def _readable_with_twins(store: FindingStore) -> list[Finding]:
        """The findings of a store that can be read, each followed by the later cases with its
        signature (duplicates.jsonl). One that cannot be read stays where it is, untouched."""
        found = []
        for sig in stored_signatures(store.root):
            folder = store.path(sig)
            try:
                finding = read_finding(folder / "finding.json")
            except ValueError:
                continue
            found.append(finding)
            try:
                lines = (folder / "duplicates.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                lines = []
            for line in lines:
                try:
                    twin = json.loads(line)
                    found.append(Finding(case=twin["case"], verdict=Verdict.from_json(twin["verdict"]),
                                         lane=finding.lane, triage=finding.triage))
                except (ValueError, TypeError, KeyError, AttributeError):
                    continue  # a line cut short by a kill
        return found

    def candidate(self, finding: Finding) -> None:
        """A failure seen in a worker: log it now, confirm it in a fresh process."""
        with signals_deferred():  # a stop in mid-line would take the line back, and lose the candidate
            append_line(self.out / "candidates.jsonl", finding.to_json())
        reason = self._suspect_reason(finding)
        if reason:
            finding.triage = {**finding.triage, "suspect": reason}
            with self.lock:
                self.suspect.add(finding)
                self.summary["suspect"] += 1
            return
        self.to_confirm(finding)

    def _suspect_reason(self, finding: Finding) -> Optional[str]:
        """Why a candidate is a lane artefact or no bug at all (None: confirm it)."""
        # Lanes lie below the oracles: they read a verdict as its JSON.
        return (self.config.lane.suspect_reason(finding.verdict.to_json(), finding.case, finding.triage)
                or _slow_by_design(finding) or _explained_by_rounding(finding))

    def to_confirm(self, finding: Finding) -> None:
        """Queue a candidate for its fresh-process confirmation (or record it as a duplicate,
        as reported without confirmation, or as flaky after too many tries)."""
        sig = finding.signature
        with self.lock:
            if sig in self.confirmed:
                self.findings.add(finding)  # recorded as a duplicate of a confirmed finding
                self.summary["duplicates"] += 1
            elif not self.config.confirm:
                self.findings.add(finding)
                self.on_confirmed(finding)
                self.confirmed.add(sig)
                self.summary["reported_unconfirmed"] += 1
            elif sig in self.confirming:
                self.twins.setdefault(sig, []).append(finding)  # decided with its twin
            elif self.tries[sig] >= self.MAX_CONFIRM_TRIES:
                self._out_of_tries(finding)
            else:
                self.confirming.add(sig)
                self.queue.put(finding)

    def confirm_loop(self) -> None:
        while True:
            finding = self.queue.get()
            if finding is None:  # the sentinel: the campaign is over
                return
            self.in_confirmation = finding
            t0 = time.monotonic()
            outcome = replay_finding(
                finding, timeout=self.config.confirm_timeout, runner=self.runner,
                env_extra={"TORCHINDUCTOR_CACHE_DIR": fresh_cache(self.out / "confirm-cache")}, check_short=True,
            )
            self.stats.seconds["confirm"] += time.monotonic() - t0
            if self.runner.cancelled:
                return  # interrupted: the finding is shelved as unconfirmed
            finding.confirmation = outcome.to_json()
            try:
                self.record(finding, outcome)
            except DiskFullError as exc:  # the main loop stops the run (it cannot store findings)
                self.disk_full = self.disk_full or exc
                return
            self.in_confirmation = None

    def record(self, finding: Finding, outcome) -> None:
        sig = finding.signature
        with self.lock:
            self.tries[sig] += 1
            twins = self.twins.pop(sig, [])
            self.confirming.discard(sig)
            # "different": it still fails in a fresh process, compiled against
            # eager by the repro's own judgment, under another signature.
            if outcome.status == "reproduced" or (outcome.status == "different" and outcome.signature):
                self.confirmed.add(sig)
                self.findings.add(finding)
                self.on_confirmed(finding)
                for twin in twins:
                    self.findings.add(twin)
                self.summary["findings"] += 1
                self.progress.note(f"finding {sig} ({finding.verdict.symptom}), confirmed in a fresh process")
                return
            if finding.verdict.symptom == "timeout" and outcome.reason:
                # Slow, not hung (or slow in eager too): a lane artefact of a short --case-timeout,
                # kept with the reason, never a finding.
                finding.triage = {**finding.triage, "suspect": outcome.reason}
                self.slow_reasons[sig] = outcome.reason
                self.suspect.add(finding)
                self.summary["suspect"] += 1
            else:
                self.flaky.add(finding)
                self.summary["flaky"] += 1
            if twins and self.tries[sig] < self.MAX_CONFIRM_TRIES:
                self.confirming.add(sig)  # another case with this signature gets its chance
                self.twins[sig] = twins[1:]
                self.queue.put(twins[0])
            else:
                for twin in twins:
                    self._out_of_tries(twin)

    def _out_of_tries(self, finding: Finding) -> None:
        """A candidate whose signature used up its confirmation tries in this run: flaky, or,
        for a timeout whose tries were judged slow rather than hung, suspect for that reason."""
        reason = self.slow_reasons.get(finding.signature)
        if reason:
            finding.triage = {**finding.triage, "suspect": f"not rerun; an earlier case with this signature: {reason}"}
            self.suspect.add(finding)
        else:
            self.flaky.add(finding)

    def finish(self, confirmer: threading.Thread) -> None:
        """Give pending confirmations up to ``confirm_grace`` after the fuzzing ends; none
        once --max-findings are confirmed (the run asked for that many: a confirmation can
        take minutes, and the rest stay in unconfirmed/, as when the budget runs out)."""
        wanted = self.config.max_findings
        if self.confirming and wanted is not None and len(self.confirmed) >= wanted:
            self.progress.note(f"{len(self.confirmed)} finding(s) confirmed, as --max-findings asked; "
                               f"{len(self.confirming)} other candidate(s) kept in unconfirmed/")
            self.runner.cancel()
            confirmer.join(timeout=10)
            return
        if self.confirming:
            self.progress.note(f"fuzzing done; confirming {len(self.confirming)} candidate(s) in fresh processes")
        limit = time.monotonic() + self.config.confirm_grace
        while self.confirming and time.monotonic() < limit and confirmer.is_alive():
            time.sleep(0.5)
        if self.confirming:
            self.progress.note("confirmation grace period over; the rest is kept in unconfirmed/")
            self.runner.cancel()
            confirmer.join(timeout=10)

    def shelve_unconfirmed(self) -> None:
        """Keep every candidate that never got a fresh-process verdict."""
        pending = []
        if self.in_confirmation is not None and self.in_confirmation.confirmation is None:
            pending.append(self.in_confirmation)
        while True:
            try:
                finding = self.queue.get_nowait()
            except queue.Empty:
                break
            if finding is not None:
                pending.append(finding)
        with self.lock:
            for twins in self.twins.values():
                pending.extend(twins)
            self.twins.clear()
        # The earlier run's candidates this run decided leave unconfirmed/; those still pending
        # stay there as they are (the folder holds them), and new ones are added.
        resumed = {id(f) for f in self.resumed_unconfirmed}
        pending_sigs = {f.signature for f in pending if id(f) in resumed}
        for sig in sorted({f.signature for f in self.resumed_unconfirmed} - pending_sigs):
            shutil.rmtree(self.unconfirmed.path(sig), ignore_errors=True)
        for finding in pending:
            if id(finding) not in resumed:
                self.unconfirmed.add(finding)
            self.summary["unconfirmed"] += 1
        if self.config.confirm:
            # The confirmation in flight when the run stopped (its verdict may be recorded yet) is no orphan.
            running = self.in_confirmation
            in_flight = frozenset({running.signature} if running is not None and running.confirmation is not None
                                  else ())
            with self.lock:
                self.summary["unconfirmed"] += self._shelve_orphans(in_flight)

def stored_signatures(root: Path) -> list[str]:
    """The signatures a store folder holds: its folders with a finding.json, less hidden ones
    (a finding a killed writer left before renaming it into place)."""
    return sorted(p.parent.name for p in Path(root).glob("*/finding.json") if not p.parent.name.startswith("."))


def _explained_by_rounding(finding: Finding) -> Optional[str]:
    """A discrete output (a comparison, all/any, argmax, sort indices...) that flipped where
    rounding explains it (oracles/differential.py): kept in suspect/ with the reason, never
    a finding."""
    return getattr(finding.verdict.evidence, "rounding", None)


def _slow_by_design(finding: Finding) -> Optional[str]:
    """A timeout of a case compiled under z3 translation validation is the
    validator's documented cost (30-100x slower compiles), not a hang in torch."""
    fx = (finding.case or {}).get("schedule", {}).get("config", {}).get("fx", {})
    if finding.verdict.symptom == "timeout" and fx.get("translation_validation"):
        return "timed out under translation validation, which makes compiles 30-100x slower by design"
    return None
