"""The opcheck plugin retrofitted onto a real-shaped op library's own suite (tests/opcheck_suites/quantlib).

quantlib defines its ops by schema string, registers fake kernels in one module and
real kernels per backend in others (two of them C functions through ctypes that
segfault when the 256-entry `code` table has another size), and its tests call
torch.library.opcheck on every op. The plugin must never change the suite's own
outcomes, must check every op in a child process, and must turn a kernel crash
into a reported result.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from opcheck_suite_support import SUITE_OUTCOMES, SUITE_OPS, run_suite

OPCHECK = ["--opcheck", "--opcheck-namespaces=quantlib", "--opcheck-store=opcheck_failures.json"]


def test_the_plugin_never_changes_the_suites_outcomes_and_checks_every_op_in_a_child(tmp_path):
    plain = run_suite(tmp_path / "plain", timeout=300)
    assert plain.returncode == 0 and plain.outcomes == SUITE_OUTCOMES, plain.output[-4000:]

    run = run_suite(tmp_path / "retrofit", [*OPCHECK, "--opcheck-budget=8"], timeout=900)
    text = run.output
    # Test by test, the same outcomes as without the plugin.
    assert run.outcomes == plain.outcomes, text[-6000:]
    assert "Traceback" not in text.split("symfuzz opcheck")[0], text[-6000:]
    assert "INTERNALERROR" not in text
    # Every op was checked, in a child process, though the test file imports none of them by name.
    assert "checking 4 op(s) in a child process" in text, text[-6000:]
    for op in SUITE_OPS:
        assert f"quantlib::{op}: " in text and f"quantlib::{op} ... schema" in text, (op, text[-6000:])
    assert "ERROR not checked" not in text and "in-process" not in text
    header = json.loads((run.root / ".symfuzz" / "opcheck-calls.jsonl").read_text().splitlines()[0])
    assert "quantlib._fake" in header["modules"]  # named by the fake kernels' registration records
    assert "quantlib.backends.cpu" in header["extra_modules"]  # the ctypes kernels: the same package
    assert set(header["registrations"]["quantlib::dequantize_blockwise"]["keys"]) >= {"CPU", "Meta"}
    # The table never varied in the recorded calls, while A and the blocksize did: held fixed,
    # so the checks ran on the ops whose kernels would crash on any other table size.
    summary = text[text.index("= symfuzz opcheck ="):]
    for op in ("quantize_blockwise", "dequantize_blockwise"):
        block = summary[summary.index(f"quantlib::{op}: "):]
        assert "contract code: held fixed at float32[256] (the same shape in all" in block.split("\nquantlib::")[0]
    assert "contract absmax: size(0) follows ceil(A.numel() / blocksize)" in summary
    assert "kernel-crash" not in text
    assert "schema passed" in summary.split("quantlib::dequantize_blockwise: ")[1].splitlines()[0]
    # Its cost, beside the suite's own time.
    assert "time: the tests took" in text and "checking 4 op(s) took" in text
    # pytest's own code (every test passed: 0) plus opcheck's failures, never a signal.
    final = text.strip().splitlines()[-1]
    assert run.returncode == (1 if " opcheck failed" in final else 0), text[-3000:]


@pytest.mark.slow  # a full suite run (about a minute); the default run keeps a crashing kernel as a
# result through the CLI (test_opcheck_cli.py) and across xdist workers (test_opcheck_plugin.py)
def test_a_kernel_crash_on_a_forced_table_size_is_a_reported_result(tmp_path):
    run = run_suite(tmp_path, [*OPCHECK, "--opcheck-accept", "--opcheck-budget=8",
                               "--opcheck-checks=schema,faketensor",
                               "--opcheck-fixed=quantlib::dequantize_blockwise="], timeout=900)
    text = run.output
    assert run.outcomes == SUITE_OUTCOMES, text[-6000:]
    assert run.returncode == 0, text[-6000:]  # accept mode: the store now expects it; a normal exit
    assert "= symfuzz opcheck =" in text
    crash = text[text.index("accepted as xfail: quantlib::dequantize_blockwise schema [kernel-crash]"):]
    assert "input: x0: uint8[" in crash and "x2: float32[" in crash  # the table's size varied
    table = int(crash.split("x2: float32[")[1].split("]")[0])
    assert table != 256
    assert "the process died of SIGSEGV" in crash
    # where (the stack the child printed): the library's own kernel, which calls the C code
    assert "the process died of SIGSEGV while checking this op, in quantlib/backends/cpu.py:_ (called from" in crash
    assert "the real kernel alone crashes the process on this input" in crash
    store = json.loads((run.root / "opcheck_failures.json").read_text())
    entry = store["data"]["quantlib::dequantize_blockwise"]["test_schema"]
    assert entry["status"] == "xfail" and "kernel-crash" in entry["comment"]
    # The other ops were still checked after the crash, by a fresh child.
    assert "quantlib::row_absmax: " in text and "quantlib::scale_rows: " in text
    # The repro needs only torch and the library, and crashes in a fresh process.
    repro = run.root / ".symfuzz" / "opcheck" / "quantlib__dequantize_blockwise__schema.py"
    env = {**os.environ, "PYTHONPATH": str(run.root)}
    done = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert done.returncode == -signal.SIGSEGV, done.stderr.decode()[-2000:]


@pytest.mark.slow  # in-process checking is also covered by test_opcheck_plugin's rebuild test
def test_in_process_checking_only_when_asked(tmp_path):
    run = run_suite(tmp_path, [*OPCHECK, "--opcheck-in-process", "--opcheck-budget=5",
                               "--opcheck-checks=schema"], timeout=600)
    assert run.outcomes == SUITE_OUTCOMES, run.output[-4000:]
    assert "checking 4 op(s) in this process (no crash isolation)" in run.output
    assert "quantlib::dequantize_blockwise (" in run.output and "in-process" in run.output
