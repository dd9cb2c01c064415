"""opcheck internals: inputs, the sweep, shrinking, calls files, schema samples, guards."""

import math

import pytest
import sympy
import torch
from opcheck_ops import buggy, correct

from symfuzz.opcheck.calls import CallRecorder, OpCall, dedupe, read_calls, write_calls
from symfuzz.opcheck.checks.common import OpCheckUsageError, Problem, make_template, resolve_op
from symfuzz.opcheck.checks.fake import _excluded_sizes
from symfuzz.opcheck.inputs import TensorInput, make
from symfuzz.opcheck.schema_samples import sample_from_schema
from symfuzz.opcheck.variants import REJECTED, Sweep, Variant, search, shrink

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py


def _sweep(module, name):
    args, kwargs = module.SAMPLES[name]
    return Sweep(make_template(module.OPS[name], args, kwargs))


def test_make_is_deterministic_and_lays_out_as_asked():
    a = make((3, 5), torch.float32, "contiguous", -1.0, 1.0, seed=7)
    assert torch.equal(a, make((3, 5), torch.float32, "contiguous", -1.0, 1.0, seed=7))
    assert not torch.equal(a, make((3, 5), torch.float32, "contiguous", -1.0, 1.0, seed=8))
    t = make((3, 5), torch.float32, "transposed", seed=1)
    assert t.shape == (3, 5) and t.stride() == (1, 3)
    s = make((3, 5), torch.float32, "sliced", seed=1)
    assert s.shape == (3, 5) and s.stride(-1) == 2 and s.storage_offset() == 1
    e = make((3, 5), torch.float32, "expanded", seed=1)
    assert e.shape == (3, 5) and e.stride(0) == 0
    ints = make((50,), torch.int64, "contiguous", 2.0, 4.0, seed=1)
    assert ints.min() >= 2 and ints.max() <= 4


def test_sweep_ties_equal_sizes_and_reaches_the_edge_sizes():
    sweep = _sweep(correct, "mm")  # a (4, 8) @ b (8, 3): the inner 8s are one symbol
    assert sweep.symbols == [3, 4, 8]
    # (variants that drop a tensor's leading dim, to broadcast, are another test's)
    shapes = [tuple(i.shape for i in sweep.case(v).tensor_inputs()) for v in sweep.edges() if not v.drop]
    tied = [s for s in shapes if s[0][1] == s[1][0]]
    assert len(tied) > len(shapes) // 2
    assert any(s[0][1] != s[1][0] for s in shapes), "some variant unties the inner dims (mixed sizes)"
    widths = {a[1] for a, _ in shapes}
    assert {0, 1}.issubset(widths) and any(w % 2 for w in widths) and max(widths) > 8
    layouts = {i.layout for v in sweep.edges() for i in sweep.case(v).tensor_inputs()}
    assert layouts == {"contiguous", "transposed", "sliced", "expanded"}
    dtypes = {i.dtype for v in sweep.edges() for i in sweep.case(v).tensor_inputs()}
    assert {"float64", "float16", "bfloat16", "int64", "int32", "bool", "complex64"}.issubset(dtypes)
    values = {i.values for v in sweep.edges() for i in sweep.case(v).tensor_inputs()}
    assert values == {"", "zeros", "ties", "negative", "large"}


def test_broadcast_patterns_make_a_shared_dim_1_or_drop_leading_dims():
    sweep = _sweep(correct, "scaled_add")  # x (4, 8), y (4, 8)
    shapes = {tuple(tuple(i.shape) for i in sweep.case(v).tensor_inputs()) for v in sweep.broadcasts((4, 8))}
    assert {((1, 8), (4, 8)), ((4, 1), (4, 8)), ((4, 8), (1, 8)), ((8,), (4, 8)), ((4, 8), (8,))} <= shapes
    assert _sweep(correct, "row_softmax").broadcasts((4, 8)) == [], "one tensor: nothing to broadcast against"


def test_value_classes_keep_integer_indices_in_their_range():
    from symfuzz.opcheck.inputs import TensorSlot
    from symfuzz.opcheck.variants import value_classes

    index = TensorSlot((4,), "int64", "cpu", 0.0, 3.0, False, False)
    assert value_classes(index, "int64") == ("zeros", "ties")  # never negative or large: out of bounds
    signed = TensorSlot((4,), "int64", "cpu", -3.0, 3.0, False, False)
    assert value_classes(signed, "int64") == ("zeros", "ties", "negative")
    assert value_classes(index, "bool") == ("zeros",)
    x = TensorInput((64,), "float32", lo=-1.0, hi=1.0, seed=3)
    assert not torch.any(x.build() == 0)
    from dataclasses import replace

    assert torch.all(replace(x, values="zeros").build() == 0)
    ties = replace(x, values="ties").build()
    assert set(ties.tolist()) <= {-1.0, 0.0, 1.0} and len(set(ties.tolist())) == 3
    assert torch.all(replace(x, values="negative").build() <= 0)
    assert replace(x, values="large").build().abs().max() > 1000
    assert "values='zeros'" in replace(x, values="zeros").code()


def test_the_axis_of_a_case_names_what_differs_from_the_sample():
    from symfuzz.opcheck.variants import axis_of

    sweep = _sweep(correct, "scaled_add")
    assert axis_of(sweep.template.original()) == "the sample"
    assert axis_of(sweep.case(Variant((4, 8), dtypes=(("float32", "int32"),)))) == "dtype int32"
    assert axis_of(sweep.case(Variant((4, 8), values=("zeros", "")))) == "value zeros (x0)"
    assert axis_of(sweep.case(Variant((4, 8), layouts=("", "transposed")))) == "layout transposed (x1)"
    assert axis_of(sweep.case(Variant((4, 8), untie=((1, 0, 1),)))) == "broadcast x1[1, 8]"
    assert axis_of(sweep.case(Variant((4, 8), drop=((0, 1),)))) == "broadcast x0[8]"
    assert axis_of(sweep.case(Variant((1, 3)))) == "shape x0[1, 3], x1[1, 3]"


def test_inputs_the_op_writes_to_are_never_expanded():
    sweep = _sweep(correct, "add_")
    assert sweep.template.slots[0].mutable and not sweep.template.slots[1].mutable
    for v in sweep.edges():
        x, _ = sweep.case(v).tensor_inputs()
        assert x.layout != "expanded"


def test_hypothesis_search_finds_and_shrinks_a_size_bug():
    sweep = _sweep(buggy, "half_cols")

    def judge(case):
        (x,) = case.tensor_inputs()
        if x.dtype != "float32" or x.layout != "contiguous":
            return None
        return Problem("odd", "odd width") if x.shape[1] % 2 and x.shape[1] > 4 else None

    import time

    found = search(judge, sweep, deadline=time.monotonic() + 60, variants=[], examples=200)
    assert found.failure is not None and found.shrunk
    assert found.case.tensor_inputs()[0].shape[1] == 5, "shrunk to the smallest odd width above 4"


def test_greedy_shrink_keeps_the_kind_and_drops_what_is_not_needed():
    sweep = _sweep(buggy, "scale2")

    def judge(case):
        (x,) = case.tensor_inputs()
        if x.shape[0] == 0 or x.shape[1] == 0:
            return REJECTED
        return Problem("strides", "") if x.layout == "transposed" and x.shape[0] > 1 and x.shape[1] > 1 else None

    import time

    start = Variant((9, 17), layouts=("transposed",), dtypes=(("float32", "float64"),), seed=3)
    case, problem, shrunk = shrink(judge, sweep, start, judge(sweep.case(start)), deadline=time.monotonic() + 30)
    (x,) = case.tensor_inputs()
    assert shrunk and problem.kind == "strides"
    assert (x.shape, x.layout, x.dtype) == ((2, 2), "transposed", "float32")


def test_only_guards_ruling_out_every_nearby_size_are_candidates_for_specializing():
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)

    class Env:
        var_to_val = backed_var_to_val = {s0: 4, s1: 8}  # noqa: RUF012 - a read-only stand-in for a ShapeEnv

    assert _excluded_sizes(sympy.Eq(s0, 4), Env) == (s0, (5, 6, 7, 9))
    assert _excluded_sizes(s0 <= 4, Env) == (s0, (5, 6, 7, 9))
    # Whether the kernel takes those sizes decides (SymbolicFakeCheck); see the quality tests.
    assert _excluded_sizes(s0 > 1, Env) is None
    assert _excluded_sizes(sympy.Ne(s0, 0), Env) is None
    assert _excluded_sizes(sympy.Eq(sympy.Mod(s0, 2), 0), Env) is None
    assert _excluded_sizes(sympy.Eq(s0, s1), Env) is None


def test_calls_file_round_trip_keeps_values_layout_and_types(tmp_path):
    x = torch.randn(3, 4).t()
    calls = [
        OpCall("mylib::op", (x, torch.tensor([True, False]), [1, 2], 0.5, float("inf"), None, torch.float16),
               {"scale": 2, "pair": (1, 2)}, "test_x.py::t"),
        OpCall("mylib::op", (torch.randn(2, 2, dtype=torch.bfloat16).requires_grad_(), torch.arange(3)), {}, "t2"),
        OpCall("mylib::other", (torch.ones(1, 5).expand(3, 5), torch.tensor(0.5), 2j), {}, "t3"),
    ]
    assert write_calls(tmp_path / "calls.jsonl", calls) == 3
    back = read_calls(tmp_path / "calls.jsonl")
    assert [c.op for c in back] == ["mylib::op", "mylib::op", "mylib::other"]
    a = back[0].args
    assert torch.equal(a[0], x) and a[0].stride() == x.stride()
    assert a[1].dtype == torch.bool and a[1].tolist() == [True, False]
    assert a[2:6] == ([1, 2], 0.5, math.inf, None) and a[6] is torch.float16
    assert back[0].kwargs == {"scale": 2, "pair": (1, 2)} and back[0].test == "test_x.py::t"
    assert back[1].args[0].dtype == torch.bfloat16 and back[1].args[0].requires_grad
    assert torch.equal(back[2].args[0], torch.ones(3, 5))
    assert back[2].args[1].shape == () and back[2].args[1].item() == 0.5 and back[2].args[2] == 2j


def test_dedupe_keeps_distinct_signatures_and_caps_per_op():
    calls = [OpCall("a::b", (torch.randn(4, 8),), {}) for _ in range(3)]
    calls += [OpCall("a::b", (torch.randn(n, 8),), {}) for n in range(1, 10)]
    kept = dedupe(calls)
    assert len(kept) == 4 and len({c.args[0].shape for c in kept}) == 4


def test_recorder_copies_inputs_before_a_mutating_call():
    x = torch.zeros(4)
    calls = []
    with CallRecorder({"symfuzz_ok"}, test="t", sink=calls):
        correct.add_(x, torch.ones(4))
        torch.sin(x)  # not in the namespace
    assert [c.op for c in calls] == ["symfuzz_ok::add_"]
    assert torch.equal(calls[0].args[0], torch.zeros(4)) and torch.equal(x, torch.ones(4))


def test_recorder_takes_the_sample_a_test_hands_to_torch_library_opcheck():
    from torch.library import opcheck  # imported as a suite does, before the recorder wraps torch's helper

    x = torch.zeros(4)
    calls = []
    with CallRecorder({"symfuzz_ok"}, test="t", sink=calls):
        opcheck(correct.OPS["add_"], (x, torch.ones(4)), test_utils=("test_schema",))
        opcheck(torch.ops.aten.sin.default, (x,), test_utils=("test_schema",))  # not in the namespace
    assert [c.op for c in calls] == ["symfuzz_ok::add_"], "the sample once, not the calls opcheck itself makes"
    assert torch.equal(calls[0].args[0], torch.zeros(4)), "copied before opcheck ran the op"
    with CallRecorder({"symfuzz_ok"}, sink=calls):
        pass
    opcheck(correct.OPS["add_"], (torch.zeros(3), torch.ones(3)), test_utils=("test_schema",))
    assert len(calls) == 1, "outside a recorder nothing is recorded"


def test_samples_from_the_schema_are_accepted_by_the_kernel():
    args, _ = sample_from_schema(correct.OPS["mm"])
    assert [tuple(a.shape) for a in args] == [(4, 8), (8, 3)]
    args, _ = sample_from_schema(correct.OPS["scaled_add"])
    assert isinstance(args[2], float)


def test_op_names_resolve_and_mistakes_are_usage_errors():
    assert resolve_op("symfuzz_ok::mm") is correct.OPS["mm"]
    assert resolve_op(torch.ops.symfuzz_ok.mm) is correct.OPS["mm"]
    for bad in ("mm", "symfuzz_ok::no_such_op", "no_such_ns::op"):
        with pytest.raises(OpCheckUsageError):
            resolve_op(bad)


def test_tensor_input_describes_itself():
    spec = TensorInput((1, 7), "float32", "transposed", -1.0, 1.0, 3, True)
    assert spec.describe() == "float32[1, 7] transposed requires_grad"
    assert spec.build().requires_grad and spec.build().shape == (1, 7)


def test_recorder_keeps_one_copy_of_a_call_repeated_in_a_loop():
    calls = []
    x = torch.randn(4, 8)
    with CallRecorder({"symfuzz_ok"}, sink=calls):
        for _ in range(100):
            correct.row_softmax(x)
        for n in range(1, 10):
            correct.row_softmax(torch.randn(n, 8))
    assert len(calls) == 4, "one per signature, at most MAX_CALLS_PER_OP per op"


def test_expanded_and_zero_dim_samples_are_checked_as_given():
    import symfuzz.opcheck as opcheck

    x = torch.randn(1, 8).expand(4, 8)
    report = opcheck.check(correct.OPS["scale_by"], [((x, torch.tensor(2.0)), {})], checks=["schema", "faketensor"],
                           budget=20)
    assert not report.error and report.ok, report.format(repro=False)
    from symfuzz.opcheck.checks.common import make_template

    built, _ = make_template(correct.OPS["scale_by"], (x, torch.tensor(2.0)), {}).original().build()
    assert built[0].stride() == (0, 1) and torch.equal(built[0], x)


def test_optional_arguments_keep_their_defaults_in_schema_samples():
    @torch.library.custom_op("symfuzz_test_schema::lin", mutates_args=())
    def lin(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None, scale: float = 1.0) -> torch.Tensor:
        return (x @ w.t()) * scale if b is None else (x @ w.t() + b) * scale

    args, kwargs = sample_from_schema(torch.ops.symfuzz_test_schema.lin.default)
    assert [tuple(a.shape) for a in args] == [(4, 8), (4, 8)] and kwargs == {}
