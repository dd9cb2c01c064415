"""Finding-path minifier passes, the short repro, and `symfuzz minify` errors (fast: nothing compiles
except in the short-repro test, on the Dynamo-only lane)."""

import json
import os
import subprocess
import sys

from conftest import ROOT
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.store import FindingStore
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.minifier import case_passes as passes
from symfuzz.minifier.case_subject import CaseSubject, dynamic_dims
from symfuzz.minifier.compact import compact_matches, render_compact
from symfuzz.minifier.driver import QueryOutcome
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import OutputMismatch, RaisedError, Verdict
from symfuzz.corpus.inductor_cache import fresh_cache


def toy_case(sizes=(5, 8), dynamic=None, marks=None):
    program = Program(
        inputs=(Input("x0", "float32", ("s0", 4)), Input("x1", "float32", ("s0", 4))),
        body=(OpNode("v1", "abs", ("x0",)), OpNode("v2", "add", ("v1", "x1"), {"alpha": 1}), OpNode("v3", "relu", ("x1",))),
        outputs=("v2", "v3"),
    )
    # Marks go on both inputs: they share s0, and marking one of two tied dims is refused by torch.
    calls = tuple(Call((ArgSpec((n, 4), "float32", 1, marks=dict(marks or {})),
                        ArgSpec((n, 4), "float32", 2, marks=dict(marks or {})))) for n in sizes)
    return Case(program, Schedule(dynamic, calls))


def subject(case, symptom="value-mismatch", path="out[0][0]", call_index=1, lane="eager"):
    if symptom in ("crash", "accepts-invalid"):
        oracle, evidence = "crash", RaisedError(error={"type": "RuntimeError", "message": "made up"})
    else:
        oracle, evidence = "differential", OutputMismatch(path=path, detail="made up")
    verdict = Verdict(ok=False, oracle=oracle, symptom=symptom, stage="runtime",
                      signature=f"{symptom}-0123456789", call_index=call_index, evidence=evidence)
    return CaseSubject(case, verdict, get_lane(lane).to_json(), {"torch": "x"})


def test_keep_one_output_tries_the_failing_output_first_and_drops_dead_inputs():
    first = next(passes.keep_one_output(subject(toy_case(), path="out[0][1]")))
    assert first.case.program.outputs == ("v3",)
    assert [i.name for i in first.case.program.inputs] == ["x1"]
    assert [len(c.args) for c in first.case.schedule.calls] == [1, 1]
    assert first.cost() < subject(toy_case()).cost()


def test_an_op_output_replaced_by_an_input_stays_tied_to_its_symbol():
    case = passes.replace_with_input(toy_case(), "v1")
    fresh = case.program.inputs[-1]
    assert fresh.name == "v1" and fresh.dims == ("s0", 4)  # tied to s0, so still dynamic with it
    assert [c.args[-1].shape for c in case.schedule.calls] == [(5, 4), (8, 4)]
    assert "v1 =" not in case.source


def test_a_fresh_input_copies_the_marks_of_its_symbol():
    case = passes.replace_with_input(toy_case(marks={0: {"mark": "dynamic"}}), "v1")
    assert all(c.args[-1].marks == {0: {"mark": "dynamic"}} for c in case.schedule.calls)


def test_dropping_a_unary_op_bypasses_it():
    case = toy_case()
    candidate = passes.without_nodes(case, [0])  # v1 = abs(x0): readers get x0
    assert "torch.abs" not in candidate.source and "torch.add(x0, x1," in candidate.source


def test_shrinking_keeps_the_order_of_sizes_across_calls():
    first = next(passes.shrink_sizes(subject(toy_case(sizes=(9, 5, 9)))))
    assert [c.args[0].shape[0] for c in first.case.schedule.calls] == [3, 2, 3]
    assert [c.args[1].shape[0] for c in first.case.schedule.calls] == [3, 2, 3]  # tied dims move together


def test_dropping_calls_keeps_the_failing_call_index_right():
    s = subject(toy_case(sizes=(5, 6, 7)), call_index=2)
    candidates = list(passes.drop_calls(s))
    kept_last = next(c for c in candidates if [a.args[0].shape[0] for a in c.case.schedule.calls] == [7])
    assert kept_last.verdict.call_index == 0


def test_plausible_rejects_candidates_eager_cannot_run():
    good = subject(toy_case())
    assert good.plausible()
    bad_case = passes.set_constant(toy_case(), 1, 1, 3)  # x1 is now (n, 3): add(v1, x1) cannot broadcast
    assert not subject(bad_case).plausible()
    assert subject(bad_case, symptom="accepts-invalid").plausible()  # eager must raise there


def test_dynamic_dims():
    assert dynamic_dims(toy_case(dynamic=True)) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert dynamic_dims(toy_case(sizes=(5, 8), dynamic=None)) == {(0, 0), (1, 0)}  # automatic: sizes changed
    assert dynamic_dims(toy_case(sizes=(5, 5), dynamic=None)) == set()
    assert dynamic_dims(toy_case(sizes=(5, 5), marks={1: {"mark": "dynamic"}})) == {(0, 1), (1, 1)}


def _traceback(line, exception):
    return f"Traceback (most recent call last):\n  File \"repro.py\", line 30, in main\n    {line}\n{exception}\n"


def test_short_repro_runs_and_judges(tmp_path):
    """On the Dynamo-only lane nothing is wrong: the short repro says so and exits 0."""
    s = subject(toy_case(marks={0: {"mark": "dynamic"}}))
    script = render_compact(s)
    assert "torch._dynamo.mark_dynamic(args[1], 0)" in script and "def fn(x0, x1):" in script
    assert script.startswith('"""value-mismatch') and "Minified by symfuzz from finding value-mismatch" in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compiled matches eager at every call" in proc.stdout
    ok = QueryOutcome(0, None, proc.stdout + proc.stderr, 1.0)
    assert not compact_matches(s, ok)
    failing = QueryOutcome(1, None, _traceback('check(f"call {i}: outputs", actual, expected)',
                                                "AssertionError: call 1: outputs [0]: Tensor-likes are not close!"), 1.0)
    assert compact_matches(s, failing)
    assert not compact_matches(subject(toy_case(), symptom="crash"), failing)


def test_the_short_repro_of_a_minified_case_is_plain_and_fails_on_a_wrong_compiled_result(tmp_path):
    """No judging machinery in it (no float64 reference, no rounding explainer: judge.py has them);
    a compiled function planted with a wrong first output fails it at that call."""
    floats = render_compact(subject(toy_case()))
    assert not any(m in floats for m in ("RoundingShadow", "float64_call", "reference_call", "SYMFUZZ-RESULT"))
    assert len(floats.splitlines()) <= 60, floats
    path = tmp_path / "repro.py"
    path.write_text(floats)
    plant = ("import runpy, torch\n"
             "compile = torch.compile\n"
             "def planted(fn, **kw):\n"
             "    compiled = compile(fn, **kw)\n"
             "    return lambda *a: (lambda out: (out[0] + 0.5,) + tuple(out[1:]))(compiled(*a))\n"
             "torch.compile = planted\n"
             f"runpy.run_path({str(path)!r}, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", plant], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "c")})
    assert proc.returncode == 1 and "AssertionError: call 0: outputs [0]" in proc.stderr, proc.stderr[-2000:]
    assert compact_matches(subject(toy_case(), call_index=0),
                           QueryOutcome(proc.returncode, None, proc.stdout + proc.stderr, 1.0))


def test_a_crash_that_is_an_assertion_error_is_told_from_the_repros_own_checks():
    """Dynamo raises AssertionError for a guard that fails where it was made; the short
    repro's own checks raise AssertionError too, and are not that crash."""
    s = subject(toy_case(), symptom="crash")
    s.verdict.evidence.error["type"] = "builtins.AssertionError"
    crashed = QueryOutcome(1, None, _traceback("actual = compiled(*args)",
                                               "AssertionError: Guard failed on the same frame it was created."), 1.0)
    assert compact_matches(s, crashed)
    mismatch = QueryOutcome(1, None, _traceback('check(f"call {i}: outputs", actual, expected)',
                                                "AssertionError: call 1: outputs [0]: not close!"), 1.0)
    assert not compact_matches(s, mismatch)


def test_a_crash_is_recognized_under_dynamos_hints_and_a_long_message():
    """Inductor's errors come wrapped, with the message's later lines and Dynamo's hint after them."""
    s = subject(toy_case(), symptom="crash")
    s.verdict.evidence.error["type"] = "torch._inductor.exc.InductorError"
    text = ("Traceback (most recent call last):\n    actual = compiled(*args)\n"
            "torch._inductor.exc.InductorError: LoweringException: KeyError: 'unbacked_bindings'\n"
            "KeyError: 'unbacked_bindings'\n"
            "  target: aten._local_scalar_dense.default\n  ))KeyError: 'unbacked_bindings'\nFound from : \n"
            "   File \"repro.py\", line 27, in fn\n\n"
            "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug)")
    assert compact_matches(s, QueryOutcome(1, None, text, 1.0))
    other = text.replace("torch._inductor.exc.InductorError:", "torch._dynamo.exc.Unsupported:")
    assert not compact_matches(s, QueryOutcome(1, None, other, 1.0))


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "symfuzz.cli", "minify", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_cli_refuses_bad_input_without_a_traceback(tmp_path):
    proc = run_cli(str(tmp_path / "missing"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "notes.txt").write_text("hi")
    proc = run_cli(str(tmp_path / "notes.txt"))
    assert proc.returncode == 2 and "neither a finding folder" in proc.stderr
    proc = run_cli(str(tmp_path), "--accuracy", "--match", "x")
    assert proc.returncode == 2 and "not allowed with" in proc.stderr


def test_cli_says_how_to_check_by_hand_when_the_finding_does_not_fail(tmp_path):
    # A finding whose case is fine on unmodified torch (its verdict was made up).
    s = subject(toy_case(sizes=(5,)), call_index=0)
    FindingStore(tmp_path / "f").add(Finding(case=s.case.to_json(), verdict=s.verdict, lane=s.lane))
    folder = tmp_path / "f" / s.verdict.signature
    proc = run_cli(str(folder), "--budget", "2m")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "does not fail" in proc.stderr and f"python {folder / 'repro.py'}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads((folder / "finding.json").read_text())["signature"] == s.verdict.signature


def test_short_repro_of_accepts_invalid_raises_only_where_compiled_returns(tmp_path):
    """Call 0 is valid (compared as usual); call 1 makes eager raise: the script must
    say accepts-invalid there only if compiled returns. On the Dynamo-only lane it raises too,
    which is no bug (the judge has it so): the script passes."""
    case = passes.set_constant(toy_case(sizes=(5, 6)), 1, 1, 4)
    calls = list(case.schedule.calls)
    bad = calls[1].args[1]
    calls[1] = Call((calls[1].args[0], ArgSpec((6, 3), bad.dtype, bad.seed)))
    from dataclasses import replace

    case = replace(case, schedule=replace(case.schedule, calls=tuple(calls)))
    s = subject(case, symptom="accepts-invalid", call_index=1)
    path = tmp_path / "repro.py"
    path.write_text(render_compact(s))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compiled matches eager at every call" in proc.stdout  # compiled raised as well: not this bug
    assert not compact_matches(s, QueryOutcome(0, None, proc.stdout + proc.stderr, 1.0))


def test_equal_constant_dims_shrink_together():
    """x0 (s0, 4) + x1 (s0, 4): shrinking one 4 alone breaks the add; both at once does not."""
    candidates = list(passes.shrink_sizes(subject(toy_case())))
    together = [c for c in candidates
                if [i.dims[1] for i in c.case.program.inputs] == [2, 2]
                and all(a.shape[1] == 2 for call in c.case.schedule.calls for a in call.args)]
    assert together and together[0].plausible()
    alone = [c for c in candidates if [i.dims[1] for i in c.case.program.inputs] == [2, 4]]
    assert alone and not alone[0].plausible()


def test_a_candidate_program_the_ir_refuses_to_read_back_is_not_plausible_and_not_an_error():
    # A pass that writes what no generated program holds (an expression reading the module's
    # `training` flag) made the whole minify stop with ValueError; it is one refused candidate.
    from symfuzz.minifier.case_eager import _values_at

    assert _values_at('{"inputs": "not a program"}', '{"args": []}') == {}
