"""The CI gate end to end, on planted bugs: regression verdicts against a reference
Python, the known-findings baseline, corpus replay first, exit codes (SIGTERM: tests/test_interruptions.py).

The "new" environment has two planted miscompiles (tanh and exp, in the eager
backend); the reference environment, an interpreter wrapper that loads the
plants through sitecustomize as the new one does, has only the exp one. So
the tanh finding is a regression and the exp finding is pre-existing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, once_per_session, planted_env

from symfuzz.corpus.case_corpus import CaseCorpus, case_digest
from symfuzz.corpus.regression import judge_against_reference
from symfuzz.corpus.store import load_findings
from symfuzz.fuzz.case import Case
from symfuzz.gate import fails

NEW_PLANTS = "tanh-wrong-eager,exp-wrong-eager"
# --guidance 0: the four cases are fresh draws of seed 2, whichever cases finished first. Cases 1 and 2
# fail by the tanh plant (regressions), case 3 by the exp plant (pre-existing).
CAMPAIGN = ["--lane", "eager", "--ops", "tanh,exp,add", "--max-ops", "3", "--max-cases", "4", "--jobs", "1",
            "--seed", "2", "--quiet", "--guidance", "0"]


def symfuzz(args, env_extra, cwd=None, timeout=900):
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "symfuzz.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=cwd or ROOT)


def wrapper(path: Path, plant: str) -> Path:
    """An interpreter of a "reference environment": this Python with other plants."""
    path.write_text(f"#!/bin/sh\nexport SYMFUZZ_PLANT={plant}\nexec {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """One campaign in the new environment, judged against the reference, appending to a corpus
    (once per session, whichever xdist workers this module's tests land on)."""

    def run(tmp: Path) -> dict:
        reference = wrapper(tmp / "reference-python", "exp-wrong-eager")
        done = symfuzz(["fuzz", *CAMPAIGN, "--out", tmp / "A", "--corpus", tmp / "corpus", "--reference-python",
                        reference, "--fail-on", "regression"], planted_env(NEW_PLANTS))
        return {"args": done.args, "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    tmp, result = once_per_session(tmp_path_factory, "gate-first-run", run)
    return tmp, tmp / "A", tmp / "corpus", subprocess.CompletedProcess(**result)


def gate(out: Path) -> dict:
    return json.loads((out / "gate.json").read_text())


def test_a_bug_only_in_the_new_environment_is_a_regression_and_fails_the_run(first_run):
    _, out, _, done = first_run
    assert done.returncode == 1, done.stdout + done.stderr
    judged = gate(out)
    assert judged["policy"] == "regression" and judged["exit_code"] == 1
    classes = {e["regression"] for e in judged["findings"].values()}
    assert classes == {"regression", "pre-existing"}, judged["findings"]
    for sig, entry in judged["findings"].items():
        ops = entry["description"].split("(ops:")[-1]
        if entry["regression"] == "regression":
            assert "tanh" in ops and "passes under torch" in entry["reference"]["reason"]
            assert entry["fails"] is True
            assert f"{sig}: [NEW, regression, fails the run]" in done.stdout
        else:  # fails there too: the exp bug
            assert "exp" in ops and entry["fails"] is False
            assert entry["reference"]["status"] == "pre-existing"


def test_accepted_findings_are_known_on_the_next_run_and_the_corpus_replays_first(first_run):
    tmp, out, corpus, _ = first_run
    baseline = tmp / "baseline.json"
    accepted = symfuzz(["accept", out, "--baseline", baseline], {})
    assert accepted.returncode == 0, accepted.stderr
    text = baseline.read_text()
    entries = json.loads(text)["entries"]
    assert set(entries) == set(gate(out)["findings"])
    for sig, entry in entries.items():
        assert {"signature", "symptom", "lane", "description", "torch", "first_seen", "repro", "reason"} <= set(entry)
        assert entry["signature"] == sig and entry["reason"] == ""
    assert symfuzz(["accept", out, "--baseline", baseline], {}).returncode == 0
    assert baseline.read_text() == text, "accepting the same findings again changed the file"

    stored = {c.name for c in CaseCorpus(corpus)}
    assert stored, "the first run stored no case in the corpus"
    out2 = tmp / "B"
    # The same seed; two generated cases are enough here: the stored corpus replays first.
    again = symfuzz(["fuzz", *CAMPAIGN, "--max-cases", "2", "--out", out2, "--corpus", corpus, "--baseline", baseline],
                    planted_env(NEW_PLANTS))
    assert again.returncode == 0, again.stdout + again.stderr
    judged = gate(out2)
    assert judged["findings"] and all(e["known"] and not e["fails"] for e in judged["findings"].values())
    for sig in judged["findings"]:
        assert f"{sig}: [known]" in again.stdout
    stats = json.loads((out2 / "stats.json").read_text())
    assert stats["replay"]["cases"] == len(stored)
    assert set(stats["replay"]["signatures"]) & set(entries)
    # The first candidate of the run came from a stored case: found in the replay phase,
    # before any new case was generated. (A stored case replays with its guard-directed
    # calls planned again, from the guards of the torch installed now.)
    first = json.loads((out2 / "candidates.jsonl").read_text().splitlines()[0])
    assert drawn_digest(first["case"]) in {drawn_digest(c.case) for c in CaseCorpus(corpus) if c.name in stored}


def drawn_digest(case: dict) -> str:
    return case_digest(Case.from_json(case).without_planned_calls().to_json())


def test_a_reference_torch_that_lacks_what_a_repro_needs_is_unknown_with_the_reason(first_run, tmp_path):
    _, out, _, _ = first_run
    old = wrapper(tmp_path / "old-python", "torch-without-compile")
    (folder, finding), *_ = load_findings(out / "findings")  # one finding is enough
    verdict = judge_against_reference(finding, str(old), timeout=300, env_extra=planted_env("torch-without-compile"))
    assert verdict.status == "unknown", verdict
    assert "that torch lacks torch.compile" in verdict.reason and verdict.torch
    # ... and the gate counts such a finding as not judged: exit 3 under --fail-on regression.
    entry = {"known": False, "regression": verdict.status}
    assert not fails("regression", entry)


def test_replaying_the_baseline_where_the_bugs_are_gone_reports_them_fixed(first_run, tmp_path):
    _, out, _, _ = first_run
    one = tmp_path / "one"  # a run with one of the findings: one entry is enough, and half the time
    (one / "findings").mkdir(parents=True)
    first = sorted((out / "findings").iterdir())[0]
    shutil.copytree(first, one / "findings" / first.name)
    baseline = tmp_path / "baseline.json"
    assert symfuzz(["accept", one, "--baseline", baseline], {}).returncode == 0
    fixed = symfuzz(["replay", "--baseline", baseline], {"SYMFUZZ_PLANT": ""})
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.count("FIXED") == len(json.loads(baseline.read_text())["entries"])
    assert "baseline entries no longer reproduce" in fixed.stdout


@pytest.mark.parametrize("args, message", [
    (["fuzz", "--fail-on", "regression"], "needs --reference-python"),
    (["fuzz", "--reference-python", "/no/such/python"], "does not exist"),
    (["fuzz", "--reference-python", "no-such-python-here"], "not a file or a command"),
    (["fuzz", "--shard", "3/2"], "with 1 <= K <= N"),
    (["fuzz", "--fail-on", "everything"], "must be one of regression, new, any"),
    (["accept", "/no/such/out"], "not a symfuzz output folder"),
    (["replay"], "--baseline"),
])
def test_bad_gate_options_are_usage_errors(args, message, tmp_path):
    done = symfuzz(args, {}, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_an_unreadable_baseline_is_a_usage_error(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    done = symfuzz(["fuzz", "--baseline", tmp_path / "bad.json", "--lane", "eager"], {}, cwd=tmp_path)
    assert done.returncode == 2 and "not readable JSON" in done.stderr and "Traceback" not in done.stderr
