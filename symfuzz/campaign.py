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

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from symfuzz.canary import canary_failure
from symfuzz.corpus.atomic import DiskFullError, append_line, write_json, write_text
from symfuzz.corpus.case_corpus import CaseCorpus
from symfuzz.corpus.deaths import ask_for_stack, death_signature, place_of
from symfuzz.corpus.finding import Finding, environment, read_finding
from symfuzz.corpus.replay import ScriptRunner, replay_finding, resident_mb
from symfuzz.corpus.store import FindingStore
from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.health import InternalErrors, ProgramHealth, exception_line, too_many_internal_errors
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_finding
from symfuzz.oracles.lanes.lane import Lane
from symfuzz.oracles.verdict import ISOLATION, OUT_OF_MEMORY, Died, Hung, Verdict
from symfuzz.progress import Progress
from symfuzz.report import throughput
from symfuzz.resume import check_out_folder, write_state
from symfuzz.stats_schema import section as stats_section
from symfuzz.worker_slot import WorkerSlot, throughput_env, worker_args


# The shortest --case-timeout accepted: one case compiles its program once per
# recompile (a first compile alone takes ~20 s here), so a shorter limit kills
# programs that are merely slow. A timeout is a finding only once it also runs past
# a longer limit in confirmation (corpus/replay.py: hang_limit).
CASE_TIMEOUT_FLOOR = 30.0

CANARY_TIMEOUT = 120.0

# How much of a dead or killed worker's log is read for the stack faulthandler printed.
DUMP_TAIL_BYTES = 64 * 1024
CORPUS_PREFIX = "corpus:"  # the index of a replayed corpus case: "corpus:<its digest>"

# More calls per symbolic compile, at new sizes inside its guards (CampaignConfig.reuse_calls):
# a cached graph runs them without compiling, so each is a check at the cost of two small
# runs (eager and compiled) while a compile costs a second or more on inductor-cpp.
REUSE_CALLS = 3


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


def shard_indices(shard: Optional[tuple[int, int]], max_cases: Optional[int]):
    """The case indices a (sharded) run generates, in order: case i is a pure
    function of (seed, i), so shards of one seed are disjoint and together are
    the unsharded run."""
    k, n = shard or (1, 1)
    index = k - 1
    while max_cases is None or index < max_cases:
        yield index
        index += n


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by the CLI's handler: it stops a run the
    way Ctrl-C does (everything kept, stats written), with exit code 143."""


class CampaignError(Exception):
    """symfuzz or its environment is broken, so the campaign cannot test anything
    (workers cannot start, the canary fails): one line that says why and where
    the details are."""


MOTIF_PREFIX = "motif:"
RECOMPILE_PREFIX = "recompile-class:"


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
        self.replayed: list[str] = []  # names of the corpus cases replayed (for --resume)

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

    def add_result(self, msg: dict, verdicts: list[Verdict]) -> None:
        """Count one "result" message; ``verdicts``: its failing verdicts, parsed."""
        c = self.counts
        c["programs_generated"] += 1
        self.count_index(msg.get("index"))
        if "internal_error" in msg:
            c["internal_errors"] += 1
            return
        c["programs_valid"] += msg["valid"]
        c["programs_compiled"] += msg["compiled"]
        c["programs_called"] += msg["calls"] > 0
        c["calls"] += msg["calls"]
        c["calls_checked"] += msg["checked"]
        c["recompiles"] += msg["recompiles"]
        c["candidates"] += bool(verdicts)
        for name, value in msg["seconds"].items():
            self.seconds[name] += value
        self.ops.update(msg["ops"])
        for g in msg["graphs"]:
            self.graphs_per_call[str(g)] += 1
        c["graphs_compiled"] += sum(g for g in msg["graphs"] if g > 0)
        guards = msg.get("guards") or {}
        if guards.get("regions"):
            c["programs_with_guards"] += 1
            c["guard_regions"] += guards["regions"]
            c["guard_regions_covered"] += guards.get("covered", 0)
        c["over_guards"] += guards.get("over_guards", 0)
        c["unexplained_recompiles"] += guards.get("unexplained_recompiles", 0)
        c["recompiles_explained"] += guards.get("recompiles_explained", 0)
        c["recompiles_unexplained"] += guards.get("recompiles_unexplained", 0)
        features = msg.get("features") or {}
        c["gradient_calls_checked"] += features.get("gradient_calls", 0)
        c["programs_with_gradients"] += features.get("gradient_calls", 0) > 0
        c["programs_with_scalar_inputs"] += bool(features.get("scalar_inputs"))
        c["programs_with_modules"] += bool(features.get("module"))
        # Per-motif counts ride in the counts (so --resume carries them), under a prefix.
        c.update(MOTIF_PREFIX + str(m) for m in features.get("motifs") or [])
        for name, count in (guards.get("recompile_classes") or {}).items():
            c[RECOMPILE_PREFIX + str(name)] += count
        c["rejected_calls"] += msg.get("rejected", 0)
        c["planned_reused"] += msg.get("planned_reused", 0)
        c["reuse_more_reused"] += msg.get("reuse_more_reused", 0)
        self.planned.update(msg.get("planned", []))
        for verdict in verdicts:
            if verdict.symptom == "over-specialization":
                c["over_specializations"] += 1

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
                "candidates": c["candidates"], "distinct_ops": len(self.ops), "guard_regions": c["guard_regions"],
                "guard_regions_covered": c["guard_regions_covered"],
                "seconds": {k: round(v, 2) for k, v in tracked.items()}}

    def to_json(self, wall: float, extra: dict) -> dict:
        c = self.counts
        wall += self.prior_wall
        generated = max(c["programs_generated"], 1)
        # Workers run for the whole wall time; fresh-process confirmations run
        # beside them, so their time adds to the total rather than hiding in it.
        worker_seconds = wall * self.config.jobs + self.seconds["confirm"]
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
            "findings": extra,
            "time_seconds": {k: round(v, 2) for k, v in tracked.items()},
            "throughput": throughput(c["programs_generated"], c["calls_checked"], c["guard_regions_covered"],
                                     wall, worker_seconds),
            "time_share": {k: round(v / worker_seconds, 4) if worker_seconds else 0 for k, v in tracked.items()},
            "ops": dict(sorted(self.ops.items())),
            "distinct_ops": len(self.ops),
        }


class Worker(WorkerSlot):
    """One local worker process and the thread that reads its protocol stream."""

    def __init__(self, slot: int, config: CampaignConfig, events: queue.Queue):
        super().__init__(slot, config, events)
        self.log = open(self.log_path, "a")
        env = dict(os.environ)
        env.update(config.lane.env)
        for key, value in throughput_env(config).items():
            env.setdefault(key, value)
        if "TORCHINDUCTOR_CACHE_DIR" not in env:
            env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(config.out / "inductor-cache")
        env["PYTHONHASHSEED"] = "0"
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        self.proc = subprocess.Popen(
            [sys.executable, *worker_args(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True, bufsize=1,
            # Its own session: a Ctrl-C or SIGTERM sent to the job's process group reaches the
            # campaign, which stops its workers itself, rather than killing workers mid-case and
            # looking like crashes. (If the campaign is killed outright, a worker's stdin closes
            # and it exits after its case.)
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.events.put((self, json.loads(line)))
            except json.JSONDecodeError:
                continue
        self.proc.wait()
        self.events.put((self, None))

    def _send(self, request: dict) -> bool:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def rss_mb(self) -> float:
        return resident_mb(self.proc.pid)

    def wait(self) -> Optional[int]:
        """The process's exit status, once its stream has ended."""
        return self.proc.wait()

    def kill(self, reason: str) -> None:
        self.killed_for = reason
        if reason in ("timeout", "out-of-memory"):  # where it is, for the finding's signature (corpus/deaths.py)
            ask_for_stack(self.proc)
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Campaign:
    MAX_CONFIRM_TRIES = 3  # per signature and run; later cases with it are kept as flaky
    MAX_RESPAWNS = 20  # workers that die before they are ready: the environment is broken

    def __init__(self, config: CampaignConfig):
        self.config = config
        self.out = Path(config.out)
        self.torch_version = environment().get("torch")
        # Raises OutFolderError for a folder that holds another run (or one --resume cannot continue).
        resumed = check_out_folder(config, self.torch_version)
        self.out.mkdir(parents=True, exist_ok=True)
        self.stats = Stats(config)
        self.findings = FindingStore(self.out / "findings")
        self.flaky = FindingStore(self.out / "flaky")
        self.unconfirmed = FindingStore(self.out / "unconfirmed")
        self.suspect = FindingStore(self.out / "suspect")
        self.events: queue.Queue = queue.Queue()
        self.confirm_queue: queue.Queue = queue.Queue()
        self.runner = ScriptRunner()
        self.lock = threading.Lock()
        # Per-signature bookkeeping for this run (with --resume, ``_resume`` fills it in
        # from the folder: earlier findings count as confirmed).
        self.confirmed: set[str] = set()
        self.confirming: set[str] = set()
        self.tries: Counter = Counter()
        self.twins: dict[str, list[Finding]] = {}
        self.slow_reasons: dict[str, str] = {}  # timeout signatures judged slow, not hung: why
        self.in_confirmation: Optional[Finding] = None
        self.indices = shard_indices(config.shard, config.max_cases)
        self.next_index: Optional[int] = next(self.indices, None)
        self.corpus = CaseCorpus(config.corpus) if config.corpus else None
        self.reached = {"op": set(), "guards": set(), "recompile": set()}  # what earlier cases reached
        self.replay_queue = self._corpus_cases()
        self.stats.replay["stored"] = len(self.replay_queue)
        self.replayed_candidates: set[str] = set()  # signatures that corpus replays failed with
        self.respawns = 0
        self.spawned: list = []  # the workers started and not yet closed
        self.interrupted = False
        self.interrupted_by: Optional[str] = None
        self.progress = Progress(config.budget, enabled=not config.quiet)
        self.summary = Counter()
        self.minified: dict = {}  # signature -> what minifying it gave
        self.canary: Optional[dict] = None  # the canary's outcome, once run (stats.json)
        self.internal = InternalErrors()
        self.health = ProgramHealth()
        self.stop_reason: Optional[str] = None  # why the campaign stopped early
        self.fuzz_start: Optional[float] = None  # when the canary passed: the budget starts then
        self.disk_full: Optional[DiskFullError] = None  # the first write a full disk stopped
        self.resumed_unconfirmed: list[Finding] = []  # an earlier run's unconfirmed candidates, confirmed now
        if resumed is not None:
            self._resume(resumed)

    def _resume(self, state: dict) -> None:
        """Continue the campaign in --out: its counters, the indices it did not finish,
        the corpus cases it did not replay, and its unconfirmed candidates to confirm."""
        now = {k: self.stats.replay[k] for k in ("stored", "unreadable") if k in self.stats.replay}
        self.stats.restore(state)
        self.stats.replay.update(now)  # what this run's corpus holds
        self.summary.update(state["summary"])
        done = set(self.stats.indices)
        self.indices = (i for i in shard_indices(self.config.shard, self.config.max_cases) if i not in done)
        self.next_index = next(self.indices, None)
        self.replay_queue = [c for c in self.replay_queue if c.name not in set(self.stats.replayed)]
        self.confirmed = set(_stored_signatures(self.out / "findings"))
        if self.config.confirm:
            self._shelve_orphans()
            # Every readable unconfirmed candidate, and the later cases with its signature
            # (its duplicates.jsonl), is confirmed again; unconfirmed/ keeps them until this run
            # has decided them (a kill before then loses nothing). Counted anew when shelved.
            self.resumed_unconfirmed = self._readable_with_twins(self.unconfirmed)
            left = set(_stored_signatures(self.unconfirmed.root)) - {f.signature for f in self.resumed_unconfirmed}
            self.summary["unconfirmed"] = len(left)

    def _shelve_orphans(self) -> None:
        """A run killed outright (SIGKILL, a lost machine) could not shelve the candidates it
        had queued for confirmation: candidates.jsonl has them, no store does. They go to
        unconfirmed/ now, to be confirmed with the rest."""
        stored = {sig for store in (self.findings, self.flaky, self.unconfirmed, self.suspect)
                  for sig in _stored_signatures(store.root)}
        try:
            lines = (self.out / "candidates.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
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

    @staticmethod
    def _readable_with_twins(store: FindingStore) -> list[Finding]:
        """The findings of a store that can be read, each followed by the later cases with its
        signature (duplicates.jsonl). One that cannot be read stays where it is, untouched."""
        found = []
        for sig in _stored_signatures(store.root):
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

    # ------------------------------------------------------------ candidates

    def candidate(self, finding: Finding) -> None:
        """A failure seen in a worker: log it now, confirm it in a fresh process."""
        append_line(self.out / "candidates.jsonl", finding.to_json())
        reason = self._suspect_reason(finding)
        if reason:
            finding.triage = {**finding.triage, "suspect": reason}
            with self.lock:
                self.suspect.add(finding)
                self.summary["suspect"] += 1
            return
        self._to_confirm(finding)

    def _suspect_reason(self, finding: Finding) -> Optional[str]:
        """Why a candidate is a lane artefact or no bug at all (None: confirm it)."""
        # Lanes lie below the oracles: they read a verdict as its JSON.
        return (self.config.lane.suspect_reason(finding.verdict.to_json(), finding.case, finding.triage)
                or _slow_by_design(finding) or _explained_by_rounding(finding))

    def _to_confirm(self, finding: Finding) -> None:
        """Queue a candidate for its fresh-process confirmation (or record it as a duplicate,
        as reported without confirmation, or as flaky after too many tries)."""
        sig = finding.signature
        with self.lock:
            if sig in self.confirmed:
                self.findings.add(finding)  # recorded as a duplicate of a confirmed finding
                self.summary["duplicates"] += 1
            elif not self.config.confirm:
                self.findings.add(finding)
                self._finding_to_corpus(finding)
                self.confirmed.add(sig)
                self.summary["reported_unconfirmed"] += 1
            elif sig in self.confirming:
                self.twins.setdefault(sig, []).append(finding)  # decided with its twin
            elif self.tries[sig] >= self.MAX_CONFIRM_TRIES:
                self._out_of_tries(finding)
            else:
                self.confirming.add(sig)
                self.confirm_queue.put(finding)

    def _finding_to_corpus(self, finding: Finding) -> None:
        """A confirmed finding's case joins the corpus; one found by a replayed case is noted
        (its case is in the corpus already)."""
        sig = finding.signature
        if sig in self.replayed_candidates:
            if sig not in self.stats.replay["signatures"]:
                self.stats.replay["signatures"].append(sig)
        elif self.corpus is not None and finding.case:
            self.corpus.add(finding.case, self.config.lane.name, [f"finding:{sig}"], environment().get("torch"))

    def confirm_loop(self) -> None:
        while True:
            finding = self.confirm_queue.get()
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
                self.record_confirmation(finding, outcome)
            except DiskFullError as exc:  # the main loop stops the run (it cannot store findings)
                self.disk_full = self.disk_full or exc
                return
            self.in_confirmation = None

    def record_confirmation(self, finding: Finding, outcome) -> None:
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
                self._finding_to_corpus(finding)
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
                self.confirm_queue.put(twins[0])
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
        confirmer = threading.Thread(target=self.confirm_loop, daemon=True)
        confirmer.start()
        if self.stats.replay.get("unreadable"):
            first, why = self.corpus.unreadable[0]
            self.progress.note(f"corpus: {self.stats.replay['unreadable']} stored file(s) are not cases and were "
                               f"skipped (left as they are), e.g. {first}: {why}")
        for sig in sorted({f.signature for f in self.resumed_unconfirmed}):
            self.progress.note(f"resuming: confirming {sig}, left unconfirmed by the earlier run")
        for finding in self.resumed_unconfirmed:
            self._to_confirm(finding)
        workers = [self._new_worker(slot) for slot in range(cfg.jobs)]
        last_stats = 0.0
        try:
            while True:
                now = time.monotonic()
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
                    and (self.replay_queue or self.next_index is not None)
                    and (cfg.max_findings is None or len(self.confirmed) < cfg.max_findings)
                )
                for w in workers:
                    if w.ready and not w.busy and accepting:
                        self._assign_next(w)
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
            for w in workers:
                w.close()
                if w in self.spawned:
                    self.spawned.remove(w)
            workers = []
            self._finish_confirmations(confirmer)
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
            self.runner.cancel()
        except DiskFullError as exc:
            self.disk_full = self.disk_full or exc
            self.runner.cancel()
        finally:
            # Every worker still open, including one started while a signal cut its caller short
            # (not yet in ``workers``): none may outlive the campaign.
            for w in list(self.spawned):
                w.kill("interrupted")
                w.close()
            self.spawned.clear()
            self.confirm_queue.put(None)
            try:
                self._shelve_unconfirmed()
                self.progress.finish()
                stats = self.write_stats(time.monotonic() - start)
            except DiskFullError as exc:  # what was written before stays whole (corpus/atomic.py)
                self.disk_full = self.disk_full or exc
            finally:
                for sig, handler in ignored.items():
                    signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if self.disk_full is not None:
            raise CampaignError(f"{self.disk_full}: the disk is full, so the run stopped; what it wrote so far is "
                                f"kept whole. Free space, then continue with --resume")
        return stats

    # ------------------------------------------------------------ cases and the corpus

    def _new_worker(self, slot: int):
        # A signal that lands inside Popen would leave a started worker that nobody holds
        # (it outlives the run): the signal waits until the worker is tracked.
        with _signals_deferred():
            if self.config.executor == "ray":
                # deferred: ray is an optional extra, imported only by runs that ask for it
                from symfuzz.ray_executor import RayWorker

                worker = RayWorker(slot, self.config, self.events)
            else:
                worker = Worker(slot, self.config, self.events)
            self.spawned.append(worker)
        return worker

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

    def _assign_next(self, worker) -> None:
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

    def _add_to_corpus(self, case: Optional[dict], msg: dict) -> None:
        """Keep a finished case that reached something no earlier case of this run did."""
        if self.corpus is None or not case:
            return
        why = []
        for op in sorted(set(msg.get("ops") or {})):
            if op not in self.reached["op"]:
                self.reached["op"].add(op)
                why.append(f"op:{op}")
        for shape in msg.get("guard_shapes") or []:
            if shape not in self.reached["guards"]:
                self.reached["guards"].add(shape)
                why.append(f"guards:{shape}")
        graphs, planned = msg.get("graphs") or [], msg.get("planned") or []
        purposes = ["drawn"] * (len(graphs) - len(planned)) + list(planned)
        for purpose, count in list(zip(purposes, graphs))[1:]:
            # which kind of call recompiled: a drawn call, or a guard-directed one (outside a guard...)
            if count and count > 0 and purpose not in self.reached["recompile"]:
                self.reached["recompile"].add(purpose)
                why.append(f"recompile:{purpose}")
        if why and not str(msg.get("index", "")).startswith(CORPUS_PREFIX):
            self.corpus.add(case, self.config.lane.name, why, environment().get("torch"))

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

    def _canary_done(self, worker: Worker, msg: dict) -> None:
        """Record the canary's outcome; raise CampaignError if it failed."""
        worker.canary = False
        failure = canary_failure(msg)
        detail = msg.get("internal_error") or json.dumps(
            {k: msg.get(k) for k in ("valid", "compiled", "calls", "checked", "graphs", "verdicts", "first_errors")}, indent=1)
        self._record_canary(failure, round(msg.get("total_seconds", 0.0), 2), detail)
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
        for sig in sorted(self.confirmed):
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

    def _finish_confirmations(self, confirmer: threading.Thread) -> None:
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

    def _watchdog(self, workers, now):
        for w in workers:
            if not w.busy or w.killed_for:
                continue
            if now - w.since > (self.canary_limit if w.canary or w.warming else self.config.case_timeout):
                w.kill("timeout")
            elif w.rss_mb() > self.config.memory_limit_mb:
                w.kill("out-of-memory")

    def _handle(self, worker: Worker, msg, workers, accepting):
        if msg is None:  # the worker process ended
            return self._worker_ended(worker, workers, accepting)
        event = msg["event"]
        if event == "ready":
            worker.ready = True
        elif event == "canary":
            self._canary_done(worker, msg)
        elif event == "warm":
            worker.warming = False
        elif event in ("started", "planned"):
            worker.case = msg["case"]  # "planned": guard-directed calls were appended
        elif event == "judged":
            worker.judged = [Verdict.from_json(v) for v in msg["verdicts"]]
        elif event == "result":
            if "case" in msg:
                worker.case = msg["case"]
            verdicts = [Verdict.from_json(v) for v in msg.get("verdicts", [])]
            if str(msg.get("index")).startswith(CORPUS_PREFIX) and ("internal_error" in msg or not msg["valid"]):
                # A stored case this torch or symfuzz no longer runs (it was stored by an older
                # one): stale, not a sign that this run tests nothing.
                self.stats.replay["stale"] = self.stats.replay.get("stale", 0) + 1
                self.stats.count_index(msg["index"])
                worker.index = worker.case = None
                worker.judged = []
                return workers
            self.stats.add_result(msg, verdicts)
            if "internal_error" in msg:
                self._record_internal_error(msg["index"], msg["internal_error"])
            self._record_health("internal_error" in msg or not msg["valid"])
            if "internal_error" not in msg:
                self._add_to_corpus(worker.case, msg)
            for verdict in verdicts[:1]:
                if str(msg.get("index")).startswith(CORPUS_PREFIX):
                    self.replayed_candidates.add(verdict.signature)
                self.candidate(Finding(case=worker.case, verdict=verdict, lane=self.config.lane.to_json(),
                                       triage=msg.get("triage", {})))
            worker.index = worker.case = None
            worker.judged = []
        return workers

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
                self.candidate(finding)
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

    def _shelve_unconfirmed(self) -> None:
        """Keep every candidate that never got a fresh-process verdict."""
        pending = []
        if self.in_confirmation is not None and self.in_confirmation.confirmation is None:
            pending.append(self.in_confirmation)
        while True:
            try:
                finding = self.confirm_queue.get_nowait()
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

    def write_stats(self, wall: float) -> dict:
        extra = {
            "confirmed": len(self.confirmed) if self.config.confirm else 0,
            "reported_unconfirmed": self.summary["reported_unconfirmed"],
            "flaky": self.summary["flaky"],
            "suspect": self.summary["suspect"],
            "unconfirmed": self.summary["unconfirmed"],
            "duplicates": self.summary["duplicates"],
            "signatures": sorted(self.confirmed),
            "interrupted": self.interrupted,
            "interrupted_by": self.interrupted_by,
            "minified": self.minified,
        }
        data = self.stats.to_json(wall, extra)
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
                    self.stats.prior_wall + wall, write_json)
        append_line(self.out / "timeline.jsonl", self.stats.timeline_line(wall, extra["confirmed"], data["time_seconds"]))
        return data


def _death_cause(returncode: Optional[int]) -> str:
    """A signal's name, "exit N", or, with no status at all (a Ray actor whose node went
    away takes its worker with it), "host lost"."""
    if returncode is None:
        return "host lost"
    return signal.Signals(-returncode).name if returncode < 0 else f"exit {returncode}"


@contextlib.contextmanager
def _signals_deferred():
    """SIGINT and SIGTERM received inside the block take effect when it ends (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)  # raises KeyboardInterrupt or Terminated
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), caught[0])


def _stored_signatures(root: Path) -> list[str]:
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
