"""The symbolic-metadata oracle, alone, on runs made on the eager lane.

The planted faults patch a fake-tensor implementation in this process only:
FakeTensorMode decomposes ``aten.new_zeros`` through
``torch._decomp.decomposition_table`` when its inputs have symbolic sizes, so
a patched entry changes the fake result and nothing else (eager runs the
real kernel). The fixture clears FakeTensorMode's dispatch cache on both
sides so no patched result outlives the test.
"""

import importlib

import pytest
import torch

from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import BranchNode, Input, OpNode, Program, SizeNode
from symfuzz.oracles.lanes import lane as lanes
from symfuzz.oracles import registry
from symfuzz.oracles.differential import differential_oracle
from symfuzz.oracles.lanes.execute import execute
from symfuzz.oracles.symbolic_meta import (NAME, bind, compare_call, stride_checked, symbolic_metadata_oracle, trace_symbolic)
from symfuzz.oracles.verdict import SymbolicSkipped

aten = torch.ops.aten


def eager_run(case):
    return execute(case, lanes.get_lane("eager"))


def make_case(program, shapes, layouts=None, dynamic=True, config=None):
    layouts = layouts or [None] * len(shapes)
    calls = []
    for i, (call_shapes, call_layouts) in enumerate(zip(shapes, layouts)):
        args = []
        for j, shape in enumerate(call_shapes):
            layout = (call_layouts or {}).get(j) if call_layouts else None
            args.append(ArgSpec(tuple(shape), "float32", 100 * i + j, layout or {"kind": "contiguous"}))
        calls.append(Call(tuple(args)))
    return Case(program, Schedule(dynamic, tuple(calls), config or {}))


def new_zeros_case(sizes=(4, 6, 7, 8)):
    program = Program(
        (Input("x0", "float32", ("s0", 3)),),
        (OpNode("v1", "new_zeros", ("x0",), {"sizes": "x0.size(0), 3"}),),
        ("v1",),
    )
    return make_case(program, [[(n, 3)] for n in sizes])


@pytest.fixture
def fake_impl(monkeypatch):
    """Replace the fake (symbolic) implementation of ``aten.new_zeros``."""
    from torch._decomp import decomposition_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    original = decomposition_table[aten.new_zeros.default]

    def plant(make):
        FakeTensorMode.cache.clear()
        monkeypatch.setitem(decomposition_table, aten.new_zeros.default, make(original))

    yield plant
    FakeTensorMode.cache.clear()


def rounds_dim0_down_to_even(original):
    """A classic meta bug: right at even sizes (the hint), wrong at odd ones."""

    def new_zeros(self, size, **kwargs):
        size = list(size)
        if isinstance(size[0], torch.SymInt):
            size[0] = size[0] // 2 * 2
        return original(self, size, **kwargs)

    return new_zeros


def column_major(original):
    """Right sizes, wrong (transposed) strides for 2-D symbolic results."""

    def new_zeros(self, size, **kwargs):
        size = list(size)
        if len(size) == 2 and any(isinstance(s, torch.SymInt) for s in size):
            return original(self, [size[1], size[0]], **kwargs).t()
        return original(self, size, **kwargs)

    return new_zeros


def stride_right_at_even_sizes_only(original):
    """Row stride 3 at even row counts (the hint), 4 at odd ones: a symbolic
    stride bug, not a layout choice."""

    def new_zeros(self, size, **kwargs):
        size = list(size)
        if len(size) == 2 and isinstance(size[0], torch.SymInt):
            return self.new_empty_strided(size, [size[1] + size[0] % 2, 1], **kwargs).zero_()
        return original(self, size, **kwargs)

    return new_zeros


# ---------------------------------------------------------------- registry


def test_registered_by_name_and_importable_as_symbolic_meta():
    module = importlib.import_module("symfuzz.oracles.symbolic_meta")
    assert registry.ORACLES[NAME] is module.symbolic_metadata_oracle


# ---------------------------------------------------------------- planted faults


def test_planted_size_fault_is_found_at_the_first_odd_size(fake_impl):
    fake_impl(rounds_dim0_down_to_even)
    case = new_zeros_case((4, 6, 7, 8))
    run = eager_run(case)
    v = symbolic_metadata_oracle(case, run)
    assert not v.ok
    assert (v.symptom, v.stage, v.oracle, v.call_index) == ("fake-real-mismatch", "dynamo", "symbolic-metadata", 2)
    ev = v.evidence
    assert (ev.path, ev.what, ev.dim, ev.expected, ev.actual) == ("out[0][0]", "size", 0, 6, 7)
    assert "//" in ev.symbolic or "FloorDiv" in ev.symbolic
    assert ev.call_sizes == [[7, 3]] and ev.hint_sizes == [[4, 3]]
    assert v.signature.startswith("fake-real-mismatch-")
    # Dynamo traced the same wrong size, but the eager backend runs the real
    # kernel: the compiled results are right and only this oracle sees the bug.
    assert differential_oracle(case, run).ok
    # Same bug, same signature, whatever call first shows it.
    other = new_zeros_case((6, 5))
    v2 = symbolic_metadata_oracle(other, eager_run(other))
    assert v2.call_index == 1 and v2.signature == v.signature


def test_planted_stride_fault_is_found(fake_impl):
    fake_impl(column_major)
    case = new_zeros_case((4, 6))
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert not v.ok and v.call_index == 0
    ev = v.evidence
    assert (ev.what, ev.dim, ev.expected, ev.actual) == ("stride", 0, 1, 3)


def test_outside_the_allow_list_a_stride_that_agreed_at_the_first_call_must_keep_agreeing(fake_impl, monkeypatch):
    import symfuzz.oracles.symbolic_meta as sm

    monkeypatch.setattr(sm, "FRESH_OPS", frozenset())  # new_zeros is now judged like any other op
    fake_impl(stride_right_at_even_sizes_only)
    case = new_zeros_case((4, 6, 7))
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert not v.ok and v.call_index == 2
    ev = v.evidence
    assert (ev.what, ev.dim, ev.expected, ev.actual) == ("stride", 0, 4, 3)
    assert ev.rule == "agreed at the first compared call"


def test_outside_the_allow_list_a_layout_chosen_differently_from_the_start_is_only_recorded(fake_impl, monkeypatch):
    import symfuzz.oracles.symbolic_meta as sm

    monkeypatch.setattr(sm, "FRESH_OPS", frozenset())
    fake_impl(column_major)
    case = new_zeros_case((4, 6))
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert v.ok, v.evidence
    assert v.evidence.layout_divergences == [{"path": "out[0][0]", "dim": 0, "fake": 1, "eager": 3},
                                                {"path": "out[0][0]", "dim": 1, "fake": 4, "eager": 1}]


LAYOUT_DIVERGENCES = {
    # fake copysign is the torch._refs decomposition, which lays out a result
    # with a broadcast operand differently from the CPU kernel
    "copysign": (
        Program((Input("x0", "float32", ("s0", "s0", "s0")), Input("x1", "float32", ("s0", 1, "s0"))),
                (OpNode("v1", "copysign", ("x0", "x1")),), ("v1",)),
        [[(3, 3, 3), (3, 1, 3)], [(5, 5, 5), (5, 1, 5)]],
    ),
    # fake F.one_hot follows a transposed input's layout; the CPU kernel
    # returns a contiguous result
    "one_hot": (
        Program((Input("x0", "float32", ("s0", "s1")),),
                (OpNode("v1", "one_hot", ("x0",), {"c": "2", "desc": ["c", 2]}),), ("v1",)),
        [[(4, 3)], [(6, 5)]],
    ),
}


@pytest.mark.parametrize("op", sorted(LAYOUT_DIVERGENCES))
def test_real_layout_divergences_in_torch_are_recorded_not_reported(op):
    """Real in torch 2.13, with static shapes too. They are the CPU-elementwise
    kind of stride difference torch excuses, not symbolic errors."""
    program, shapes = LAYOUT_DIVERGENCES[op]
    transposed = {0: {"kind": "transposed", "dims": [0, 1] if len(shapes[0][0]) == 2 else [1, 2]}}
    case = make_case(program, shapes, layouts=[transposed] * len(shapes))
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert v.ok and v.evidence.compared_calls == [0, 1]
    assert v.evidence.layout_divergences[0]["path"] == "out[0][0]"


def test_unpatched_torch_passes_the_same_cases():
    for sizes in ((4, 6, 7, 8), (6, 5)):
        case = new_zeros_case(sizes)
        v = symbolic_metadata_oracle(case, eager_run(case))
        assert v.ok, v.evidence
        assert v.evidence.compared_calls == list(range(len(sizes)))


# ---------------------------------------------------------------- what is comparable


def branch_case(sizes):
    """The two arms have different shapes on purpose (the generator never does
    this): the trace follows the arm of the hint, so a call taking the other
    arm is comparable only if the guard is honoured."""
    program = Program(
        (Input("x0", "float32", ("s0",)),),
        (BranchNode("v1", "x0.size(0) > 4", "torch.cat([x0, x0])", "x0"),),
        ("v1",),
    )
    return make_case(program, [[(n,)] for n in sizes])


def test_a_call_violating_the_guards_is_skipped():
    case = branch_case((6, 8, 3))
    run = eager_run(case)
    v = symbolic_metadata_oracle(case, run)
    assert v.ok, v.evidence
    assert v.evidence.compared_calls == [0, 1]
    assert set(v.evidence.skipped_calls) == {"2"}
    assert "range" in v.evidence.skipped_calls["2"] or "guard" in v.evidence.skipped_calls["2"]
    # Without the guard check, call 2 would be a false finding: the trace
    # says 2*s0 = 6, eager made 3 (the other arm).
    from symfuzz.fuzz import script_runtime

    call = case.schedule.calls[2].to_json()
    trace = trace_symbolic(case.source, case.schedule.calls[0].to_json())
    bindings, _, _ = bind(trace, script_runtime.make_args(call))
    mismatch = compare_call(trace, bindings, run.calls[2].eager["out"], lambda: None, False)
    assert (mismatch["expected"], mismatch["actual"]) == (6, 3)


def test_sizes_tied_only_by_duck_sizing_at_the_hint_are_not_compared_apart():
    program = Program(
        (Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s1",))),
        (OpNode("v1", "relu", ("x0",)), OpNode("v2", "relu", ("x1",))),
        ("v1", "v2"),
    )
    case = make_case(program, [[(3,), (3,)], [(4,), (4,)], [(4,), (6,)]])
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert v.ok and v.evidence.compared_calls == [0, 1]
    assert "input size" in v.evidence.skipped_calls["2"]


def test_data_dependent_sizes_are_not_compared_but_the_rest_is():
    program = Program(
        (Input("x0", "float32", ("s0", 4)),),
        (OpNode("v1", "masked_select", ("x0",), {"cmp": " > 0"}), OpNode("v2", "relu", ("x0",)),
         # builtins on sizes, as Dynamo traces them (sym_max: no guard on u0)
         SizeNode("n3", "max(v1.size(0), 1)"), SizeNode("n4", "divmod(x0.size(0), 2)[0]"),
         OpNode("v5", "new_zeros", ("x0",), {"sizes": "n4, 3"})),
        ("v1", "v2", "v5"),
    )
    case = make_case(program, [[(5, 4)], [(7, 4)], [(9, 4)]],
                     config={"dynamo": {"capture_dynamic_output_shape_ops": True}})
    trace = trace_symbolic(case.source, case.schedule.calls[0].to_json())
    assert any(s.name.startswith("u") for s in trace.leaves[0][1].sizes[0].free_symbols)
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert v.ok and v.evidence.compared_calls == [0, 1, 2]


def test_a_program_that_cannot_be_traced_symbolically_passes_with_the_reason():
    program = Program(
        (Input("x0", "float32", ("s0",)),),
        (BranchNode("v1", "bool(x0.sum() > 0)", "x0", "x0 * 2"),),  # a branch on data
        ("v1",),
    )
    case = make_case(program, [[(4,)], [(6,)]])
    v = symbolic_metadata_oracle(case, eager_run(case))
    assert v.ok
    assert v.evidence.skipped == "symbolic trace failed" and "data-dependent" in v.evidence.reason


def test_strides_are_eagers_true_strides_not_the_snapshots():
    """snapshot() clones, which makes an expanded output contiguous; the
    oracle must not take the clone's strides for eager's."""
    program = Program(
        (Input("x0", "float32", ("s0", "s1")),),
        (OpNode("v1", "t", ("x0",)),),
        ("v1", "x0"),
    )
    expanded = {0: {"kind": "expanded", "dim": 0}}
    case = make_case(program, [[(3, 4)], [(5, 6)]], layouts=[expanded, expanded])
    run = eager_run(case)
    assert run.calls[0].eager["out"][0][1].stride() != (0, 1)  # the clone's
    v = symbolic_metadata_oracle(case, run)
    assert v.ok and v.evidence.compared_calls == [0, 1]


def test_strides_are_only_held_to_allow_listed_ops():
    program = Program(
        (Input("x0", "float32", ("s0", "s1")), Input("x1", "float32", ("s0", "s1"))),
        (OpNode("v1", "t", ("x0",)), OpNode("v2", "add", ("v1", "x1"), {"alpha": 1}), OpNode("v3", "t", ("v2",)),
         OpNode("v4", "new_zeros", ("v2",), {"sizes": "v2.size(0), 3"})),
        ("v1", "v3", "v4"),
    )
    checked = stride_checked(program)
    assert {"x0", "x1", "v1", "v4"} <= checked
    assert not {"v2", "v3"} & checked  # elementwise on two operands, and what is made from it


def test_the_oracle_mutates_neither_case_nor_run():
    case = new_zeros_case((4, 5))
    run = eager_run(case)
    before_case = case.to_json()
    before_out = [(c.eager["out"][0][0].clone(), c.eager["out"][0][0].stride()) for c in run.calls]
    symbolic_metadata_oracle(case, run)
    assert case.to_json() == before_case
    for (t, stride), c in zip(before_out, run.calls):
        assert torch.equal(t, c.eager["out"][0][0]) and c.eager["out"][0][0].stride() == stride


# ---------------------------------------------------------------- generated cases


@pytest.mark.slow
def test_no_findings_on_100_generated_cases_on_unmodified_torch():
    from symfuzz.fuzz.drawing import generate
    from symfuzz.fuzz.generate import GenConfig

    failures, compared, untraced = [], 0, 0
    for index in range(100):
        case = generate(0, index, GenConfig())
        v = symbolic_metadata_oracle(case, eager_run(case))
        if not v.ok:
            failures.append((index, v.headline(), v.evidence.detail))
        elif isinstance(v.evidence, SymbolicSkipped):
            untraced += 1
        else:
            compared += len(v.evidence.compared_calls)
    assert failures == []
    assert compared >= 100 and untraced <= 20  # the oracle really judged something


# ---------------------------------------------------------------- repro scripts


# A sitecustomize that plants rounds_dim0_down_to_even (the same function, its
# source copied) in every Python process started with its folder on PYTHONPATH.
PLANT_SITECUSTOMIZE = '''import torch
from torch._decomp import decomposition_table

{source}

_table_key = torch.ops.aten.new_zeros.default
decomposition_table[_table_key] = rounds_dim0_down_to_even(decomposition_table[_table_key])
'''


def _run_script(script, pythonpath=None):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, str(script)], cwd=script.parent, env=env, capture_output=True, check=False,
                          text=True, timeout=300)


def test_repro_of_a_fake_real_mismatch_runs_the_symbolic_check_standalone(fake_impl, tmp_path):
    import inspect
    import json
    import re
    import sys

    from symfuzz.corpus.finding import Finding
    from symfuzz.corpus.replay import replay_finding
    from symfuzz.corpus.scripts import render_repro

    fake_impl(rounds_dim0_down_to_even)
    case = new_zeros_case((4, 6, 7, 8))
    run = eager_run(case)
    v = symbolic_metadata_oracle(case, run)
    assert not v.ok and v.call_index == 2
    finding = Finding(case=(run.case or case).to_json(), verdict=v, lane=lanes.get_lane("eager").to_json())

    source = render_repro(finding)
    imports = {i.split(".")[0] for i in re.findall(r"^\s*(?:import|from)\s+([\w.]+)", source, re.MULTILINE)}
    assert imports <= set(sys.stdlib_module_names) | {"torch", "sympy"}, imports
    assert not re.search(r"^\s*from\s+\.", source, re.MULTILINE)  # no relative imports survive inlining
    # Nothing is compiled (the runtime's config helper names torch.compiler.config, which is no compile).
    assert not re.search(r"torch\.compile\b(?!r)", source) and "def trace_symbolic(" in source and "def fn(" in source
    script = tmp_path / "repro" / "repro.py"
    script.parent.mkdir()
    script.write_text(source)

    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(
        PLANT_SITECUSTOMIZE.format(source=inspect.getsource(rounds_dim0_down_to_even)))

    planted = _run_script(script, plant)
    assert planted.returncode == 1, planted.stdout[-3000:] + planted.stderr[-3000:]
    result = json.loads(planted.stdout.strip().splitlines()[-1].removeprefix("SYMFUZZ-RESULT "))
    assert result == {"ok": False, "signature": v.signature, "call": 2, "symptom": "fake-real-mismatch"}
    assert v.evidence.detail in planted.stdout

    fixed = _run_script(script)  # unpatched torch: the trace agrees with eager everywhere
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    assert fixed.stdout.strip().endswith('SYMFUZZ-RESULT {"ok": true}')

    # Campaign confirmation compares the script's signature with the finding's.
    outcome = replay_finding(finding, timeout=300, env_extra={"PYTHONPATH": str(plant)})
    assert outcome.status == "reproduced" and outcome.signature == v.signature, outcome.output_tail
