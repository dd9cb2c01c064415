"""Campaign isolation: a worker that dies or hangs is a finding, and the campaign goes on."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, planted_env


def symfuzz(args, env_extra, timeout=600):
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-m", "symfuzz.cli", "fuzz", "--quiet", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )


def findings(out, symptom):
    return [json.loads(p.read_text()) for p in sorted((out / "findings").glob(f"{symptom}-*/finding.json"))]


# A worker that segfaults is recorded and the campaign goes on: the local executor's run of
# test_ray_executor.py (the same plant, beside the Ray run) shows it (test_local_worker_that_segfaults_...).


@pytest.mark.slow
def test_hanging_worker_is_killed_and_recorded(tmp_path):
    out = tmp_path / "out"
    proc = symfuzz(
        ["--lane", "eager", "--ops", "sin", "--max-ops", "2", "--max-cases", "2", "--jobs", "1",
         "--budget", "8m", "--case-timeout", "30s", "--confirm-timeout", "40s", "--out", str(out)],
        planted_env("hang-sin"),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hangs = findings(out, "timeout")
    assert len(hangs) == 1
    assert hangs[0]["confirmation"]["status"] == "reproduced"
    assert json.loads((out / "stats.json").read_text())["programs"]["generated"] == 2


def test_ctrl_c_keeps_every_candidate(tmp_path):
    """Interrupting a campaign mid-confirmation loses nothing and exits 130."""
    import signal
    import time

    out = tmp_path / "out"
    env = dict(os.environ)
    env.update(planted_env("segfault-cos"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "symfuzz.cli", "fuzz", "--quiet", "--lane", "eager", "--ops", "cos", "--max-ops", "2",
         "--jobs", "1", "--budget", "5m", "--out", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        # as from a terminal: a child inherits an ignored SIGINT, and this test process may hold one
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 240
    while not (out / "candidates.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert (out / "candidates.jsonl").exists(), "no candidate appeared"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["findings"]["interrupted"] is True
    seen = {json.loads(line)["signature"] for line in (out / "candidates.jsonl").read_text().splitlines()}
    kept = {p.parent.name for p in out.glob("*/*/finding.json")}
    assert seen <= kept, (seen, kept)
    assert "Traceback" not in stderr


def test_worker_growing_past_the_memory_limit_is_killed_and_recorded(tmp_path):
    out = tmp_path / "out"
    proc = symfuzz(
        ["--lane", "eager", "--ops", "sigmoid", "--max-ops", "2", "--max-cases", "2", "--jobs", "1",
         "--budget", "8m", "--memory-limit", "2048", "--confirm-timeout", "120s", "--out", str(out)],
        planted_env("oom-sigmoid"),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    deaths = findings(out, "process-death")
    assert len(deaths) == 1, proc.stdout + proc.stderr
    evidence = deaths[0]["verdict"]["evidence"]
    assert evidence["cause"] == "out-of-memory" and evidence["limit_mb"] == 2048
    assert deaths[0]["confirmation"]["status"] == "reproduced"  # the fresh process grew past the limit too
    assert deaths[0]["confirmation"]["memory_exceeded"] is True
    assert json.loads((out / "stats.json").read_text())["programs"]["generated"] == 2
