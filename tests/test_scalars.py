"""Python numbers and int lists as program inputs (fuzz/scalars.py): generation, the case
model around them, and the pipeline pieces that must take them (symbolic trace, export's
dynamic_shapes, the short repro, the minifier's passes). No compiles here: cheap."""

import json
from collections import Counter
from random import Random

import pytest
import torch
from hypothesis.internal.conjecture.data import ConjectureData

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.short_repro import render_short
from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.drawing import generate
from symfuzz.fuzz.generate import GenConfig, build_case
from symfuzz.fuzz.ir import ExprNode, Input, OpNode, Program, check_program
from symfuzz.fuzz.scalars import draw_int_dynamism
from symfuzz.minifier.case_eager import values_at
from symfuzz.minifier.case_passes import inline_scalar, shrink_scalar_values
from symfuzz.minifier.case_subject import CaseSubject
from symfuzz.oracles.lanes.export_runner import dynamic_shapes_for, scalar_dynamic_shape
from symfuzz.oracles.lanes.execute import load_function
from symfuzz.oracles.lanes.runners import runner_spec
from symfuzz.oracles.symbolic_meta import stride_paths, trace_symbolic
from symfuzz.oracles.symbolic_trace import judge_calls
from symfuzz.oracles.verdict import Verdict

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

N_CASES = 80
CONFIG = GenConfig(max_ops=5)


def scalars_of(case):
    return [(a, inp) for a, inp in enumerate(case.program.inputs) if not inp.is_tensor]


def values_of(case, a):
    return [call.args[a].value for call in case.schedule.calls]


@pytest.fixture(scope="module")
def generated():
    """(case, builder) of the generated programs that take a number or an int list."""
    out = []
    for i in range(N_CASES):
        case, builder = build_case(ConjectureData(random=Random(f"scalars:{i}")).draw, CONFIG)
        if scalars_of(case):
            out.append((case, builder))
    return out


def test_a_good_share_of_programs_take_numbers_of_every_kind(generated):
    assert len(generated) >= N_CASES // 4
    kinds = Counter(inp.kind for case, _ in generated for _, inp in scalars_of(case))
    assert set(kinds) == {"int", "float", "bool", "ints"}, kinds


def test_every_program_is_valid_with_every_call_s_values(generated):
    for case, _ in generated:
        fn = load_function(case.source)
        for call in case.schedule.calls:
            result = script_runtime.run_call(fn, script_runtime.make_args(call.to_json()))
            assert "error" not in result, (case.source, call.to_json(), result["error"])


def test_number_inputs_are_used_and_change_across_calls(generated):
    used = changed = 0
    seen = set()
    for case, _ in generated:
        for a, inp in scalars_of(case):
            used += any(inp.name in " ".join(map(str, node.__dict__.values())) for node in case.program.body)
            values = values_of(case, a)
            changed += len({json.dumps(v) for v in values}) > 1
            if inp.kind in ("int", "float"):
                seen |= {("zero" if v == 0 else "one" if v == 1 else "negative" if v < 0 else
                          "large" if v >= 33 else "small") for v in values}
    total = sum(len(scalars_of(case)) for case, _ in generated)
    assert used == total
    assert 0 < changed < total  # some equal at every call, most not
    assert seen >= {"zero", "one", "negative", "small"}, seen


def test_shape_rules_of_specs_that_read_numbers_agree_with_execution(generated):
    mismatches = [m for _, builder in generated for m in builder.shape_rule_mismatches]
    assert not mismatches, mismatches[:3]


def test_some_specs_and_size_level_python_take_the_numbers(generated):
    """Beyond their first uses, numbers reach op specs' parameters."""
    ops = Counter()
    for case, _ in generated:
        names = {inp.name for _, inp in scalars_of(case)}
        for node in case.program.body:
            if isinstance(node, OpNode) and (names & set(node.args) or
                                              any(n in str(v) for v in node.params.values() for n in names)):
                ops[node.op] += 1
    assert sum(ops.values()) >= 3, ops


def test_generation_is_deterministic_and_round_trips_through_json(generated):
    for i in range(12):
        case = generate(5, i, CONFIG)
        assert generate(5, i, CONFIG).to_json() == case.to_json()
        again = Case.from_json(json.loads(json.dumps(case.to_json())))
        assert again.to_json() == case.to_json()
    for case, _ in generated:
        check_program(case.program)
        data = json.loads(json.dumps(case.to_json()))
        assert data["program"]["ir_version"] == (4 if case.program.params else 3)  # IR v4: module state
        assert Case.from_json(data).to_json() == case.to_json()


def test_int_dynamism_marks_ints_through_torch_compiler_config():
    k = [("k3", "int", (2, 3)), ("f4", "float", (0.5, 1.5))]
    from symfuzz.fuzz.specs.base import ScalarInput

    configs = []
    for seed in range(40):
        config = {}
        rng = Random(seed)
        draw_int_dynamism(lambda strategy: ConjectureData(random=rng).draw(strategy),
                          [ScalarInput(*s) for s in k], config)
        configs.append(config)
    marked = [c for c in configs if c]
    assert marked and len(marked) < len(configs)
    assert {next(iter(c["compiler"].values())) for c in marked} == {"L['k3']"}
    restore = script_runtime.set_compile_config(marked[0])
    try:
        flag, value = next(iter(marked[0]["compiler"].items()))
        assert getattr(torch.compiler.config, flag) == value
    finally:
        restore()
    assert torch.compiler.config.dynamic_sources == ""


# ---------------------------------------------------------------- a hand-made case


def small_case(values=(2, 3, 2), floats=(0.5, 0.5, 1.5)):
    program = Program(
        (Input("x0", "float32", ("s0", 4)), Input("k1", "int64", (), "int"), Input("f2", "float64", (), "float"),
         Input("shape3", "int64", (), "ints")),
        (ExprNode("v1", "x0[:, :k1] * f2"), ExprNode("v2", "torch.zeros(k1, x0.size(0)) + f2"),
         ExprNode("v3", "x0.reshape(shape3)"), OpNode("v4", "add", ("v1", "k1"), {"alpha": 1})),
        ("v4", "v2", "v3"))
    calls = tuple(Call((ArgSpec((n, 4), "float32", n), ArgSpec.of_scalar("int", k), ArgSpec.of_scalar("float", f),
                        ArgSpec.of_scalar("ints", [2, n * 2])), {"s0": n})
                  for n, k, f in zip((3, 5, 4), values, floats))
    return Case(program, Schedule(None, calls))


def test_the_symbolic_trace_makes_ints_symbols_and_judges_every_call():
    case = small_case()
    calls = [c.to_json() for c in case.schedule.calls]
    trace = trace_symbolic(case.source, calls[0])
    assert [m[0] for m in trace.inputs[1:]] == ["int", "const", "ints"]
    fn = load_function(case.source)
    eager = [script_runtime.run_call(fn, script_runtime.make_args(c)) for c in calls]
    judgement = judge_calls(trace, fn, calls, lambda i, c: eager[i], stride_paths(case.program), case.output_ops())
    assert judgement.mismatch is None
    assert judgement.compared[:2] == [0, 1]  # call 1: another int (a symbol in the trace), the same float
    assert "number input" in judgement.skipped[2]  # call 2: another float, a constant of the trace


def test_export_dynamic_shapes_make_changing_non_negative_ints_dynamic():
    case = small_case()
    calls = [c.to_json() for c in case.schedule.calls]
    (shapes,) = dynamic_shapes_for(runner_spec(case), calls)
    assert shapes[1] == torch.export.Dim.AUTO(min=2, max=3)
    assert shapes[2] is None  # floats are constants of an exported program
    assert shapes[3][0] is torch.export.Dim.STATIC and shapes[3][1] == torch.export.Dim.AUTO(min=6, max=10)
    assert scalar_dynamic_shape([{"scalar": "int", "value": v} for v in (3, -1)]) is torch.export.Dim.STATIC


def test_the_short_repro_passes_numbers_as_literals():
    case = small_case(values=(2, -3, 2))
    verdict = Verdict(False, "differential", "value-mismatch", "runtime", "value-mismatch-0123456789", 1)
    text = render_short(Finding(case=case.to_json(), verdict=verdict, environment={"torch": "x"},
                                lane={"name": "inductor-cpp", "backend": "inductor"}))
    assert "lambda: [randn((5, 4), torch.float32, 5), -3, 0.5, [2, 10]]," in text
    compile(text, "<repro>", "exec")


def test_inlining_a_number_input_keeps_the_program_valid_and_equal_where_the_value_held():
    case = small_case(values=(2, 2, 2))
    for a in (1, 2, 3):
        value = case.schedule.calls[0].args[a].value
        smaller = inline_scalar(case, a, value)
        Program.from_json(smaller.program.to_json())  # checked as a program read from a file
        assert case.program.inputs[a].name not in smaller.source
        assert len(smaller.program.inputs) == 3 and all(len(c.args) == 3 for c in smaller.schedule.calls)
        original, inlined = values_at(case, 0), values_at(smaller, 0)
        assert inlined and {k: v for k, v in original.items() if k in inlined} == inlined
    negative = inline_scalar(small_case(values=(-1, -1, -1)), 1, -1)
    assert "x0[:, :(-1)]" in negative.source and "torch.add(v1, -1" in negative.source
    check_program(negative.program)


def test_number_values_shrink_toward_equal_small_ones():
    case = small_case(values=(1000, 3, -7), floats=(0.5, 256.5, 0.5))
    subject = CaseSubject(case, Verdict(False, "reuse-soundness", "unsound-guard", "guard", "sig", 1), {}, {})
    candidates = [c.case for c in shrink_scalar_values(subject)]
    ints = [values_of(c, 1) for c in candidates if values_of(c, 1) != values_of(case, 1)]
    floats = [values_of(c, 2) for c in candidates if values_of(c, 2) != values_of(case, 2)]
    assert [3, 3, 3] in ints and [1000, 1000, 1000] in ints  # the failing call's value, then the first call's
    assert [3, 2, -2] in ints  # compressed: order and sign kept
    assert [500, 3, -7] in ints
    assert [0.5, 0.5, 0.5] in floats and [0.5, 1.0, 0.5] in floats
    for c in candidates:
        assert subject.with_case(c).cost() < subject.cost()
        Case.from_json(c.to_json())


@pytest.mark.integration
def test_guard_planning_solves_for_int_arguments_too():
    """An int argument compiled as a symbol is a variable of the guard model: planned calls
    take new values inside its guards (reused) and across them (recompiled)."""
    from symfuzz.fuzz.ir import BranchNode
    from symfuzz.oracles.lanes.execute import execute
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.registry import judge

    program = Program((Input("x0", "float32", ("s0",)), Input("k1", "int64", (), "int")),
                      (BranchNode("v1", "k1 > 3", "x0 * 2", "x0 - 1"), ExprNode("v2", "v1[:k1] * k1")), ("v2",))
    calls = tuple(Call((ArgSpec((n,), "float32", n), ArgSpec.of_scalar("int", k)), {"s0": n})
                  for n, k in ((5, 2), (6, 3), (7, 5)))
    run = execute(Case(program, Schedule(True, calls)), get_lane("eager"), plan=True)
    assert not run.guards["untranslated"], run.guards
    planned = [(c.args[1].value, r) for c, r in zip(run.case.schedule.calls, run.calls) if r.purpose != "drawn"]
    assert len({k for k, _ in planned} - {2, 3, 5}) >= 2
    assert any(r.expect_reuse and r.graphs == 0 for _, r in planned)
    assert any(r.purpose.startswith("violate") and k <= 3 and r.graphs > 0 for k, r in planned)
    assert not [v for v in judge(run.case, run) if not v.ok]


def test_the_export_lane_takes_numbers_and_int_lists():
    """Export: a changing int is a dynamic input, an int list one per element (the exported
    program's checks take them flattened), a changed float is refused, not a finding."""
    from symfuzz.oracles.lanes.execute import execute
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.registry import judge

    case = small_case(values=(2, 3, 2), floats=(0.5, 0.5, 1.5))
    run = execute(case, get_lane("export"))
    assert [("error" in c.compiled) for c in run.calls] == [False, False, True]
    assert "LaneRejectedCall" in run.calls[2].compiled["error"]["type"]
    assert not [v for v in judge(case, run) if not v.ok]
