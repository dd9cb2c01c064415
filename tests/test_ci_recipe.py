"""The CI recipe cannot rot: examples/ci/github-actions.yml's own steps, run end to end.

The test reads the workflow's `run:` lines that call examples/ci/symfuzz-ci.sh (one
per job, the shard line once per matrix value) and runs them in the workflow's
order, with tiny budgets and a planted miscompile, so that every path the recipe
takes is exercised: replay, 4 shards, merge (fails on new), then accept and the
same again (green); and the nightly job (fails on a regression against a reference
Python; marked slow).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, planted_env

RECIPE = ROOT / "examples" / "ci" / "github-actions.yml"
SCRIPT = "examples/ci/symfuzz-ci.sh"


def recipe_steps() -> dict[str, list[list[str]]]:
    """{job: [argv, ...]}: each job's symfuzz-ci.sh command lines, matrix expanded."""
    jobs: dict[str, list[list[str]]] = {}
    job, matrix = None, []
    for line in RECIPE.read_text().splitlines():
        if m := re.match(r"^  (\w+):\s*$", line):
            job, matrix = m.group(1), []
        elif m := re.match(r"^\s+shard: \[(.*)\]", line):
            matrix = [v.strip() for v in m.group(1).split(",")]
        elif job and SCRIPT in line:
            command = line.split("run:", 1)[1].strip()
            values = matrix if "${{ matrix.shard }}" in command else [None]
            for value in values:
                text = command.replace("${{ matrix.shard }}", value) if value else command
                jobs.setdefault(job, []).append(text.split())
    return jobs


def run_step(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def test_the_recipe_has_the_jobs_the_issue_asks_for():
    steps = recipe_steps()
    assert [argv[1] for argv in steps["replay"]] == ["replay"]
    assert [argv[1:] for argv in steps["shard"]] == [["shard", str(k), "4"] for k in range(1, 5)]
    assert [argv[1] for argv in steps["merge"]] == ["merge"]
    assert [argv[1] for argv in steps["nightly"]] == ["nightly"]
    text = RECIPE.read_text()
    assert "SYMFUZZ_FAIL_ON: new" in text and "SYMFUZZ_REFERENCE_PYTHON:" in text
    assert "upload-artifact" in text and "cache/restore" in text


def recipe_env(tmp_path: Path) -> dict:
    """The environment a step sees: `symfuzz` on PATH, tiny budgets, the eager lane, a planted
    miscompile, and a reference Python (the "last release") without it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "symfuzz").write_text(f"#!/bin/sh\nexec {sys.executable} -m symfuzz.cli \"$@\"\n")
    (bin_dir / "symfuzz").chmod(0o755)
    clean = bin_dir / "reference-python"
    clean.write_text(f"#!/bin/sh\nunset SYMFUZZ_PLANT\nexec {sys.executable} \"$@\"\n")
    clean.chmod(0o755)
    env = dict(os.environ, **planted_env("tanh-wrong-eager"))
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SYMFUZZ_LANE="eager", SYMFUZZ_JOBS="1", SYMFUZZ_SEED="0",
               SYMFUZZ_FUZZ_ARGS="--max-cases 4 --ops tanh,add,mul --max-ops 3 --quiet",
               SYMFUZZ_REFERENCE_PYTHON=str(clean), SYMFUZZ_FAIL_ON="new")
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def run_matrix(argvs: list[list[str]], env: dict, cwd: Path, at_once: int = 2) -> list[subprocess.CompletedProcess]:
    """The shard steps side by side, as a matrix runs them (two at a time: this machine's cores)."""
    done = []
    for i in range(0, len(argvs), at_once):
        procs = [subprocess.Popen(["bash", str(ROOT / argv[0]), *argv[1:]], cwd=cwd, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for argv in argvs[i:i + at_once]]
        for proc in procs:
            output, _ = proc.communicate(timeout=900)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, output, ""))
    return done


# Nine symfuzz runs (about 70 s): slow, for the default suite's time. What each step does is in
# the default tier: new findings fail and accepted ones are known on the next run, with the corpus
# replayed first (test_ci_gate.py), shards merged equal the unsharded run (test_merge.py), and the
# recipe still has these jobs and steps (test_the_recipe_has_the_jobs_the_issue_asks_for).
@pytest.mark.slow
def test_the_pull_request_job_runs_end_to_end(tmp_path):
    steps = recipe_steps()
    env = recipe_env(tmp_path)
    out, corpus = tmp_path / "symfuzz-ci", tmp_path / ".symfuzz-corpus"

    # A first pull request: no baseline, no corpus yet.
    replay = run_step(steps["replay"][0], env, tmp_path)
    assert replay.returncode == 0 and "nothing to replay" in replay.stdout, replay.stdout + replay.stderr
    for shard in run_matrix(steps["shard"], env, tmp_path):
        assert shard.returncode == 0, shard.stdout  # findings are judged at the merge
    merged = run_step(steps["merge"][0], env, tmp_path)
    assert merged.returncode == 1, merged.stdout + merged.stderr  # a new finding fails the pull request
    stats = json.loads((out / "merged" / "stats.json").read_text())
    assert stats["indices"] == [0, 1, 2, 3] and stats["findings"]["signatures"]
    for name in ("junit.xml", "summary.md", "report.html"):
        assert (out / "merged" / "report" / name).exists()
    assert list((corpus / "cases").glob("*.json")), "the merged corpus was not kept for the next run"

    # The team accepts the finding; the next pull request is green and lists it as known.
    accept = subprocess.run(["symfuzz", "accept", str(out / "merged")], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert accept.returncode == 0 and (tmp_path / "symfuzz-baseline.json").exists(), accept.stderr
    replay = run_step(steps["replay"][0], env, tmp_path)
    assert replay.returncode == 0 and "REPRODUCED" in replay.stdout, replay.stdout + replay.stderr
    merged = run_step(steps["merge"][0], env, tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "[known]" in merged.stdout


# One more campaign with a reference run (about a minute): slow, for the default suite's time.
# The default run keeps the regression verdict and --fail-on regression (test_ci_gate.py).
@pytest.mark.slow
def test_the_nightly_job_fails_on_a_regression(tmp_path):
    steps = recipe_steps()
    env = recipe_env(tmp_path)
    nightly = run_step(steps["nightly"][0], env, tmp_path)
    assert nightly.returncode == 1, nightly.stdout + nightly.stderr
    out = tmp_path / "symfuzz-ci" / "nightly"
    gate = json.loads((out / "gate.json").read_text())
    assert gate["findings"] and {e["regression"] for e in gate["findings"].values()} == {"regression"}
    assert (out / "report" / "junit.xml").exists()
    assert list((tmp_path / ".symfuzz-corpus" / "cases").glob("*.json"))


def test_the_nightly_step_needs_a_reference_python(tmp_path):
    steps = recipe_steps()
    env = recipe_env(tmp_path)
    env.pop("SYMFUZZ_REFERENCE_PYTHON")
    done = run_step(steps["nightly"][0], env, tmp_path)
    assert done.returncode == 2 and "needs SYMFUZZ_REFERENCE_PYTHON" in done.stderr
