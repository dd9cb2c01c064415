"""A finding's short repro.py, run as a person runs it: in a fresh process, with only torch.

Schedules hold calls eager refuses on purpose (an invalid shape, a guard's other side). There
the judge counts compiled raising too as agreement (fuzz/runtime/comparing.judge_call); the short
script must do the same, or it stops at that call with eager's error and never reaches the bug.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.short_repro import render_short, short_mismatch
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import OutputMismatch, Verdict


def _mm_finding(calls) -> Finding:
    program = Program(inputs=(Input("x0", "float32", ("s0", "s1")), Input("x1", "float32", ("s2", 3))),
                      body=(OpNode("v1", "mm", ("x0", "x1"), {"c1": ""}),), outputs=("v1",))
    case = Case(program, Schedule(None, tuple(Call((ArgSpec(a, "float32", 1), ArgSpec(b, "float32", 2)))
                                              for a, b in calls)))
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="runtime",
                      signature="value-mismatch-0123456789", call_index=len(calls) - 1,
                      evidence=OutputMismatch(path="out[0][0]", detail="1/6 elements differ"))
    return Finding(case=case.to_json(), verdict=verdict, lane=get_lane("eager").to_json(),
                   environment={"torch": "2.13.0"})


def _run(script: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_a_call_eager_refuses_and_compiled_refuses_too_is_passed_over(tmp_path):
    # Call 0 multiplies (2, 4) by (5, 3): eager raises, and so does the compiled call. Call 1 is valid.
    finding = _mm_finding([((2, 4), (5, 3)), ((2, 4), (4, 3))])
    run = _run(render_short(finding), tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "compiled matches eager at every call" in run.stdout
    # No bug on the eager backend, so the run does not show the finding; it says so, not "failed otherwise".
    assert short_mismatch(finding, run.returncode, run.stdout + run.stderr).startswith("exit 0")


# With an SGD step: the run covers what a program without one does (the forward, the gradients, the
# mode switch, the state checks) and the step too. A module program without a step passes on Inductor
# in tests/test_quality_modules.py; Adam's step is the judge's too: tests/test_short_repro.py, in process.
@pytest.mark.parametrize("step", [{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9}])
def test_a_module_programs_short_repro_passes_where_compiled_is_right(tmp_path, step):
    """A model per side with a trainable weight, a frozen bias, a running statistic written in place
    and a mode switch, through AOTAutograd: the plain checks of outputs, gradients and the models'
    state (after the optimizer's step, with one) agree, as the judge does."""
    from test_modules import module_case

    case = module_case(step)
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="runtime",
                      signature="value-mismatch-0123456789", call_index=2,
                      evidence=OutputMismatch(path="out[3][2]", detail="made up"))
    finding = Finding(case=case.to_json(), verdict=verdict, lane=get_lane("aot_eager").to_json(),
                      environment={"torch": "2.13.0"})
    script = render_short(finding)
    assert "model.train(False)" in script and ("train_step(optimizer, model" in script) == (step is not None)
    run = _run(script, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "compiled matches eager at every call" in run.stdout
    # The compiled side's running statistic set off by one (no output reads it): only the state check sees it.
    line = next(ln for ln in script.splitlines() if ln.startswith("compiled = torch.compile(model, "))
    planted = _run(script.replace(line, line + "\nmodel.b2.add_(1.0)"), tmp_path)
    assert planted.returncode == 1 and "AssertionError: call 0: the model's state [2]" in planted.stderr, planted.stderr[-3000:]
