"""A finding's short repro.py (corpus/short_repro.py): the bug in a screenful, judged plainly, and
built from the same inputs, cotangents and tolerances as the full judge beside it (judge.py).

Its runs in fresh processes against planted bugs are in the quality tests (test_quality*.py)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
import torch

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.short_repro import SHORT_SHOWS, render_short, short_mismatch, short_repro_for
from symfuzz.corpus.store import FindingStore
from symfuzz.fuzz import plain_runtime
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.fuzz.ir_nodes import Param
from symfuzz.fuzz.script_runtime import input_gradients, make_input
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import Died, ExcessRecompile, OutputMismatch, RaisedError, Verdict

UNIT_TIER = True


def _case(requires_grad=False, layout=None):
    program = Program(inputs=(Input("x0", "float32", ("s0", 4)), Input("x1", "float32", ("s0", 4))),
                      body=(OpNode("v1", "add", ("x0", "x1"), {"alpha": 1}),), outputs=("v1",))
    calls = tuple(Call((ArgSpec((n, 4), "float32", 1, layout=layout or {"kind": "contiguous"},
                                requires_grad=requires_grad), ArgSpec((n, 4), "float32", 2))) for n in (5, 8))
    return Case(program, Schedule(None, calls))


def _finding(symptom="value-mismatch", evidence=None, lane="inductor-cpp", case=None, call_index=1):
    evidence = evidence or OutputMismatch(path="out[0][0]", detail="3/20 elements differ; at [1, 2]: compiled 0.5, "
                                                                   "eager 0.25")
    verdict = Verdict(ok=False, oracle="differential", symptom=symptom, stage="runtime",
                      signature=f"{symptom}-0123456789", call_index=call_index, evidence=evidence)
    return Finding(case=(case or _case()).to_json(), verdict=verdict, lane=get_lane(lane).to_json(),
                   environment={"torch": "2.13.0"})


def test_a_one_statement_finding_reads_as_the_bug_in_a_screenful():
    text = render_short(_finding())
    lines = text.splitlines()
    assert len(lines) <= 50, text
    ast.parse(text)
    # The bug comes first: what differs, then the program, its few small helpers, the calls.
    assert lines[0].startswith('"""value-mismatch under torch.compile(backend=\'inductor\', dynamic=None) on cpu')
    assert "At output 0: 3/20 elements differ" in text
    order = [text.index(s) for s in ("def fn(x0, x1):", "def check(", "CALLS = [", "compiled = torch.compile(fn")]
    assert order == sorted(order)
    # One line per call, the inputs as symfuzz made them; only the calls up to the failing one.
    assert "    lambda: [randn((5, 4), torch.float32, 1), randn((5, 4), torch.float32, 2)]," in lines
    assert "    lambda: [randn((8, 4), torch.float32, 1), randn((8, 4), torch.float32, 2)]," in lines
    # Plain checks, no judging machinery, no JSON.
    assert "torch.testing.assert_close" in text and "json" not in text and "float64_call" not in text
    assert "judge.py" in text


def test_only_the_calls_up_to_the_failing_one_are_made():
    text = render_short(_finding(call_index=0))
    assert "randn((8, 4)" not in text and "randn((5, 4)" in text


@pytest.mark.parametrize("layout, expr", [
    ({"kind": "transposed", "dims": [0, 1]}, "randn((4, 5), torch.float32, 1).transpose(0, 1)"),
    ({"kind": "strided", "dim": 1, "step": 3}, "randn((5, 10), torch.float32, 1)[:, ::3]"),
    ({"kind": "sliced", "dim": -1}, "randn((5, 9), torch.float32, 1)[:, 1::2]"),
    ({"kind": "expanded", "dim": 0}, "randn((1, 4), torch.float32, 1).expand((5, 4))"),
])
def test_each_input_is_the_tensor_symfuzz_made_in_one_line(layout, expr):
    text = render_short(_finding(case=_case(layout=layout)))
    assert expr in text
    made = eval(expr, {"torch": torch, "randn": plain_runtime.randn})  # noqa: S307 - our own rendering
    expected = make_input((5, 4), torch.float32, 1, layout)
    assert made.shape == expected.shape and made.stride() == expected.stride()
    assert torch.equal(made, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                   torch.int64, torch.bool, torch.complex64])
def test_seeded_inputs_equal_the_runtimes(dtype):
    _made = plain_runtime.randn if dtype.is_floating_point else plain_runtime.seeded
    assert torch.equal(_made((3, 5), dtype, 17), make_input((3, 5), dtype, 17))


def test_the_gradients_are_the_judges_own():
    x = make_input((3, 4), torch.float32, 5).requires_grad_()
    [mine] = plain_runtime.gradients((x.sin(), x.sum(), 3), [x])
    [judges] = input_gradients((x.sin(), x.sum(), 3), [x])
    assert torch.equal(mine, judges)
    # An output nothing requires grad of: zeros, as the judge gives.
    assert torch.equal(plain_runtime.gradients((x.detach(),), [x])[0], torch.zeros_like(x))


def test_the_gradient_check_is_there_when_inputs_require_grad():
    text = render_short(_finding("gradient-mismatch", case=_case(requires_grad=True),
                                 evidence=OutputMismatch(path="out[2][0]", detail="1/20 elements differ")))
    assert "randn((5, 4), torch.float32, 1).requires_grad_()" in text
    assert 'check(f"call {i}: gradients", actual_grads, expected_grads)' in text and "def gradients(" in text
    assert "At the gradient for x0: 1/20 elements differ" in text
    assert len(text.splitlines()) <= 62


def _module_case():
    program = Program(inputs=(Input("x0", "float32", (5, 4)),),
                      body=(OpNode("v1", "add", ("x0", "w0"), {"alpha": 1}),), outputs=("v1",),
                      params=(Param("w0", "float32", (5, 4), seed=9),
                              Param("b0", "float32", (4,), kind="buffer", init="zeros")))
    calls = (Call((ArgSpec((5, 4), "float32", 1),), training=True), Call((ArgSpec((5, 4), "float32", 2),)),
             Call((ArgSpec((5, 4), "float32", 3),), training=False))
    return Case(program, Schedule(None, calls))


def test_a_module_program_runs_a_model_per_side_and_checks_its_state():
    case = _module_case()
    text = render_short(_finding(case=case, call_index=2,
                                 evidence=OutputMismatch(path="out[3][1]", detail="1/4 elements differ")))
    ast.parse(text)
    assert len(text.splitlines()) <= 80, text
    assert "At the model's self.b0 after the call: 1/4 elements differ" in text
    # Both models built alike from the short script's own seeded helper; the compiled one is the module.
    assert "self.w0 = torch.nn.Parameter(randn((5, 4), torch.float32, 9))" in text and "make_input" not in text
    assert "eager, model = Model(), Model()" in text and "compiled = torch.compile(model, " in text
    # Eval mode from call 2 (call 1 keeps the training mode call 0 set), on both sides.
    assert "    if i == 2:\n        eager.train(False)\n        model.train(False)" in text and "if i == 1:" not in text
    # The trainable parameter's gradient and the state after each call are checked, as the judge does.
    assert "+ [p for p in model.parameters() if p.requires_grad])" in text
    assert 'check(f"call {i}: the model\'s state", [*model.state_dict().values()], [*eager.state_dict().values()])' in text
    made = eval("randn((5, 4), torch.float32, 9)", {"torch": torch, "randn": plain_runtime.randn})  # noqa: S307
    assert torch.equal(made, make_input((5, 4), torch.float32, 9))  # the parameter the judge's model has


def test_a_module_program_with_a_training_step_steps_each_side_with_its_own_optimizer():
    from dataclasses import replace

    case = _module_case()
    step = replace(case, schedule=replace(case.schedule, step={"optimizer": "sgd", "lr": 0.1, "momentum": 0.5}))
    text = render_short(_finding(case=step))
    ast.parse(text)
    assert "eager_optimizer, optimizer = make_optimizer(eager, 'sgd', 0.1, 0.5), make_optimizer(model, 'sgd', 0.1, 0.5)" in text
    # Each side steps on the gradients it took, before the checks (the state checked is the stepped one).
    order = [text.index(s) for s in ("train_step(eager_optimizer, eager, expected_grads)", "actual = compiled(*args)",
                                     "train_step(optimizer, model, actual_grads)", 'check(f"call {i}: the model')]
    assert order == sorted(order)


def test_a_training_step_updates_as_the_judges_module_side_does():
    from symfuzz.fuzz.module_runtime import ModuleSide

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(make_input((3, 4), torch.float32, 5))

        def forward(self, x):
            return (x * self.w).tanh(), x.sum()

    spec = {"optimizer": "adam", "lr": 0.05}
    judges = ModuleSide(Model, step=spec)
    mine = Model()
    optimizer = plain_runtime.make_optimizer(mine, "adam", 0.05)
    for seed in (1, 2):
        x = make_input((3, 4), torch.float32, seed)
        judged = judges.call_tree((x.clone(),))
        out = mine(x.clone())
        grads = plain_runtime.gradients(out, [p for p in mine.parameters() if p.requires_grad])
        plain_runtime.train_step(optimizer, mine, grads)
        assert torch.equal(grads[0], judged[2][0])
        assert torch.equal(mine.w.detach(), judged[3][0])


def test_check_judges_at_the_dtype_tolerance_and_exactly_otherwise():
    e = torch.ones(4)
    plain_runtime.check("close", e + 5e-6, e)  # within float32's (1e-4, 1e-5)
    with pytest.raises(AssertionError, match=r"far \[0\]"):
        plain_runtime.check("far", (e + 1e-3,), (e,))
    plain_runtime.check("half", e.half() + 5e-3, e.half())
    with pytest.raises(AssertionError):
        plain_runtime.check("ints", torch.tensor([1, 2]), torch.tensor([1, 3]))
    with pytest.raises(AssertionError, match="compiled gives 1 values, eager 2"):
        plain_runtime.check("count", (e,), (e, e))
    with pytest.raises(AssertionError):
        plain_runtime.check("dtype", e.double(), e)
    plain_runtime.check("nan", torch.tensor([float("nan")]), torch.tensor([float("nan")]))


def test_findings_it_cannot_show_plainly_keep_the_judged_script():
    assert render_short(_finding(lane="export")) is None
    assert render_short(_finding("excess-recompiles", evidence=ExcessRecompile(detail="x", recompile_reason="y"))) is None
    assert render_short(_finding("crash", evidence=RaisedError(error={"type": "RuntimeError", "message": "x"}),
                                 lane="eager")) is not None


def test_the_store_writes_the_short_repro_beside_the_judge(tmp_path):
    store = FindingStore(tmp_path)
    store.add(_finding())
    folder = tmp_path / "value-mismatch-0123456789"
    assert (folder / "repro.py").read_text() == render_short(_finding())
    assert "SYMFUZZ-RESULT" in (folder / "judge.py").read_text()
    # Confirmation ran it and it passed: only the judge shows the bug, so repro.py is the judged script, alone.
    passed = _finding(evidence=OutputMismatch(path="out[0][0]", detail="x"))
    passed.verdict = Verdict(**{**passed.verdict.__dict__, "signature": "value-mismatch-9999999999"})
    passed.confirmation = {"status": "reproduced", "short_repro": "did not show the bug: exit 0: all ok"}
    assert short_repro_for(passed) is None
    store.add(passed)
    assert "SYMFUZZ-RESULT" in (tmp_path / "value-mismatch-9999999999" / "repro.py").read_text()
    assert not (tmp_path / "value-mismatch-9999999999" / "judge.py").exists()
    # It met another error first: it stays short, names that error, and points to judge.py.
    other = _finding(evidence=OutputMismatch(path="out[0][0]", detail="x"))
    other.verdict = Verdict(**{**other.verdict.__dict__, "signature": "value-mismatch-8888888888"})
    other.confirmation = {"status": "reproduced", "short_repro": "did not show the bug: it failed otherwise: "
                                                                "RuntimeError: a guard \"\"\" failed"}
    store.add(other)
    text = (tmp_path / "value-mismatch-8888888888" / "repro.py").read_text()
    ast.parse(text)
    assert len(text.splitlines()) <= 70 and "SYMFUZZ-RESULT" not in text
    assert "failed with another error first: RuntimeError: a guard" in " ".join(text.split())
    assert "python judge.py" in text and (tmp_path / "value-mismatch-8888888888" / "judge.py").exists()


def _traceback(line, exception):
    return f"Traceback (most recent call last):\n  File \"repro.py\", line 30, in main\n    {line}\n{exception}\n"


def test_a_run_of_the_short_repro_shows_the_finding_only_when_it_fails_the_same_way():
    value = _finding()
    check = 'check(f"call {i}: outputs", actual, expected)'
    assert short_mismatch(value, 1, _traceback(check, "AssertionError: call 1: outputs [0]: not close!")) is None
    assert short_mismatch(value, 1, _traceback(check, "AssertionError: call 0: outputs [0]: not close!"))
    assert short_mismatch(value, 0, "compiled matches eager at every call").startswith("exit 0")
    assert short_mismatch(value, None, "") == "it ran past the time limit"
    crash = _finding("crash", evidence=RaisedError(error={"type": "torch._dynamo.exc.Unsupported", "message": "x"}))
    assert short_mismatch(crash, 1, _traceback("actual = compiled(*args)", "torch._dynamo.exc.Unsupported: x")) is None
    assert short_mismatch(crash, 1, _traceback("expected = fn(*eager_args)", "torch._dynamo.exc.Unsupported: x"))
    assert short_mismatch(crash, 1, _traceback("actual = compiled(*args)", "NameError: name 'q' is not defined"))
    # A crash that is itself an AssertionError is not the checks' own AssertionError.
    assertion = _finding("crash", evidence=RaisedError(error={"type": "builtins.AssertionError", "message": "size"}))
    assert short_mismatch(assertion, 1, _traceback(check, "AssertionError: call 1: outputs [0]: not close"))
    assert short_mismatch(assertion, 1, _traceback("actual = compiled(*args)", "AssertionError: size 9")) is None
    # Accepts-invalid: the script's own words, only where compiled returned.
    invalid = _finding("accepts-invalid", evidence=RaisedError(error={"type": "IndexError", "message": "out"}))
    said = "AssertionError: call 1: compiled returned where eager raised IndexError('out')"
    assert short_mismatch(invalid, 1, _traceback("raise AssertionError(...)", said)) is None
    assert short_mismatch(invalid, 1, _traceback("compiled(*args)", "IndexError: out"))
    died = _finding("process-death", evidence=Died(cause="SIGSEGV", returncode=-11))
    assert short_mismatch(died, -11, "Fatal Python error: Segmentation fault") is None
    assert short_mismatch(died, 0, "compiled matches eager")
    assert SHORT_SHOWS == "shows the bug"


def test_a_minified_one_statement_repro_is_shorter_still_and_parses():
    text = render_short(_finding(), minified=True)
    assert len(text.splitlines()) <= 32, text
    assert "\n\n\n" not in text and text.splitlines()[1].startswith("Minified by symfuzz from finding value-mismatch-")
    assert text.replace("\n\n", "\n") != render_short(_finding()).replace("\n\n", "\n")  # not the finding's script
    ast.parse(text)


def test_the_refusal_pass_appears_only_where_a_call_before_the_failing_one_can_be_refused():
    """A flag drawn at random (capture_scalar_outputs with nothing to capture) refuses nothing: the
    reader of a plain bug is spared the try/except and its imports. Unbacked sizes can be refused."""
    program = _case().program
    calls = _case().schedule.calls
    flagged = Case(program, Schedule(None, calls, config={"dynamo": {"capture_scalar_outputs": True}}))
    text = render_short(_finding(case=flagged))
    assert "as refused" not in text and "ConstraintViolationError" not in text, text
    unbacked = Case(program, Schedule(None, calls, config={"dynamo": {"automatic_dynamic_shapes_mark_as": "unbacked"}}))
    assert "as refused" in render_short(_finding(case=unbacked))


@pytest.mark.integration  # runs the script: one compile on the eager backend, a few seconds
def test_a_call_whose_marks_torch_refuses_is_passed_over_as_the_judge_does(tmp_path):
    """Call 0 marks a dim dynamic that the program must specialize (it is added to a (5, 4) tensor):
    torch refuses the marks with ConstraintViolationError, which the judge counts as torch refusing
    the schedule. The short script goes on to the next call, as judge.py does, rather than stop there."""
    program = Program(inputs=(Input("x0", "float32", ("s0", 4)), Input("x1", "float32", (5, 4))),
                      body=(OpNode("v1", "add", ("x0", "x1"), {"alpha": 1}),), outputs=("v1",))
    marked = {"0": {"mark": "dynamic"}}
    calls = (Call((ArgSpec((5, 4), "float32", 1, marks=marked), ArgSpec((5, 4), "float32", 2))),
             Call((ArgSpec((5, 4), "float32", 3), ArgSpec((5, 4), "float32", 4))))
    text = render_short(_finding(lane="eager", case=Case(program, Schedule(None, calls))))
    assert "except (ConstraintViolationError, UserError, GuardOnDataDependentSymNode) as refused:" in text
    script = tmp_path / "repro.py"
    script.write_text(text)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "call 0: torch refused its marks or flags (ConstraintViolationError)" in run.stdout
    # Not where the failing call is the first (no call before it to pass over), nor where nothing is marked.
    assert "as refused" not in render_short(_finding(lane="eager", call_index=0, case=Case(program, Schedule(None, calls))))
    assert "as refused" not in render_short(_finding())


def test_a_wrapped_compiler_error_is_headlined_by_the_error_it_wraps():
    """Inductor's wrapper says only "backend='inductor' raised:" on its first line; the reader of the
    repro and of the campaign's report gets the wrapped error instead (campaign 4's crash-16b2390814)."""
    from symfuzz.report import describe

    message = ("backend='inductor' raised:\nGuardOnDataDependentSymNode: Could not guard on data-dependent expression "
               "Eq(Max(1, u2), 1)\n\nconsider using data-dependent friendly APIs")
    crash = _finding("crash", evidence=RaisedError(error={"type": "torch._dynamo.exc.BackendCompilerFailed",
                                                          "message": message}))
    text = " ".join(render_short(crash).split())
    assert ("Compiled raised torch._dynamo.exc.BackendCompilerFailed: GuardOnDataDependentSymNode: Could not guard on "
            "data-dependent expression Eq(Max(1, u2), 1)") in text, text[:600]
    assert "GuardOnDataDependentSymNode: Could not guard" in describe(crash.to_json())
