"""The minifier's driver: run passes over a subject while the failure stays the same.

A *subject* is what gets shrunk: a fuzzer finding's Case (``case_subject``)
or a graph captured from a user's script (``graph_subject``). It knows how to
measure itself, how to write the script that runs it in a fresh process
(``query_script``), and the readable repro for users (``repro_script``).

A *pass* is a top-level function ``pass_fn(subject) -> Iterator[subject]``
yielding smaller candidates, most ambitious first. Passes never run
anything: the driver does all the bookkeeping.

- Every candidate is checked in its own subprocess with a timeout (the
  ``Criterion`` says how to run it and whether the outcome is "the same bug"),
  forked from a warm server that imported torch once (``warm_queries``), and
  never twice: answers are memoized by the candidate's JSON.
- A subject with ``cheaper_variants`` (a finding of an Inductor lane) is first
  run on those lanes; where one fails the same way, the passes run there and the
  result is checked on the subject's own lane at the end.
- A candidate is accepted only if it is strictly smaller (``subject.cost()``)
  and interesting; the pass is then restarted on it. Rounds over all passes
  repeat until one makes no progress or the budget runs out.
- With ``jobs > 1`` candidates are checked in batches, and the *first*
  interesting candidate in pass order wins, whatever finished first: the
  same input gives the same result at any ``jobs``.
- The best subject so far is written to disk each time it improves
  (``best.json``, ``repro.py``, ``report.json``), so an interrupted run
  loses nothing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Protocol

from symfuzz.corpus.atomic import write_json, write_text
from symfuzz.corpus.deaths import DeathPlace, place_of
from symfuzz.corpus.deaths import failure_id as death_failure_id
from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.corpus.replay import ScriptRunner
from symfuzz.corpus.short_repro import JUDGE_NAME
from symfuzz.minifier.warm_queries import WarmPool, WarmRunner
from symfuzz.oracles.verdict import OUT_OF_MEMORY
from symfuzz.corpus.replay import result_line as parse_result


class Subject(Protocol):
    kind: str  # "case" or "graph"

    def to_json(self) -> dict: ...

    def measure(self) -> dict: ...  # {"ops", "nodes", "elements", "calls", "dynamic_dims"}

    def cost(self) -> tuple: ...  # lexicographic; strictly smaller is progress

    def query_script(self) -> str: ...  # runs it fresh, prints "SYMFUZZ-RESULT {json}"

    def repro_script(self) -> str: ...  # the readable repro users get


Pass = Callable[[Subject], Iterator[Subject]]


@dataclass
class QueryOutcome:
    """How one fresh-process run of a candidate ended."""

    returncode: Optional[int]  # None: timed out
    result: Optional[dict]  # the parsed SYMFUZZ-RESULT line, if any
    output: str
    seconds: float
    memory_exceeded: bool = False
    # Where it died, hung or grew past the memory limit, from the stack it printed
    # (corpus/deaths.py); read while a kernel the stack names is still on disk.
    place: Optional[DeathPlace] = None

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def signal_name(self) -> Optional[str]:
        code = self.returncode
        if code is not None and code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return None

    def failure_id(self) -> Optional[str]:
        """A name for how the run failed: the result's signature, a signal, a
        timeout, or None if it did not fail (or could not be judged)."""
        if self.result is not None and self.result.get("ok") is False:
            return self.result.get("signature") or self.result.get("symptom")
        if self.memory_exceeded:
            return death_failure_id("process-death", OUT_OF_MEMORY, self.place)
        if self.signal_name:
            return death_failure_id("process-death", self.signal_name, self.place)
        if self.timed_out:
            return death_failure_id("timeout", "timeout", self.place)
        return None


class Criterion:
    """Decides whether a candidate still shows the bug. Subclasses in ``criteria``."""

    description = "?"
    # True when the verdict comes from the script's SYMFUZZ-RESULT line. A short
    # repro prints none, so for such criteria the subject judges it instead
    # (``repro_matches``); a regex or an external script applies to it as it is.
    reads_result_line = False
    # True when "the same bug" is a failure key that names no lane (a stored signature: its
    # scripts sign under the finding's lane whichever lane compiles), so a cheaper lane may stand in.
    lane_free = False

    def command(self, script: Path) -> list[str]:
        return [sys.executable, str(script)]

    def calibrate(self, original: QueryOutcome) -> None:
        """Called once with the original's outcome, before any candidate."""

    def interesting(self, outcome: QueryOutcome) -> bool:
        raise NotImplementedError

    def explain(self, outcome: QueryOutcome) -> str:
        """Why ``outcome`` is not interesting, for the "original does not fail" message."""
        found = outcome.failure_id()
        return f"it ended with exit code {outcome.returncode}" + (f" and failure {found}" if found else " and no failure")


def run_query(script_text: str, criterion: Criterion, timeout: float, env: dict,
              memory_limit_mb: Optional[int] = None, cache_dir: Optional[Path] = None,
              runner: Optional[ScriptRunner] = None) -> QueryOutcome:
    """Run one candidate script in a fresh process of its own session.

    ``cache_dir`` is the Inductor cache shared by one minify run's queries:
    the first compile in a fresh process spends most of its ~20 s building
    C++ artifacts that only depend on the toolchain, and sharing them makes
    each later query cheaper. Compiled kernels are keyed by their source, so
    a shared cache cannot mix up two candidates; lanes that must not reuse
    compiled graphs turn the FX graph cache off themselves.
    """
    with tempfile.TemporaryDirectory(prefix="symfuzz-minify-") as tmp:
        folder = Path(tmp)
        script = folder / "repro.py"
        script.write_text(script_text)
        extra = query_env(cache_dir or folder / "inductor-cache", env)
        runner = runner or ScriptRunner()
        code, out, seconds, exceeded = runner.run_command(criterion.command(script), folder, extra, timeout,
                                                          memory_limit_mb)
        died = code is None or code < 0 or exceeded
        place = place_of(out, hang=code is None or exceeded) if died else None
    return QueryOutcome(code, parse_result(out), out, round(seconds, 2), exceeded, place)


def query_env(cache_dir: Path, env: dict) -> dict:
    """The environment a query runs with, on top of this process's."""
    extra = {"TORCHINDUCTOR_CACHE_DIR": fresh_cache(cache_dir), "PYTHONHASHSEED": "0"}
    extra.update(env)
    return extra


@dataclass
class PassStats:
    queries: int = 0
    accepted: int = 0
    seconds: float = 0.0
    rejected_not_smaller: int = 0
    implausible: int = 0
    skipped_runs: int = 0  # rounds it sat out: what it watches had not changed since it found nothing

    def to_json(self) -> dict:
        return dict(self.__dict__, seconds=round(self.seconds, 1))


@dataclass
class Result:
    original: Subject
    best: Subject
    before: dict
    after: dict
    queries: int
    seconds: float
    passes: dict = field(default_factory=dict)
    stopped: str = "running"  # then "fixpoint", "budget" or "interrupted"
    original_outcome: Optional[QueryOutcome] = None
    repro_check: Optional[dict] = None
    work_dir: Optional[Path] = None
    repro_path: Optional[Path] = None
    lane: dict = field(default_factory=dict)  # a cheaper lane tried or minified on (driver._cheapest_lane_showing)
    # Wall seconds per phase: the original's check, trying cheaper lanes, the passes, the
    # check back on the finding's own lane, the final repro's check (benchmarks/minify.py).
    phases: dict = field(default_factory=dict)

    def report(self) -> dict:
        return {
            "kind": self.best.kind,
            "before": self.before,
            "after": self.after,
            "queries": self.queries,
            "seconds": round(self.seconds, 1),
            "stopped": self.stopped,
            "passes": {name: s.to_json() for name, s in self.passes.items()},
            "repro_check": self.repro_check,
            "repro": str(self.repro_path) if self.repro_path else None,
            "lane": self.lane,
            "phases": {name: round(seconds, 1) for name, seconds in self.phases.items()},
        }


class OriginalDoesNotFail(Exception):
    """The subject as given does not show the failure; minifying it would be meaningless."""


class Driver:
    def __init__(self, criterion: Criterion, out_dir: Path, *, budget: float = 600.0, jobs: int = 1,
                 query_timeout: float = 300.0, env: Optional[dict] = None, memory_limit_mb: Optional[int] = None,
                 progress: Optional[Callable[[str], None]] = None, max_rounds: int = 8,
                 repro_path: Optional[Path] = None, warm: bool = True, cheapest_lane_first: bool = True,
                 skip_fruitless: bool = True):
        self.criterion = criterion
        self.out_dir = Path(out_dir)
        self.repro_path = Path(repro_path) if repro_path else self.out_dir / "repro.py"
        self.budget = budget
        self.jobs = max(1, jobs)
        self.query_timeout = query_timeout
        self.env = dict(env or {})
        self.memory_limit_mb = memory_limit_mb
        self.say = progress or (lambda message: print(message, file=sys.stderr, flush=True))
        self.max_rounds = max_rounds
        self.queries = 0
        self.cache: dict[str, bool] = {}  # candidate json -> interesting
        self.cache_dir: Optional[Path] = None  # the Inductor cache of this run's queries
        self.runners: set = set()  # queries in flight, to kill on Ctrl-C
        self.warm = warm  # run queries on warm servers (minifier/warm_queries.py) rather than cold interpreters
        self.pool: Optional[WarmPool] = None
        self.cheapest_lane_first = cheapest_lane_first
        self.skip_fruitless = skip_fruitless  # a pass's ``watches`` may keep it from running again (_rounds)
        self.lanes_tried: dict = {}
        self.lock = threading.Lock()
        self.start = 0.0

    # -- queries

    def check(self, subject: Subject) -> QueryOutcome:
        return self._run(subject.query_script())

    def _run(self, script: str) -> QueryOutcome:
        runner = WarmRunner(self.pool)
        with self.lock:
            self.queries += 1
            self.runners.add(runner)
        try:
            return run_query(script, self.criterion, self.query_timeout, self.env, self.memory_limit_mb,
                             self.cache_dir, runner)
        finally:
            with self.lock:
                self.runners.discard(runner)

    def _cancel_queries(self) -> None:
        """Kill every running query (they run in sessions of their own: Ctrl-C does not reach them)."""
        with self.lock:
            for runner in self.runners:
                runner.cancel()

    def _interesting(self, subject: Subject) -> bool:
        key = json.dumps(subject.to_json(), sort_keys=True, default=str)
        if key not in self.cache:
            self.cache[key] = self.criterion.interesting(self.check(subject))
        return self.cache[key]

    def _out_of_time(self) -> bool:
        return time.monotonic() - self.start > self.budget

    # -- the loop

    def minify(self, subject: Subject, passes: list[Pass]) -> Result:
        with tempfile.TemporaryDirectory(prefix="symfuzz-minify-cache-") as cache:
            self.cache_dir = Path(cache)
            if self.warm:
                # One warm server per concurrent query, with the environment every query shares.
                self.pool = WarmPool(query_env(self.cache_dir, self.env), self.jobs)
            try:
                return self._minify(subject, passes)
            finally:
                if self.pool is not None:
                    self.pool.close()
                    self.pool = None
                self.cache_dir = None

    def _minify(self, subject: Subject, passes: list[Pass]) -> Result:
        self.start = time.monotonic()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        phases: dict = {}
        original_outcome = None
        try:
            with _timed_into(phases, "cheaper_lanes"):
                cheaper = self._cheapest_lane_showing(subject)
            if cheaper is None:
                described = self.criterion.description
                with _timed_into(phases, "original"):
                    original_outcome = self._check_original(subject)
                if self.criterion.description != described:
                    # The bug is known by another signature now (a finding an older symfuzz keyed):
                    # the cheaper lanes may show that one.
                    with _timed_into(phases, "cheaper_lanes"):
                        cheaper = self._cheapest_lane_showing(subject)
        except KeyboardInterrupt:
            self._cancel_queries()
            raise
        result = Result(subject, subject, subject.measure(), subject.measure(), 1, 0.0,
                        {p.__name__: PassStats() for p in passes},
                        original_outcome=original_outcome or cheaper[1], work_dir=self.out_dir,
                        repro_path=self.repro_path, lane=self.lanes_tried, phases=phases)
        if original_outcome is not None:
            self.cache[json.dumps(subject.to_json(), sort_keys=True, default=str)] = True
        if cheaper is None:
            self.say(f"minify: the original fails as expected; {_describe(result.before)}")
        else:
            result.best = cheaper[0]
            self.say(f"minify: it fails the same way on {cheaper[0].run_lane_name}: minifying there, with a "
                     f"final check on {subject.run_lane_name}; {_describe(result.before)}")
        self._save(result)
        try:
            with _timed(result, "passes"):
                stopped = self._rounds(passes, result)
            if getattr(result.best, "run_lane", None) is not None:
                with _timed(result, "own_lane_check"):
                    stopped = self._back_on_own_lane(subject, passes, result, stopped)
            result.stopped = stopped
            return self._finish(result)
        except KeyboardInterrupt:
            self._cancel_queries()
            result.stopped = "interrupted"
            self._finish(result, check_repro=False)
            raise

    def _rounds(self, passes: list[Pass], result: Result) -> str:
        """Rounds over all passes until one makes no progress; how they stopped.

        A pass with ``watches`` (subject -> a key: e.g. the statements, for a pass that
        removes statements) runs again only once what it watches changed since it
        last found nothing: the sizes or marks other passes shrank since then do
        not make its candidates new ones worth a query each."""
        fruitless: dict = {}  # pass -> its ``watches`` key when it last found nothing
        for _ in range(self.max_rounds):
            progressed = False
            for pass_fn in passes:
                if self._out_of_time():
                    break
                watches = getattr(pass_fn, "watches", None) if self.skip_fruitless else None
                key = watches(result.best) if watches is not None else None
                if watches is not None and pass_fn in fruitless and fruitless[pass_fn] == key:
                    result.passes[pass_fn.__name__].skipped_runs += 1
                    continue
                if self._run_pass(pass_fn, result):
                    progressed = True
                    fruitless.pop(pass_fn, None)
                elif watches is not None:
                    fruitless[pass_fn] = key
            if self._out_of_time():
                return "budget"
            if not progressed:
                return "fixpoint"
        return "max-rounds"

    # -- the cheapest lane first

    def _cheapest_lane_showing(self, subject: Subject) -> Optional[tuple[Subject, QueryOutcome]]:
        """(the subject on the cheapest lane where it fails the same way, that run), or None.

        ``cheaper_variants`` are e.g. eager and aot_eager for an Inductor finding whose bug is in
        Dynamo or AOTAutograd. Tried before the original itself: a query there skips Inductor's
        compile, the bulk of a query's time, and a variant that fails under the finding's own
        signature shows the bug as well as the original would. The original is checked on its
        own lane only when no variant fails so; the result is always checked there at the end
        (``_back_on_own_lane``)."""
        self.lanes_tried = {}
        if not (self.cheapest_lane_first and self.criterion.lane_free):
            return None
        for variant in getattr(subject, "cheaper_variants", lambda: [])():
            if self._out_of_time():
                break
            self.say(f"minify: does it fail the same way on {variant.run_lane_name} ({self.criterion.description})? ...")
            outcome = self.check(variant)
            interesting = self.criterion.interesting(outcome)
            self.cache[json.dumps(variant.to_json(), sort_keys=True, default=str)] = interesting
            self.lanes_tried.setdefault("tried", []).append(variant.run_lane_name)
            if interesting:
                self.lanes_tried["minified_on"] = variant.run_lane_name
                return variant, outcome
        return None

    def _check_original(self, subject: Subject) -> QueryOutcome:
        """Run the original; calibrate the criterion on it; raise unless it fails as required."""
        self.say(f"minify: checking that the original fails ({self.criterion.description}) ...")
        outcome = self.check(subject)
        self.criterion.calibrate(outcome)
        if not self.criterion.interesting(outcome):
            raise OriginalDoesNotFail(self.criterion.explain(outcome))
        return outcome

    def _back_on_own_lane(self, original: Subject, passes: list[Pass], result: Result, stopped: str) -> str:
        """Check the result minified on a cheaper lane on the finding's own lane. If it does not
        fail the same way there, minify again on the own lane, from the original (checked first)."""
        own = result.best.on_own_lane()
        self.say(f"minify: checking the result on {own.run_lane_name} ...")
        if self._interesting(own):
            result.best = own
            result.lane["final_check"] = "same failure"
            return stopped
        self.say(f"minify: on {own.run_lane_name} it does not fail the same way: minifying again there, from the "
                 "original")
        result.lane["final_check"] = "different: minified again on the finding's lane"
        outcome = self._check_original(original)
        self.cache[json.dumps(original.to_json(), sort_keys=True, default=str)] = True
        result.original_outcome = outcome
        result.best = original
        result.after = original.measure()
        self._save(result)
        return self._rounds(passes, result)

    def _run_pass(self, pass_fn: Pass, result: Result) -> bool:
        """Run one pass to its own fixpoint; True if it accepted anything."""
        stats = result.passes[pass_fn.__name__]
        began = time.monotonic()
        progressed = False
        try:
            restart = True
            while restart and not self._out_of_time():
                restart = False
                current = result.best
                current_cost = current.cost()
                batch: list[Subject] = []
                for candidate in pass_fn(current):
                    if not candidate.cost() < current_cost:
                        stats.rejected_not_smaller += 1  # the driver demands progress
                        continue
                    if not _plausible(candidate):
                        stats.implausible += 1  # cheap in-process filter: no query spent
                        continue
                    batch.append(candidate)
                    if len(batch) < self.jobs:
                        continue
                    winner = self._first_interesting(batch, stats)
                    batch = []
                    if winner is not None:
                        self._accept(winner, result, stats, pass_fn.__name__, began)
                        began = time.monotonic()
                        progressed = restart = True
                        break
                    if self._out_of_time():
                        break
                else:
                    if batch:
                        winner = self._first_interesting(batch, stats)
                        if winner is not None:
                            self._accept(winner, result, stats, pass_fn.__name__, began)
                            began = time.monotonic()
                            progressed = restart = True
        finally:
            stats.seconds += time.monotonic() - began
        return progressed

    def _first_interesting(self, batch: list[Subject], stats: PassStats) -> Optional[Subject]:
        before = self.queries
        if self.jobs == 1 or len(batch) == 1:
            verdicts = []
            for candidate in batch:
                verdicts.append(self._interesting(candidate))
                if verdicts[-1]:
                    break
        else:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs)
            try:
                verdicts = list(pool.map(self._interesting, batch))
            except BaseException:
                self._cancel_queries()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
        stats.queries += self.queries - before
        for candidate, interesting in zip(batch, verdicts):
            if interesting:
                return candidate
        return None

    def _accept(self, candidate: Subject, result: Result, stats: PassStats, name: str, began: float) -> None:
        stats.seconds += time.monotonic() - began  # counted so far, so that report.json is current
        result.best = candidate
        result.after = candidate.measure()
        stats.accepted += 1
        self._save(result)
        elapsed = time.monotonic() - self.start
        self.say(f"minify: [{elapsed:5.0f}s, {self.queries} queries] {name}: {_describe(result.after)}")

    def _save(self, result: Result) -> None:
        result.queries = self.queries
        result.seconds = time.monotonic() - self.start
        write_json(self.out_dir / "best.json", {"kind": result.best.kind, "subject": result.best.to_json()})
        write_text(self.repro_path, self._repro_text(result))
        os.chmod(self.repro_path, 0o755)
        judge = self.repro_path.with_name(JUDGE_NAME)
        check = result.repro_check
        if check is not None and check["same_bug"] and check["short"]:
            # Beside the short repro, the judged script (float64 reference, signature): it decides.
            judge_script = getattr(result.best, "judge_script", result.best.query_script)
            write_text(judge, judge_script())
            os.chmod(judge, 0o755)
        elif judge.exists():
            judge.unlink()  # an earlier save's: repro.py is the judged script itself now
        write_json(self.out_dir / "report.json", result.report())

    @staticmethod
    def _repro_text(result: Result) -> str:
        # The short repro is used once it has been seen to fail the same way;
        # until then (and if it does not) the judged query script is the repro.
        check = result.repro_check
        if check is not None and check["same_bug"]:
            return result.best.repro_script()
        return result.best.query_script()

    def _finish(self, result: Result, check_repro: bool = True) -> Result:
        if check_repro:
            self.say("minify: checking the final repro in a fresh process ...")
            with _timed(result, "repro_check"):
                result.repro_check = self._check_repro(result.best)
            if not result.repro_check["same_bug"]:
                self.say("minify: the short repro does not show the same failure; repro.py is the full judged script")
        result.after = result.best.measure()
        self._save(result)
        return result

    def _check_repro(self, subject: Subject) -> dict:
        """Run the user-facing repro fresh: does it still fail the same way?
        (It is a simpler script than the query script, so it is checked on its own.)"""
        script = subject.repro_script()
        outcome = self._run(script)
        fails = outcome.returncode != 0
        short = script != subject.query_script()
        matches = getattr(subject, "repro_matches", None)
        if short and matches is not None and self.criterion.reads_result_line:
            same = matches(outcome)
        else:
            same = self.criterion.interesting(outcome)
        return {"fails": fails, "same_bug": bool(same), "short": short, "returncode": outcome.returncode,
                "seconds": outcome.seconds, "output_tail": outcome.output[-1500:]}


@contextlib.contextmanager
def _timed_into(phases: dict, phase: str):
    began = time.monotonic()
    try:
        yield
    finally:
        phases[phase] = phases.get(phase, 0.0) + time.monotonic() - began


def _timed(result: Result, phase: str):
    return _timed_into(result.phases, phase)


def _plausible(subject: Subject) -> bool:
    check = getattr(subject, "plausible", None)
    return True if check is None else bool(check())


def _describe(measure: dict) -> str:
    parts = [f"{measure[k]} {k.replace('_', ' ')}" for k in ("ops", "nodes", "calls", "elements", "dynamic_dims")
             if k in measure]
    return ", ".join(parts)


def format_report(result: Result) -> str:
    """A short human table of the reduction."""
    lines = []
    keys = [k for k in ("ops", "nodes", "calls", "elements", "dynamic_dims") if k in result.before]
    for key in keys:
        lines.append(f"  {key.replace('_', ' '):<13} {result.before[key]:>8} -> {result.after[key]}")
    lines.append(f"  time          {result.seconds:8.1f}s, {result.queries} queries ({result.stopped})")
    for name, stats in result.passes.items():
        if stats.queries or stats.accepted:
            lines.append(f"    {name:<28} {stats.queries:4d} queries {stats.accepted:3d} accepted {stats.seconds:7.1f}s")
    return "\n".join(lines)
