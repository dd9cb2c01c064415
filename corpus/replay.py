"""Run repro scripts in fresh processes: confirmation during a campaign, and ``symfuzz replay``.

A run counts as a reproduction only when it fails the same way:
- value, metadata and crash findings: the script itself reports the failure
  (exit 1 *and* its ``SYMFUZZ-RESULT`` line), with the same signature;
- timeouts: the script runs past a longer limit than the case timeout (a fresh
  process pays for imports and a cold compile, and a merely slow program must
  not pass for a hang: see ``hang_limit``), while the same calls in eager alone
  finish well within it. A timeout that finishes under the longer limit is
  "fixed" with the reason "slow, not hung"; one whose eager calls are as slow is
  "broken" (nothing to judge: the program is slow, not the compiler);
- process deaths: the script dies by the same signal, or grows past the
  same resident-memory limit for an out-of-memory finding.
Anything else (an import error, Ctrl-C, another signal) is not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from symfuzz.corpus.deaths import ask_for_stack, cause_of, death_signature, place_of
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.corpus.scripts import EXIT_FIXED, EXIT_REPRODUCED, render_repro
from symfuzz.corpus.short_repro import SHORT_SHOWS, render_short, short_mismatch
from symfuzz.oracles.verdict import OUT_OF_MEMORY, Died, Hung


@dataclass
class ReplayOutcome:
    status: str  # "reproduced", "fixed", "different" (fails, another way), "broken" (could not judge)
    returncode: Optional[int]
    signature: Optional[str]
    seconds: float
    output_tail: str
    memory_exceeded: bool = False
    # for "broken": why nothing could be judged, in one line; for a timeout, also how the
    # hang was judged ("hung: ...", "slow, not hung: ...")
    reason: Optional[str] = None
    # for a death or hang: where this run died or hung ({"phase", "frames"}: corpus/deaths.py)
    place: Optional[dict] = None
    # the short repro.py, run after a reproduction when asked (replay_finding's check_short):
    # SHORT_SHOWS, or why it is not the finding's repro.py ("did not show the bug: ...")
    short_repro: Optional[str] = None

    def to_json(self) -> dict:
        return dict(self.__dict__)


class ScriptRunner:
    """Runs one script at a time in its own session; ``cancel()`` kills it (for Ctrl-C)."""

    def __init__(self):
        self.proc: Optional[subprocess.Popen] = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def run(self, script: Path, env_extra: dict, timeout: float, memory_limit_mb: Optional[int] = None,
            python: Optional[str] = None):
        """(returncode or None on timeout, output, seconds, memory_exceeded); ``python``: another
        environment's interpreter (default: this one)."""
        return self.run_command([python or sys.executable, str(script)], script.parent, env_extra, timeout,
                                memory_limit_mb)

    def run_command(self, argv: list, cwd: Path, env_extra: dict, timeout: float,
                    memory_limit_mb: Optional[int] = None):
        """As ``run``, for any command line."""
        env = dict(os.environ)
        env.update(env_extra)
        env.setdefault("PYTHONHASHSEED", "0")
        # A script that does not enable faulthandler itself (not one of symfuzz's) still prints
        # where it dies: deaths are signed by that place (corpus/deaths.py).
        env.setdefault("PYTHONFAULTHANDLER", "1")
        start = time.monotonic()
        with tempfile.TemporaryFile("w+") as log:
            # Own session: a Ctrl-C at the terminal must not kill it and look like a crash.
            self.proc = proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
            exceeded = timed_out = False
            try:
                while proc.poll() is None:
                    if time.monotonic() - start > timeout:
                        timed_out = True
                    elif memory_limit_mb and resident_mb(proc.pid) > memory_limit_mb:
                        exceeded = True
                    if timed_out or exceeded or self.cancelled:
                        if not self.cancelled:  # where it hung or grew: the finding's signature (deaths.py)
                            ask_for_stack(proc)
                        try:
                            os.killpg(proc.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass  # it ended meanwhile (a process past the memory limit may die on its own)
                        proc.wait()
                        break
                    time.sleep(0.2)
            except BaseException:  # Ctrl-C, SIGTERM: the script is in its own session, so stop it here
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                raise
            log.seek(0)
            out = log.read()
        self.proc = None
        code = None if timed_out else proc.returncode
        return code, out, time.monotonic() - start, exceeded


def resident_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# The environment variable that makes a fuzz repro run its calls in eager only (no
# compile): how long the program itself takes, to tell a hang from a slow program.
EAGER_ONLY_ENV = "SYMFUZZ_EAGER_ONLY"


def hang_limit(case_timeout: float, timeout: float) -> float:
    """How long a timeout finding's repro may run in a fresh process before it counts as hung.

    Twice the case timeout plus a minute (imports, a cold compile per recompile on a
    busy machine), and never less than ``timeout``, the caller's limit for one repro."""
    return max(timeout, 2 * case_timeout + 60)


def replay_finding(finding: Finding, timeout: float = 600.0, env_extra: Optional[dict] = None,
                   runner: Optional[ScriptRunner] = None, python: Optional[str] = None,
                   check_short: bool = False) -> ReplayOutcome:
    """Regenerate the repro from the finding's JSON alone and run it fresh.

    With ``check_short``, a reproduced finding's short repro (``corpus/short_repro.py``)
    runs fresh too, and ``short_repro`` says whether it shows the same failure: the
    store writes it as the finding's repro.py only then."""
    evidence = finding.verdict.evidence
    if isinstance(evidence, Hung):
        timeout = hang_limit(evidence.timeout_seconds, timeout)
    memory_limit = evidence.limit_mb if isinstance(evidence, Died) and evidence.out_of_memory else None
    runner = runner or ScriptRunner()
    with tempfile.TemporaryDirectory(prefix="symfuzz-replay-") as tmp:
        script = Path(tmp) / "repro.py"
        script.write_text(render_repro(finding))
        extra = {"TORCHINDUCTOR_CACHE_DIR": fresh_cache(Path(tmp) / "inductor-cache")}
        extra.update(env_extra or {})
        code, out, seconds, exceeded = runner.run(script, extra, timeout, memory_limit, python)
        outcome = classify(finding, code, out, seconds, exceeded)
        if isinstance(evidence, Hung):
            outcome = _judge_hang(outcome, timeout, evidence.timeout_seconds,
                                  lambda: runner.run(script, {**extra, EAGER_ONLY_ENV: "1"}, timeout, None, python))
        if check_short and outcome.status in ("reproduced", "different") and not runner.cancelled:
            try:
                outcome.short_repro = _check_short(finding, Path(tmp), extra, timeout, memory_limit, runner, python)
            except Exception as exc:  # noqa: BLE001 - the finding is confirmed; only its short script is lost
                outcome.short_repro = f"not checked: symfuzz failed running it: {type(exc).__name__}: {exc}"
    return outcome


def _check_short(finding: Finding, tmp: Path, extra: dict, timeout: float, memory_limit, runner, python):
    short = render_short(finding)
    if short is None:
        return None
    if isinstance(finding.verdict.evidence, Hung):
        return SHORT_SHOWS + " (a hang: not run again)"  # the judged run just hung on the same calls
    script = tmp / "short.py"
    script.write_text(short)
    code, out, _, exceeded = runner.run(script, extra, timeout, memory_limit, python)
    why = short_mismatch(finding, code, out, exceeded)
    return SHORT_SHOWS if why is None else f"did not show the bug: {why}"


def _judge_hang(outcome: ReplayOutcome, limit: float, case_timeout: float, run_eager) -> ReplayOutcome:
    """A timeout is a hang of the compiler only if the compiled repro runs past ``limit``
    while the program's calls in eager alone finish in well under half of it."""
    if outcome.returncode is not None:
        if outcome.status == "fixed":
            outcome.reason = (f"slow, not hung: the repro finished in {outcome.seconds:.0f}s in a fresh process "
                              f"(case timeout {case_timeout:.0f}s, limit {limit:.0f}s)")
        return outcome
    code, out, seconds, _ = run_eager()
    if code is None or seconds > limit / 2:
        took = "ran past the limit" if code is None else f"took {seconds:.0f}s"
        outcome.status = "broken"
        outcome.reason = (f"the program is slow, not the compiler: its calls in eager alone {took} "
                          f"(compiled ran past {limit:.0f}s)")
    else:
        outcome.reason = (f"hung: compiled ran past {limit:.0f}s in a fresh process; the same calls in eager "
                          f"alone took {seconds:.0f}s")
    return outcome


def classify(finding: Finding, code, out: str, seconds: float, memory_exceeded: bool = False) -> ReplayOutcome:
    verdict = finding.verdict
    symptom = verdict.symptom
    result = result_line(out)
    sig = result.get("signature") if result else None
    place = None
    if result is not None and result.get("unsupported"):
        status = "broken"  # the torch running it lacks what the repro needs: nothing judged
    elif result is not None and result.get("ok") is True and code == EXIT_FIXED:
        status = "fixed"
    elif symptom in ("timeout", "process-death"):
        status, sig, place = _judge_death(finding, code, out, memory_exceeded)
    elif code == EXIT_REPRODUCED and result is not None and result.get("ok") is False:
        status = "reproduced" if sig == finding.signature else "different"
    elif code == EXIT_FIXED and result is not None:
        status = "fixed"
    else:
        status = "broken"
    if status == "different" and result is None and symptom not in ("timeout", "process-death"):
        status = "broken"  # it ended without judging anything: no evidence either way
    reason = _broken_reason(result, code, out) if status == "broken" else None
    return ReplayOutcome(status, code, sig, round(seconds, 2), out[-6000:], memory_exceeded, reason, place)


def _judge_death(finding: Finding, code, out: str, memory_exceeded: bool) -> tuple:
    """(status, the run's death signature, where it died) for a timeout or process-death finding.

    It died (or hung) the same way when the cause matches (the signal, the memory limit, the
    time limit) and the stack it printed signs it as the finding was signed. A finding stored
    under the old signature (one for every death of its lane and signal: no place recorded) is
    reproduced by the cause alone, and the signature returned is its new one."""
    verdict = finding.verdict
    symptom, evidence = verdict.symptom, verdict.evidence
    cause = cause_of(symptom, evidence)
    if symptom == "timeout":
        died = code is None
    elif cause == OUT_OF_MEMORY:
        died = memory_exceeded
    else:
        died = code is not None and code < 0 and _signal_name(-code) == cause
    if not died:
        return "different", None, None
    lane = (finding.lane or {}).get("name", "")
    place = place_of(out, hang=symptom == "timeout" or cause == OUT_OF_MEMORY)
    now = death_signature(symptom, lane, cause, place)
    old = not isinstance(evidence, (Died, Hung)) or evidence.phase is None
    where = {"phase": place.phase, "frames": list(place.frames)}
    return ("reproduced" if old or now == verdict.signature else "different"), now, where


def _signal_name(number: int) -> Optional[str]:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def _broken_reason(result: Optional[dict], code, out: str) -> str:
    """Why a run judged nothing: what the torch there lacks, a timeout, or its last error line."""
    if result and result.get("unsupported"):
        return "that torch lacks " + ", ".join(result["unsupported"])
    if code is None:
        return "it ran past the time limit"
    errors = [line.strip() for line in out.splitlines() if "Error" in line or "Exception" in line]
    return (errors[-1] if errors else f"it exited {code} without a verdict")[:300]


def result_line(out: str) -> Optional[dict]:
    """The JSON of a script's last ``SYMFUZZ-RESULT`` line, or None."""
    for line in reversed(out.splitlines()):
        if line.startswith("SYMFUZZ-RESULT "):
            try:
                return json.loads(line[len("SYMFUZZ-RESULT "):])
            except json.JSONDecodeError:
                return None
    return None
