"""The opcheck plugin on an op library built like the real ones it was tried on
(tests/opcheck_suites/kernlib), with its own suite that calls torch.library.opcheck on every op
and checks accuracy at production sizes.

Its correct ops carry every pattern that made false alarms on real suites: a statistics tensor
of ceil(A.numel() / blocksize) entries with the blocksize varying while A does not, per-row
statistics tied to A.size(0), an out= argument, two optional tensors given together, a
differentiable composite op recorded at a million elements, an op computing in float32 whatever
its input, float8 inputs, several optional tensors some None. Their C kernels crash on inputs
outside those contracts. Beside them, four ops with a genuine bug that one float32 sample hides.
"""

import re

import pytest

from opcheck_suite_support import run_suite

OPCHECK = ["--opcheck", "--opcheck-namespaces=kernlib"]
CORRECT = ("dequant_blocks", "dequant_blocks_out", "dequant_offset", "dequant_rows", "int8_linear", "gelu_scale",
           "scale_f32", "fp8_dequant")
# op -> (check, kind) the planted bug is reported with
PLANTED = {
    "rescale": ("faketensor", "wrong-strides"),  # fake says contiguous; the kernel keeps a transposed layout
    "row_sums": ("layout_consistency", "layout-dependent"),  # C reads an expanded input as contiguous
    "center": ("mutation", "undeclared-mutation"),  # writes its input and writes the values back
    "soft_clip": ("autograd_registration", "autograd-not-at-autograd-key"),  # autograd.Function in the CPU kernel
}


@pytest.mark.slow  # three runs of a 100-test suite, about 2 min; the patterns are unit-tested in
# test_opcheck_contracts.py, test_opcheck_arguments.py and test_opcheck_gradient_precision.py
def test_every_failure_on_a_real_shaped_suite_is_a_bug_of_the_op(tmp_path):
    plain = run_suite(tmp_path / "plain", timeout=600, suite="kernlib")
    assert plain.returncode == 0 and plain.outcomes, plain.output[-4000:]
    assert set(plain.outcomes.values()) == {"passed"}

    run = run_suite(tmp_path / "retrofit", OPCHECK, timeout=900, suite="kernlib")
    text = run.output
    assert run.outcomes == plain.outcomes, text[-6000:]  # no test changes outcome
    summary = text[text.index("= symfuzz opcheck ="):]
    assert "ERROR not checked" not in summary and "checker itself" not in summary, summary

    verdicts = dict(re.findall(r"^kernlib::(\w+): (ok|FAILED)", summary, re.M))
    assert verdicts == {**{op: "ok" for op in CORRECT}, **{op: "FAILED" for op in PLANTED}}, summary
    for op, (check, kind) in PLANTED.items():
        assert f"FAILED kernlib::{op} {check} [{kind}]" in summary, (op, summary)
    assert "kernel-crash" not in summary and "[hang]" not in summary

    # Every contract, with its reason (the accuracy tests add recorded calls: counts vary).
    for pattern in (r"contract absmax: size\(0\) follows ceil\(A\.numel\(\) / blocksize\), as in every recorded call",
                    r"contract A\.size\(0\) == row_stats\.size\(0\): equal in all \d+ recorded calls while it varied",
                    r"contract A\.size\(0\) == out\.size\(0\): (equal in all \d+ recorded calls while it varied|"
                    r"the op writes to one of them)",
                    r"contract offset, offset_scale: given together or None together",
                    r"contract row_stats, col_stats: given together or None together",
                    r"contract B\.size\(0\) == col_stats\.size\(0\): equal in every recorded call, at places "
                    r"broadcasting never relates",
                    r"contract scale: held fixed at float32\[1\] \(the same shape in all \d+ recorded calls"):
        assert re.search(pattern, summary), (pattern, summary)
    # A is data beside absmax, not a table: only the blocksize varied.
    assert not re.search(r"contract A: held fixed", summary), summary
    assert "recorded call(s) over 1,048,576 elements were not checked at their own size" in summary

    # Stage 2 costs no more than the suite's own tests, and says so, once Inductor's cache holds
    # its kernels (a CI machine that keeps it between runs; this test's cache is its own). The
    # first run on a fresh machine also pays Inductor's cold start (its C++ compiles): printed too.
    assert _cost(summary)
    again = run_suite(tmp_path / "retrofit", OPCHECK, timeout=900, suite="kernlib", reuse=True)
    tests_took, checks_took = _cost(again.output)
    assert checks_took <= tests_took, again.output[-3000:]


def _cost(text):
    """(the tests' seconds, stage 2's seconds) from the summary's cost line."""
    cost = re.search(r"time: the tests took ([\d.]+)s; checking 12 op\(s\) took ([\d.]+)s, ([\d.]+)x the tests' "
                     r"time \(at most 15s per op", text)
    assert cost, text[-3000:]
    return float(cost.group(1)), float(cost.group(2))
