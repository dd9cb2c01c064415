"""Each oracle and the comparison rules, on hand-made runs (no compiling)."""

import math
import warnings

import pytest
import torch

from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import EffectNode, ExprNode, Input, OpNode, Program
from symfuzz.fuzz import script_runtime
from symfuzz.oracles.crash import crash_oracle
from symfuzz.oracles.differential import differential_oracle
from symfuzz.oracles.lanes.execute import CallResult, Run
from symfuzz.oracles import verdict as verdicts
from symfuzz.oracles.verdict import Verdict

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py


def case():
    program = Program((Input("x0", "float32", ("s0",)),), (OpNode("v1", "relu", ("x0",)),), ("v1",))
    calls = (Call((ArgSpec((3,), "float32", 1),)), Call((ArgSpec((5,), "float32", 2),)))
    return Case(program, Schedule(True, calls))


def ok(*tensors):
    return {"out": (tuple(tensors), ()), "seconds": 0.0}


def err(message="boom", type_="torch._dynamo.exc.BackendCompilerFailed"):
    return {"error": {"type": type_, "message": message, "stage": "inductor", "traceback": ""}, "seconds": 0.0}


def run(*pairs, ref=None):
    calls = [CallResult(e, c, (lambda r=ref: r)) for e, c in pairs]
    return Run("inductor-cpp", calls, ["relu"])


def test_matching_calls_pass_both_oracles():
    t = torch.randn(4)
    r = run((ok(t), ok(t.clone())), (ok(t), ok(t + 1e-7)))
    assert crash_oracle(case(), r).ok
    assert differential_oracle(case(), r).ok


def test_crash_when_only_compiled_raises():
    t = torch.randn(4)
    v = crash_oracle(case(), run((ok(t), ok(t)), (ok(t), err("backend='inductor' raised: IndexError: 17 out of range"))))
    assert not v.ok and v.symptom == "crash" and v.call_index == 1
    assert v.signature.startswith("crash-")


def test_accepts_invalid_when_only_eager_raises():
    t = torch.randn(4)
    v = crash_oracle(case(), run((err("shape mismatch", "builtins.RuntimeError"), ok(t))))
    assert not v.ok and v.symptom == "accepts-invalid"


def test_verdicts_write_their_evidence_as_before_and_read_it_back_typed():
    t = torch.randn(4)
    crash = crash_oracle(case(), run((ok(t), err("backend='inductor' raised: IndexError: 17"))))
    mismatch = differential_oracle(case(), run((ok(t), ok(t + 1))))
    assert isinstance(crash.evidence, verdicts.RaisedError) and crash.evidence.error["type"].endswith("Failed")
    assert crash.to_json()["evidence"] == {"error": err("backend='inductor' raised: IndexError: 17")["error"], "detail": ""}
    assert mismatch.to_json()["evidence"] == {"path": "out[0][0]", "detail": mismatch.evidence.detail, "graphs_at_call": 0}
    for v in (crash, mismatch):
        assert Verdict.from_json(v.to_json()) == v


EVIDENCE_OF = {  # one verdict of each family, as its JSON object has always been written
    "crash": {"error": {"type": "builtins.IndexError", "message": "17", "stage": "runtime", "traceback": ""},
              "detail": ""},
    "value-mismatch": {"path": "out[0][1]", "detail": "1/4 elements differ", "graphs_at_call": 1},
    "excess-recompiles": {"detail": "recompiled although ...", "recompile_reason": "size mismatch at index 0",
                          "guards": ["Eq(s0, 3)"]},
    "unsound-recompile": {"detail": "recompiled although ...", "recompile_reason": "0/1: Unexpected recompilation",
                          "admitted_by": ["0/1"], "reasons": {"<own frame>": ["Unexpected recompilation"]},
                          "guard_manager_accepted": True},
    "unsound-guard": {"detail": "", "path": None, "reused_symptom": "crash", "purpose": "drawn",
                      "guard_manager_accepted": None,
                      "error": {"type": "builtins.IndexError", "message": "17", "stage": "runtime", "traceback": ""}},
    "fake-real-mismatch": {"path": "out[0][0]", "what": "rank", "dim": None, "symbolic": "[s0]", "expected": 1,
                           "actual": 2, "bindings": {"s0": 3}, "hint_sizes": [[2]], "call_sizes": [[3]],
                           "detail": "out[0][0]: fake rank = [s0] = 1 at this call's sizes, eager gave 2"},
    "timeout": {"timeout_seconds": 120.0, "worker_log_tail": ""},
    "process-death": {"cause": "SIGSEGV", "returncode": -11, "worker_log_tail": "Segmentation fault"},
}


@pytest.mark.parametrize("symptom", sorted(EVIDENCE_OF))
def test_each_family_of_evidence_round_trips_with_the_same_keys(symptom):
    data = {"ok": False, "oracle": "x", "symptom": symptom, "stage": "runtime", "signature": f"{symptom}-0",
            "call_index": 1, "evidence": EVIDENCE_OF[symptom]}
    v = Verdict.from_json(data)
    assert type(v.evidence) is not verdicts.Evidence and not v.evidence.extra  # a declared family, every key a field
    assert v.to_json() == data


def test_evidence_of_another_family_is_refused():
    with pytest.raises(ValueError, match="not evidence of timeout"):
        Verdict(ok=False, oracle="x", symptom="timeout", evidence=verdicts.Died(cause="SIGSEGV"))


def test_both_raising_is_not_a_finding():
    assert crash_oracle(case(), run((err(), err()))).ok


def test_value_mismatch_names_the_output_and_is_stable():
    t = torch.randn(4)
    bad = t.clone()
    bad[2] += 1.0
    v1 = differential_oracle(case(), run((ok(t), ok(bad))))
    v2 = differential_oracle(case(), run((ok(t * 3), ok(t * 3 + 5))))
    assert not v1.ok and v1.symptom == "value-mismatch"
    assert "1/4 elements differ" in v1.evidence.detail
    assert v1.signature == v2.signature  # same output op, same lane: same bug


def test_shape_and_dtype_differences_are_metadata_mismatches():
    t = torch.randn(4)
    assert differential_oracle(case(), run((ok(t), ok(t[:3])))).symptom == "metadata-mismatch"
    assert differential_oracle(case(), run((ok(t), ok(t.double())))).symptom == "metadata-mismatch"


@pytest.mark.parametrize("dtype,noise,close", [
    (torch.float32, 1e-6, True), (torch.float32, 1e-2, False),
    (torch.bfloat16, 1e-2, True), (torch.bfloat16, 0.5, False),
    (torch.float16, 1e-3, True), (torch.float64, 1e-9, True), (torch.float64, 1e-5, False),
])
def test_dtype_aware_tolerances(dtype, noise, close):
    e = torch.linspace(-2, 2, 16, dtype=torch.float64).to(dtype)
    c = (e.double() + noise).to(dtype)
    assert script_runtime.tensors_close(e, c) is close


def test_integers_and_bools_must_match_exactly():
    e = torch.arange(5)
    assert script_runtime.tensors_close(e, e.clone())
    assert not script_runtime.tensors_close(e, e + (torch.arange(5) == 4))


def test_fp64_reference_forgives_rounding_but_not_bugs():
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = (exact + torch.tensor([0.05, -0.05, 0.05], dtype=torch.float64)).float()
    rounding = (exact + torch.tensor([-0.06, 0.04, 0.06], dtype=torch.float64)).float()
    wrong = (exact + 1.0).float()
    ref = lambda: ((exact,), ())  # noqa: E731
    assert script_runtime.compare(((eager,), ()), ((rounding,), ()), ref) is None
    assert script_runtime.compare(((eager,), ()), ((wrong,), ()), ref)["symptom"] == "value-mismatch"


def test_discrete_flip_is_forgiven_only_where_eager_itself_is_inexact():
    exact = torch.tensor([0.5, -0.5], dtype=torch.float64)
    eager = torch.tensor([True, False])
    flipped = torch.tensor([True, True])
    # The exact result says index 1 is False, as eager does: compiled is wrong.
    assert script_runtime.compare(((eager,), ()), ((flipped,), ()), lambda: ((exact > 0,), ())) is not None
    # The exact result says True at index 1: eager's own rounding flipped it.
    assert script_runtime.compare(((eager,), ()), ((flipped,), ()), lambda: ((torch.tensor([True, True]),), ())) is None


def test_nan_in_both_is_equal():
    e = torch.tensor([math.nan, 1.0])
    assert script_runtime.compare(((e,), ()), ((e.clone(),), ())) is None


def test_mutated_inputs_are_compared():
    t = torch.randn(3)
    v = differential_oracle(case(), run(({"out": ((t,), (t,)), "seconds": 0}, {"out": ((t,), (t + 1,)), "seconds": 0})))
    assert not v.ok and v.evidence.path.startswith("out[1]")


def test_message_normalization_erases_volatile_parts():
    a = script_runtime.normalize_message("IndexError: index 17 is out of bounds for s0 at 0x7ffe12 in /tmp/x/y.py")
    b = script_runtime.normalize_message("IndexError: index 3 is out of bounds for s12 at 0xdeadbeef in /a/b.py")
    assert a == b


def test_layouts_make_the_requested_strides():
    t = script_runtime.make_arg({"shape": [3, 4], "dtype": "float32", "seed": 1, "layout": {"kind": "transposed", "dims": [0, 1]}})
    assert t.shape == (3, 4) and not t.is_contiguous()
    s = script_runtime.make_arg({"shape": [5], "dtype": "float32", "seed": 1, "layout": {"kind": "strided", "dim": 0, "step": 3}})
    assert s.shape == (5,) and s.stride() == (3,)
    e = script_runtime.make_arg({"shape": [2, 6], "dtype": "int64", "seed": 1, "layout": {"kind": "expanded", "dim": 0}})
    assert e.shape == (2, 6) and e.stride(0) == 0
    z = script_runtime.make_arg({"shape": [0, 3], "dtype": "bool", "seed": 1, "layout": {"kind": "strided", "dim": 0, "step": 2}})
    assert z.shape == (0, 3)


def test_inputs_are_a_pure_function_of_the_seed():
    spec = {"shape": [4, 4], "dtype": "bfloat16", "seed": 7}
    assert torch.equal(script_runtime.make_arg(spec), script_runtime.make_arg(spec))
    assert not torch.equal(script_runtime.make_arg(spec), script_runtime.make_arg({**spec, "seed": 8}))


def test_wrapped_compiler_errors_are_told_apart_by_the_real_error():
    head = "backend='inductor' raised:\n"
    a = script_runtime.normalize_message(head + "IndexError: tuple index out of range\n\nSet TORCHDYNAMO_VERBOSE=1 ...")
    b = script_runtime.normalize_message(head + "ValueRangeError: Invalid ranges [0:-1]")
    assert a != b and "IndexError" in a and "ValueRangeError" in b


def test_reference_runs_in_float64_through_casts_inside_the_program():
    def fn(x, w):
        h = x.to(torch.float16).float()  # an explicit round trip through fp16
        return (torch.mm(h, w.float()), torch.full((2,), 1.5) + h.sum())

    x, w = torch.randn(3, 4), torch.randn(4, 2, dtype=torch.float16)
    record = script_runtime.reference_call(fn, [x, w])
    assert "error" not in record, record.get("error")
    mm, full = record["out"][0]
    assert mm.dtype == torch.float64 and full.dtype == torch.float64
    expected = x.double() @ w.double()  # no fp16 rounding anywhere
    assert torch.allclose(mm, expected)
    assert torch.get_default_dtype() == torch.float32  # restored


def _indexing_case(outputs):
    """``v1 = x0[3]`` (eager raises on a call with fewer than 4 elements), then ``v2 = relu(x0)``."""
    program = Program((Input("x0", "float32", ("s0",)),), (ExprNode("v1", "x0[3]"), OpNode("v2", "relu", ("x0",))),
                      outputs)
    return Case(program, Schedule(True, (Call((ArgSpec((2,), "float32", 1),)),)))


def test_eager_raising_only_in_a_statement_nothing_reads_is_not_accepts_invalid():
    """Dynamo drops a statement nothing reads, even on the eager backend, so compiled returns where
    eager raised: no check was skipped. The same statement read by an output is accepts-invalid."""
    raised = err("index 3 is out of bounds for dimension 0 with size 2", "builtins.IndexError")
    t = torch.randn(2)
    assert crash_oracle(_indexing_case(("v2",)), run((raised, ok(t)))).ok
    v = crash_oracle(_indexing_case(("v2", "v1")), run((raised, ok(t, t))))
    assert not v.ok and v.symptom == "accepts-invalid"
    assert _indexing_case(("v2",)).program.live().body == (OpNode("v2", "relu", ("x0",)),)


def _masked_write_case(before, outputs):
    """``before`` (statements making ``v1``), then ``v1[x1 < 0] = 3`` where eager raises (the mask has
    3 elements, ``v1`` 2), then ``v2 = relu(x0)``."""
    write = EffectNode("setitem_mask", ("v1", "x1"), {"reject": "", "cmp": "< 0", "v": 3})
    program = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s1",))),
                      (*before, write, OpNode("v2", "relu", ("x0",))), outputs)
    return Case(program, Schedule(True, (Call((ArgSpec((2,), "float32", 1), ArgSpec((3,), "float32", 2))),)))


@pytest.mark.parametrize("before, outputs, dead", [
    ((ExprNode("v1", "x0 + 1"),), ("v2",), True),  # a temporary nothing reads after the write
    ((ExprNode("v1", "x0[:]"),), ("v2",), False),  # a view of an input: the caller sees the write
    ((ExprNode("v1", "x0 + 1"),), ("v2", "v1"), False),  # returned
    ((ExprNode("v1", "x0 + 1"), ExprNode("v3", "v1.view(-1)")), ("v2", "v3"), False),  # read after, through a view
])
def test_eager_raising_only_in_an_in_place_write_nobody_sees_is_not_accepts_invalid(before, outputs, dead):
    """Eager raised in ``v1[mask] = 3``. When ``v1`` is a temporary that nothing reads afterwards, nor returns,
    nor aliases, the write is dead code, which compiled may drop: no check was skipped. Whether ``v1``
    aliases something is read from eager's storages, so a view of an input or of a value read later counts."""
    raised = err("The shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2]",
                 "builtins.IndexError")
    t = torch.randn(2)
    v = crash_oracle(_masked_write_case(before, outputs), run((raised, ok(*[t] * len(outputs)))))
    assert v.ok == dead
    assert dead or v.symptom == "accepts-invalid"



@pytest.fixture
def pixel_unshuffle_keeps_its_shape():
    """Plants an eager-only bug: aten::pixel_unshuffle's CPU kernel returns its input unchanged
    (torch 2.13's own kernel does so for an empty input), while its meta function, which the
    compiler follows, moves the factor's square into the channels."""
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch warns that a kernel is overridden: that is the plant)
        lib.impl("pixel_unshuffle", lambda x, factor: x.clone(), "CPU")
    yield
    lib._destroy()
    assert torch.nn.functional.pixel_unshuffle(torch.ones(1, 1, 3, 3), 3).shape == (1, 9, 1, 1), "the plant stayed"


def test_an_eager_kernel_leaving_its_shape_rule_is_named_in_an_accepts_invalid_finding(pixel_unshuffle_keeps_its_shape):
    """Eager's pixel_unshuffle keeps the shape its meta function changes, and the pixel_shuffle
    after it raises in eager; compiled follows the meta function and returns. The verdict is still
    accepts-invalid (eager raised), but its detail names the op eager got wrong, and the short
    repro's reader sees it under the error."""
    from symfuzz.corpus.finding import Finding
    from symfuzz.corpus.short_repro import render_short
    from symfuzz.oracles.lanes.lane import get_lane

    program = Program((Input("x0", "float32", ("s0", 1, 9, 9)),),
                      (ExprNode("v1", "F.pixel_unshuffle(x0, 3)"), ExprNode("v2", "F.pixel_shuffle(v1, 3)")), ("v2",))
    case = Case(program, Schedule(True, (Call((ArgSpec((2, 1, 9, 9), "float32", 1),)),)))
    raised = err("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                 "upscale_factor, but input.size(-3)=1 is not divisible by 9", "builtins.RuntimeError")
    v = crash_oracle(case, run((raised, ok(torch.randn(2, 1, 9, 9)))))
    assert v.symptom == "accepts-invalid"
    assert v.evidence.detail.startswith("eager's aten.pixel_unshuffle.default returned float32[2, 1, 9, 9] where its "
                                        "meta function, the shape rule the compiler follows, gives float32[2, 9, 3, 3]"
                                        ), v.evidence.detail
    finding = Finding(case=case.to_json(), verdict=v, lane=get_lane("inductor-cpp").to_json(),
                      environment={"torch": torch.__version__})
    assert "But eager's aten.pixel_unshuffle.default returned" in " ".join(render_short(finding).split())


def test_a_kernel_raising_on_what_its_shape_rule_accepts_stays_a_skipped_check():
    """An index out of range: eager's kernel checks the values, the meta function cannot. Nothing
    eager returned left a shape rule, so the detail stays the plain one."""
    program = Program((Input("x0", "float32", ("s0",)),), (ExprNode("v1", "x0[torch.tensor([5])]"),), ("v1",))
    case = Case(program, Schedule(True, (Call((ArgSpec((3,), "float32", 1),)),)))
    raised = err("index 5 is out of bounds for dimension 0 with size 3", "builtins.IndexError")
    v = crash_oracle(case, run((raised, ok(torch.randn(1)))))
    assert v.symptom == "accepts-invalid" and v.evidence.detail == "compiled returned a result where eager raised"


def test_a_metadata_mismatch_where_eager_left_its_shape_rule_says_so(pixel_unshuffle_keeps_its_shape):
    """Nothing raises: compiled returns the meta function's shape, eager its kernel's. The verdict is
    a metadata mismatch as before (same signature), and its detail says eager left the rule."""
    program = Program((Input("x0", "float32", ("s0", 1, 9, 9)),), (ExprNode("v1", "F.pixel_unshuffle(x0, 3)"),), ("v1",))
    case = Case(program, Schedule(True, (Call((ArgSpec((2, 1, 9, 9), "float32", 1),)),)))
    r = run((ok(torch.randn(2, 1, 9, 9)), ok(torch.randn(2, 9, 3, 3))))
    v = differential_oracle(case, r)
    assert v.symptom == "metadata-mismatch"
    assert v.evidence.detail.startswith("compiled torch.float32[2, 9, 3, 3], eager torch.float32[2, 1, 9, 9]; but eager's "
                                        "aten.pixel_unshuffle.default returned float32[2, 1, 9, 9]"), v.evidence.detail
    plain = Program((Input("x0", "float32", ("s0", 1, 9, 9)),), (ExprNode("v1", "x0 + 1"),), ("v1",))
    again = differential_oracle(Case(plain, case.schedule), r)
    assert again.signature == v.signature and again.evidence.detail == "compiled torch.float32[2, 9, 3, 3], eager torch.float32[2, 1, 9, 9]"


def test_an_eager_result_off_its_shape_rule_that_nothing_uses_says_nothing():
    """Eager's batch norm in eval mode returns empty saved statistics where its meta function gives
    one per channel; F.batch_norm returns only the normalized tensor, so nobody reads them, and a
    finding in such a program must not blame batch norm."""
    from symfuzz.oracles.eager_meta import MetaShadow

    shadow = MetaShadow()
    with shadow:
        out = torch.nn.functional.batch_norm(torch.randn(2, 3), torch.zeros(3), torch.ones(3), training=False)
    shadow.returned(out)
    if not shadow.suspects:
        pytest.skip("this torch's eager batch norm agrees with its meta function")
    assert shadow.first is None


def test_a_call_passed_over_as_dead_code_is_named_for_the_finding_at_a_later_call():
    """Call 0's eager error is a dead write; a finding at call 1 carries call 0 as passed over."""
    from symfuzz.oracles.crash import dead_code_calls

    case = _masked_write_case((ExprNode("v1", "x0 + 1"),), ("v2",))
    case = Case(case.program, Schedule(True, (*case.schedule.calls, Call((ArgSpec((2,), "float32", 1),
                                                                          ArgSpec((2,), "float32", 2))))))
    raised = err("The shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2]",
                 "builtins.IndexError")
    t = torch.randn(2)
    assert dead_code_calls(case, run((raised, ok(t)), (ok(t), ok(t))), before=1) == [0]
    live = _masked_write_case((ExprNode("v1", "x0 + 1"),), ("v2", "v1"))  # v1 returned: the write is seen
    assert dead_code_calls(live, run((raised, ok(t, t)), (ok(t, t), ok(t, t))), before=1) == []


@pytest.mark.integration  # runs two scripts: compiles on the eager backend, seconds
@pytest.mark.parametrize("script", ["judged", "short"])
def test_the_scripts_pass_over_a_call_the_oracle_passed_over_as_dead_code(tmp_path, script):
    """Eager raises at call 0 in a write to a temporary nobody reads; AOTAutograd drops the write
    (functionalized, then dead), so compiled returns on aot_eager. The oracle passed over it; a finding at call 1 (here nothing is wrong there
    on stock torch) has scripts that pass over it too, and without the finding's list they stop."""
    import subprocess
    import sys

    from symfuzz.corpus.finding import Finding
    from symfuzz.corpus.scripts import render_repro
    from symfuzz.corpus.short_repro import render_short
    from symfuzz.oracles.lanes.lane import get_lane
    from symfuzz.oracles.verdict import OutputMismatch

    base = _masked_write_case((ExprNode("v1", "x0 + 1"),), ("v2",))
    case = Case(base.program, Schedule(True, (*base.schedule.calls, Call((ArgSpec((2,), "float32", 1),
                                                                          ArgSpec((2,), "float32", 2))))))
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="runtime",
                      signature="value-mismatch-0123456789", call_index=1,
                      evidence=OutputMismatch(path="out[0][0]", detail="1/2 elements differ"))
    render = render_repro if script == "judged" else render_short
    results = {}
    for dead in ([0], None):
        finding = Finding(case=case.to_json(), verdict=verdict, lane=get_lane("aot_eager").to_json(),
                          triage={"stage": "aot", **({"dead_code_calls": dead} if dead else {})})
        path = tmp_path / f"{script}-{bool(dead)}.py"
        path.write_text(render(finding))
        results[bool(dead)] = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    passed, stopped = results[True], results[False]
    assert passed.returncode == 0, passed.stdout[-2000:] + passed.stderr[-2000:]
    said = stopped.stdout + stopped.stderr
    assert stopped.returncode == 1 and ("call 0: accepts-invalid" in said or "call 0: compiled returned where eager raised" in said), \
        said[-3000:]
    if script == "judged":
        assert "call 0: eager raised only in code nobody reads" in passed.stdout
