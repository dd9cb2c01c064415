"""The CI gate's small parts, without a campaign: the case corpus under concurrent
appends, shard indices, the baseline file, and the gate's policy table."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from symfuzz.settings import shard_indices
from symfuzz.corpus.baseline import BaselineError, load_baseline
from symfuzz.corpus.case_corpus import CaseCorpus
from symfuzz.gate import fails, gate_exit_code

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py


def _append(root: str, start: int, count: int) -> None:
    corpus = CaseCorpus(root)
    for i in range(start, start + count):
        corpus.add({"program": {"i": i}, "schedule": {}}, "eager", [f"op:{i}"], "2.13")


def test_two_runs_appending_to_one_corpus_do_not_corrupt_it(tmp_path):
    # Two processes, overlapping cases: every file whole, each case once.
    procs = [multiprocessing.get_context("spawn").Process(target=_append, args=(str(tmp_path), start, 150))
             for start in (0, 100)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    files = sorted((tmp_path / "cases").glob("*.json"))
    assert len(files) == 250
    assert all(json.loads(f.read_text())["case"]["program"]["i"] in range(250) for f in files)
    assert not list((tmp_path / "cases").glob(".*"))  # no temp file left behind
    assert sorted(c.case["program"]["i"] for c in CaseCorpus(tmp_path)) == list(range(250))


def test_shards_are_disjoint_and_cover_the_run():
    whole = list(shard_indices(None, 10))
    parts = [list(shard_indices((k, 3), 10)) for k in (1, 2, 3)]
    assert whole == list(range(10))
    assert sorted(i for part in parts for i in part) == whole
    assert parts[0] == [0, 3, 6, 9]
    assert list(shard_indices((4, 4), 3)) == []  # more shards than cases: this one runs none


def test_a_baseline_that_is_not_one_is_a_one_line_error(tmp_path):
    for text, message in (("{", "not readable JSON"), ("[]", "not a symfuzz baseline"),
                          ('{"baseline_version": 99, "entries": {}}', "newer symfuzz")):
        path = tmp_path / "b.json"
        path.write_text(text)
        with pytest.raises(BaselineError, match=message):
            load_baseline(path)
    with pytest.raises(BaselineError, match="does not exist"):
        load_baseline(tmp_path / "missing.json")
    assert load_baseline(tmp_path / "missing.json", missing_ok=True).entries == {}


@pytest.mark.parametrize("policy, known, regression, expected", [
    ("new", False, None, True), ("new", True, None, False),
    ("any", True, None, True),
    ("regression", False, "regression", True), ("regression", False, "pre-existing", False),
    ("regression", True, "regression", False), ("regression", False, "unknown", False),
])
def test_which_findings_fail_under_each_policy(policy, known, regression, expected):
    assert fails(policy, {"known": known, "regression": regression}) is expected


def test_gate_exit_codes():
    failing = {"findings": {"a": {"fails": True}}, "unjudged": ["b"]}
    assert gate_exit_code(failing) == 1  # a failing finding wins over one that could not be judged
    assert gate_exit_code({"findings": {"a": {"fails": False}}, "unjudged": ["a"]}) == 3
    assert gate_exit_code({"findings": {"a": {"fails": False}}, "unjudged": []}) == 0
    assert gate_exit_code({"findings": {}, "unjudged": []}) == 0


def test_the_baseline_file_does_not_change_when_accepted_again(tmp_path):
    from symfuzz.corpus.finding import Finding  # (here: the import loads the verdict types)
    from symfuzz.oracles.verdict import OutputMismatch, Verdict

    def finding(sig):
        verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="runtime", signature=sig,
                          call_index=0, evidence=OutputMismatch(path="out[0][0]", detail="1/4 elements differ"))
        return Finding(case={"program": {"body": [{"op": "tanh"}]}, "schedule": {}, "origin": {"choices": [1, 2]}},
                       verdict=verdict, lane={"name": "eager"}, environment={"torch": "2.13.0"})

    path = tmp_path / "baseline.json"
    baseline = load_baseline(path, missing_ok=True)
    assert baseline.accept([finding("value-mismatch-b"), finding("value-mismatch-a")]) == [
        "value-mismatch-a", "value-mismatch-b"]
    baseline.save()
    first = path.read_text()
    entry = json.loads(first)["entries"]["value-mismatch-a"]
    assert entry["description"].startswith("value-mismatch in runtime at call 0: out[0][0]: 1/4 elements differ")
    assert "(ops: tanh)" in entry["description"] and "choices" not in entry["repro"]["case"]["origin"]
    again = load_baseline(path)
    again.entries["value-mismatch-a"]["reason"] = "https://github.com/pytorch/pytorch/issues/1"
    again.save()
    edited = path.read_text()
    assert again.accept([finding("value-mismatch-a")]) == []  # known: the person's reason stays
    again.save()
    assert path.read_text() == edited != first
    assert [sig for sig, _ in again.findings()] == ["value-mismatch-a", "value-mismatch-b"]
    assert Path(path).read_text().endswith("\n")


def test_a_merge_missing_a_shard_says_which():
    from symfuzz.cli import _missing_shards

    assert _missing_shards({"shard": {"merged": [[1, 4], [2, 4], [4, 4]]}}) == ["3/4"]
    assert _missing_shards({"shard": {"merged": [[1, 2], [2, 2]]}}) == []
    assert _missing_shards({"shard": {"merged": ["out-a", "out-b"]}}) == []  # not shards
    assert _missing_shards({"shard": None}) == []


@pytest.mark.integration
def test_a_repro_that_says_its_torch_lacks_something_judged_nothing_whatever_the_symptom():
    from symfuzz.corpus.finding import Finding  # (here: the import loads the verdict types)
    from symfuzz.corpus.replay import classify
    from symfuzz.oracles.verdict import Hung, Verdict

    hang = Finding(case={}, lane={"name": "eager"},
                   verdict=Verdict(ok=False, oracle="isolation", symptom="timeout", stage="unknown",
                                   signature="timeout-x", call_index=None, evidence=Hung(timeout_seconds=60)))
    out = 'SYMFUZZ-RESULT {"ok": null, "unsupported": ["torch.compile"]}\n'
    outcome = classify(hang, 2, out, 1.0)
    assert outcome.status == "broken" and outcome.reason == "that torch lacks torch.compile"
