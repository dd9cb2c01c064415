"""Size-level Python and data-dependent ops in generated programs.

Each pattern must show up in generated programs, render to valid Python, run
in eager at every call's sizes, and compile (backend="eager") to the same
results.
"""

import warnings

import pytest
import torch

from symfuzz.fuzz.drawing import generate
from symfuzz.fuzz.generate import Builder, GenConfig
from symfuzz.fuzz.ir import CheckNode, CondNode, ExprNode, GraphBreakNode, Input, OpNode, Program, SizeNode
from symfuzz.fuzz.specs import all_specs, required_dynamo_config
from symfuzz.fuzz import script_runtime
from symfuzz.oracles.lanes.execute import load_function

N_CASES = 200
DATADEP = tuple(s.name for s in all_specs() if s.family == "datadep")

# Fragment of rendered source -> the pattern it shows.
SIZE_PATTERNS = {
    "torch.cond(": "torch.cond on a size predicate",
    "lambda a0": "torch.cond branches as lambdas",
    "_true(a0": "torch.cond branches as nested defs",
    "torch._dynamo.graph_break()": "explicit graph break",
    "assert ": "assert on sizes",
    "torch._check(": "torch._check",
    "torch._check_is_size(": "torch._check_is_size",
    "math.sqrt(": "math.sqrt of a size as a scale",
    " != ": "!= on sizes",
    " and ": "chained comparison",
    " // 2, -1)": "size variable feeding a view",
}
# Sizes handed to plain Python; one of them must appear.
NON_TORCH = ("len(range(", "int(sum([", "max(x", "min(x", "sum(x", "math.prod(", "len(x", "sorted(", "list(",
             "divmod(", "math.ceil(", "int(math.sqrt(")


def _quiet_generate(seed, index, config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return generate(seed, index, config)


@pytest.fixture(scope="module")
def mixed():
    return [_quiet_generate(11, i, GenConfig()) for i in range(N_CASES)]


@pytest.fixture(scope="module")
def datadep_only():
    return [_quiet_generate(12, i, GenConfig(ops=DATADEP, max_ops=4)) for i in range(80)]


def _eager_errors(case):
    fn = load_function(case.source)
    errors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in case.schedule.calls:
            record = script_runtime.run_call(fn, script_runtime.make_args(call.to_json()))
            if "error" in record:
                errors.append(record["error"]["message"][:100])
    return errors


def test_every_size_level_pattern_appears_in_generated_programs(mixed):
    text = "".join(case.source for case in mixed)
    missing = [what for fragment, what in SIZE_PATTERNS.items() if fragment not in text]
    assert not missing, missing
    assert any(fragment in text for fragment in NON_TORCH), "no size passed through plain Python"
    assert any(isinstance(n, ExprNode) for case in mixed for n in case.program.body)
    assert any(isinstance(n, SizeNode) for case in mixed for n in case.program.body)


def test_data_dependent_ops_appear_among_the_others_and_alone(mixed, datadep_only):
    assert {op for case in mixed for op in case.program.ops()} & set(DATADEP)
    used = {op for case in datadep_only for op in case.program.ops()}
    assert used >= set(DATADEP), set(DATADEP) - used


def test_programs_are_valid_python_and_run_in_eager_at_every_call(mixed, datadep_only):
    for cases in (mixed, datadep_only):
        invalid = []
        for case in cases:
            compile(case.source, "<case>", "exec")
            if _eager_errors(case):
                invalid.append(case.source)
        assert len(invalid) <= 0.05 * len(cases), invalid[:2]


def test_data_dependent_programs_declare_the_dynamo_flags_they_need(datadep_only):
    wanted = {"capture_scalar_outputs", "capture_dynamic_output_shape_ops"}
    for case in datadep_only:
        if not case.program.ops():  # only size-level statements were drawn
            continue
        flags = required_dynamo_config(case.program)
        assert flags and set(flags) <= wanted and all(flags.values()), (flags, case.source)


def test_required_dynamo_config_is_the_union_over_the_ops():
    x = (Input("x0", "float32", ("s0",)),)
    plain = Program(x, (OpNode("v1", "neg", ("x0",)),), ("v1",))
    assert required_dynamo_config(plain) == {}
    both = Program(x, (OpNode("v1", "nonzero", ("x0",), {"call": "torch.nonzero({0} > 0)"}),
                       OpNode("v2", "item_scalar", ("x0",), {"red": ".sum()"})), ("v1", "v2"))
    assert required_dynamo_config(both) == {"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True}


def test_new_nodes_render_and_round_trip_through_json():
    program = Program(
        (Input("x0", "float32", ("s0", 4)),),
        (
            CheckNode("assert", "x0.shape[0] > 0"),
            CheckNode("check", "x0.size(0) >= 1"),
            CheckNode("check_is_size", "x0.size(1)"),
            ExprNode("v1", "x0 / math.sqrt(x0.shape[-1])"),
            GraphBreakNode(),
            CondNode("v2", "x0.size(0) > 2", ("v1",), "a0 * 2", "a0.sin()"),
            CondNode("v3", "x0.size(0) == 3", ("v2", "v1"), "a0 + a1", "a0 - a1", "def"),
        ),
        ("v3",),
    )
    source = program.render()
    assert "    assert x0.shape[0] > 0\n    torch._check(x0.size(0) >= 1)\n    torch._check_is_size(x0.size(1))" in source
    assert "    torch._dynamo.graph_break()\n" in source
    assert "v2 = torch.cond(x0.size(0) > 2, lambda a0: a0 * 2, lambda a0: a0.sin(), (v1,))" in source
    assert "    def v3_true(a0, a1):\n        return a0 + a1\n" in source
    data = program.to_json()
    assert data["ir_version"] == 2
    assert Program.from_json(data) == program
    fn = load_function(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # _check_is_size is deprecated, still supported
        for n in (1, 3, 5):  # runs in eager (graph_break is a no-op there), both cond arms
            assert fn(torch.randn(n, 4))[0].shape == (n, 4)
    v1_only = Program((Input("x0", "float32", ("s0",)),), (SizeNode("n1", "x0.size(0)"),), ("x0",))
    assert v1_only.to_json()["ir_version"] == 1  # older symfuzz can still read it


def test_data_dependent_statements_keep_world_shapes_and_values_exact():
    """Worlds hold the calls' real inputs, so a nonzero count seen while
    generating is the count the call sees."""
    for case in [_quiet_generate(12, i, GenConfig(ops=("nonzero", "masked_select"), max_ops=2)) for i in range(6)]:
        assert not _eager_errors(case), case.source


def _compiled_mismatch(case):
    """None if ``case`` compiles (backend="eager") and matches eager at every
    call, else what went wrong. Only the flags the program's ops need are
    set: no dynamism marks or other schedule knobs, which may legitimately
    make torch reject a program."""
    fn = load_function(case.source)
    torch._dynamo.reset()
    restore = script_runtime.set_compile_config({"dynamo": required_dynamo_config(case.program)})
    try:
        compiled = torch.compile(fn, backend="eager", dynamic=True)
        for call in case.schedule.calls:
            args = call.to_json()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                eager = script_runtime.run_call(fn, script_runtime.make_args(args))
                out = script_runtime.run_call(compiled, script_runtime.make_args(args))
            failure = script_runtime.judge_call(eager, out)
            if failure is not None:
                return failure.get("error", {}).get("message", failure.get("detail", ""))[:300]
    finally:
        restore()
        torch._dynamo.reset()
    return None


PATTERNS = {
    "cond": lambda c: "torch.cond(" in c.source,
    "check+sqrt": lambda c: ("torch._check(" in c.source or "assert " in c.source) and "math.sqrt(" in c.source,
    "graph_break": lambda c: "graph_break()" in c.source,
    "nonzero": lambda c: {"nonzero", "masked_select", "bool_mask_index"} & set(c.program.ops()),
    "item": lambda c: {"item_size", "split_by_item"} & set(c.program.ops()),
}


@pytest.mark.parametrize("what", sorted(PATTERNS))
def test_patterns_compile_with_the_eager_backend_and_match_eager(what, mixed, datadep_only):
    """Of the first three programs with the pattern, one at least compiles and
    matches eager. (Not all: a generated program may hit a real torch bug or
    limitation, e.g. torch.cond rejecting a dense output whose symbolic
    stride it cannot simplify.)"""
    pool = datadep_only if what in ("nonzero", "item") else mixed
    candidates = [case for case in pool if PATTERNS[what](case)][:3]
    assert candidates, f"no generated program has the {what} pattern"
    problems = []
    for case in candidates:
        problem = _compiled_mismatch(case)
        if problem is None:
            return
        problems.append((case.source, problem))
    raise AssertionError(problems)


def test_builder_validates_on_real_values():
    """Data-dependent ops raise on meta tensors; the builder's worlds are real CPU tensors."""
    from random import Random

    from hypothesis.internal.conjecture.data import ConjectureData

    b = Builder(ConjectureData(random=Random(0)).draw, GenConfig(), {"s0": (3, 5)}, 2)
    b.add_input(("s0",), "float32")
    assert all(env["x0"].device.type == "cpu" for env in b.envs)
    assert b.try_statement(OpNode("v1", "nonzero", ("x0",), {"call": "torch.nonzero({0} > 0)"}), "v1")
    assert "v1" in b.unbacked
    assert [s[0] for s in b.tensors[-1].shapes] == [int((env["x0"] > 0).sum()) for env in b.envs]
