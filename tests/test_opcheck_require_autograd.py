"""The require-autograd opt-in: a forward-only op is not differentiable, an info line,
unless the author asks for a gradient formula: --require-autograd (CLI), --opcheck-require-autograd
or the ini's opcheck_require_autograd (pytest plugin), or the store's per-op "require_autograd" setting.

Cheap: only the autograd_registration check runs, and every run but one per front end is in-process.
"""

pytest_plugins = ["pytester"]

import json

import pytest

from symfuzz.opcheck.report import Report
from symfuzz.opcheck.store import DESCRIPTION, StoreError, XfailStore, apply_results
from symfuzz.opcheck.task import Task

NS = "symfuzz_fwdonly"
OP = f"{NS}::scale2"
MODULE = "symfuzz_fwdonly_ops"
# A correct forward-only op: a fake kernel, no register_autograd (on purpose).
FORWARD_ONLY = f'''
import torch


@torch.library.custom_op("{NS}::scale2", mutates_args=())
def scale2(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).contiguous()


@scale2.register_fake
def _(x):
    return x.new_empty(x.shape)
'''
CHECK = ["--checks", "autograd_registration", "--budget", "20s", "--quiet"]
REQUIRED = {"comment": "trained through: it needs a backward", "status": "required"}


def dump(data):
    return json.dumps({"_description": DESCRIPTION, "_version": 1, "data": data}, indent=2, sort_keys=True) + "\n"


# ------------------------------------------------------------------ the store's per-op setting


def test_store_setting_round_trips_and_is_no_check(tmp_path):
    text = dump({
        "mylib::op": {"require_autograd": REQUIRED, "test_faketensor": {"comment": "", "status": "xfail"}},
        "mylib::other": {"test_schema": {"comment": "", "status": "skip"}},
    })
    path = tmp_path / "failures_dict.json"
    path.write_text(text)
    store = XfailStore.load(path)
    assert store.to_text() == text
    assert store.requires_autograd("mylib::op") and store.requires_autograd("mylib::op.default")
    assert not store.requires_autograd("mylib::other") and not store.requires_autograd("mylib::nothing")
    # Not a check: no check's expected result comes from it.
    assert store.expected("mylib::op", "autograd_registration") == ("success", "")
    assert store.expected("mylib::op", "gradient") == ("success", "")
    assert store.judge("mylib::op", "autograd_registration", False) == "failed"

    # accept() never adds, removes or changes it: the xfail that passes now goes, the setting stays.
    assert store.accept("mylib::op", "faketensor", True)
    assert store.accept("mylib::op", "autograd_registration", False, "[missing-autograd] no backward")
    assert store.data["mylib::op"]["require_autograd"] == REQUIRED
    assert store.accept("mylib::op", "autograd_registration", True)
    assert store.data == {"mylib::op": {"require_autograd": REQUIRED},
                          "mylib::other": {"test_schema": {"comment": "", "status": "skip"}}}
    store.save()
    assert XfailStore.load(path).to_text() == store.to_text()


def test_apply_results_keeps_the_setting_byte_for_byte(tmp_path):
    path = tmp_path / "failures_dict.json"
    path.write_text(dump({"mylib::op": {"require_autograd": REQUIRED}}))
    apply_results(str(path), [("mylib::op", "gradient", False, "boom"), ("mylib::op", "schema", True, "")])
    data = json.loads(path.read_text())["data"]["mylib::op"]
    assert data["require_autograd"] == REQUIRED and data["test_gradient"]["status"] == "xfail"
    apply_results(str(path), [("mylib::op", "gradient", True, "")])
    assert path.read_text() == dump({"mylib::op": {"require_autograd": REQUIRED}})


def test_pytorch_failures_dict_still_loads_it(tmp_path):
    pytest.importorskip("torch")
    from torch.testing._internal.optests import generate_tests as gt

    path = tmp_path / "failures_dict.json"
    path.write_text(dump({"mylib::op": {"require_autograd": REQUIRED,
                                        "test_faketensor": {"comment": "", "status": "xfail"}}}))
    loaded = gt.FailuresDict.load(str(path))
    assert loaded.data["mylib::op"]["require_autograd"] == REQUIRED
    assert loaded._save(to_str=True) == path.read_text().replace(DESCRIPTION, gt.DESCRIPTION)


@pytest.mark.parametrize("value, needle", [
    ({"comment": "", "status": "xfail"}, "status 'xfail'"),
    ({"comment": "", "status": "Required"}, "status 'Required'"),
    (True, "expected {"),
    ("required", "expected {"),
    ({"status": "required"}, "expected {"),
    ({"comment": "", "status": "required", "extra": 1}, "expected {"),
    ({"comment": 3, "status": "required"}, "'comment' must be a string"),
])
def test_bad_setting_is_a_store_error_naming_file_and_op(tmp_path, value, needle):
    path = tmp_path / "failures_dict.json"
    path.write_text(dump({"mylib::op": {"require_autograd": value}}))
    with pytest.raises(StoreError) as info:
        XfailStore.load(path)
    message = str(info.value)
    assert str(path) in message and "mylib::op" in message and needle in message and "\n" not in message


def test_required_is_no_status_of_a_check(tmp_path):
    path = tmp_path / "failures_dict.json"
    path.write_text(dump({"mylib::op": {"test_gradient": REQUIRED}}))
    with pytest.raises(StoreError, match="unknown status 'required'"):
        XfailStore.load(path)


# ------------------------------------------------------------------ plumbing without torch


def test_task_carries_the_ops_through_json():
    task = Task(ops=["a::b", "a::c"], require_autograd=["a::c"])
    again = Task(**json.loads(json.dumps(task.__dict__)))  # as runner.run_ops hands it to the child
    assert again.require_autograd == ["a::c"]
    assert Task(ops=["a::b"]).require_autograd == []


def test_merged_reports_show_each_info_line_once():
    from symfuzz.opcheck.report_merging import merge_reports

    line = "not differentiable: no autograd formula"
    merged = merge_reports([Report(op="a::b", info=[line]), Report(op="a::b", info=[line, "other"])])
    assert merged["a::b"].info == [line, "other"]


# ------------------------------------------------------------------ the CLI


@pytest.fixture(scope="module")
def ops_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fwdonly")
    (folder / f"{MODULE}.py").write_text(FORWARD_ONLY)
    return folder


@pytest.fixture
def cli(ops_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # repro snippets go to ./.symfuzz/opcheck
    monkeypatch.syspath_prepend(str(ops_dir))  # the child process gets this sys.path too (Task.sys_path)
    from symfuzz.cli import main

    def run(*argv):
        code = main(["opcheck", OP, "--module", MODULE, *CHECK, *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_cli_help_says_what_it_does_and_its_default(capsys):
    from symfuzz.cli import main

    with pytest.raises(SystemExit):
        main(["opcheck", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--require-autograd" in text
    assert "a missing gradient formula is a failure" in text and "default: off" in text
    assert "not differentiable" in text


def test_cli_forward_only_op_is_info_unless_required(cli):
    code, out, err = cli("--in-process")
    assert code == 0, out + err
    assert "info: " in out and "not differentiable" in out
    assert "FAIL" not in out and "missing-autograd" not in out

    code, out, err = cli("--in-process", "--require-autograd")
    assert code == 1, out + err
    assert "autograd_registration FAIL" in out and "FAIL autograd_registration [missing-autograd]" in out


def test_cli_store_setting_requires_it_for_that_op_in_the_child(cli, tmp_path):
    store = tmp_path / "failures_dict.json"
    store.write_text(dump({OP: {"require_autograd": REQUIRED}}))
    code, out, err = cli("--store", str(store))  # isolated: the setting reaches the child through the Task
    assert code == 1, out + err
    assert "FAIL autograd_registration [missing-autograd]" in out

    # Accept records the failure as expected and leaves the setting as it was.
    code, out, err = cli("--store", str(store), "--in-process", "--accept")
    assert code == 0, out + err
    entries = json.loads(store.read_text())["data"][OP]
    assert entries["require_autograd"] == REQUIRED and entries["test_autograd_registration"]["status"] == "xfail"
    code, out, err = cli("--store", str(store), "--in-process")
    assert code == 0 and "autograd_registration xfail" in out, out + err

    # Another op's setting does not reach this one.
    store.write_text(dump({f"{NS}::other": {"require_autograd": REQUIRED}}))
    code, out, err = cli("--store", str(store), "--in-process")
    assert code == 0 and "not differentiable" in out, out + err


# ------------------------------------------------------------------ the pytest plugin

TEST_OPS = f'''
import torch
import {MODULE}


def test_scale2():
    x = torch.randn(4, 8)
    assert torch.equal({MODULE}.scale2(x), x * 2)
'''
INI = f"""
[pytest]
pythonpath = .
addopts = --opcheck --opcheck-namespaces={NS} --opcheck-checks=autograd_registration --opcheck-budget=20
{{extra}}
"""


def plugin_run(pytester, *args, extra=""):
    pytester.makeini(INI.format(extra=extra))
    pytester.makepyfile(**{MODULE: FORWARD_ONLY, "test_ops": TEST_OPS})
    result = pytester.runpytest_subprocess(*args, timeout=300)
    result.text = result.stdout.str()
    return result


def test_plugin_forward_only_op_is_info_unless_required(pytester):
    result = plugin_run(pytester, "--opcheck-in-process")
    assert result.ret == 0, result.text
    result.assert_outcomes(passed=1)
    assert f"{OP}: ok" in result.text and "info: " in result.text and "not differentiable" in result.text
    assert "FAILED" not in result.text

    result = plugin_run(pytester, "--opcheck-in-process", "--opcheck-require-autograd")
    assert result.ret == 1, result.text
    result.assert_outcomes(passed=1)
    assert f"FAILED {OP} autograd_registration [missing-autograd]" in result.text

    result = plugin_run(pytester, "--opcheck-in-process", extra="opcheck_require_autograd = true")
    assert result.ret == 1, result.text
    assert f"FAILED {OP} autograd_registration [missing-autograd]" in result.text


def test_plugin_store_setting_requires_it_in_the_child(pytester):
    (pytester.path / "failures_dict.json").write_text(dump({OP: {"require_autograd": REQUIRED}}))
    result = plugin_run(pytester, "--opcheck-store=failures_dict.json")  # isolated: through the Task
    assert result.ret == 1, result.text
    result.assert_outcomes(passed=1)
    assert f"FAILED {OP} autograd_registration [missing-autograd]" in result.text


def test_plugin_bad_store_setting_is_a_usage_error(pytester):
    (pytester.path / "failures_dict.json").write_text(dump({OP: {"require_autograd": {"comment": "",
                                                                                      "status": "yes"}}}))
    result = plugin_run(pytester, "--opcheck-store=failures_dict.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--opcheck-store:" in err and OP in err and "status 'yes'" in err and "Traceback" not in err
