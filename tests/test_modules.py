"""nn.Module programs: the IR, the runtime that keeps each side's state, generation, minifier passes.

Cheap: nothing here compiles except one Dynamo-only run (the "eager" lane).
"""

import ast
import json
from dataclasses import replace

import pytest
import torch

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.scripts import render_repro
from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule, check_step
from symfuzz.fuzz.drawing import generate
from symfuzz.fuzz.generate import GenConfig
from symfuzz.fuzz.ir import ExprNode, Input, OpNode, Param, Program, node_reads
from symfuzz.fuzz.module_runtime import ModuleSide
from symfuzz.minifier.case_passes import dead_code_eliminated
from symfuzz.minifier.case_subject import CaseSubject
from symfuzz.minifier.compact import render_compact
from symfuzz.minifier.module_passes import drop_state, shrink_state_sizes, simplify_module_calls
from symfuzz.oracles.lanes.execute import execute, load_function, load_program
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.registry import judge
from symfuzz.oracles.verdict import OutputMismatch, Verdict

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

# A Linear-like weight tied to the input's fixed last dim (4), a frozen bias, a running
# statistic updated in place, and a value that depends on the mode.
PARAMS = (Param("w0", "float32", (3, 4), "parameter", 5), Param("w1", "float32", (3,), "parameter", 6, "normal", False),
          Param("b2", "float32", (3,), "buffer", 0, "zeros", False))
BODY = (ExprNode("v1", "F.linear(x0, w0, w1)"), ExprNode("v2", "b2.mul_(0.9).add_(v1.detach().mean(0) * 0.1)"),
        ExprNode("v3", "v1 * 2 if training else v1"))
PROGRAM = Program((Input("x0", "float32", ("s0", 4)),), BODY, ("v3",), PARAMS)
SGD = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9}


def module_case(step=None, modes=(True, True, False), sizes=(3, 5, 7)):
    calls = tuple(Call((ArgSpec((n, 4), "float32", 10 + n),), {"s0": n}, mode) for n, mode in zip(sizes, modes))
    return Case(PROGRAM, Schedule(None, calls, {}, step))


def calls_json(case):
    return [c.to_json() for c in case.schedule.calls]


# ---------------------------------------------------------------- the IR and the case


def test_a_module_program_renders_a_class_whose_forward_binds_its_state_first():
    source = PROGRAM.render()
    assert source.startswith("class Model(torch.nn.Module):")
    assert "self.w0 = torch.nn.Parameter(make_input((3, 4), torch.float32, 5))" in source
    assert "self.w1 = torch.nn.Parameter(make_input((3,), torch.float32, 6), requires_grad=False)" in source
    assert "self.register_buffer('b2', torch.zeros((3,), dtype=torch.float32))" in source
    forward = source.split("def forward(self, x0):\n", 1)[1].splitlines()
    assert forward[:4] == ["        w0 = self.w0", "        w1 = self.w1", "        b2 = self.b2",
                           "        training = self.training"]
    ast.parse(source)
    # Without a body that reads the mode, there is no ``training`` line.
    plain = replace(PROGRAM, body=BODY[:2], outputs=("v2",))
    assert "training" not in plain.render()


def test_module_programs_are_ir_v4_and_round_trip_while_plain_ones_keep_their_version():
    data = PROGRAM.to_json()
    assert data["ir_version"] == 4 and [p["name"] for p in data["params"]] == ["w0", "w1", "b2"]
    assert data["params"][1]["requires_grad"] is False and "requires_grad" not in data["params"][0]
    assert Program.from_json(json.loads(json.dumps(data))) == PROGRAM
    plain = Program((Input("x0", "float32", ("s0",)),), (OpNode("v1", "relu", ("x0",)),), ("v1",))
    assert "params" not in plain.to_json() and plain.to_json()["ir_version"] == 1


@pytest.mark.parametrize("change, message", [
    ({"name": "training"}, "not a parameter's name"),
    ({"name": "forward0x"}, "not a parameter's name"),
    ({"name": "x0"}, "taken by an input"),
    ({"kind": "weight"}, "kind"),
    ({"dims": ["s0"]}, "are not sizes"),
    ({"dtype": "int64"}, "true only for a floating dtype"),
    ({"init": "__import__('os')"}, "init"),
    ({"seed": "1); import os; ("}, "seed"),
])
def test_a_hostile_or_impossible_param_is_refused_as_it_is_read(change, message):
    data = PROGRAM.to_json()
    data["params"][0].update(change)
    with pytest.raises(ValueError, match=message):
        Program.from_json(data)


def test_only_a_module_program_may_read_the_mode():
    data = replace(PROGRAM, params=()).to_json()
    data["body"] = [{"kind": "expr", "out": "v9", "expr": "x0 * 2 if training else x0"}]
    data["outputs"] = ["v9"]
    with pytest.raises(ValueError, match="'training'"):
        Program.from_json(data)


def test_calls_carry_their_mode_and_a_schedule_its_training_step():
    case = module_case(SGD)
    data = json.loads(json.dumps(case.to_json()))
    assert [c.get("training") for c in data["schedule"]["calls"]] == [True, True, False]
    assert data["schedule"]["step"] == SGD
    assert Case.from_json(data) == case
    assert check_step({"optimizer": "adam", "lr": 0.01}) == {"optimizer": "adam", "lr": 0.01}
    for bad in ({"optimizer": "sgd", "lr": 0.1}, {"optimizer": "lbfgs", "lr": 0.1}, {"optimizer": "adam", "lr": 5},
                {"optimizer": "adam", "lr": "0.1"}, {"optimizer": "sgd", "lr": 0.1, "momentum": 1.5}):
        with pytest.raises(ValueError):
            check_step(bad)
    data["program"] = replace(PROGRAM, params=(), body=(OpNode("v1", "relu", ("x0",)),), outputs=("v1",)).to_json()
    with pytest.raises(ValueError, match="needs a module program"):
        Case.from_json(data)


# ---------------------------------------------------------------- the runtime


def test_each_side_keeps_its_own_state_and_the_tree_holds_gradients_and_state():
    case = module_case()
    eager, other = load_program(case), load_program(case)
    calls = calls_json(case)
    records = script_runtime.run_schedule(eager, other, calls)
    for index, (e, c) in enumerate(records):
        assert script_runtime.judge_call(e, c, lambda: script_runtime.reference_output(eager, calls[index], "cpu", index)) is None
    out, inputs, grads, state = records[0][0]["out"]
    assert [tuple(g.shape) for g in grads] == [(3, 4)]  # the trainable weight; the frozen bias has none
    assert [tuple(t.shape) for t in state] == [(3, 4), (3,), (3,)]
    # The running statistic moves from call to call; the last call ran in eval mode.
    buffer = [r[0]["out"][3][2] for r in records]
    assert not torch.equal(buffer[0], torch.zeros(3)) and not torch.equal(buffer[0], buffer[1])
    assert not torch.equal(buffer[1], buffer[2]) and not eager.model.training and other.model is not eager.model
    # A replay starts from the state before the call; the reference runs it in float64.
    replay = eager.replay(1)
    assert torch.equal(replay.model.b2, records[0][0]["out"][3][2])
    reference = script_runtime.reference_output(eager, calls[1], "cpu", 1)
    assert reference[3][2].dtype == torch.float64
    assert torch.allclose(reference[3][2].float(), records[1][0]["out"][3][2], atol=1e-6)
    assert script_runtime.reference_output(eager, calls[1], "cpu") is None  # which state: unknown
    locals_ = eager.frame_locals(make := script_runtime.make_args(calls[0]))
    assert locals_["self"] is eager.model and locals_["x0"] is make[0]


def test_a_lost_buffer_update_is_a_module_state_mismatch():
    case = module_case()

    def forgetful(model):  # a "compiler" that loses the buffer's update
        def run(*args):
            before = model.b2.clone()
            out = model(*args)
            model.b2.copy_(before)
            return out
        return run

    eager = load_program(case)
    broken = ModuleSide(eager.model_class, forgetful)
    calls = calls_json(case)
    records = script_runtime.run_schedule(eager, broken, calls)
    failure = script_runtime.judge_call(*records[0], lambda: script_runtime.reference_output(eager, calls[0], "cpu", 0))
    assert failure["symptom"] == "value-mismatch" and failure["path"] == "out[3][2]"
    assert script_runtime.failure_key(failure, case.output_ops()) == "module-state|float:finite"


def test_a_training_step_updates_the_weights_and_compares_their_gradients():
    case = module_case(SGD)
    eager, twin = load_program(case), load_program(case)
    records = script_runtime.run_schedule(eager, twin, calls_json(case))
    assert all(script_runtime.judge_call(e, c) is None for e, c in records)
    start = make_weight = records[0][0]["out"][3][0]
    initial = load_program(case).model.w0.detach()
    assert not torch.equal(start, initial)  # stepped
    grad = records[0][0]["out"][2][0]
    assert torch.allclose(make_weight, initial - SGD["lr"] * grad, atol=1e-6)  # the first SGD step: w - lr * g
    assert eager.model.w0.grad is None  # zero_grad after the step


def test_after_a_call_that_raised_on_one_side_compiled_goes_on_from_eager_state():
    case = module_case(SGD)

    def refusing(model):  # a "compiler" that refuses the second call (torch refusing a mark, say)
        def run(*args):
            if args[0].shape[0] == 5:
                raise RuntimeError("refused")
            return model(*args)
        return run

    eager = load_program(case)
    records = script_runtime.run_schedule(eager, ModuleSide(eager.model_class, refusing, SGD), calls_json(case))
    assert "error" in records[1][1] and "error" not in records[1][0]
    assert script_runtime.judge_call(*records[2]) is None  # eager stepped at call 1; so did compiled's state


# ---------------------------------------------------------------- generation


def test_generated_module_programs_are_valid_modules():
    config = GenConfig(module_rate=1.0, max_ops=5, translation_validation_rate=0.0)
    cases = [generate(3, i, config) for i in range(10)]
    modules = [c for c in cases if c.program.params]
    assert len(modules) >= 8
    for case in modules:
        assert Case.from_json(json.loads(json.dumps(case.to_json()))) == case
        read = set().union(*(node_reads(n) for n in case.program.body))
        assert {p.name for p in case.program.params} <= read  # no dead state
        assert all(c.training in (True, False) for c in case.schedule.calls)
        assert not set(case.program.outputs) & {p.name for p in case.program.params}
        assert case.schedule.step is None or any(p.trainable for p in case.program.params)
        fn = load_function(case.source)
        eager = [script_runtime.run_call(fn, script_runtime.make_args(c.to_json())) for c in case.schedule.calls]
        assert sum("error" not in r for r in eager) >= len(eager) - 1, [r.get("error", {}).get("message") for r in eager]
    assert any(p.kind == "buffer" for c in modules for p in c.program.params)
    assert not any(c.program.params for c in (generate(3, i, GenConfig(module_rate=0.0)) for i in range(3)))


# ---------------------------------------------------------------- minifier passes and scripts


def _subject(case, path="out[3][2]"):
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="runtime",
                      signature="value-mismatch-0", call_index=1, evidence=OutputMismatch(path=path, detail=""))
    return CaseSubject(case, verdict, get_lane("inductor-cpp").to_json(), {})


def test_dead_code_elimination_keeps_buffer_updates_and_drops_unread_state():
    case = module_case()
    narrow = replace(case, program=replace(case.program, outputs=("v1",)))
    kept = dead_code_eliminated(narrow)
    assert [n.out for n in kept.program.body] == ["v1", "v2"]  # v2 writes the buffer: kept though unread
    no_update = replace(narrow, program=replace(narrow.program, body=narrow.program.body[:1]))
    assert [p.name for p in dead_code_eliminated(no_update).program.params] == ["w0", "w1"]


def test_module_passes_make_plainer_calls_then_turn_state_into_inputs_and_constants():
    subject = _subject(module_case(SGD))
    simpler = [s.case for s in simplify_module_calls(subject)]
    assert simpler[0].schedule.step is None
    assert not any(p.trainable for p in simpler[1].program.params)
    assert all(c.training for c in simpler[2].schedule.calls)
    assert all(s.cost() < subject.cost() for s in simplify_module_calls(subject))
    dropped = [s.case for s in drop_state(subject)]
    as_input, as_constant = dropped[0], dropped[1]  # b2 (zeros): an input, then torch.zeros(...)
    assert [i.name for i in as_input.program.inputs] == ["x0", "b2"]
    assert all(c.args[1].shape == (3,) for c in as_input.schedule.calls)
    assert as_constant.program.body[0].expr == "torch.zeros((3,), dtype=torch.float32)"
    for case in dropped:
        Case.from_json(json.loads(json.dumps(case.to_json())))  # valid programs
        assert _subject(case).cost() < subject.cost()
    last = dropped[-1]  # w0 as an input: its values are the parameter's
    assert last.schedule.calls[0].args[-1].seed == 5 and [p.name for p in last.program.params] == ["w1", "b2"]


@pytest.mark.integration
def test_repro_scripts_build_a_model_on_each_side():
    case = module_case(SGD)
    subject = _subject(case)
    judged = render_repro(Finding(case=case.to_json(), verdict=subject.verdict, lane=subject.lane))
    ast.parse(judged)
    assert "class Model(torch.nn.Module):" in judged and "fn = ModuleSide(Model, None, {'optimizer': 'sgd'" in judged
    assert "ModuleSide(Model, lambda model: torch.compile(model, backend='inductor'" in judged
    assert "lambda model: torch.compile(model, backend='inductor', dynamic=True)" in judged
    short = render_compact(subject)
    ast.parse(short)
    assert "class Model(torch.nn.Module):" in short and "actual = compiled(*args)" in short
    assert "eager, model = Model(), Model()" in short and "make_optimizer(model, 'sgd'" in short
    assert "train_step(optimizer, model, actual_grads)" in short and "the model's state" in short


@pytest.mark.integration
def test_a_module_case_runs_through_dynamo_and_every_oracle_passes():
    case = module_case(SGD, (True, True, False, True), (3, 5, 7, 6))
    run = execute(case, get_lane("eager"), plan=False)
    assert [v.symptom for v in judge(case, run) if not v.ok] == []
    assert run.calls[2].graphs > 0  # eval mode: a guard on self.training failed, a new graph
    # Back in train mode at a new size: the dynamic graph of call 1 is reused, as the guard
    # managers (asked about the compiled model, the frame's self) said.
    assert run.calls[3].graphs == 0 and run.calls[3].predicted_reuse is True


def test_a_lane_that_exports_refuses_every_call_of_a_module_program():
    case = module_case()
    run = execute(case, get_lane("export"), plan=False)
    assert all(c.compiled["error"]["type"].endswith(".LaneRejectedCall") for c in run.calls)
    assert [v.symptom for v in judge(case, run) if not v.ok] == []


def test_a_state_size_shrinks_with_the_input_dims_tied_to_it():
    subject = _subject(module_case())
    smaller = [s.case for s in shrink_state_sizes(subject)]
    four_to_two = next(c for c in smaller if c.program.params[0].dims == (3, 2))
    assert four_to_two.program.inputs[0].dims == ("s0", 2)
    assert [c.args[0].shape for c in four_to_two.schedule.calls] == [(3, 2), (5, 2), (7, 2)]
    assert all(_subject(c).cost() < subject.cost() for c in smaller)
