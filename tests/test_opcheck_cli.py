"""`symfuzz opcheck`: usage errors, the xfail store, stage 2 from a calls file, crash isolation."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT
from opcheck_ops import buggy

from symfuzz.cli import main
from symfuzz.opcheck.calls import CallRecorder, write_calls

FAST = ["--checks", "schema,faketensor,symbolic_fake", "--budget", "20s", "--in-process", "--quiet"]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # repro files go to ./.symfuzz/opcheck by default


def run(capsys, *argv):
    code = main(["opcheck", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("argv", "message"), [
    ([], "nothing to check"),
    (["nosuchns::op"], "no op nosuchns::op is registered"),
    (["half_cols"], "is not an op name"),
    (["--module", "no_such_module_xyz", "a::b"], "cannot import --module no_such_module_xyz"),
    (["--accept", "symfuzz_buggy::cube"], "--accept needs --store"),
    (["--checks", "schema,nope", "symfuzz_buggy::cube"], "unknown check(s) nope"),
    (["--namespace", "no_such_namespace"], "no ops registered in namespace"),
])
def test_usage_errors_are_one_line_without_traceback(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err + out


def test_bad_calls_file_and_bad_store_are_usage_errors(capsys, tmp_path):
    bad = tmp_path / "calls.jsonl"
    bad.write_text('{"something": "else"}\n')
    code, _, err = run(capsys, "--from", str(bad))
    assert code == 2 and "not a symfuzz opcheck calls file" in err
    store = tmp_path / "store.json"
    store.write_text('{"data": {"a::b": {"test_schema": {"status": "maybe", "comment": ""}}}, "_version": 1}')
    code, _, err = run(capsys, "symfuzz_buggy::cube", "--store", str(store))
    assert code == 2 and str(store) in err and "Traceback" not in err


def test_store_xfails_accept_and_strict_unexpected_success(capsys, tmp_path):
    store = tmp_path / "failures_dict.json"
    code, out, _ = run(capsys, "symfuzz_buggy::half_cols", "--store", str(store), *FAST)
    assert code == 1 and "FAIL faketensor [wrong-shape]" in out

    code, out, _ = run(capsys, "symfuzz_buggy::half_cols", "--store", str(store), "--accept", *FAST)
    assert code == 0 and "updated" in out
    data = json.loads(store.read_text())
    entry = data["data"]["symfuzz_buggy::half_cols"]["test_faketensor"]
    assert entry["status"] == "xfail" and entry["comment"].startswith("symfuzz: ") and "shape" in entry["comment"]

    code, out, _ = run(capsys, "symfuzz_buggy::half_cols", "--store", str(store), *FAST)
    assert code == 0 and "faketensor xfail" in out and "FAIL faketensor" not in out

    # The same entry on an op that passes: strict, an unexpected success fails the run.
    data["data"]["symfuzz_ok::mm"] = {"test_faketensor": {"status": "xfail", "comment": "was broken once"}}
    store.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    code, out, _ = run(capsys, "symfuzz_ok::mm", "--module", "opcheck_ops.correct", "--store", str(store), *FAST)
    assert code == 1 and "faketensor XPASS(strict)" in out
    code, out, _ = run(capsys, "symfuzz_ok::mm", "--module", "opcheck_ops.correct", "--store", str(store), "--accept", *FAST)
    assert code == 0
    kept = json.loads(store.read_text())["data"]["symfuzz_ok::mm"]["test_faketensor"]
    assert kept == {"status": "xsuccess", "comment": "was broken once"}, "accept keeps the comment"


def test_pytorch_failures_dict_entries_apply(capsys, tmp_path):
    store = tmp_path / "failures_dict.json"
    store.write_text(json.dumps({
        "_description": "failures for generate_opcheck_tests",
        "_version": 1,
        "data": {"symfuzz_buggy::half_cols": {
            "TestCustomOps.test_faketensor__test_half_cols": {"comment": "known: odd widths", "status": "xfail"},
        }},
    }, indent=2, sort_keys=True) + "\n")
    code, out, _ = run(capsys, "symfuzz_buggy::half_cols", "--store", str(store), *FAST)
    assert code == 0 and "faketensor xfail" in out


def test_stage_two_runs_the_checks_from_a_calls_file(capsys, tmp_path):
    calls = []
    with CallRecorder({"symfuzz_buggy"}, test="test_suite.py::test_x", sink=calls):
        buggy.half_cols(torch.randn(4, 8))
        buggy.half_cols(torch.randn(4, 8))
        buggy.row_sum(torch.randn(6, 8))
    path = tmp_path / "calls.jsonl"
    write_calls(path, calls)
    report = tmp_path / "reports.json"
    code, out, err = run(capsys, "--from", str(path), "--module", "opcheck_ops.buggy", "--json", str(report),
                         "--repro-dir", str(tmp_path / "repros"), *FAST)
    assert code == 1, out + err
    assert "symfuzz_buggy::half_cols" in out and "symfuzz_buggy::row_sum" in out
    reports = {r["op"]: r for r in json.loads(report.read_text())}
    assert reports["symfuzz_buggy::half_cols"]["samples"] == 1, "duplicate calls were merged"
    assert reports["symfuzz_buggy::row_sum"]["results"]["symbolic_fake"]["status"] == "failed"
    assert sorted(p.name for p in (tmp_path / "repros").iterdir()) == [
        "symfuzz_buggy__half_cols__faketensor.py",
        "symfuzz_buggy__row_sum__faketensor.py",  # int32 rows sum to int64; its fake keeps int32 (the dtype sweep)
        "symfuzz_buggy__row_sum__symbolic_fake.py",
        "symfuzz_snippet_helpers.py",  # what they import, written beside them
    ]


def test_a_crashing_or_hanging_kernel_is_a_result_and_the_run_goes_on(tmp_path):
    # --op-timeout: the hang, its probe and the slow fake each wait it out; the timer starts once the
    # child has imported torch, and these ops' own checks take well under a second.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-m", "symfuzz.cli", "opcheck", "--module", "opcheck_ops.crashy", "--module", "opcheck_ops.buggy",
         "symfuzz_crashy::segv_on_odd", "symfuzz_crashy::hang_on_empty", "symfuzz_crashy::slow_fake_on_empty",
         "symfuzz_crashy::exit_on_empty",
         "symfuzz_buggy::scale2",
         "--checks", "schema,faketensor", "--op-timeout", "7s", "--repro-dir", str(tmp_path)],
        check=False, capture_output=True, text=True, env=env, timeout=400, cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 1, proc.stdout + proc.stderr
    segv = out[out.index("symfuzz_crashy::segv_on_odd: schema FAIL"):]
    assert "FAIL schema [kernel-crash]" in segv
    assert "crash: the process died of SIGSEGV" in segv
    assert "the real kernel alone crashes the process on this input" in segv  # confirmed in a probe
    shape = segv.split("input: x0: float32[")[1].split("]")[0]
    assert int(shape.split(",")[-1]) % 2 == 1, "names an input that crashes it (an odd width)"
    assert "(shrunk)" in segv.split("\n")[2] and shape.startswith("1, "), "shrunk by the probes"
    assert "FAIL schema [hang]" in out and "hang: still running after 7s" in out
    assert "the real kernel alone hangs on this input too" in out  # confirmed in a probe
    # A check that hangs where the op's own call returns (here, in its fake kernel) is not a hang of the op.
    assert "symfuzz_crashy::slow_fake_on_empty: schema ok, faketensor skip" in out, out
    assert "note faketensor: not checked: the check ran past the op's time limit on x0: float32[0," in out, out
    assert "FAIL schema [process-exit]" in out
    assert "the checking process exited (code 0) while checking this op" in out
    assert "FAIL faketensor [wrong-strides]" in out, "the op after the crash and the hang was still checked"


def test_namespace_checks_every_op_registered_in_it(capsys):
    code, out, _ = run(capsys, "--namespace", "symfuzz_buggy", "--module", "opcheck_ops.buggy",
                       "--checks", "schema", "--budget", "10s", "--in-process", "--quiet")
    assert code == 1, "add_one and flat break their schema"
    for name in buggy.SAMPLES:
        assert f"symfuzz_buggy::{name}: schema" in out
    assert "10 op(s) checked, 2 unexpected result(s)" in out


def test_a_kernel_that_eats_memory_is_an_out_of_memory_result():
    from symfuzz.opcheck.runner import Task, run_ops

    task = Task(ops=["symfuzz_crashy::oom_on_empty", "symfuzz_buggy::scale2"],
                modules=["opcheck_ops.crashy", "opcheck_ops.buggy"], sys_path=[str(ROOT / "tests"), str(ROOT)],
                checks=["schema", "faketensor"], budget=20, memory_limit_mb=3000)
    oom, after = run_ops(task)
    failure = oom.results["schema"].failures[0]
    assert failure.kind == "out-of-memory" and "grew past 3000 MB" in failure.message
    dims = [int(d) for d in failure.input.split("x0: float32[")[1].split("]")[0].split(",")]
    assert 0 in dims, failure.input  # the empty input did it
    assert oom.results["faketensor"].status == "skipped"  # not run: the process died
    assert after.results["faketensor"].status == "failed"  # the next op was still checked, by a new child
