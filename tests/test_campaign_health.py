"""Honest outcomes: a campaign that tests nothing, or too little, never ends green.

The rules are pure functions (fast tests first); the campaigns below run
``symfuzz fuzz`` in a subprocess, in an environment broken on purpose.
"""

import json
import os
import subprocess
import sys
import time

from conftest import ROOT, planted_env
from symfuzz.canary import canary_case, canary_failure
from symfuzz.fuzz_run import EXIT_ENVIRONMENT, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, fuzz_exit_code
from symfuzz.health import InternalErrors, ProgramHealth, cause_of, exception_line, too_many_internal_errors

# ---------------------------------------------------------------- causes


def _traceback(last_line: str, path: str = "/home/user/project/symfuzz/worker.py") -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "{path}", line 103, in run_canary\n'
            "    result = run_case(canary_case(), lane, plan=False)\n"
            "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            f"{last_line}\n")


def test_exception_line_is_the_final_exception_of_a_chained_traceback():
    text = (_traceback("KeyError: 'x'") + "\nDuring handling of the above exception, another exception occurred:\n\n"
            + _traceback("AttributeError: module 'torch._dynamo' has no attribute 'utils'\n  second line of message"))
    assert exception_line(text) == "AttributeError: module 'torch._dynamo' has no attribute 'utils'"


def test_exception_line_of_a_note_is_its_first_line():
    assert exception_line("\nworker died while generating the case (exit -9, timeout)\nmore") == \
        "worker died while generating the case (exit -9, timeout)"


def test_one_bug_at_other_sizes_addresses_and_temp_folders_is_one_cause():
    a = _traceback("RuntimeError: bad view of <Tensor at 0x7f3a2b1c> size 12 in /tmp/tmpa8x2k1/kernel.py")
    b = _traceback("RuntimeError: bad view of <Tensor at 0x55d0e4f0> size 7 in /tmp/tmpzz91qq/kernel.py")
    assert cause_of(a) == cause_of(b) == "RuntimeError: bad view of <Tensor at 0x?> size N in <tmp>"


def test_different_errors_are_different_causes():
    assert cause_of(_traceback("KeyError: 'x'")) != cause_of(_traceback("KeyError: 'y'"))
    assert cause_of(_traceback("TypeError: bad dtype torch.float32")) != \
        cause_of(_traceback("TypeError: bad dtype torch.float16"))  # "float32" is a name, not a number


def test_internal_errors_group_by_cause_most_frequent_first():
    errors = InternalErrors()
    errors.add(4, _traceback("ValueError: once"))
    for index in (7, 9, 12):
        errors.add(index, _traceback(f"RuntimeError: planted generator fault at case {index}"))
    assert errors.total == 4
    first, second = errors.by_count()
    assert (first["cause"], first["count"], first["first_index"]) == \
        ("RuntimeError: planted generator fault at case N", 3, 7)
    assert first["first_line"] == "RuntimeError: planted generator fault at case 7"
    assert "Traceback" in first["traceback"]
    assert (second["count"], second["first_index"]) == (1, 4)
    assert all("traceback" not in g for g in errors.summary())  # stats.json stays small


# ---------------------------------------------------------------- windows and thresholds


def _feed(health: ProgramHealth, outcomes) -> list:
    """The problem after each program, as the campaign checks it."""
    problems = []
    for bad in outcomes:
        health.record(bad)
        problems.append(health.problem())
    return problems


def test_all_of_the_first_fifty_bad_stops_at_the_fiftieth():
    problems = _feed(ProgramHealth(), [True] * 50)
    assert problems[:49] == [None] * 49
    assert "all of the first 50" in problems[49]


def test_one_good_program_in_the_first_fifty_waits_for_the_recent_window():
    problems = _feed(ProgramHealth(), [False] + [True] * 199)
    assert problems[:199] == [None] * 199
    assert problems[199] == "199 of the last 200 programs were internal errors or invalid in eager"


def test_exactly_half_bad_is_not_enough_and_one_more_is():
    health = ProgramHealth()
    assert _feed(health, [False, True] * 100)[-1] is None
    assert _feed(health, [True, True])[-1] is not None  # the window slid: 101 of the last 200


def test_a_run_breaking_midway_is_caught_by_the_recent_window():
    problems = _feed(ProgramHealth(), [False] * 500 + [True] * 101)
    assert problems[599] is None and problems[600] is not None


def test_a_healthy_run_never_trips_the_rules():
    # A healthy run is ~100% valid with no internal errors; even 1 bad program
    # in 3, far worse than healthy, stays well inside the rules.
    assert set(_feed(ProgramHealth(), [i % 3 == 0 for i in range(2000)])) == {None}


def test_internal_errors_above_one_percent_are_too_many():
    assert not too_many_internal_errors(0, 0)
    assert not too_many_internal_errors(1, 100)
    assert too_many_internal_errors(2, 100)
    assert too_many_internal_errors(1, 10)


def _stats(confirmed=0, interrupted=False, problems=()):
    return {"findings": {"confirmed": confirmed, "reported_unconfirmed": 0, "interrupted": interrupted},
            "health": {"problems": list(problems)}}


def test_exit_codes_and_their_precedence():
    assert fuzz_exit_code(_stats()) == EXIT_OK
    assert fuzz_exit_code(_stats(problems=["stopped early"])) == EXIT_ENVIRONMENT == 3
    assert fuzz_exit_code(_stats(confirmed=1)) == EXIT_FINDINGS
    # An unhealthy run wins over its findings (documented in --help): it did not test what was asked.
    assert fuzz_exit_code(_stats(confirmed=1, problems=["too many internal errors"])) == EXIT_ENVIRONMENT
    assert fuzz_exit_code(_stats(confirmed=1, interrupted=True, problems=["x"])) == EXIT_INTERRUPTED


def test_the_exit_codes_are_in_the_help():
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "fuzz", "--help"], cwd=ROOT, capture_output=True, text=True)
    for code in ("0 ", "1 ", "2 ", "3 ", "130 "):
        assert f"\n  {code}" in proc.stdout, proc.stdout


# ---------------------------------------------------------------- the canary


def _result(**changes):
    result = {"valid": True, "compiled": True, "calls": 2, "checked": 2, "verdicts": [], "first_errors": {}}
    return {**result, **changes}


def test_canary_failure_names_the_cause():
    assert canary_failure(_result()) is None
    assert "AttributeError: no utils" in canary_failure({"internal_error": _traceback("AttributeError: no utils")})
    invalid = canary_failure(_result(valid=False, first_errors={"eager": "RuntimeError: shapes"}))
    assert "invalid in eager" in invalid and "RuntimeError: shapes" in invalid
    assert "torch.compile failed" in canary_failure(_result(compiled=False))
    assert "disagrees with eager" in canary_failure(_result(verdicts=[{"symptom": "mismatch", "signature": "m-1"}]))
    assert "only 1 of" in canary_failure(_result(checked=1))


def test_the_canary_passes_on_the_eager_lane_and_recompiles_dynamically():
    from symfuzz.fuzz.case import Case
    from symfuzz.worker import run_case
    from symfuzz.oracles.lanes.lane import get_lane

    case = canary_case()
    assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case
    result = run_case(case, get_lane("eager"), plan=False)
    assert canary_failure(result) is None, result
    assert result["graphs"] == [1, 1]  # a static graph, then a dynamic one for the new size


# ---------------------------------------------------------------- campaigns


def symfuzz(args, env_extra, timeout=600):
    """Run ``symfuzz fuzz``; returns the finished process and its wall time."""
    env = dict(os.environ)
    env.update(env_extra)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "fuzz", "--quiet", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - t0


def _env_with_sitecustomize(tmp_path, source: str) -> dict:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(source)
    return {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _error_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if line.startswith("symfuzz fuzz:")]


# In workers only (the CLI process stays sound, as when a plugin breaks the
# compile stack): importing this module first is a circular import inside
# torch 2.13, after which torch._dynamo has no `utils` and nothing compiles.
BREAK_COMPILE_STACK = """\
import sys
if "symfuzz.worker" in sys.orig_argv:
    import torch._functorch._aot_autograd.runtime_wrappers
"""


def test_a_broken_compile_stack_stops_at_the_canary_with_exit_3(tmp_path):
    out = tmp_path / "out"
    proc, seconds = symfuzz(["--lane", "eager", "--jobs", "1", "--budget", "5m", "--out", str(out)],
                            _env_with_sitecustomize(tmp_path, BREAK_COMPILE_STACK))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert seconds < 90
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "has no attribute" in lines[0] and str(out / "canary.log") in lines[0], (
        "the canary did not fail with torch's circular-import breakage; if this torch no longer breaks "
        "that way, pick another broken import for BREAK_COMPILE_STACK:\n" + proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["programs"]["generated"] == 0
    assert stats["canary"]["ok"] is False and "has no attribute" in stats["canary"]["cause"]
    assert "Traceback" in (out / "canary.log").read_text()


def test_a_worker_that_cannot_start_exits_3_with_the_cause(tmp_path):
    out = tmp_path / "out"
    no_torch = 'import sys\nif "symfuzz.worker" in sys.orig_argv:\n    sys.modules["torch"] = None\n'
    proc, seconds = symfuzz(["--lane", "eager", "--jobs", "2", "--budget", "5m", "--out", str(out)],
                            _env_with_sitecustomize(tmp_path, no_torch))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert seconds < 90
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and "exited before it was ready" in lines[0], proc.stderr
    assert "ModuleNotFoundError" in lines[0] and "worker-" in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


SMALL = ["--lane", "eager", "--ops", "add,mul,sum_dim,sin", "--max-ops", "3", "--jobs", "1"]


def test_a_generator_failing_most_cases_stops_early_with_exit_3(tmp_path):
    out = tmp_path / "out"
    proc, seconds = symfuzz([*SMALL, "--budget", "10m", "--out", str(out)], planted_env("generator-fault-most"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert seconds < 300  # well before the 10-minute budget
    stats = json.loads((out / "stats.json").read_text())
    assert stats["canary"]["ok"] is True
    assert "of the last 200 programs" in stats["health"]["stopped_early"]
    assert stats["programs"]["generated"] <= 201
    causes = json.loads((out / "internal_errors.json").read_text())["causes"]
    assert [c["cause"] for c in causes] == ["RuntimeError: planted generator fault at case N"]
    assert causes[0]["count"] == stats["programs"]["internal_errors"] >= 150
    assert "x RuntimeError: planted generator fault at case" in proc.stdout  # listed in the summary
    assert any("stopped early" in line for line in _error_lines(proc.stderr)), proc.stderr


def test_a_few_internal_errors_still_end_with_exit_3(tmp_path):
    out = tmp_path / "out"
    proc, _ = symfuzz([*SMALL, "--max-cases", "10", "--budget", "5m", "--out", str(out)],
                      planted_env("generator-fault-some"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["programs"]["generated"], stats["programs"]["internal_errors"]) == (10, 1)
    assert stats["health"]["stopped_early"] is None  # 1 in 10 is no window problem, but it is over 1%
    assert "1x RuntimeError: planted generator fault at case 3" in proc.stdout
    assert "1 internal error in 10 programs (1 distinct cause)" in proc.stderr


def test_a_canary_that_hangs_is_stopped_at_its_limit(tmp_path):
    out = tmp_path / "out"
    hang = ('import sys\nif "symfuzz.worker" in sys.orig_argv:\n    import time\n    import symfuzz.canary\n'
            '    symfuzz.canary.canary_case = lambda: time.sleep(3600)\n')
    proc, seconds = symfuzz(["--lane", "eager", "--jobs", "1", "--budget", "5m", "--canary-timeout", "8s",
                             "--out", str(out)], _env_with_sitecustomize(tmp_path, hang))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert seconds < 90
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and "did not finish within its limit (8s; --canary-timeout)" in lines[0], proc.stderr
    assert json.loads((out / "stats.json").read_text())["canary"]["ok"] is False
