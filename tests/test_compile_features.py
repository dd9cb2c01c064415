"""Name-free features of what the compiler did with a case (oracles/lanes/compile_features.py,
oracles/lanes/feature_erasure.py).

The erasure helpers and the hook machinery are tested alone (no compile); the tests
marked integration compile small programs on the inductor-cpp lane through ``execute``.
"""

import re

import pytest
import sympy
from torch.utils._sympy.functions import FloorDiv, Max, ModularIndexing, PythonMod, Where
from torch.utils._sympy.numbers import int_oo

from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import ExprNode, GraphBreakNode, Input, OpNode, Program
from symfuzz.oracles.lanes import compile_features, feature_erasure
from symfuzz.oracles.lanes.compile_features import FeatureCollector, Hook
from symfuzz.oracles.lanes.feature_erasure import bucket, erase, graph_break_kind, index_forms, number_token, source_kind
from symfuzz.oracles.lanes.execute import execute
from symfuzz.oracles.lanes.lane import get_lane

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py

s0, s1, u0 = sympy.symbols("s0 s1 u0", integer=True, positive=True)
p0, x0 = sympy.symbols("p0 x0", integer=True, nonnegative=True)  # loop index variables


# ---------------------------------------------------------------- erasure


def test_numbers_keep_zero_and_one_and_erase_the_rest():
    assert [number_token(v) for v in (0, 1, -1, 7, 2.5, sympy.Integer(64), sympy.Float(1.0))] == \
        ["0", "1", "-1", "c", "c", "c", "1"]
    assert (number_token(int_oo), number_token(-int_oo), number_token(sympy.oo)) == ("oo", "-oo", "oo")


def test_guards_erase_symbols_and_numbers_canonically():
    assert erase(sympy.Eq(sympy.Mod(s0, 4), 0)) == "Eq(Mod(s,c),0)"
    assert erase(sympy.Ne(s0 * s1, s0)) == "Ne(s,s*s)"  # commutative operands sorted
    assert erase(s0 <= 64) == "s <= c"
    assert erase(s0 >= 2) == erase(2 <= s0) == "c <= s"  # one spelling per relation
    assert erase(sympy.Eq(s0, s1)) == erase(sympy.Eq(s1, s0))
    assert erase(s0 + 3) == erase(s1 + 5) == "s+c"
    assert erase(sympy.Eq(u0, 1)) == "Eq(u,1)"  # unbacked symbols stay apart from backed ones
    deep = s0
    for _ in range(40):
        deep = FloorDiv(deep + s1, 3)
    assert len(erase(deep)) <= feature_erasure.MAX_CHARS
    for text in (erase(sympy.Eq(sympy.Mod(17 * s0 + 5, 12), 0)), erase(Max(s1, 12) > 100)):
        assert not re.search(r"\d", text.replace("0", "").replace("1", ""))
        assert "s0" not in text and "s1" not in text


def test_index_forms_say_whether_a_divisor_is_symbolic():
    assert index_forms(ModularIndexing(p0, s0, 4)) == {"ModularIndexing[symbolic-divisor]",
                                                       "ModularIndexing[const-modulus]"}
    assert index_forms(FloorDiv(p0, 4) + s1 * p0) == {"FloorDiv[const-divisor]", "affine[symbolic-stride]"}
    assert "ModularIndexing[one-divisor]" in index_forms(ModularIndexing(x0, 1, s0 * s1))
    assert "ModularIndexing[symbolic-modulus]" in index_forms(ModularIndexing(x0, 1, s0 * s1))
    assert index_forms(PythonMod(p0, s0)) == {"PythonMod[symbolic-modulus]"}
    assert index_forms(Max(1, FloorDiv(s0, 4))) == {"Max[one-bound]", "Max[symbolic-bound]", "FloorDiv[const-divisor]"}
    assert "Where" in index_forms(Where(p0 < s0, p0, 0))
    assert index_forms(p0 + 3) == frozenset()
    assert "indirect" in index_forms(sympy.Symbol("tmp3") * 4 + p0)


def test_graph_breaks_sources_and_buckets_are_name_free():
    assert graph_break_kind("Failed to trace builtin operator\n  Explanation: `print` 3 args") == \
        "Failed to trace builtin operator"
    assert graph_break_kind("call_function BuiltinVariable(print) 'x0' [2]") == "call_function BuiltinVariable(print) ? [#]"
    assert graph_break_kind("Call to `torch._dynamo.graph_break()`") == "Call to `torch._dynamo.graph_break()`"
    assert source_kind("L['x'].size()[1]") == ("L['x']", "size")
    assert source_kind("L['x'].stride()[0]") == ("L['x']", "stride")
    assert source_kind("L['k']") == ("L['k']", "value")
    assert [bucket(n) for n in (0, 1, 2, 3, 4, 9)] == ["0", "1", "2-3", "2-3", "4-7", "8+"]


# ---------------------------------------------------------------- the collector and its hooks


def test_families_are_capped_and_overflow_is_counted():
    collector = FeatureCollector(cap=3)
    collector.add_all("guard", ["a", "b", "c", "d", "a"])
    features = collector.features()
    assert features["guard"] == ["a", "b", "c"]
    assert features["collector"] == ["overflow:guard"]


class Target:
    """A stand-in for a torch class a hook wraps."""

    def work(self, value):
        return value * 2


def _observe_work(collector, out, target, value):
    if value < 0:
        raise ValueError("the observer failed")
    collector.add("test", f"work:{number_token(out)}")


def test_hooks_exist_only_while_active_and_their_errors_never_escape(monkeypatch):
    hooks = (Hook(__name__, "Target", "work", compile_features._after(_observe_work)),
             Hook(__name__, "Target", "missing_in_this_version", compile_features._after(_observe_work)),
             Hook("no_such_module_here", "", "anything", compile_features._after(_observe_work)))
    monkeypatch.setattr(compile_features, "HOOKS", hooks)
    original = Target.__dict__["work"]
    collector = FeatureCollector()
    with collector.active():
        assert Target.__dict__["work"] is not original
        assert Target().work(0) == 0
        assert Target().work(-3) == -6  # the observer raises; the call's own result is unchanged
    assert Target.__dict__["work"] is original and not hasattr(Target, "missing_in_this_version")
    Target().work(5)  # not active: not seen
    assert collector.features() == {"collector": ["error:ValueError"], "test": ["work:0"]}


def test_every_hook_has_a_target_in_this_torch():
    assert len(compile_features.hooks_available()) == len(compile_features.HOOKS)


def test_a_failing_reader_is_counted_not_raised():
    collector = FeatureCollector()
    collector.after_compile(object(), [], object(), None)  # nothing a reader expects
    assert set(collector.features().get("collector", [])) <= {"error:AttributeError", "error:TypeError"}


# ---------------------------------------------------------------- real compiles


def _case(program, shapes_per_call, dynamic=True, config=None):
    calls = tuple(Call(tuple(ArgSpec(tuple(s), "float32", 10 * i + j) for j, s in enumerate(shapes)))
                  for i, shapes in enumerate(shapes_per_call))
    return Case(program, Schedule(dynamic, calls, config or {}))


def _cpp_lane():
    lane = get_lane("inductor-cpp")
    reason = lane.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return lane


# A transpose reshaped by a size: Inductor indexes the input through ModularIndexing and
# FloorDiv whose divisors are size symbols; nonzero is a fallback kernel.
VIEWS = Program(
    (Input("x0", "float32", ("s0", 8)), Input("x1", "float32", ("s1",))),
    (ExprNode("v1", "x0.t().reshape(-1, x0.size(0) // 2) * 2"), ExprNode("v2", "torch.nonzero(x1 > 0).float().sum()")),
    ("v1", "v2"),
)
CAPTURE = {"dynamo": {"capture_dynamic_output_shape_ops": True}}


@pytest.mark.integration
def test_a_compile_on_the_cpp_lane_yields_name_free_features():
    run = execute(_case(VIEWS, [[(6, 8), (5,)], [(10, 8), (7,)]], config=CAPTURE), _cpp_lane())
    assert all("error" not in c.compiled for c in run.calls)
    features = run.features
    assert {"ModularIndexing[symbolic-divisor]", "FloorDiv[symbolic-divisor]"} & set(features["index"])
    assert features["guard"]
    for text in features["guard"] + features.get("assert", []):
        assert not re.search(r"\b[su]\d+\b", text), text
        assert not re.search(r"[2-9]|\d\d", text), text  # only 0 and 1 survive erasure
    assert "fallback:aten.nonzero.default" in features["lowering"]
    assert any(f.startswith("lowered:aten.") for f in features["lowering"])
    assert "created:nonzero" in features["unbacked"]
    assert "graph:inference" in features["aot"]
    assert not features.get("collector")
    assert all(features[family] == sorted(features[family]) for family in features)
    assert all(len(items) <= compile_features.CAP for items in features.values())
    assert not compile_features._ACTIVE and not compile_features._INSTALLED  # the hooks are gone


def _broken(*args, **kwargs):
    raise RuntimeError("the collector failed")


@pytest.mark.integration
def test_a_failing_collector_does_not_break_the_compile(monkeypatch):
    lane = _cpp_lane()
    monkeypatch.setattr(compile_features, "index_forms", _broken)  # inside the Inductor hooks
    monkeypatch.setattr(compile_features, "erase", _broken)  # inside the ShapeEnv reader
    run = execute(_case(VIEWS, [[(6, 8), (5,)], [(10, 8), (7,)]], config=CAPTURE), lane)
    assert all("error" not in c.compiled for c in run.calls)
    assert run.features["collector"] == ["error:RuntimeError"]
    assert "index" not in run.features and "specialize" in run.features  # what did not fail is still there
    assert any(f.startswith("lowered:") for f in run.features["lowering"])


@pytest.mark.integration
def test_graph_breaks_and_recompile_classes_are_features_on_the_eager_lane():
    """x1 is first read after the graph break: the resume function recompiles for its new size."""
    program = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s1",))),
                      (OpNode("v1", "relu", ("x0",), {}), GraphBreakNode(), OpNode("v2", "sum", ("x1",), {})),
                      ("v1", "v2"))
    calls = tuple(Call((ArgSpec((3,), "float32", 1), ArgSpec((n,), "float32", 2))) for n in (4, 5))
    run = execute(Case(program, Schedule(None, calls)), get_lane("eager"))
    assert run.features["recompile"] == ["resume-recompile"]
    assert any(f.startswith("break:") for f in run.features["dynamo"])
    assert "automatic-dynamic:static->dynamic" in run.features["specialize"]
    assert not {"index", "lowering"} & set(run.features)  # no Inductor on this lane
