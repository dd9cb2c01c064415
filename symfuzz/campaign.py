"""A time-boxed fuzz campaign over warm worker processes.

The campaign hands case indices to workers; case ``i`` is a pure function
of (seed, i), so the same seed and torch version give the same programs,
whatever the timing. A worker that segfaults, hangs past the case timeout,
or grows past the memory limit is killed, its in-flight case becomes a
finding, and a fresh worker takes its place.

Before any generated case, a worker runs the canary (``symfuzz.canary``); if
it fails, or a worker cannot start, the campaign stops with a CampaignError
(symfuzz or the environment is broken: exit 3). During the run, internal
errors are grouped by cause, and the campaign stops early when bad programs
dominate (``symfuzz.health``).

Every candidate failure is confirmed by running its repro.py in a fresh
process before it is reported. Output folder:

    OUT/stats.json            updated as the campaign goes
    OUT/findings/<sig>/       confirmed findings (finding.json, repro.py)
    OUT/flaky/<sig>/          failed in the worker, passed in a fresh process
    OUT/candidates.jsonl      every candidate, as soon as it is seen
    OUT/unconfirmed/<sig>/    the budget ran out before confirmation
    OUT/internal_errors.json  internal errors by cause: count, first case, one traceback
    OUT/internal_errors.jsonl every internal error, as soon as it is seen
    OUT/canary.log            what the canary run said (its traceback, if it failed)
    OUT/workers/*.log         worker stderr
"""

from __future__ import annotations

import json
import queue
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from symfuzz.canary import canary_failure
from symfuzz.case_source import CaseSource
from symfuzz.confirmation import Confirmation
from symfuzz.corpus.atomic import DiskFullError, append_line, write_json, write_text
from symfuzz.corpus.deaths import death_signature, place_of
from symfuzz.corpus.finding import Finding, environment
from symfuzz.health import InternalErrors, ProgramHealth, exception_line, too_many_internal_errors
from symfuzz.local_worker import Worker
from symfuzz.messages import (
    CanaryDone,
    CaseResult,
    Judged,
    Planned,
    Ready,
    Result,
    Started,
    Warm,
    is_corpus_index,
)
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_finding
from symfuzz.oracles.verdict import ISOLATION, OUT_OF_MEMORY, Died, Hung, Verdict
from symfuzz.progress import Progress
from symfuzz.resume import check_out_folder, write_state
from symfuzz.settings import CANARY_TIMEOUT, CampaignConfig
from symfuzz.signals import signals_deferred
from symfuzz.stats import Stats

# How much of a dead or killed worker's log is read for the stack faulthandler printed.
DUMP_TAIL_BYTES = 64 * 1024


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by the CLI's handler: it stops a run the
    way Ctrl-C does (everything kept, stats written), with exit code 143."""


class CampaignError(Exception):
    """symfuzz or its environment is broken, so the campaign cannot test anything
    (workers cannot start, the canary fails): one line that says why and where
    the details are."""


class Campaign:
    MAX_RESPAWNS = 20  # workers that die before they are ready: the environment is broken

    def __init__(self, config: CampaignConfig):
        self.config = config
        self.out = Path(config.out)
        self.torch_version = environment().get("torch")
        # Raises OutFolderError for a folder that holds another run (or one --resume cannot continue).
        resumed = check_out_folder(config, self.torch_version)
        self.out.mkdir(parents=True, exist_ok=True)
        self.stats = Stats(config)
        self.progress = Progress(config.budget, enabled=not config.quiet)
        self.summary = Counter()  # stats.json's "findings" counts (shared with the confirmation)
        self.events: queue.Queue = queue.Queue()
        self.cases = CaseSource(config, self.stats, self.progress)
        self.confirmation = Confirmation(config, self.stats, self.summary, self.progress,
                                         on_confirmed=self._confirmed)
        self.respawns = 0
        self.spawned: list = []  # the workers started and not yet closed
        self.interrupted = False
        self.interrupted_by: Optional[str] = None
        self.minified: dict = {}  # signature -> what minifying it gave
        self.canary: Optional[dict] = None  # the canary's outcome, once run (stats.json)
        self.internal = InternalErrors()
        self.health = ProgramHealth()
        self.stop_reason: Optional[str] = None  # why the campaign stopped early
        self.fuzz_start: Optional[float] = None  # when the canary passed: the budget starts then
        self.workers_wall: Optional[float] = None  # the workers' mean seconds up, from the start (Stats.to_json)
        self.closed_idle: list[float] = []  # when each worker closed early, idle with no case left to run
        self.disk_full: Optional[DiskFullError] = None  # the first write a full disk stopped
        if resumed is not None:
            self._resume(resumed)

    def _resume(self, state: dict) -> None:
        """Continue the campaign in --out: its counters, the indices it did not finish,
        the corpus cases it did not replay, and its unconfirmed candidates to confirm."""
        now = {k: self.stats.replay[k] for k in ("stored", "unreadable") if k in self.stats.replay}
        self.stats.restore(state)
        self.stats.replay.update(now)  # what this run's corpus holds
        self.summary.update(state["summary"])
        self.cases.resume()
        self.confirmation.resume()

    def death_finding(self, worker: Worker, returncode: Optional[int]) -> Optional[Finding]:
        if worker.judged:
            # It died in triage, after the oracles had spoken: keep their verdict.
            verdict = worker.judged[0]
            return Finding(case=worker.case, verdict=verdict, lane=self.config.lane.to_json(),
                           triage={"stage": verdict.stage, "note": "the worker died during triage"})
        reason = worker.killed_for
        log_tail = worker.log_tail()
        # Signed by where it died or hung: the stack faulthandler printed (corpus/deaths.py), read
        # from a longer tail than the evidence keeps (a deep stack runs to several kB).
        place = place_of(worker.case_log(DUMP_TAIL_BYTES), hang=reason in ("timeout", "out-of-memory"))
        where = {"phase": place.phase, "frames": list(place.frames)}
        if reason == "timeout":
            symptom, cause = "timeout", "timeout"
            evidence = Hung(timeout_seconds=self.config.case_timeout, worker_log_tail=log_tail, **where)
        elif reason == "out-of-memory":
            symptom, cause = "process-death", OUT_OF_MEMORY
            evidence = Died(cause=OUT_OF_MEMORY, limit_mb=self.config.memory_limit_mb, worker_log_tail=log_tail,
                            **where)
        else:
            cause = _death_cause(returncode)
            symptom = "process-death"
            evidence = Died(cause=cause, returncode=returncode, worker_log_tail=log_tail, **where)
        sig = death_signature(symptom, self.config.lane.name, cause, place)
        verdict = Verdict(ok=False, oracle=ISOLATION, symptom=symptom, stage="unknown",
                          signature=sig, call_index=None, evidence=evidence)
        return Finding(case=worker.case, verdict=verdict, lane=self.config.lane.to_json())

    # ------------------------------------------------------------ main loop

    def run(self) -> dict:
        """Run the campaign; returns stats.json's content.

        Raises CampaignError when nothing can be tested (the canary fails, or
        workers cannot start); stats.json and canary.log are written first.
        """
        cfg = self.config
        start = time.monotonic()
        self.fuzz_start = None
        ignored = {}  # the signal handlers an interruption set aside, given back at the end
        if self.stats.replay.get("unreadable"):
            first, why = self.cases.corpus.unreadable[0]
            self.progress.note(f"corpus: {self.stats.replay['unreadable']} stored file(s) are not cases and were "
                               f"skipped (left as they are), e.g. {first}: {why}")
        confirmer = self.confirmation.start()
        workers = [self._new_worker(slot) for slot in range(cfg.jobs)]
        last_stats = 0.0
        try:
            while True:
                now = time.monotonic()
                self.disk_full = self.disk_full or self.confirmation.disk_full
                if self.disk_full is not None:
                    raise self.disk_full
                if self.canary is None and not any(w.canary for w in workers):
                    self._start_canary(workers)
                    if not any(w.ready for w in workers) and now - start > self.startup_timeout:
                        raise CampaignError(self._never_ready_message(workers))
                if self.canary is None and cfg.throughput_settings:
                    for w in workers:  # no worker waits idle for the canary (see WorkerSlot.start_warmup)
                        if w.ready and not w.busy and not w.warmed:
                            w.start_warmup()
                fuzzing = self.fuzz_start is not None
                accepting = (
                    fuzzing
                    and now < self.fuzz_start + cfg.budget
                    and self.stop_reason is None
                    and not self.cases.exhausted
                    and (cfg.max_findings is None or len(self.confirmation.confirmed) < cfg.max_findings)
                )
                waiting = self.waiting_for_confirmations()
                for w in workers:
                    if w.ready and not w.busy and accepting and not waiting:
                        self.cases.assign_next(w)
                if fuzzing and not accepting:
                    workers = self._close_idle(workers, now - start)
                if fuzzing and not accepting and all(w.index is None or not w.ready for w in workers):
                    break
                self._watchdog(workers, now)
                try:
                    worker, msg = self.events.get(timeout=0.5)
                except queue.Empty:
                    pass
                else:
                    workers = self._handle(worker, msg, workers, accepting)
                if now - last_stats > 5:
                    self.write_stats(now - start)
                    last_stats = now
                self.progress.update(now - self.fuzz_start if fuzzing else 0.0, self.stats.counts, self.summary)
            self.workers_wall = self._mean_up(time.monotonic() - start)
            for w in workers:
                w.close()
                if w in self.spawned:
                    self.spawned.remove(w)
            workers = []
            self.confirmation.finish(confirmer)
            if cfg.minify_budget:
                self._minify_findings(start)
        except KeyboardInterrupt as exc:
            # A second signal (a CI runner sends SIGINT, then SIGTERM) must not cut the clean-up
            # short: what was found is written below, and the clean-up is bounded. The handlers
            # are given back at the end (a process that runs campaigns one after another, and the
            # processes it starts later, which inherit an ignored signal, must still stop on one).
            ignored = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
            self.interrupted = True
            self.interrupted_by = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
            self.progress.note("interrupted: stopping; unconfirmed candidates are kept in unconfirmed/")
            self.confirmation.runner.cancel()
        except DiskFullError as exc:
            self.disk_full = self.disk_full or exc
            self.confirmation.runner.cancel()
        finally:
            if self.workers_wall is None:  # the loop was cut short: the workers close now
                self.workers_wall = self._mean_up(time.monotonic() - start)
            # Every worker still open, including one started while a signal cut its caller short
            # (not yet in ``workers``): none may outlive the campaign.
            for w in list(self.spawned):
                w.kill("interrupted")
                w.close()
            self.spawned.clear()
            self.confirmation.stop()
            try:
                self.confirmation.shelve_unconfirmed()
                self.progress.finish()
                stats = self.write_stats(time.monotonic() - start)
            except DiskFullError as exc:  # what was written before stays whole (corpus/atomic.py)
                self.disk_full = self.disk_full or exc
            finally:
                for sig, handler in ignored.items():
                    signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.disk_full = self.disk_full or self.confirmation.disk_full  # the confirmer's, after the loop
        if self.disk_full is not None:
            raise CampaignError(f"{self.disk_full}: the disk is full, so the run stopped; what it wrote so far is "
                                f"kept whole. Free space, then continue with --resume")
        return stats

    # ------------------------------------------------------------ cases and the corpus

    def waiting_for_confirmations(self) -> bool:
        """With --max-findings, no new case starts while the candidates in confirmation could make
        up the findings asked for: their cases would most likely never be needed, and they would
        slow the confirmations down. A candidate that does not confirm lets the cases go on, and
        so does a confirming thread that is gone."""
        wanted, confirmation = self.config.max_findings, self.confirmation
        return (wanted is not None and confirmation.running
                and len(confirmation.confirmed) + len(confirmation.confirming) >= wanted)

    def _new_worker(self, slot: int):
        # A signal that lands inside Popen would leave a started worker that nobody holds
        # (it outlives the run): the signal waits until the worker is tracked.
        with signals_deferred():
            if self.config.executor == "ray":
                # deferred: ray is an optional extra, imported only by runs that ask for it
                from symfuzz.ray_executor import RayWorker

                worker = RayWorker(slot, self.config, self.events)
            else:
                worker = Worker(slot, self.config, self.events)
            self.spawned.append(worker)
        return worker

    # ------------------------------------------------------------ the canary

    @property
    def startup_timeout(self) -> float:
        """How long workers may take to start: importing torch on a cold disk can take
        tens of seconds, which a short --case-timeout must not turn into exit 3."""
        return max(self.config.case_timeout, 120.0)

    @property
    def canary_limit(self) -> float:
        return self.config.canary_timeout or max(self.config.case_timeout, CANARY_TIMEOUT)

    def _start_canary(self, workers) -> None:
        """Send the canary to the first ready worker (no case goes out until it passes)."""
        for w in workers:
            if w.ready and w.start_canary():
                self.progress.note(f"running the canary program on lane {self.config.lane.name} ...")
                return

    def _canary_done(self, worker: Worker, result: CaseResult) -> None:
        """Record the canary's outcome; raise CampaignError if it failed."""
        worker.canary = False
        failure = canary_failure(result)
        shown = result.to_json()
        detail = result.internal_error or json.dumps(
            {k: shown.get(k) for k in ("valid", "compiled", "calls", "checked", "graphs", "verdicts", "first_errors")},
            indent=1)
        self._record_canary(failure, round(result.total_seconds, 2), detail)
        if failure:
            raise CampaignError(self._canary_message(failure))
        self.fuzz_start = time.monotonic()
        self.progress.note(f"canary passed in {self.canary['seconds']:.0f}s; fuzzing for {self.config.budget:.0f}s")

    def _canary_died(self, worker: Worker, returncode: Optional[int]) -> None:
        """The worker ended while running the canary: raise CampaignError with the cause."""
        worker.canary = False
        if worker.killed_for == "timeout":
            failure = f"the canary did not finish within its limit ({self.canary_limit:.0f}s; --canary-timeout)"
        elif worker.killed_for == "out-of-memory":
            failure = f"the canary grew past the memory limit ({self.config.memory_limit_mb} MB)"
        else:
            cause = _death_cause(returncode)
            line = exception_line(worker.log_tail())
            failure = f"the worker died running the canary ({cause})" + (f": {line}" if line else "")
        self._record_canary(failure, round(time.monotonic() - worker.since, 2),
                            f"worker log tail ({worker.log_path}):\n{worker.log_tail()}")
        raise CampaignError(self._canary_message(failure))

    def _record_canary(self, failure: Optional[str], seconds: float, detail: str) -> None:
        self.canary = {"ok": failure is None, "cause": failure, "seconds": seconds, "log": str(self.out / "canary.log")}
        write_text(self.out / "canary.log", f"canary on lane {self.config.lane.name}: "
                                            f"{'passed' if failure is None else 'FAILED: ' + failure}\n\n{detail}\n")

    def _canary_message(self, failure: str) -> str:
        return (f"the canary program failed on lane {self.config.lane.name}, before any fuzzing: {failure} "
                f"(details: {self.out / 'canary.log'}). symfuzz or its environment is broken (not torch's "
                f"compiler under test): a broken install, a bad plugin or sitecustomize; fix that and run again")

    # ------------------------------------------------------------ health

    def _record_internal_error(self, index: Optional[int], text: str) -> None:
        with signals_deferred():  # kept whole by a stop, like a candidate
            append_line(self.out / "internal_errors.jsonl", {"index": index, "seed": self.config.seed, "traceback": text})
        self.internal.add(index, text)

    def _record_health(self, bad: bool) -> None:
        """Count one finished program; stop taking cases once bad ones dominate."""
        self.health.record(bad)
        problem = self.health.problem()
        if problem and self.stop_reason is None:
            self.stop_reason = problem
            causes = "; ".join(f"{g['count']}x {g['cause']}" for g in self.internal.by_count()[:3]) or "none"
            self.progress.note(f"stopping early: {problem} (internal errors by cause: {causes})")

    def problems(self) -> list[str]:
        """Why this run cannot be trusted to have tested what it claims (empty: it can)."""
        out = []
        if self.canary is not None and not self.canary["ok"]:
            out.append(f"the canary failed: {self.canary['cause']}")
        if self.stop_reason:
            out.append(f"stopped early: {self.stop_reason}")
        generated = self.stats.counts["programs_generated"]
        if too_many_internal_errors(self.internal.total, generated):
            total, causes = self.internal.total, len(self.internal.groups)
            out.append(f"{total} internal error{'s' * (total != 1)} in {generated} programs "
                       f"({causes} distinct cause{'s' * (causes != 1)})")
        return out

    def _minify_findings(self, start: float) -> None:
        """Shrink each confirmed finding (after fuzzing: minifying needs the CPU the workers had)."""
        cfg = self.config
        for sig in sorted(self.confirmation.confirmed):
            folder = self.out / "findings" / sig
            self.progress.note(f"minifying {sig} (budget {cfg.minify_budget:.0f}s) ...")
            options = MinifyOptions(budget=cfg.minify_budget, jobs=cfg.jobs, quiet=True,
                                    query_timeout=cfg.confirm_timeout)
            try:
                result = minify_finding(folder, options, lambda message: None)
            except MinifyError as exc:
                self.minified[sig] = {"error": str(exc)[:500]}
                self.progress.note(f"minifying {sig}: not possible: {str(exc).splitlines()[0]}")
                continue
            except Exception as exc:  # noqa: BLE001 - one finding's trouble must not end the campaign
                self.minified[sig] = {"error": f"symfuzz internal error: {type(exc).__name__}: {exc}"[:500]}
                self.progress.note(f"minifying {sig} failed: {type(exc).__name__}: {exc}; please report it")
                continue
            check = result.repro_check or {}
            self.minified[sig] = {"before": result.before, "after": result.after,
                                            "same_bug": check.get("same_bug"), "repro": str(result.repro_path)}
            self.progress.note(f"minified {sig}: {result.before.get('ops')} -> {result.after.get('ops')} ops, "
                               f"{result.before.get('calls')} -> {result.after.get('calls')} calls: {result.repro_path}")
            self.write_stats(time.monotonic() - start)

    def _watchdog(self, workers, now):
        for w in workers:
            if not w.busy or w.killed_for:
                continue
            if now - w.since > (self.canary_limit if w.canary or w.warming else self.config.case_timeout):
                w.kill("timeout")
            elif w.rss_mb() > self.config.memory_limit_mb:
                w.kill("out-of-memory")

    def _handle(self, worker: Worker, event, workers, accepting):
        if event is None:  # the worker process ended
            return self._worker_ended(worker, workers, accepting)
        if isinstance(event, Ready):
            worker.ready = True
        elif isinstance(event, CanaryDone):
            self._canary_done(worker, event.body)
        elif isinstance(event, Warm):
            worker.warming = False
        elif isinstance(event, (Started, Planned)):
            worker.case = event.case  # Planned: guard-directed calls were appended
        elif isinstance(event, Judged):
            worker.judged = [Verdict.from_json(v) for v in event.verdicts]
        elif isinstance(event, Result):
            self._finished(worker, event.index, event.body)
        return workers

    def _confirmed(self, finding: Finding) -> None:
        self.stats.count_finding(finding)
        self.cases.finding_to_corpus(finding)

    def _finished(self, worker: Worker, index, result: CaseResult) -> None:
        """Count a finished case, keep what it reached, and pass its failure on to be confirmed."""
        if result.case is not None:
            worker.case = result.case
        verdicts = [Verdict.from_json(v) for v in result.verdicts]
        failed = result.internal_error is not None
        if is_corpus_index(index) and (failed or not result.valid):
            # A stored case this torch or symfuzz no longer runs (it was stored by an older
            # one): stale, not a sign that this run tests nothing.
            self.stats.replay["stale"] = self.stats.replay.get("stale", 0) + 1
            self.stats.count_index(index)
            worker.index = worker.case = None
            worker.judged = []
            return
        self.stats.add_result(index, result, verdicts)
        if failed:
            self._record_internal_error(index, result.internal_error)
        self._record_health(failed or not result.valid)
        if not failed:
            self.cases.add_to_corpus(worker.case, index, result, self.stats.new_features)
        for verdict in verdicts[:1]:
            if is_corpus_index(index):
                self.cases.replayed_candidates.add(verdict.signature)
            self.confirmation.candidate(Finding(case=worker.case, verdict=verdict, lane=self.config.lane.to_json(),
                                                triage=result.triage, features=result.reached))
        worker.index = worker.case = None
        worker.judged = []

    def _close_idle(self, workers, elapsed: float):
        """Close the workers that wait idle once no more cases go out (the budget is spent, the
        cases or findings are enough): the others finish their cases meanwhile, beside fresh-process
        confirmations, and an idle worker's seconds are neither work nor symfuzz's overhead."""
        idle = [w for w in workers if w.ready and not w.busy]
        for w in idle:
            w.close()
            if w in self.spawned:
                self.spawned.remove(w)
            self.closed_idle.append(elapsed)
        return [w for w in workers if w not in idle]

    def _mean_up(self, elapsed: float) -> float:
        """The workers' mean seconds up: ``elapsed`` for those open until now, less for those closed idle."""
        jobs = self.config.jobs
        early = self.closed_idle[:jobs]
        return (sum(early) + (jobs - len(early)) * elapsed) / jobs

    def _worker_ended(self, worker: Worker, workers, accepting):
        code = worker.wait()
        if worker.canary:
            self._canary_died(worker, code)
        if worker.index is not None:
            self.stats.counts["programs_generated"] += 1
            self.stats.count_index(worker.index)
            self.stats.counts["worker_deaths"] += 1
            finding = self.death_finding(worker, code)
            if finding is not None:
                self.confirmation.candidate(finding)
            else:  # it died while generating: not a compiler finding, but never silent
                self._record_internal_error(
                    worker.index, f"worker died while generating the case (exit {code}, {worker.killed_for or 'no kill'})")
                self.stats.counts["internal_errors"] += 1
                self._record_health(True)
        elif not worker.ready:
            self._worker_never_ready(worker, code, workers)
        elif worker.warming:  # the canary decides whether the environment works; this one is replaced
            self.progress.note(f"a worker ended while warming up ({_death_cause(code)}, "
                               f"{worker.killed_for or 'not killed'}); starting another")
        worker.close()
        if worker in self.spawned:
            self.spawned.remove(worker)
        workers = [w for w in workers if w is not worker]
        if (accepting or self.fuzz_start is None) and self.respawns <= self.MAX_RESPAWNS:
            workers.append(self._new_worker(worker.slot))
        return workers

    def _worker_never_ready(self, worker: Worker, code: int, workers) -> None:
        """A worker exited before it was ready. Another one is started, unless
        this keeps happening: before the canary passes with no worker ready,
        nothing can be tested (CampaignError); later, the campaign stops early."""
        self.respawns += 1
        alone = not any(w.ready for w in workers if w is not worker)
        if self.respawns <= self.MAX_RESPAWNS and not (alone and self.fuzz_start is None):
            return
        line = exception_line(worker.log_tail()) or "(its log says nothing)"
        message = f"a worker exited before it was ready (exit {code}): {line} (full log: {worker.log_path})"
        if self.fuzz_start is None:
            raise CampaignError(f"{message}. symfuzz or its environment is broken (a broken install, a bad plugin "
                                f"or sitecustomize, too little memory); fix that and run again")
        if self.stop_reason is None:
            self.stop_reason = f"{self.respawns} workers exited before they were ready; the last said: {message}"
            self.progress.note(f"stopping early: {self.stop_reason}")

    def _never_ready_message(self, workers) -> str:
        logs = ", ".join(str(w.log_path) for w in workers)
        return (f"no worker became ready within {self.startup_timeout:.0f}s (importing torch and symfuzz hangs?); "
                f"see the worker logs: {logs}")

    def write_stats(self, wall: float) -> dict:
        extra = {
            "confirmed": len(self.confirmation.confirmed) if self.config.confirm else 0,
            "reported_unconfirmed": self.summary["reported_unconfirmed"],
            "flaky": self.summary["flaky"],
            "suspect": self.summary["suspect"],
            "unconfirmed": self.summary["unconfirmed"],
            "duplicates": self.summary["duplicates"],
            "signatures": sorted(self.confirmation.confirmed),
            "interrupted": self.interrupted,
            "interrupted_by": self.interrupted_by,
            "minified": self.minified,
        }
        # While some workers are closed idle and others still run, the workers' time is their mean so far.
        workers_wall = self.workers_wall if self.workers_wall is not None or not self.closed_idle \
            else self._mean_up(wall)
        data = self.stats.to_json(wall, extra, workers_wall)
        data["canary"] = self.canary
        data["health"] = {
            "problems": self.problems(),
            "stopped_early": self.stop_reason,
            "internal_error_causes": self.internal.summary(),
        }
        if self.internal.groups:
            write_json(self.out / "internal_errors.json", {"total": self.internal.total, "causes": self.internal.by_count()})
        write_json(self.out / "stats.json", data)
        write_state(self.out, self.config, self.torch_version, self.stats, dict(self.summary), self.stats.replayed,
                    self.stats.prior_wall + wall, write_json,
                    self.stats.workers_seconds(wall, workers_wall))
        append_line(self.out / "timeline.jsonl", self.stats.timeline_line(wall, extra["confirmed"], data["time_seconds"]))
        return data


def _death_cause(returncode: Optional[int]) -> str:
    """A signal's name, "exit N", or, with no status at all (a Ray actor whose node went
    away takes its worker with it), "host lost"."""
    if returncode is None:
        return "host lost"
    return signal.Signals(-returncode).name if returncode < 0 else f"exit {returncode}"
