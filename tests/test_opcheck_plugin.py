"""The symfuzz opcheck pytest plugin (opcheck/plugin.py), end to end on small suites.

Every run is a fresh pytest subprocess (runpytest_subprocess): the plugin imports
torch and registers custom ops, and neither may leak into this process. Most
runs check only the cheap checks (schema, faketensor, symbolic_fake); one runs
all of them on one small op.
"""

pytest_plugins = ["pytester"]

import json
import subprocess
import sys

import pytest

from symfuzz.opcheck.store import CHECKS, XfailStore

CHEAP = "--opcheck-checks=schema,faketensor,symbolic_fake"
TIMEOUT = 300

# Two ops with a fake kernel that floors where the real kernel rounds up (wrong
# for odd sizes only, the tests use even ones) and one correct op.
OPS = '''
import torch


@torch.library.custom_op("pt_mini::halve", mutates_args=())
def halve(x: torch.Tensor) -> torch.Tensor:
    """Every other column: ceil(n/2) of them."""
    return x[..., ::2].clone(memory_format=torch.contiguous_format)


@halve.register_fake
def _(x):
    return x.new_empty(*x.shape[:-1], {halve_cols})


@torch.library.custom_op("pt_mini::top_half", mutates_args=())
def top_half(x: torch.Tensor) -> torch.Tensor:
    """The first ceil(n/2) rows."""
    return x[: (x.shape[0] + 1) // 2].clone(memory_format=torch.contiguous_format)


@top_half.register_fake
def _(x):
    return x.new_empty({top_rows}, *x.shape[1:])


@torch.library.custom_op("pt_mini::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return (x + x).contiguous()  # in x's dtype, as the fake says (x * 2 turns bool into int64)


@twice.register_fake
def _(x):
    return x.new_empty(x.shape)


twice.register_autograd(lambda ctx, grad: grad * 2, setup_context=lambda ctx, inputs, output: None)
'''
BUGGY = {"halve_cols": "x.shape[-1] // 2", "top_rows": "x.shape[0] // 2"}
FIXED = {"halve_cols": "(x.shape[-1] + 1) // 2", "top_rows": "(x.shape[0] + 1) // 2"}

TEST_ALL = '''
import torch
import mini_ops


def test_halve():
    x = torch.randn(4, 8)
    assert torch.equal(mini_ops.halve(x), x[:, ::2])


def test_top_half():
    x = torch.randn(4, 8)
    assert torch.equal(mini_ops.top_half(x), x[:2])


def test_twice():
    x = torch.randn(4, 8)
    assert torch.equal(mini_ops.twice(x), x * 2)


def test_not_an_op():
    assert 1 + 1 == 2
'''

RETROFIT_INI = """
[pytest]
pythonpath = .
addopts = --opcheck --opcheck-namespaces=pt_mini --opcheck-store=opcheck_failures.json
"""


def make_suite(pytester, fixed=False, ini=RETROFIT_INI, **tests):
    pytester.makeini(ini)
    pytester.makepyfile(mini_ops=OPS.format(**(FIXED if fixed else BUGGY)))
    if tests:
        pytester.makepyfile(**tests)  # dedented by pytester


def run(pytester, *args):
    result = pytester.runpytest_subprocess(*args, timeout=TIMEOUT)
    result.text = result.stdout.str()
    return result


def store_data(pytester):
    return XfailStore.load(pytester.path / "opcheck_failures.json").data


def test_loading_the_plugin_imports_no_torch(pytester):
    code = "import symfuzz.opcheck.plugin, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    # A plain pytest run (the plugin is installed, --opcheck off) stays torch-free too.
    pytester.makepyfile(test_plain="import sys\n\ndef test_no_torch():\n    assert 'torch' not in sys.modules\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "symfuzz opcheck" not in result.text


def test_opcheck_without_namespaces_is_a_usage_error(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    result = run(pytester, "--opcheck")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "ERROR: --opcheck needs the op namespaces to check" in err
    assert "Traceback" not in err + result.text
    result = run(pytester, "--opcheck", "--opcheck-namespaces=x", "--opcheck-checks=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown check(s) fake" in result.stderr.str()


@pytest.mark.slow  # five suite runs (3 minutes); the default run covers accept through the plugin under
# xdist (test_xdist_workers_results_are_merged), and strict xpass and accept through the CLI
# (test_opcheck_cli.py::test_store_xfails_accept_and_strict_unexpected_success)
def test_retrofit_store_cycle(pytester):
    """Unexpected failure -> accept -> xfailed -> fixed (xpassed) -> accept keeps or drops the entry."""
    make_suite(pytester, test_ops=TEST_ALL)

    # 1. No store entries: the fake-kernel bugs fail the run, the ordinary tests pass.
    result = run(pytester, CHEAP)
    assert result.ret == 1, result.text
    result.assert_outcomes(passed=4)
    text = result.text
    assert "pt_mini::halve: FAILED" in text
    assert "pt_mini::top_half: FAILED" in text
    assert "pt_mini::twice: ok  [schema passed, faketensor passed, symbolic_fake passed]" in text
    assert "FAILED pt_mini::halve faketensor [wrong-shape]" in text
    assert "input: x0: float32[" in text and "(shrunk)" in text
    assert "opcheck failed" in text.splitlines()[-1]
    repro = pytester.path / ".symfuzz/opcheck/pt_mini__halve__faketensor.py"
    assert "repro: .symfuzz/opcheck/pt_mini__halve__faketensor.py" in text and repro.exists()
    assert "symfuzz opcheck --from .symfuzz/opcheck-calls.jsonl" in text
    assert (pytester.path / ".symfuzz/opcheck-calls.jsonl").exists()

    # 2. Accept: the store now expects both failures; opcheck fails nothing.
    result = run(pytester, CHEAP, "--opcheck-accept")
    assert result.ret == 0, result.text
    assert "added pt_mini::halve test_faketensor: xfail" in result.text
    data = store_data(pytester)
    assert data["pt_mini::halve"]["test_faketensor"]["status"] == "xfail"
    assert data["pt_mini::top_half"]["test_faketensor"]["status"] == "xfail"
    assert "pt_mini::twice" not in data

    # A human explains one entry; the other's comment is cleared (as PyTorch writes entries).
    store = XfailStore.load(pytester.path / "opcheck_failures.json")
    store.data["pt_mini::halve"]["test_faketensor"]["comment"] = "odd widths floor; fix tracked in #12"
    store.data["pt_mini::top_half"]["test_faketensor"]["comment"] = ""
    store.save()

    # 3. A plain rerun: expected failures are xfailed, the run passes.
    result = run(pytester, CHEAP)
    assert result.ret == 0, result.text
    assert "pt_mini::halve: ok  [schema passed, faketensor xfailed, symbolic_fake passed]" in result.text
    assert "xfailed pt_mini::halve faketensor: odd widths floor; fix tracked in #12" in result.text

    # 4. The bugs are fixed: strict xfail, the unexpected successes fail the run.
    make_suite(pytester, fixed=True)
    result = run(pytester, CHEAP)
    assert result.ret == 1, result.text
    assert "faketensor XPASSED" in result.text
    assert "XPASSED pt_mini::halve faketensor" in result.text

    # 5. Accept: the commented entry is kept as xsuccess, the bare one is removed.
    result = run(pytester, CHEAP, "--opcheck-accept")
    assert result.ret == 0, result.text
    assert "changed pt_mini::halve test_faketensor: xfail -> xsuccess; comment kept" in result.text
    assert "removed pt_mini::top_half test_faketensor" in result.text
    assert store_data(pytester) == {
        "pt_mini::halve": {"test_faketensor": {"comment": "odd widths floor; fix tracked in #12", "status": "xsuccess"}}
    }
    assert not (pytester.path / ".symfuzz/opcheck/pt_mini__halve__faketensor.py").exists()  # stale repro removed
    result = run(pytester, CHEAP)
    assert result.ret == 0, result.text


def test_xdist_workers_results_are_merged(pytester):
    # loadfile puts each file on its own worker; both also call twice, so two workers check it.
    make_suite(pytester, test_a="""
        import torch
        import mini_ops

        def test_halve():
            assert mini_ops.halve(torch.randn(4, 8)).shape == (4, 4)

        def test_twice():
            assert mini_ops.twice(torch.ones(4, 8)).sum() == 64
        """, test_b="""
        import torch
        import mini_ops

        def test_top_half():
            assert mini_ops.top_half(torch.randn(4, 8)).shape == (2, 8)

        def test_twice():
            assert mini_ops.twice(torch.ones(2, 3)).sum() == 12
        """)
    result = run(pytester, CHEAP, "-n", "2", "--dist", "loadfile")
    assert result.ret == 1, result.text
    result.assert_outcomes(passed=4)
    text = result.text
    assert "[gw0] symfuzz opcheck checked" in text and "[gw1] symfuzz opcheck checked" in text
    assert "FAILED pt_mini::halve faketensor [wrong-shape]" in text
    assert "FAILED pt_mini::top_half faketensor [wrong-shape]" in text
    assert "pt_mini::twice: ok" in text
    calls = pytester.path / ".symfuzz/opcheck-calls.jsonl"
    assert calls.exists()
    assert not list(calls.parent.glob("opcheck-calls.jsonl.*")), "worker part files left behind"
    lines = [json.loads(line) for line in calls.read_text().splitlines()[1:]]
    assert sorted(c["op"] for c in lines) == ["pt_mini::halve", "pt_mini::top_half", "pt_mini::twice",
                                              "pt_mini::twice"]

    result = run(pytester, CHEAP, "-n", "2", "--dist", "loadfile", "--opcheck-accept")
    assert result.ret == 0, result.text
    data = store_data(pytester)
    assert data["pt_mini::halve"]["test_faketensor"]["status"] == "xfail"
    assert data["pt_mini::top_half"]["test_faketensor"]["status"] == "xfail"


def test_record_only_writes_calls_and_checks_nothing(pytester):
    make_suite(pytester, test_ops=TEST_ALL)
    result = run(pytester, "--opcheck-record-only", "--opcheck-calls=out/calls.jsonl")
    assert result.ret == 0, result.text
    assert "record only: 3 call(s) written to out/calls.jsonl; no checks were run" in result.text
    assert "symfuzz opcheck --from out/calls.jsonl" in result.text
    assert "checking" not in result.text and "FAILED" not in result.text

    from symfuzz.opcheck.calls import read_calls  # imports torch; only reads tensors back

    calls = read_calls(pytester.path / "out/calls.jsonl")
    assert {c.op: c.test for c in calls} == {
        "pt_mini::halve": "test_ops.py::test_halve",
        "pt_mini::top_half": "test_ops.py::test_top_half",
        "pt_mini::twice": "test_ops.py::test_twice",
    }
    assert all(tuple(c.args[0].shape) == (4, 8) for c in calls)

    # Stage 2 from the file alone: it names the module that registers the ops.
    stage2 = subprocess.run(
        [sys.executable, "-m", "symfuzz.cli", "opcheck", "--from", "out/calls.jsonl", "--checks", "schema,faketensor"],
        cwd=pytester.path, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )
    assert stage2.returncode == 1, stage2.stdout + stage2.stderr
    assert "pt_mini::halve: schema ok, faketensor FAIL" in stage2.stdout
    assert "pt_mini::twice: schema ok, faketensor ok" in stage2.stdout


def test_all_checks_on_one_op_from_ini(pytester):
    """The ini alone switches opcheck on; command-line options win over ini values."""
    make_suite(pytester, ini="""
        [pytest]
        pythonpath = .
        opcheck = true
        opcheck_namespaces = not_this_one
        opcheck_checks = schema
        opcheck_budget = 30
        """, test_ops="""
        import torch
        import mini_ops

        def test_twice():
            assert torch.equal(mini_ops.twice(torch.ones(4, 8)), torch.full((4, 8), 2.0))
        """)
    result = run(pytester, "--opcheck-namespaces=pt_mini", "--opcheck-checks=" + ",".join(CHECKS))
    assert result.ret == 0, result.text
    assert "pt_mini::twice: ok  [" + ", ".join(f"{c} passed" for c in CHECKS) + "]" in result.text


def test_namespace_typo_warns(pytester):
    make_suite(pytester, test_ops=TEST_ALL)
    result = run(pytester, "--opcheck-namespaces=pt_mnii", "--opcheck-store=")
    assert result.ret == 0, result.text
    assert "warning: no calls to ops in namespace(s) pt_mnii were captured" in result.text


def test_ops_that_cannot_be_checked_are_reported_not_a_crash(pytester):
    # once works once per checkout only (a marker file), so opcheck's rerun of the
    # recorded sample raises: an op error. bare is registered through a Library
    # object (no fake): the dispatcher's record names odd_ops.py, so the child
    # imports it. crash segfaults on odd widths: a kernel-crash failure with the
    # input, confirmed in a probe process, and the session survives.
    pytester.makeini(RETROFIT_INI)
    pytester.makepyfile(odd_ops='''
        import os
        import signal

        import torch

        MARKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "once-called")


        @torch.library.custom_op("pt_mini::once", mutates_args=())
        def once(x: torch.Tensor) -> torch.Tensor:
            if os.path.exists(MARKER):
                raise RuntimeError("called twice")
            open(MARKER, "w").close()
            return x.clone()


        @once.register_fake
        def _(x):
            return x.new_empty(x.shape)


        @torch.library.custom_op("pt_mini::crash", mutates_args=())
        def crash(x: torch.Tensor) -> torch.Tensor:
            if x.shape[-1] % 2:
                import sys
                print("UserWarning: an unrelated library warning", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGSEGV)
            return x * 2


        @crash.register_fake
        def _(x):
            return torch.empty_like(x)


        lib = torch.library.Library("pt_mini", "DEF")
        lib.define("bare(Tensor x) -> Tensor")
        lib.impl("bare", lambda x: x + 1, "CPU")
        ''', test_odd="""
        import torch
        import odd_ops

        def test_once():
            assert odd_ops.once(torch.ones(3)).sum() == 3

        def test_crash():
            assert odd_ops.crash(torch.ones(2, 4)).sum() == 16

        def test_bare():
            assert torch.ops.pt_mini.bare(torch.ones(2)).sum() == 4
        """)
    result = run(pytester, CHEAP)
    assert result.ret == 1, result.text
    result.assert_outcomes(passed=3)
    text = result.text
    assert "pt_mini::once: ERROR not checked: the real kernel raised on sample 0" in text
    assert "FAILED pt_mini::crash schema [kernel-crash]" in text
    crash = text[text.index("FAILED pt_mini::crash schema [kernel-crash]"):]
    assert "crash: the process died of SIGSEGV" in crash
    # where it died (the stack the child printed), not the last thing it wrote to stderr
    assert "in odd_ops.py:crash (called from torch/" in crash, crash
    assert "unrelated library warning" not in crash
    assert "the real kernel alone crashes the process on this input" in crash
    width = int(crash.split("input: x0: float32[")[1].split("]")[0].split(",")[-1])
    assert width % 2 == 1  # the input it names is one that crashes
    assert "in-process" not in text
    assert "FAILED pt_mini::bare faketensor [no-fake-kernel]" in text
    assert "INTERNALERROR" not in text


def test_a_crash_on_one_worker_survives_the_merge():
    from symfuzz.opcheck.report_merging import merge_reports
    from symfuzz.opcheck.report import CheckResult, Report

    clean = Report(op="pt_mini::op", results={"schema": CheckResult("schema", "passed")}, samples=1)
    crashed = Report(op="pt_mini::op", error="crash: the process died of SIGSEGV while checking this op")
    merged = merge_reports([clean, crashed])["pt_mini::op"]
    assert merged.error.startswith("crash") and merged.results["schema"].status == "passed"


def test_an_op_the_child_cannot_rebuild_is_reported_not_checked_in_process(pytester):
    # The CPU kernel is registered while the test runs, not when a module is
    # imported: a fresh process that imports the test module has the schema and
    # the fake kernel but no kernel, and must say so instead of checking another op.
    pytester.makeini(RETROFIT_INI)
    pytester.makepyfile(test_late="""
        import torch

        torch.library.define("pt_mini::late", "(Tensor x) -> Tensor")


        @torch.library.register_fake("pt_mini::late")
        def _(x):
            return torch.empty_like(x)


        def test_late():
            torch.library.register_kernel("pt_mini::late", "cpu", lambda x: x + x)  # x's dtype, as its fake says
            assert torch.ops.pt_mini.late(torch.ones(2)).sum() == 4
        """)
    result = run(pytester, CHEAP)
    result.assert_outcomes(passed=1)
    assert "pt_mini::late: ERROR not checked: a fresh process could not rebuild pt_mini::late" in result.text
    assert "missing there: a CPU kernel" in result.text and "--opcheck-in-process" in result.text
    assert result.ret == 1
    result = run(pytester, CHEAP, "--opcheck-in-process")
    assert "checking 1 op(s) in this process (no crash isolation)" in result.text
    assert "pt_mini::late: ok" in result.text, result.text


def test_a_marker_holds_a_table_fixed(pytester):
    # The table's 8 entries tie to x's width in the one recorded call, so the sweep
    # would resize them together; this kernel, like many, assumes 8 and crashes.
    # The author's marker says the table keeps its shape.
    pytester.makeini(RETROFIT_INI)
    pytester.makepyfile(lut_ops="""
        import os
        import signal

        import torch

        torch.library.define("pt_mini::lut", "(Tensor x, Tensor table) -> Tensor")


        @torch.library.register_fake("pt_mini::lut")
        def _(x, table):
            return torch.empty_like(x)


        @torch.library.register_kernel("pt_mini::lut", "cpu")
        def _(x, table):
            if table.numel() != 8:
                os.kill(os.getpid(), signal.SIGSEGV)
            return (x * table.sum()).to(x.dtype)  # x's dtype, as its fake says
        """, test_lut="""
        import pytest
        import torch
        import lut_ops


        @pytest.mark.opcheck_fixed("pt_mini::lut", "table")
        def test_lut():
            assert torch.ops.pt_mini.lut(torch.ones(4, 8), torch.ones(8)).sum() == 256
        """)
    result = run(pytester, "--opcheck-checks=schema,faketensor", "--opcheck-budget=20")
    result.assert_outcomes(passed=1)
    assert "contract table: held fixed at float32[8] (asked for)" in result.text, result.text
    assert "kernel-crash" not in result.text and "pt_mini::lut: ok" in result.text, result.text
    assert result.ret == 0


def test_an_internal_error_is_counted_apart_and_leaves_the_session_green(pytester):
    # A planted bug of symfuzz's own (contract inference raising), checked in process so
    # that the plant applies. Other plugins read pytest's stats entries as report objects
    # (Hypothesis's reads each one's __dict__): the count must not break them.
    make_suite(pytester, fixed=True, test_twice='''
        import torch
        import mini_ops


        def test_twice():
            assert torch.equal(mini_ops.twice(torch.ones(2)), torch.full((2,), 2.0))
        ''')
    pytester.makeconftest('''
        import symfuzz.opcheck.contracts as contracts


        def _broken(templates):
            raise IndexError("list index out of range")


        contracts.infer = _broken
        ''')
    result = run(pytester, CHEAP, "--opcheck-in-process", "-p", "hypothesispytest")
    assert "pt_mini::twice: INTERNAL ERROR of symfuzz: IndexError: list index out of range" in result.text, result.text
    assert "1 passed, 1 opcheck internal error" in result.text, result.text
    assert result.ret == 0, result.text
