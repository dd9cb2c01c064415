"""The minifier's driver on a toy subject (no torch in the queries: fast).

The toy "program" is a set of numbers; its query script fails (like a repro
with a signature) exactly when the set holds both 3 and 7, so the minimum
is known: {3, 7}.
"""

import json
import sys
import time
from dataclasses import dataclass

import pytest

from symfuzz.minifier.criteria import ErrorMatches, ExternalScript, SameAsOriginal, SameFailure
from symfuzz.minifier.driver import Driver, OriginalDoesNotFail

QUERY = '''
import json, sys
items = {items!r}
if 3 in items and 7 in items:
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "symptom": "crash", "signature": "crash-toy"}}))
    sys.exit(1)
if {other_bug!r} and 5 in items:
    print("SYMFUZZ-RESULT " + json.dumps({{"ok": False, "symptom": "crash", "signature": "crash-other"}}))
    sys.exit(1)
print("SYMFUZZ-RESULT " + json.dumps({{"ok": True}}))
'''


@dataclass(frozen=True)
class Toy:
    items: tuple
    other_bug: bool = False
    kind: str = "toy"

    def to_json(self):
        return {"items": list(self.items)}

    def measure(self):
        return {"nodes": len(self.items), "elements": sum(self.items)}

    def cost(self):
        return (len(self.items), sum(self.items))

    def query_script(self):
        return QUERY.format(items=set(self.items), other_bug=self.other_bug)

    def repro_script(self):
        return self.query_script()


def drop_halves(subject):
    """ddmin-like: drop chunks, largest first."""
    n = len(subject.items)
    size = max(n // 2, 1)
    while True:
        for start in range(0, n, size):
            yield Toy(subject.items[:start] + subject.items[start + size:], subject.other_bug)
        if size == 1:
            return
        size //= 2


def grow(subject):
    """A pass that only proposes bigger candidates: the driver must refuse them unqueried."""
    yield Toy(subject.items + (100,), subject.other_bug)


def driver(tmp_path, criterion=None, jobs=1, name="out", warm=True):
    return Driver(criterion or SameFailure("crash-toy"), tmp_path / name, budget=120, jobs=jobs, query_timeout=30,
                  progress=lambda message: None, warm=warm)


def test_reduces_to_the_known_minimum_and_writes_best_and_report(tmp_path):
    subject = Toy(tuple(range(12)))
    result = driver(tmp_path).minify(subject, [grow, drop_halves])
    assert set(result.best.items) == {3, 7}
    assert json.loads((tmp_path / "out" / "best.json").read_text())["subject"]["items"] in ([3, 7], [7, 3])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["before"]["nodes"] == 12 and report["after"]["nodes"] == 2
    assert report["passes"]["grow"]["rejected_not_smaller"] >= 1
    assert report["passes"]["grow"]["queries"] == 0
    assert report["passes"]["drop_halves"]["accepted"] >= 1
    assert report["queries"] == result.queries > 1
    assert report["repro_check"]["same_bug"] is True


def test_a_different_failure_is_not_the_same_bug(tmp_path):
    # Dropping 3 or 7 while 5 stays makes it fail as "crash-other": not accepted.
    subject = Toy((3, 5, 7), other_bug=True)
    result = driver(tmp_path).minify(subject, [drop_halves])
    assert set(result.best.items) == {3, 7}
    matched = driver(tmp_path, ErrorMatches("crash-(toy|other)"), name="re").minify(subject, [drop_halves])
    assert matched.best.items == (5,)  # any failure matching the regex counts


def test_same_as_original_takes_the_failure_from_the_first_run(tmp_path):
    result = driver(tmp_path, SameAsOriginal()).minify(Toy((1, 3, 7, 9)), [drop_halves])
    assert set(result.best.items) == {3, 7}


def test_external_interestingness_script(tmp_path):
    script = tmp_path / "interesting.sh"
    script.write_text('#!/bin/sh\ngrep -q "7 in items" "$1" && ! python "$1" > /dev/null\n')
    script.chmod(0o755)
    result = driver(tmp_path, ExternalScript(str(script))).minify(Toy((1, 3, 7, 9)), [drop_halves])
    assert set(result.best.items) == {3, 7}


def test_an_original_that_does_not_fail_is_refused(tmp_path):
    with pytest.raises(OriginalDoesNotFail, match="did not fail"):
        driver(tmp_path).minify(Toy((1, 2, 3)), [drop_halves])


def test_interrupt_keeps_the_best_so_far(tmp_path):
    calls = []

    def interrupting(subject):
        calls.append(subject)
        if len(calls) > 1:
            raise KeyboardInterrupt
        yield from drop_halves(subject)

    with pytest.raises(KeyboardInterrupt):
        driver(tmp_path).minify(Toy(tuple(range(8))), [interrupting])
    best = json.loads((tmp_path / "out" / "best.json").read_text())["subject"]["items"]
    assert 3 in best and 7 in best and len(best) < 8
    assert json.loads((tmp_path / "out" / "report.json").read_text())["stopped"] == "interrupted"


def test_match_never_accepts_a_run_that_judged_nothing(tmp_path):
    """Exit 2 (eager itself failed, nothing judged) is not the bug, whatever its output says."""
    from symfuzz.minifier.driver import QueryOutcome

    criterion = ErrorMatches("shape .* is invalid")
    eager_broke = QueryOutcome(2, {"ok": None}, "RuntimeError: shape '[2]' is invalid", 1.0)
    assert not criterion.interesting(eager_broke)
    compiled_broke = QueryOutcome(1, {"ok": False, "symptom": "crash"}, "RuntimeError: shape '[2]' is invalid", 1.0)
    assert criterion.interesting(compiled_broke)


def test_external_script_paths_are_resolved_and_checked(tmp_path, monkeypatch):
    (tmp_path / "check.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.chdir(tmp_path)
    criterion = ExternalScript(f"{sys.executable} check.py")
    assert criterion.command(tmp_path / "c.py")[1] == str(tmp_path / "check.py")
    with pytest.raises(ValueError, match="not an executable"):
        ExternalScript("no-such-command-xyz --flag")


TIMED_QUERY = '''
import json, sys, time
items = {items!r}
time.sleep({delay!r})
bug = (3 in items and 7 in items) or (2 in items and 9 in items)
print("SYMFUZZ-RESULT " + json.dumps({{"ok": not bug, "signature": "crash-toy" if bug else None}}))
sys.exit(1 if bug else 0)
'''


@dataclass(frozen=True)
class TwoMinima(Toy):
    """Two different minima, {2, 9} and {3, 7}; candidates that keep 3 and 7
    answer slowly, so a driver that took the first answer to arrive (not the
    first candidate in pass order) would end at {2, 9} with several jobs."""

    def query_script(self):
        delay = 1.5 if (3 in self.items and 7 in self.items) else 0.0
        return TIMED_QUERY.format(items=set(self.items), delay=delay)


def test_the_first_candidate_in_pass_order_wins_not_the_first_to_finish(tmp_path):
    def drop_front_first(subject):
        for i in range(len(subject.items)):
            yield TwoMinima(subject.items[:i] + subject.items[i + 1:])

    subject = TwoMinima((2, 3, 7, 9))
    one = driver(tmp_path, jobs=1, name="one").minify(subject, [drop_front_first])
    three = driver(tmp_path, jobs=3, name="three").minify(subject, [drop_front_first])
    assert one.best == three.best
    assert set(one.best.items) == {3, 7}  # dropping 2 comes first in pass order


SLOW_QUERY = '''
import os, time
open({pidfile!r}, "a").write(str(os.getpid()) + "\\n")
time.sleep(60)
'''


@dataclass(frozen=True)
class Slow(Toy):
    pidfile: str = ""

    def query_script(self):
        if len(self.items) == 3:  # the original fails at once
            return QUERY.format(items={3, 7}, other_bug=False)
        return SLOW_QUERY.format(pidfile=self.pidfile)


def drop_slowly(subject):
    for i in range(len(subject.items)):
        yield Slow(subject.items[:i] + subject.items[i + 1:], pidfile=subject.pidfile)


@pytest.mark.parametrize("warm", [True, False], ids=["warm-servers", "cold-interpreters"])
def test_ctrl_c_kills_the_queries_in_flight(tmp_path, warm):
    """Queries run in sessions of their own (a terminal's Ctrl-C does not reach
    them), so the driver must kill them itself when interrupted: forked from a
    warm server or started cold."""
    import os
    import signal
    import threading

    pidfile = tmp_path / "pids"
    main = threading.get_ident()
    done = threading.Event()

    def interrupt_once_both_run():
        # Ctrl-C arrives while both candidate queries run (a warm server first imports torch).
        deadline = time.monotonic() + 180
        while not done.is_set() and time.monotonic() < deadline:
            if pidfile.exists() and len(pidfile.read_text().split()) >= 2:
                break
            time.sleep(0.2)
        if not done.is_set():
            signal.pthread_kill(main, signal.SIGALRM)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    watcher = threading.Thread(target=interrupt_once_both_run, daemon=True)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            driver(tmp_path, jobs=2, warm=warm).minify(Slow((1, 2, 3), pidfile=str(pidfile)), [drop_slowly])
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGALRM, previous)
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # A zombie reaped late is fine; a running query is not.
        state = open(f"/proc/{pid}/stat").read().split()[2]
        assert state == "Z", f"query {pid} still running after Ctrl-C"


def test_a_finding_keyed_by_an_older_symfuzz_is_minified_under_its_signature_now():
    from symfuzz.minifier.criteria import SameStoredSignature

    class Outcome:
        def __init__(self, failure_id):
            self._id = failure_id

        def failure_id(self):
            return self._id

    rekeyed = SameStoredSignature("value-mismatch-aaaaaaaaaa")
    rekeyed.calibrate(Outcome("value-mismatch-bbbbbbbbbb"))  # same symptom, the more precise signature of today
    assert rekeyed.interesting(Outcome("value-mismatch-bbbbbbbbbb"))
    assert not rekeyed.interesting(Outcome("value-mismatch-aaaaaaaaaa"))
    other = SameStoredSignature("value-mismatch-aaaaaaaaaa")
    other.calibrate(Outcome("crash-cccccccccc"))  # another symptom is another bug
    assert not other.interesting(Outcome("crash-cccccccccc"))


def test_a_stored_crash_is_re_signed_from_its_error_before_any_query():
    """A crash's signature is its error's type and normalized message: where this symfuzz
    normalizes the stored message to another signature, minify looks for that one from the
    first query (the cheaper lanes are not tried under a signature no run prints now)."""
    from symfuzz.corpus.finding import Finding
    from symfuzz.fuzz import script_runtime
    from symfuzz.minifier.run import finding_failure_id
    from symfuzz.oracles.verdict import OutputMismatch, RaisedError, Verdict

    # Dynamo's source comment: erased by today's normalize_message, kept by an older one.
    error = {"type": "torch._dynamo.exc.Unsupported", "stage": "dynamo",
             "message": "guard 0 <= s1  # v3 = x2 + k4  # /tmp/a/repro.py:28 in fn (sizes.py:12 in f)"}
    today = script_runtime.signature("crash", "inductor-cpp", script_runtime.failure_key(
        {"symptom": "crash", "error": error}, []))

    def finding(signature, symptom="crash", evidence=None):
        verdict = Verdict(ok=False, oracle="crash", symptom=symptom, stage="dynamo", signature=signature,
                          call_index=0, evidence=evidence or RaisedError(error=error))
        return Finding(case={}, verdict=verdict, lane={"name": "inductor-cpp"}, environment={})

    assert finding_failure_id(finding("crash-0123456789")) == today
    # Its confirmation, by the same older symfuzz, signed the fresh run the old way too.
    confirmed = finding("crash-0123456789")
    confirmed.confirmation = {"status": "different", "signature": "crash-9876543210"}
    assert finding_failure_id(confirmed) == today
    current = finding(today)
    current.confirmation = {"status": "different", "signature": "crash-9876543210"}
    assert finding_failure_id(current) == "crash-9876543210"  # signed as today: the fresh run is the bug
    assert finding_failure_id(finding(today)) == today
    mismatch = finding("value-mismatch-0123456789", "value-mismatch", OutputMismatch(path="out[0][0]", detail="x"))
    assert finding_failure_id(mismatch) == "value-mismatch-0123456789"  # its key is not in the stored evidence


def test_a_watched_pass_that_found_nothing_waits_for_what_it_watches_to_change(tmp_path):
    """drop_needed only tries to drop the items the bug needs (never interesting); halve_rest
    shrinks the others, which makes progress and so another round. drop_needed watches the
    needed items alone: with them unchanged it sits that round out, unless skip_fruitless is off."""
    runs = []

    def drop_needed(subject):
        runs.append(subject.items)
        for item in (3, 7):
            yield Toy(tuple(i for i in subject.items if i != item))

    drop_needed.watches = lambda subject: tuple(i for i in subject.items if i in (3, 7))

    def halve_rest(subject):
        for n, item in enumerate(subject.items):
            if item > 8:
                yield Toy(subject.items[:n] + (item // 2,) + subject.items[n + 1:])

    for skip, expected_runs in ((True, 1), (False, 2)):
        runs.clear()
        d = Driver(SameFailure("crash-toy"), tmp_path / f"out-{skip}", budget=120, query_timeout=30,
                   progress=lambda message: None, skip_fruitless=skip)
        result = d.minify(Toy((3, 7, 40)), [drop_needed, halve_rest])
        assert result.best.items == (3, 7, 5)
        assert len(runs) == expected_runs, runs
        assert result.passes["drop_needed"].skipped_runs == (1 if skip else 0)
