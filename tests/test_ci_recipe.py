"""The CI recipe cannot rot: examples/ci/github-actions.yml's own steps, run end to end.

The test reads the workflow's `run:` lines that call examples/ci/symfuzz-ci.sh (one
per job, the shard line once per matrix value) and runs them in the workflow's
order, with tiny budgets and a planted miscompile, so that every path the recipe
takes is exercised: replay, 4 shards, merge (fails on new), nightly (fails on a
regression against a reference Python), then accept and the same again (green).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_the_recipe_runs_end_to_end(tmp_path):
    steps = recipe_steps()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "symfuzz").write_text(f"#!/bin/sh\nexec {sys.executable} -m symfuzz.cli \"$@\"\n")
    (bin_dir / "symfuzz").chmod(0o755)
    clean = bin_dir / "reference-python"  # the last release: this torch without the planted bug
    clean.write_text(f"#!/bin/sh\nunset SYMFUZZ_PLANT\nexec {sys.executable} \"$@\"\n")
    clean.chmod(0o755)
    env = dict(os.environ, **planted_env("tanh-wrong-eager"))
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", SYMFUZZ_LANE="eager", SYMFUZZ_JOBS="1", SYMFUZZ_SEED="0",
               SYMFUZZ_FUZZ_ARGS="--max-cases 4 --ops tanh,add,mul --max-ops 3 --quiet",
               SYMFUZZ_REFERENCE_PYTHON=str(clean), SYMFUZZ_FAIL_ON="new")
    env.pop("GITHUB_STEP_SUMMARY", None)
    out, corpus = tmp_path / "symfuzz-ci", tmp_path / ".symfuzz-corpus"

    # A first pull request: no baseline, no corpus yet.
    replay = run_step(steps["replay"][0], env, tmp_path)
    assert replay.returncode == 0 and "nothing to replay" in replay.stdout, replay.stdout + replay.stderr
    for argv in steps["shard"]:
        shard = run_step(argv, env, tmp_path)
        assert shard.returncode == 0, shard.stdout + shard.stderr  # findings are judged at the merge
    merged = run_step(steps["merge"][0], env, tmp_path)
    assert merged.returncode == 1, merged.stdout + merged.stderr  # a new finding fails the pull request
    stats = json.loads((out / "merged" / "stats.json").read_text())
    assert stats["indices"] == [0, 1, 2, 3] and stats["findings"]["signatures"]
    for name in ("junit.xml", "summary.md", "report.html"):
        assert (out / "merged" / "report" / name).exists()
    assert list((corpus / "cases").glob("*.json")), "the merged corpus was not kept for the next run"

    # The nightly job: the finding passes under the reference torch, a regression.
    nightly = run_step(steps["nightly"][0], env, tmp_path)
    assert nightly.returncode == 1, nightly.stdout + nightly.stderr
    gate = json.loads((out / "nightly" / "gate.json").read_text())
    assert {e["regression"] for e in gate["findings"].values()} == {"regression"}
    assert (out / "nightly" / "report" / "junit.xml").exists()

    # The team accepts the finding; the next pull request is green and lists it as known.
    accept = subprocess.run([str(bin_dir / "symfuzz"), "accept", str(out / "merged")], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert accept.returncode == 0 and (tmp_path / "symfuzz-baseline.json").exists(), accept.stderr
    replay = run_step(steps["replay"][0], env, tmp_path)
    assert replay.returncode == 0 and "REPRODUCED" in replay.stdout, replay.stdout + replay.stderr
    merged = run_step(steps["merge"][0], env, tmp_path)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "[known]" in merged.stdout
