"""The Ray executor (``symfuzz fuzz --executor ray``) on a local Ray instance.

Without --ray-address the campaign starts its own Ray instance with --jobs CPUs
(2 here), and one actor per slot runs a worker process. It must find what the
local executor finds for the same seed and --max-cases, gather everything on
the driver, and keep the local executor's isolation: a worker that dies is a
finding, and a fresh one takes its slot.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, assert_short_repro, once_per_session, planted_env
from symfuzz.corpus.inductor_cache import fresh_cache

# Seed 2 draws cos in case 0 (the plant segfaults the worker) and tanh in case 1 (the plant
# makes a wrong value): one campaign shows a worker death and a value finding.
CAMPAIGN = ["--lane", "eager", "--ops", "tanh,cos,add,mul", "--max-ops", "3", "--max-cases", "4", "--seed", "2",
            "--jobs", "2", "--budget", "8m", "--confirm-timeout", "120s"]
PLANTS = "tanh-wrong-eager,segfault-cos"


def symfuzz(args, tmp) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(planted_env(PLANTS))
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(tmp / "inductor-cache")
    return subprocess.Popen(
        [sys.executable, "-m", "symfuzz.cli", "fuzz", "--quiet", *CAMPAIGN, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def outcome(out) -> dict:
    stats = json.loads((out / "stats.json").read_text())
    return {"signatures": sorted(stats["findings"]["signatures"]), "indices": stats["indices"],
            "generated": stats["programs"]["generated"]}


def finding(out, symptom) -> dict:
    found = [json.loads(p.read_text()) for p in sorted((out / "findings").glob(f"{symptom}-*/finding.json"))]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def ray_and_local(tmp_path_factory):
    """The same planted campaign on a local 2-CPU Ray instance and on local workers
    (once per session, whichever xdist workers this module's tests land on)."""

    def run(tmp):
        # Side by side: Ray's start-up is mostly waiting, which the local run fills.
        procs = {executor: symfuzz(["--executor", executor, "--out", str(tmp / executor)], tmp)
                 for executor in ("ray", "local")}
        runs = {}
        for executor, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=600)
            runs[executor] = {"args": proc.args, "returncode": proc.returncode, "stdout": stdout, "stderr": stderr}
        return runs

    tmp, runs = once_per_session(tmp_path_factory, "ray-and-local", run)
    return {executor: (tmp / executor, subprocess.CompletedProcess(**done)) for executor, done in runs.items()}


def test_ray_finds_what_the_local_executor_finds(ray_and_local):
    (ray_out, ray_run), (local_out, local_run) = ray_and_local["ray"], ray_and_local["local"]
    assert ray_run.returncode == 1, ray_run.stdout + ray_run.stderr
    assert local_run.returncode == 1, local_run.stdout + local_run.stderr
    ray, local = outcome(ray_out), outcome(local_out)
    assert [s.split("-")[0] for s in ray["signatures"]] == ["process", "value"], ray
    assert ray == local
    assert ray["indices"] == [0, 1, 2, 3]
    assert json.loads((ray_out / "stats.json").read_text())["executor"] == "ray"


def test_ray_worker_that_segfaults_is_recorded_and_replaced(ray_and_local):
    out, run = ray_and_local["ray"]
    death = finding(out, "process-death")
    assert death["verdict"]["evidence"]["cause"] == "SIGSEGV"
    assert "cos" in json.dumps(death["case"]["program"])
    assert death["confirmation"]["status"] == "reproduced"  # it died again in a fresh process
    stats = json.loads((out / "stats.json").read_text())
    assert stats["programs"]["generated"] == 4  # every case got its turn after the crash
    # The slot's replacement is a fresh actor; its log goes on in the same file on the driver.
    assert sorted(p.name for p in (out / "workers").iterdir()) == ["ray-worker-0.log", "ray-worker-1.log"]


def test_local_worker_that_segfaults_is_recorded_and_the_campaign_continues(ray_and_local):
    """The local executor's run beside the Ray one (the campaign of the fixture): its worker dies
    of the planted segfault, the death is a confirmed finding with a short repro, and every case
    still gets its turn."""
    out, run = ray_and_local["local"]
    death = finding(out, "process-death")
    assert death["verdict"]["evidence"]["cause"] == "SIGSEGV"
    assert "cos" in json.dumps(death["case"]["program"])
    assert death["confirmation"]["status"] == "reproduced"  # it died again in a fresh process
    assert json.loads((out / "stats.json").read_text())["programs"]["generated"] == 4
    assert_short_repro(out / "findings" / death["signature"], death, most_lines=80)  # three ops at most


def test_ray_campaign_gathers_its_output_on_the_driver(ray_and_local):
    out, run = ray_and_local["ray"]
    mismatch = finding(out, "value-mismatch")
    assert mismatch["confirmation"]["status"] == "reproduced"  # confirmed in a fresh process on the driver
    assert (out / "findings" / mismatch["signature"] / "repro.py").exists()
    assert mismatch["signature"] in (out / "candidates.jsonl").read_text()
    assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_sigterm_stops_a_ray_campaign_cleanly(tmp_path):
    """Ray's core worker installs a SIGTERM handler that aborts the driver; the campaign's must win."""
    import signal
    import time

    out = tmp_path / "out"
    env = dict(os.environ)
    env.update(planted_env("segfault-cos"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "symfuzz.cli", "fuzz", "--quiet", "--executor", "ray", "--lane", "eager", "--ops", "cos",
         "--max-ops", "2", "--jobs", "1", "--budget", "5m", "--out", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not (out / "candidates.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert (out / "candidates.jsonl").exists(), "no candidate appeared"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout + stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["findings"]["interrupted_by"] == "SIGTERM"
    seen = {json.loads(line)["signature"] for line in (out / "candidates.jsonl").read_text().splitlines()}
    assert seen <= {p.parent.name for p in out.glob("*/*/finding.json")}
