"""Guard reading, z3 planning, and the guard oracles (reuse, recompiles)."""

import importlib.util
import re

import pytest

import torch

from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import BranchNode, Input, OpNode, Program, SizeNode
from symfuzz.fuzz.schedule import demands_specialization
from symfuzz.fuzz import script_runtime
from symfuzz.oracles.lanes.execute import _would_reuse, execute, load_function
from symfuzz.oracles.lanes.guards import build_model, plan_calls, recording_backend
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.recompiles import recompiles_oracle
from symfuzz.oracles.registry import judge
from symfuzz.oracles.reuse import reuse_oracle
from conftest import PLANTS

BRANCHY = Program(
    (Input("x0", "float32", ("s0", "s1")), Input("x1", "float32", ("s2",))),
    (BranchNode("v1", "x0.size(0) > 4", "x0 * 2", "x0 - 1"), OpNode("v2", "sum", ("x1",), {})),
    ("v1", "v2"),
)


def case_of(program, shapes_per_call, dynamic=True, marks=None):
    calls = []
    for i, shapes in enumerate(shapes_per_call):
        args = tuple(ArgSpec(tuple(s), "float32", 10 * i + j, marks=dict((marks or {}).get(j, {})))
                     for j, s in enumerate(shapes))
        calls.append(Call(args))
    return Case(program, Schedule(dynamic, tuple(calls)))


def compiled_model(program, shapes):
    torch._dynamo.reset()
    fn = load_function(program.render())
    recorder = recording_backend(get_lane("eager"), True)
    compiled = torch.compile(fn, backend=recorder, dynamic=True)
    compiled(*[torch.randn(s) for s in shapes])
    model = build_model(recorder.compiles[-1].shape_env, program.inputs, shapes)
    return fn, model


def test_model_reads_comparison_range_and_duck_guards():
    fn, model = compiled_model(BRANCHY, [(8, 3), (8,)])
    kinds = {(item.kind, item.text) for item in model.guards}
    texts = " ".join(text for _, text in kinds)
    assert "x1.size(0) == x0.size(0)" in texts  # duck sizing: both dims were 8
    assert "s0 > 4" in re.sub(r"\bs\d+", "s0", texts) or "x0.size(0) >= 5" in texts  # x0.size(0) > 4
    assert any(kind == "range" for kind, _ in kinds)  # 0/1 specialization: size >= 2
    regions, complete = model.regions()
    assert complete and len(regions) >= 2
    torch._dynamo.reset()


def test_planned_calls_agree_with_dynamos_own_guard_manager():
    """Each planned call's prediction (reuse or not) is what Dynamo decides."""
    fn, model = compiled_model(BRANCHY, [(8, 3), (8,)])
    planned = plan_calls(model, [[(8, 3), (8,)]])
    purposes = {p.purpose.split(":")[0] for p in planned}
    assert {"reuse", "violate", "boundary"} <= purposes
    for p in planned:
        args = [torch.randn(s) for s in p.shapes]
        assert _would_reuse(fn, BRANCHY, args) == p.expect_reuse, p
    torch._dynamo.reset()


def test_execute_with_planning_appends_calls_and_reports_regions():
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)]])
    run = execute(case, get_lane("eager"), plan=True)
    assert len(run.case.schedule.calls) > 2
    assert run.calls[2].purpose != "drawn"
    assert run.guards["regions"] >= 2 and run.guards["covered"] >= 2
    assert all(v.ok for v in judge(run.case, run)), [v.headline() for v in judge(run.case, run) if not v.ok]


def _load_plants():
    spec = importlib.util.spec_from_file_location("symfuzz_plants", PLANTS / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reuse_oracle_reports_a_dropped_guard_as_unsound(monkeypatch):
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    monkeypatch.setattr(ShapeEnv, "produce_guards_verbose", ShapeEnv.produce_guards_verbose)  # restored after
    _load_plants().plant_dropped_comparison_guard()
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)], [(3, 3), (5,)]])
    run = execute(case, get_lane("eager"))
    verdict = reuse_oracle(case, run)
    assert not verdict.ok and verdict.symptom == "unsound-guard" and verdict.call_index == 2
    assert run.calls[2].fresh == {"failure": None}
    others = [v for v in judge(case, run) if not v.ok and v.oracle != "reuse-soundness"]
    assert not others, [v.headline() for v in others]  # differential leaves it to the reuse oracle


def test_reuse_oracle_passes_on_unmodified_torch():
    case = case_of(BRANCHY, [[(8, 3), (7,)], [(9, 3), (5,)], [(3, 3), (5,)]])
    run = execute(case, get_lane("eager"))
    assert reuse_oracle(case, run).ok and run.calls[2].graphs > 0


CVE = {"type": "torch.fx.experimental.symbolic_shapes.ConstraintViolationError",
       "message": "Constraints violated (L['x0'].size()[0])!\n  - You marked L['x0'].size()[0] as dynamic but your code "
                  "specialized it to be a constant (8).", "stage": "runtime"}


def test_rejections_and_over_specialization_are_told_apart():
    assert script_runtime.rejection(CVE, {"constrained": False}) is None  # no marks: an unexplained crash
    assert script_runtime.rejection(CVE, {"constrained": True, "demands_specialization": True}) == "rejected"
    assert script_runtime.rejection(CVE, {"constrained": True, "demands_specialization": False}) == "over-specialization"
    user = {"type": "torch._dynamo.exc.UserError", "message": "Could not guard on data-dependent expression u0 > 4",
            "stage": "dynamo"}
    assert script_runtime.rejection(user, {"constrained": True, "demands_specialization": False}) == "rejected"
    # The same kind of error raised while Inductor compiles is a crash like any other.
    assert script_runtime.rejection({**user, "stage": "inductor"}, {"constrained": True}) is None
    ok = {"out": (torch.ones(2),), "seconds": 0}
    failure = script_runtime.judge_call(ok, {"error": CVE}, None, {"constrained": True, "demands_specialization": False})
    assert failure["symptom"] == "over-specialization"


def test_program_size_comparisons_are_detected():
    assert demands_specialization(BRANCHY)
    plain = Program((Input("x0", "float32", ("s0",)),), (OpNode("v1", "relu", ("x0",), {}),), ("v1",))
    assert not demands_specialization(plain)
    sized = Program((Input("x0", "float32", ("s0",)),), (SizeNode("n1", "max(x0.size(0), 1)"),
                    OpNode("v2", "relu", ("x0",), {})), ("v2",))
    assert demands_specialization(sized)


def test_mark_dynamic_next_to_an_unmarked_tied_dim_is_not_over_specialization():
    """x0 and x1 share a size; only x0's is marked dynamic. Under dynamic=None
    x1's is static, so the program itself makes x0's static: torch is right."""
    program = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s0",))),
                      (OpNode("v1", "mul", ("x0", "x1"), {}),), ("v1",))
    case = case_of(program, [[(6,), (6,)], [(7,), (7,)]], dynamic=None, marks={0: {0: {"mark": "dynamic"}}})
    run = execute(case, get_lane("eager"))
    assert all(v.ok for v in judge(case, run)), [v.headline() for v in judge(case, run) if not v.ok]


def test_graph_break_programs_plan_from_their_own_frame():
    """After a graph break, the resume function compiles too; its guards are
    not the program's, so planned reuse calls must really reuse."""
    from symfuzz.fuzz.ir import GraphBreakNode

    program = Program((Input("x0", "float32", ("s0",)),),
                      (BranchNode("v1", "x0.size(0) > 4", "x0 * 2", "x0 - 1"), GraphBreakNode(),
                       OpNode("v2", "relu", ("v1",), {})), ("v2",))
    case = case_of(program, [[(8,)], [(9,)]])
    run = execute(case, get_lane("eager"), plan=True)
    assert [v.headline() for v in judge(run.case, run) if not v.ok] == []
    assert any(c.expect_reuse for c in run.calls)


def test_mark_dynamic_specialized_by_the_program_is_rejected_not_reported():
    program = Program((Input("x0", "float32", ("s0",)),),
                      (BranchNode("v1", "x0.size(0) == 8", "x0 * 2", "x0 - 1"),), ("v1",))
    case = case_of(program, [[(8,)], [(9,)]], dynamic=None, marks={0: {0: {"mark": "dynamic"}}})
    run = execute(case, get_lane("eager"))
    assert "ConstraintViolationError" in run.calls[0].compiled["error"]["type"]
    assert all(v.ok for v in judge(case, run))


def test_excess_recompile_is_reported_when_every_guard_holds():
    """Every guard of the cached graph holds at a planned reuse call; a
    recompile there (made to happen by editing the run's record, since
    unmodified torch does not do it) is an excess recompile."""
    program = Program((Input("x0", "float32", ("s0",)),), (OpNode("v1", "relu", ("x0",), {}),), ("v1",))
    case = case_of(program, [[(6,)], [(7,)]])
    run = execute(case, get_lane("eager"), plan=True)
    assert recompiles_oracle(run.case, run).ok  # unmodified: planned reuse calls reuse
    reuse_calls = [i for i, c in enumerate(run.calls) if c.expect_reuse]
    assert reuse_calls and all(run.calls[i].graphs == 0 for i in reuse_calls)
    # Same schedule, with a recompile forced at the first planned reuse call.
    first = reuse_calls[0]
    run.calls[first].compiled["graphs"] = 1
    run.calls[first].compiled["new_entries"] = 1
    run.calls[first].compiled["recompile_reason"] = "0/0: forced"
    verdict = recompiles_oracle(run.case, run)
    assert not verdict.ok and verdict.symptom == "excess-recompiles" and verdict.call_index == first


@pytest.mark.slow  # 30 s of shrinking; test_generate's shrink test covers cases shrinking as Hypothesis examples
def test_schedule_knobs_shrink_with_the_case():
    """Marks and config flags are drawn through Hypothesis: a case that needs
    a mark_dynamic shrinks to the smallest program and schedule that has one."""
    from hypothesis import HealthCheck, find, settings

    from symfuzz.fuzz.generate import GenConfig, cases

    def has_dynamic_mark(case):
        return any(m.get("mark") == "dynamic" for call in case.schedule.calls for a in call.args for m in a.marks.values())

    # derandomize: the search is the same on every run (a random one sometimes stops
    # at an op with its size statement, e.g. ``n1 = x0.size(0) * x0.size(1)`` + reshape).
    smallest = find(cases(GenConfig(max_ops=2)), has_dynamic_mark,
                    settings=settings(max_examples=400, database=None, derandomize=True,
                                      suppress_health_check=list(HealthCheck)))
    marks = [m for a in smallest.schedule.calls[0].args for m in a.marks.values()]
    assert marks == [{"mark": "dynamic"}]  # one mark, no min/max
    assert smallest.schedule.config == {} and len(smallest.program.ops()) <= 1


def test_translation_validation_timeouts_are_kept_apart_not_reported():
    from symfuzz.corpus.finding import Finding
    from symfuzz.confirmation import _slow_by_design
    from symfuzz.oracles.verdict import Verdict

    case = case_of(BRANCHY, [[(8, 3), (7,)]]).to_json()
    verdict = Verdict(ok=False, oracle="isolation", symptom="timeout", stage="unknown", signature="timeout-x")
    assert _slow_by_design(Finding(case=case, verdict=verdict, lane={})) is None
    case["schedule"]["config"] = {"fx": {"translation_validation": True}}
    assert "translation validation" in _slow_by_design(Finding(case=case, verdict=verdict, lane={}))
