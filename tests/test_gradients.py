"""Which inputs require grad (fuzz/gradients.py): drawn deterministically, shrinking to none,
kept only where eager's gradients are valid and stable, never for ops without a usable backward."""

from dataclasses import replace

import pytest
import torch

from symfuzz.fuzz import gradients
from symfuzz.fuzz.case import ArgSpec, Call
from symfuzz.fuzz.drawing import case_from_choices, generate
from symfuzz.fuzz.generate import GenConfig
from symfuzz.fuzz.ir import EffectNode, ExprNode, Input, OpNode, Program
from symfuzz.fuzz.script_runtime import make_args
from symfuzz.fuzz.specs import all_specs
from symfuzz.fuzz.specs.base import BACKWARD_CLASSES, OpSpec
from symfuzz.corpus.inductor_cache import fresh_cache


def scripted(*values):
    """A draw function answering with ``values`` in order (whatever the strategy)."""
    answers = iter(values)
    return lambda strategy: next(answers)


# Hypothesis shrinks integers toward their lower bound and booleans toward False.
DRAWN = (99, True, True)  # the highest ticket: gradients, every candidate chosen
SHRUNK = (0, False, False)


def program(*body, inputs=("x0",), outputs=None, dims=(3, 4)) -> Program:
    ins = tuple(Input(name, "float32", dims) for name in inputs)
    return Program(ins, tuple(body), outputs or (body[-1].out,))


def calls_for(prog: Program, seeds=None, shapes=((3, 4), (3, 4))) -> tuple:
    seeds = seeds or [i + 1 for i in range(len(prog.inputs))]
    return tuple(Call(tuple(ArgSpec(shape, "float32", seed) for seed in seeds)) for shape in shapes)


def grads_of(calls) -> list:
    return [[a.requires_grad for a in call.args] for call in calls]


TANH = program(OpNode("v1", "tanh", ("x0",)))


def test_a_drawn_choice_marks_the_same_inputs_in_every_call_and_shrinks_to_none():
    calls = calls_for(TANH)
    assert grads_of(gradients.draw_gradients(scripted(*DRAWN), TANH, calls)) == [[True], [True]]
    assert gradients.draw_gradients(scripted(*SHRUNK), TANH, calls) == calls
    two = program(OpNode("v1", "mul", ("x0", "x1")), inputs=("x0", "x1"))
    # Candidates drawn one by one; none chosen falls back to the last (shrinks to one input, not zero).
    assert grads_of(gradients.draw_gradients(scripted(99, True, False), two, calls_for(two)))[0] == [True, False]
    assert grads_of(gradients.draw_gradients(scripted(99, False, False), two, calls_for(two)))[0] == [False, True]
    assert gradients.draw_gradients(scripted(*DRAWN), TANH, calls, share=0.0) == calls


def test_generated_cases_draw_gradients_deterministically():
    config = GenConfig(max_ops=3, gradient_share=1.0, schedule_knobs=False)
    with_grads = []
    for index in range(12):
        case = generate(5, index, config)
        again = case_from_choices(case.origin["choices"], config)
        assert again.schedule.to_json() == case.schedule.to_json()
        marked = grads_of(case.schedule.calls)
        assert all(m == marked[0] for m in marked)  # the same inputs in every call
        for inp, wants in zip(case.program.inputs, marked[0]):
            assert not wants or inp.dtype in ("float32", "float64", "float16", "bfloat16")
        with_grads += [index] if any(marked[0]) else []
    assert with_grads  # at share 1.0 most programs with a float input keep gradients


def test_gradients_are_dropped_where_eager_cannot_give_valid_ones():
    # An input written in place is never chosen (autograd forbids writing a leaf that requires grad).
    written = program(EffectNode("mul_scalar_", ("x0",), {"reject": "", "v": 2}), OpNode("v1", "tanh", ("x0",)))
    assert gradients.draw_gradients(scripted(*DRAWN), written, calls_for(written)) == calls_for(written)
    # Infinite gradients: sqrt(|x|) at exact zeros.
    zeros = program(OpNode("v1", "mul", ("x0", "0")), OpNode("v2", "sqrt", ("v1",)))
    assert gradients.draw_gradients(scripted(*DRAWN), zeros, calls_for(zeros)) == calls_for(zeros)
    # No output depends on the input through anything differentiable.
    argmax = program(OpNode("v1", "argmax", ("x0",), {"dim": 1, "keepdim": False}))
    assert gradients.draw_gradients(scripted(*DRAWN), argmax, calls_for(argmax)) == calls_for(argmax)


def test_a_gradient_that_jumps_when_the_inputs_are_nudged_is_dropped():
    """relu(x0 - x1) with x0 == x1 (same seed): every value sits on relu's kink, where
    compiled rounding could flip the gradient. Unequal inputs keep their gradients."""
    kink = program(OpNode("v1", "sub", ("x0", "x1")), OpNode("v2", "relu", ("v1",)), inputs=("x0", "x1"))
    assert gradients.backward_class(kink) == "ties"
    tied = calls_for(kink, seeds=[3, 3])
    assert gradients.draw_gradients(scripted(*DRAWN), kink, tied) == tied
    apart = calls_for(kink, seeds=[3, 4])
    assert grads_of(gradients.draw_gradients(scripted(*DRAWN), kink, apart))[0] == [True, True]


def test_ops_without_a_usable_backward_never_get_gradients():
    excluded = [s for s in all_specs() if s.backward in gradients.EXCLUDED]
    assert {s.name for s in excluded} >= {"unique", "unique_dim"}
    unique = program(OpNode("v1", "unique", ("x0",), {"kw": "", "pick": ""}), OpNode("v2", "tanh", ("x0",)),
                     outputs=("v1", "v2"))
    assert gradients.backward_class(unique) == "undefined"
    assert gradients.draw_gradients(scripted(*DRAWN), unique, calls_for(unique)) == calls_for(unique)


def test_backward_classes_of_specs_and_free_form_expressions():
    assert all(s.backward in BACKWARD_CLASSES for s in all_specs())
    with pytest.raises(ValueError):
        OpSpec("x", "pointwise", "{0}", backward="maybe")
    assert gradients.backward_class(TANH) == "ok"
    assert gradients.backward_class(program(ExprNode("v1", "x0 * 2"))) == "ties"  # free-form: checked when nudged
    for name in ("max_dim", "sort", "topk", "max_pool2d", "relu", "abs", "clamp", "floor", "maximum"):
        assert next(s for s in all_specs() if s.name == name).backward == "ties", name


def test_nudged_inputs_keep_shapes_layouts_and_requires_grad(monkeypatch):
    layouts = [{"kind": "transposed", "dims": [0, 1]}, {"kind": "strided", "dim": 1, "step": 2},
               {"kind": "expanded", "dim": 0}, {"kind": "contiguous"}]
    call = {"args": [{**ArgSpec((3, 4), dtype, 7, layout).to_json(), "requires_grad": True}
                     for dtype, layout in zip(("float32", "bfloat16", "float16", "float64"), layouts)]}
    made = make_args(call)
    monkeypatch.setattr(gradients, "NUDGE", dict.fromkeys(gradients.NUDGE, 0.0))
    for a, b in zip(made, gradients.nudged_args(call)):
        assert torch.equal(a, b) and a.stride() == b.stride() and b.requires_grad and b.is_leaf
    monkeypatch.undo()
    for a, b in zip(made, gradients.nudged_args(call)):
        assert a.shape == b.shape and a.stride() == b.stride() and not torch.equal(a, b)
        rel = ((a.double() - b.double()).abs() / a.double().abs().clamp_min(1e-3)).max()
        assert rel < 0.1  # a nudge, not new values


def test_requiring_grad_sets_exactly_the_given_arguments():
    calls = calls_for(program(OpNode("v1", "mul", ("x0", "x1")), inputs=("x0", "x1")))
    marked = gradients.requiring_grad(calls, [1])
    assert grads_of(marked) == [[False, True], [False, True]]
    assert grads_of(gradients.requiring_grad(marked, [])) == [[False, False], [False, False]]
    assert replace(marked[0].args[1], requires_grad=False) == calls[0].args[1]


# ---------------------------------------------------------------- the backward in the minifier and the short repro


def _grad_subject(symptom="gradient-mismatch"):
    from symfuzz.fuzz.case import Case, Schedule
    from symfuzz.minifier.case_subject import CaseSubject
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.verdict import OutputMismatch, Verdict

    prog = program(OpNode("v1", "mul", ("x0", "x1")), OpNode("v2", "tanh", ("v1",)), inputs=("x0", "x1"),
                   dims=("s0", 4))
    calls = gradients.requiring_grad(calls_for(prog, shapes=((3, 4), (5, 4))), [0, 1])
    verdict = Verdict(ok=False, oracle="differential", symptom=symptom, stage="runtime",
                      signature=f"{symptom}-0123456789", call_index=1,
                      evidence=OutputMismatch(path="out[2][0]", detail="made up"))
    return CaseSubject(Case(prog, Schedule(None, calls)), verdict, get_lane("eager").to_json(), {"torch": "x"})


def test_minifier_passes_drop_the_backward_whole_then_per_input():
    from symfuzz.minifier import case_passes as passes

    subject = _grad_subject()
    (whole,) = passes.drop_backward(subject)
    assert grads_of(whole.case.schedule.calls) == [[False, False], [False, False]]
    per_input = list(passes.drop_gradient_inputs(subject))
    assert [grads_of(s.case.schedule.calls)[0] for s in per_input] == [[True, False], [False, True]]
    assert all(s.cost() < subject.cost() for s in [whole, *per_input])
    assert list(passes.drop_backward(whole)) == [] and list(passes.drop_gradient_inputs(per_input[0])) == []
    assert passes.drop_backward in passes.CASE_PASSES and passes.drop_gradient_inputs in passes.CASE_PASSES
    # A cut point of a case with a backward requires grad, so the gradient still flows from there.
    cut = passes.replace_with_input(subject.case, "v1")
    assert [a.requires_grad for a in cut.schedule.calls[0].args] == [True, True, True]
    assert not passes.replace_with_input(whole.case, "v1").schedule.calls[0].args[-1].requires_grad


def test_the_short_repro_takes_and_judges_gradients_like_the_campaign(tmp_path):
    import os
    import subprocess
    import sys

    from symfuzz.minifier import case_passes as passes
    from symfuzz.minifier.compact import compact_matches, render_compact
    from symfuzz.minifier.driver import QueryOutcome

    subject = _grad_subject()
    text = render_compact(subject)
    assert "randn((3, 4), torch.float32, 1).requires_grad_()" in text
    assert "expected_grads = gradients(expected," in text and "def gradients(" in text
    path = tmp_path / "repro.py"
    path.write_text(text)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "c")})
    assert proc.returncode == 0 and "compiled matches eager at every call" in proc.stdout, proc.stderr[-2000:]
    failed = QueryOutcome(1, None, "Traceback (most recent call last):\n    check(...)\n"
                                   "AssertionError: call 1: gradients [0]: Tensor-likes are not close!", 1.0)
    assert compact_matches(subject, failed)
    (forward_only,) = passes.drop_backward(subject)
    text = render_compact(forward_only)
    assert "1).requires_grad_()" not in text and "expected_grads" not in text


def test_an_unreached_gradient_is_zeros_and_cotangents_follow_output_places():
    """Whether autograd's graph reaches an input (None) or hands zeros back is no promise of
    a compiled function; and an output that requires grad on one side only must not shift
    the cotangents of the others."""
    from symfuzz.fuzz.script_runtime import COTANGENT_SEED, input_gradients, make_input

    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    gx, gy = input_gradients((x * 2,), [x, y])
    assert torch.equal(gy, torch.zeros(3)) and torch.equal(gx, 2 * make_input((3,), torch.float32, COTANGENT_SEED))
    assert all(torch.equal(g, torch.zeros(3)) for g in input_gradients((torch.ones(3),), [x, y]))
    (after_constant,) = input_gradients((torch.ones(3), x * 1), [x])
    assert torch.equal(after_constant, make_input((3,), torch.float32, COTANGENT_SEED + 1))


def test_an_input_overwritten_from_one_that_requires_grad_is_not_differentiated():
    """``x0.copy_(x3)`` makes x0 require grad after the call; its gradient is of its new value,
    which a compiled function writes back after its graph (found as a false gradient-mismatch
    on inductor-cpp). Only the inputs that required grad before the call are differentiated."""
    from symfuzz.fuzz.script_runtime import run_call

    def fn(x0, x3):
        x0.copy_(x3)
        return (x0 * 2,)

    x3 = torch.randn(2, 1, requires_grad=True)
    record = run_call(fn, [torch.zeros(2, 2), x3])
    (grad,) = record["out"][2]
    assert grad.shape == (2, 1)
    compiled = run_call(torch.compile(fn, backend="aot_eager", dynamic=True), [torch.zeros(2, 2), x3])
    assert torch.allclose(compiled["out"][2][0], grad)
