"""A time-boxed fuzz campaign over warm worker processes.

The campaign hands case indices to workers; case ``i`` is a pure function
of (seed, i), so the same seed and torch version give the same programs,
whatever the timing. A worker that segfaults, hangs past the case timeout,
or grows past the memory limit is killed, its in-flight case becomes a
finding, and a fresh worker takes its place.

Every candidate failure is confirmed by running its repro.py in a fresh
process before it is reported. Output folder:

    OUT/stats.json            updated as the campaign goes
    OUT/findings/<sig>/       confirmed findings (finding.json, repro.py)
    OUT/flaky/<sig>/          failed in the worker, passed in a fresh process
    OUT/candidates.jsonl      every candidate, as soon as it is seen
    OUT/unconfirmed/<sig>/    the budget ran out before confirmation
    OUT/workers/*.log         worker stderr
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from corpus.atomic import append_line, write_json
from corpus.finding import Finding, environment
from corpus.replay import replay_finding
from corpus.store import FindingStore
from oracles.lanes import Lane

from .progress import Progress


@dataclass(frozen=True)
class CampaignConfig:
    out: Path
    lane: Lane
    budget: float = 120.0  # seconds of fuzzing (confirmation may run a little past it)
    seed: int = 0
    jobs: int = 2
    case_timeout: float = 180.0  # one case, compile included (a first compile takes ~20 s)
    memory_limit_mb: int = 6144  # per worker, resident
    confirm: bool = True
    confirm_timeout: float = 300.0
    confirm_grace: float = 240.0  # extra time after the budget for pending confirmations
    max_cases: Optional[int] = None  # stop after this many cases (tests, benchmarks)
    max_findings: Optional[int] = None  # stop once this many findings are confirmed
    gen_config: dict = field(default_factory=dict)
    quiet: bool = False


class CampaignError(Exception):
    """The campaign cannot go on (e.g. workers cannot start); the message says why."""


class Stats:
    """What stats.json reports."""

    def __init__(self, config: CampaignConfig):
        self.started = time.time()
        self.config = config
        self.counts = Counter()
        self.seconds = Counter()
        self.ops = Counter()
        self.graphs_per_call = Counter()
        self.symptoms = Counter()

    def add_result(self, msg: dict) -> None:
        c = self.counts
        c["programs_generated"] += 1
        if "internal_error" in msg:
            c["internal_errors"] += 1
            return
        c["programs_valid"] += msg["valid"]
        c["programs_compiled"] += msg["compiled"]
        c["programs_called"] += msg["calls"] > 0
        c["calls"] += msg["calls"]
        c["calls_checked"] += msg["checked"]
        c["recompiles"] += msg["recompiles"]
        c["candidates"] += bool(msg["verdicts"])
        for name, value in msg["seconds"].items():
            self.seconds[name] += value
        self.ops.update(msg["ops"])
        for g in msg["graphs"]:
            self.graphs_per_call[str(g)] += 1

    def to_json(self, wall: float, extra: dict) -> dict:
        c = self.counts
        generated = max(c["programs_generated"], 1)
        # Workers run for the whole wall time; fresh-process confirmations run
        # beside them, so their time adds to the total rather than hiding in it.
        worker_seconds = wall * self.config.jobs + self.seconds["confirm"]
        tracked = {
            "generating": self.seconds["generate"],
            "compiling": self.seconds["compile"],
            "running": self.seconds["run"],
            "oracles": self.seconds["oracle"] + self.seconds["confirm"],
        }
        tracked["overhead"] = max(0.0, worker_seconds - sum(tracked.values()))
        return {
            "seed": self.config.seed,
            "lane": self.config.lane.name,
            "jobs": self.config.jobs,
            "budget_seconds": self.config.budget,
            "wall_seconds": round(wall, 2),
            "environment": environment(),
            "programs": {
                "generated": c["programs_generated"],
                "valid": c["programs_valid"],
                "compiled": c["programs_compiled"],
                "called": c["programs_called"],
                "validity_rate": round(c["programs_valid"] / generated, 4),
                "internal_errors": c["internal_errors"],
            },
            "calls": {"made": c["calls"], "checked": c["calls_checked"], "recompiles": c["recompiles"],
                      "graphs_compiled_per_call": dict(self.graphs_per_call)},
            "findings": extra,
            "time_seconds": {k: round(v, 2) for k, v in tracked.items()},
            "time_share": {k: round(v / worker_seconds, 4) if worker_seconds else 0 for k, v in tracked.items()},
            "ops": dict(sorted(self.ops.items())),
            "distinct_ops": len(self.ops),
        }


class Worker:
    """One worker process and the thread that reads its protocol stream."""

    def __init__(self, slot: int, config: CampaignConfig, events: queue.Queue):
        self.slot = slot
        self.config = config
        self.events = events
        self.index: Optional[int] = None
        self.case: Optional[dict] = None
        self.since = 0.0
        self.ready = False
        self.killed_for: Optional[str] = None
        log_dir = config.out / "workers"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(log_dir / f"worker-{slot}.log", "a")
        env = dict(os.environ)
        env.update(config.lane.env)
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(config.out / "inductor-cache"))
        env["PYTHONHASHSEED"] = "0"
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else root
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fuzz.worker", "--lane", config.lane.name, "--seed", str(config.seed),
             "--gen-config", json.dumps(config.gen_config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True, bufsize=1,
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

    def assign(self, index: int) -> None:
        self.index, self.case, self.since = index, None, time.monotonic()
        self.proc.stdin.write(json.dumps({"index": index}) + "\n")
        self.proc.stdin.flush()

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def kill(self, reason: str) -> None:
        self.killed_for = reason
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
    def __init__(self, config: CampaignConfig):
        self.config = config
        self.out = Path(config.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.stats = Stats(config)
        self.findings = FindingStore(self.out / "findings")
        self.flaky = FindingStore(self.out / "flaky")
        self.unconfirmed = FindingStore(self.out / "unconfirmed")
        self.events: queue.Queue = queue.Queue()
        self.confirm_queue: queue.Queue = queue.Queue()
        self.confirming: set[str] = set()
        self.twins: dict[str, list[Finding]] = {}
        self.lock = threading.Lock()
        self.next_index = 0
        self.progress = Progress(config.budget, enabled=not config.quiet)
        self.summary = Counter()

    # ------------------------------------------------------------ candidates

    def candidate(self, finding: Finding) -> None:
        """A failure seen in a worker: log it now, confirm it in a fresh process."""
        append_line(self.out / "candidates.jsonl", finding.to_json())
        sig = finding.signature
        with self.lock:
            if sig in self.findings:
                self.findings.add(finding)  # a duplicate of a confirmed finding
                self.summary["duplicates"] += 1
                return
            if not self.config.confirm:
                self.findings.add(finding)
                self.summary["unconfirmed_reported"] += 1
                return
            if sig in self.confirming:
                self.twins.setdefault(sig, []).append(finding)  # decided with its twin
                return
            self.confirming.add(sig)
        self.confirm_queue.put(finding)

    def confirm_loop(self, stop: threading.Event) -> None:
        while not (stop.is_set() and self.confirm_queue.empty()):
            try:
                finding = self.confirm_queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if stop.is_set() and time.monotonic() > self.confirm_deadline:
                self.confirm_queue.put(finding)
                return  # the rest is shelved as unconfirmed
            t0 = time.monotonic()
            outcome = replay_finding(
                finding, timeout=self.config.confirm_timeout,
                env_extra={"TORCHINDUCTOR_CACHE_DIR": str(self.out / "confirm-cache")},
            )
            self.stats.seconds["confirm"] += time.monotonic() - t0
            finding.confirmation = outcome.to_json()
            with self.lock:
                sig = finding.signature
                twins = self.twins.pop(sig, [])
                if outcome.status in ("reproduced", "different"):
                    self.summary["findings"] += self.findings.add(finding)
                    for twin in twins:
                        self.findings.add(twin)
                    self.progress.note(f"finding {sig} ({finding.verdict['symptom']}), confirmed in a fresh process")
                else:
                    self.flaky.add(finding)
                    self.summary["flaky"] += 1
                    self.confirming.discard(sig)
                    if twins and self.summary[f"tries:{sig}"] < 2:
                        # Another case with this signature gets its own chance.
                        self.summary[f"tries:{sig}"] += 1
                        self.confirming.add(sig)
                        self.twins[sig] = twins[1:]
                        self.confirm_queue.put(twins[0])
                    else:
                        for twin in twins:
                            self.flaky.add(twin)

    def death_finding(self, worker: Worker, returncode: Optional[int]) -> Optional[Finding]:
        from oracles.standalone import signature

        if worker.case is None:
            return None
        reason = worker.killed_for
        if reason == "timeout":
            symptom, key, evidence = "timeout", "timeout", {"timeout_seconds": self.config.case_timeout}
        elif reason == "out-of-memory":
            symptom, key = "process-death", "out-of-memory"
            evidence = {"cause": "out-of-memory", "limit_mb": self.config.memory_limit_mb}
        else:
            sig_name = signal.Signals(-returncode).name if returncode and returncode < 0 else f"exit {returncode}"
            symptom, key, evidence = "process-death", sig_name, {"cause": sig_name, "returncode": returncode}
        log_tail = _tail(self.out / "workers" / f"worker-{worker.slot}.log")
        evidence["worker_log_tail"] = log_tail
        verdict = {
            "ok": False, "oracle": "isolation", "symptom": symptom, "stage": "unknown",
            "signature": signature(symptom, self.config.lane.name, key), "call_index": None, "evidence": evidence,
        }
        return Finding(case=worker.case, verdict=verdict, lane=self.config.lane.to_json())

    # ------------------------------------------------------------ main loop

    def run(self) -> dict:
        cfg = self.config
        start = time.monotonic()
        deadline = start + cfg.budget
        self.confirm_deadline = deadline + cfg.confirm_grace
        stop_confirming = threading.Event()
        confirmer = threading.Thread(target=self.confirm_loop, args=(stop_confirming,), daemon=True)
        confirmer.start()
        workers = [Worker(slot, cfg, self.events) for slot in range(cfg.jobs)]
        last_stats = 0.0
        interrupted = False
        try:
            while True:
                now = time.monotonic()
                accepting = (
                    now < deadline
                    and (cfg.max_cases is None or self.next_index < cfg.max_cases)
                    and (cfg.max_findings is None or self.summary["findings"] < cfg.max_findings)
                )
                for w in workers:
                    if w.ready and w.index is None and accepting:
                        w.assign(self.next_index)
                        self.next_index += 1
                if not accepting and all(w.index is None or not w.ready for w in workers):
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
                self.progress.update(now - start, self.stats.counts, self.summary)
        except KeyboardInterrupt:
            interrupted = True
            self.progress.note("interrupted: stopping workers; unconfirmed candidates kept in unconfirmed/")
            self._shelve_unconfirmed()
        finally:
            for w in workers:
                w.close()
            stop_confirming.set()
            if not interrupted:
                if not self.confirm_queue.empty() or self.confirming - set(self._confirmed()):
                    self.progress.note("budget spent; finishing confirmations in fresh processes")
                confirmer.join(timeout=cfg.confirm_grace + cfg.confirm_timeout)
            self._shelve_unconfirmed()
            self.progress.finish()
        wall = time.monotonic() - start
        return self.write_stats(wall)

    def _watchdog(self, workers, now):
        for w in workers:
            if w.index is None:
                continue
            if now - w.since > self.config.case_timeout:
                w.kill("timeout")
            elif w.rss_mb() > self.config.memory_limit_mb:
                w.kill("out-of-memory")

    def _handle(self, worker: Worker, msg, workers, accepting):
        if msg is None:  # the worker process ended
            if worker.index is not None:
                finding = self.death_finding(worker, worker.proc.returncode)
                self.stats.counts["programs_generated"] += 1
                self.stats.counts["worker_deaths"] += 1
                if finding is not None:
                    self.candidate(finding)
            elif not worker.ready:
                raise CampaignError(
                    f"worker {worker.slot} exited before it was ready (code {worker.proc.returncode}); "
                    f"see {self.out / 'workers' / f'worker-{worker.slot}.log'}"
                )
            worker.close()
            workers = [w for w in workers if w is not worker]
            if accepting:
                workers.append(Worker(worker.slot, self.config, self.events))
            return workers
        event = msg["event"]
        if event == "ready":
            worker.ready = True
        elif event == "started":
            worker.case = msg["case"]
        elif event == "result":
            self.stats.add_result(msg)
            if "internal_error" in msg:
                append_line(self.out / "internal_errors.jsonl", {"index": msg["index"], "traceback": msg["internal_error"]})
            for verdict in msg.get("verdicts", [])[:1]:
                self.candidate(Finding(case=worker.case, verdict=verdict, lane=self.config.lane.to_json(),
                                       triage=msg.get("triage", {})))
            worker.index = worker.case = None
        return workers

    def _confirmed(self) -> list[str]:
        return [f.signature for f in self.findings]

    def _shelve_unconfirmed(self) -> None:
        """Keep every candidate that never got a fresh-process verdict."""
        while True:
            try:
                finding = self.confirm_queue.get_nowait()
            except queue.Empty:
                break
            self.unconfirmed.add(finding)
            self.summary["unconfirmed"] += 1
        with self.lock:
            for twins in self.twins.values():
                for twin in twins:
                    self.unconfirmed.add(twin)
            self.twins.clear()

    def write_stats(self, wall: float) -> dict:
        extra = {
            "confirmed": len(self.findings),
            "flaky": len(self.flaky),
            "unconfirmed": len(self.unconfirmed),
            "duplicates": self.summary["duplicates"],
            "signatures": sorted(p.name for p in (self.out / "findings").glob("*") if (p / "finding.json").exists()),
        }
        data = self.stats.to_json(wall, extra)
        write_json(self.out / "stats.json", data)
        return data


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
