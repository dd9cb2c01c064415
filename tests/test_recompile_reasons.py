"""Recompile explanations on real torch behaviour: small programs, the eager backend.

Each test makes a few calls to one compiled function the way the campaign
does (``RecompileWatch`` asks the guard managers before a call and explains,
after it, a compile they did not predict), and checks the class Dynamo's
own records lead to.
"""

import torch
from torch._dynamo.backends.registry import lookup_backend

from symfuzz.fuzz import script_runtime
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import GraphBreakNode, Input, OpNode, Program
from symfuzz.oracles.lanes.execute import execute
from symfuzz.oracles.lanes.guards import GuardRecorder
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.lanes.recompile_reasons import EXPLAINED, UNSOUND, RecompileWatch, reason_key
from symfuzz.oracles.recompiles import recompiles_oracle
from symfuzz.oracles.verdict import UnsoundRecompile, Verdict



def watched_calls(fn, calls, around=None):
    """[(prediction, record)] of each call through ``torch.compile(fn)``; ``around(i)``
    (optional) is a context manager entered around the compiled call only."""
    torch._dynamo.reset()
    recorder = GuardRecorder(lookup_backend("eager"))
    compiled = torch.compile(fn, backend=recorder)
    watch = RecompileWatch(fn)
    out = []
    try:
        for index, args in enumerate(calls):
            recorder.call_index = index
            predicted = watch.before_call(index, args)
            graphs, entries = script_runtime.graph_count(), script_runtime.cache_entries(fn)
            if around is not None:
                with around(index):
                    compiled(*args)
            else:
                compiled(*args)
            record = {"graphs": script_runtime.graph_count() - graphs,
                      "new_entries": script_runtime.cache_entries(fn) - entries}
            watch.after_call(index, record, [r.code_name for r in recorder.compiles if r.call_index == index])
            out.append((predicted, record))
    finally:
        torch._dynamo.reset()
    return out


def resumed(x, y):
    a = x.sum()
    torch._dynamo.graph_break()
    return a + y.sum()  # y is first read after the graph break: the resume function guards it


def branchy(x):
    if x.sum() > 0:  # data-dependent: each branch continues in its own resume function
        return x + 1
    return x - 1


def nested_helper(x):
    z = x * 3
    torch._dynamo.graph_break()
    return z * 2


def nesting(x):
    if x.sum() > 0:
        return x + 1
    return nested_helper(x)  # first called at the second call: its own frame compiles then


def plain(x, k):
    return x.sum(0) * k


def test_a_reused_call_is_not_explained():
    calls = watched_calls(plain, [(torch.ones(3, 2), 2), (torch.ones(3, 2), 2)])
    predicted, record = calls[1]
    assert predicted is True and record["graphs"] == 0 and "recompile" not in record


def test_a_resume_function_that_fails_its_guards_is_a_resume_recompile():
    calls = watched_calls(resumed, [(torch.ones(3), torch.ones(4)), (torch.ones(3), torch.ones(5))])
    predicted, record = calls[1]
    assert predicted is True and record["graphs"] > 0 and record["new_entries"] == 0
    explanation = record["recompile"]
    assert explanation["class"] == "resume-recompile" and not explanation["unsound"]
    (name, reasons), = explanation["reasons"].items()
    assert name.startswith("torch_dynamo_resume_in_resumed") and "size mismatch" in reasons[0]


def test_the_first_compile_of_the_other_branch_is_a_resume_first_compile():
    calls = watched_calls(branchy, [(torch.ones(3),), (-torch.ones(3),)])
    predicted, record = calls[1]
    assert predicted is True
    assert record["recompile"]["class"] == "resume-first-compile"
    assert record["recompile"]["reasons"] == {}


def test_a_function_first_called_later_is_a_nested_frame():
    calls = watched_calls(nesting, [(torch.ones(3),), (-torch.ones(3),)])
    explanation = calls[1][1]["recompile"]
    assert explanation["class"] == "nested-frame"
    assert "nested_helper" in explanation["frames"]
    assert {"nested-frame", "resume-first-compile", "resume-recompile"} <= set(EXPLAINED)


def test_without_frame_names_a_first_compile_is_a_new_frame():
    """A repro script has no recording backend: the class is coarser, never unsound."""
    torch._dynamo.reset()
    compiled = torch.compile(branchy, backend="eager")
    watch = RecompileWatch(branchy)
    for index, args in enumerate([(torch.ones(3),), (-torch.ones(3),)]):
        watch.before_call(index, args)
        graphs, entries = script_runtime.graph_count(), script_runtime.cache_entries(branchy)
        compiled(*args)
        record = {"graphs": script_runtime.graph_count() - graphs,
                  "new_entries": script_runtime.cache_entries(branchy) - entries}
        watch.after_call(index, record)
    torch._dynamo.reset()
    assert record["recompile"]["class"] == "new-frame" and not record["recompile"]["unsound"]


def test_state_changed_between_the_check_and_the_frame_is_unsound():
    """The guard managers accept the call with grad enabled; the call itself runs
    under no_grad, so the global-state guard fails at frame entry and the
    program's own frame recompiles: the shape of an unsound recompile."""
    x = torch.ones(3, 2)
    calls = watched_calls(plain, [(x, 2), (x, 2)],
                          around=lambda i: torch.no_grad() if i == 1 else torch.enable_grad())
    predicted, record = calls[1]
    assert predicted is True and record["new_entries"] == 1
    explanation = record["recompile"]
    assert explanation["class"] == UNSOUND and explanation["unsound"]
    assert explanation["admitted_by"] == ["0/0"]
    assert "grad_mode" in explanation["key"] and not explanation["key"].startswith("N/N")
    assert explanation["reason"].startswith("0/0:")
    failure, key = script_runtime.judge_schedule_call(plain, None, [{"args": []}] * 2, 1, {"out": 1}, {"out": 1, **record})
    assert failure["symptom"] == "unsound-recompile" and key == explanation["key"]


def test_reason_key_drops_the_compile_id_and_dynamos_plea():
    assert reason_key("3/7: tensor 'x0' size mismatch at index 0. expected 5, actual 7") == \
        reason_key("0/1: tensor 'x1' size mismatch at index 1. expected 2, actual 9")
    assert reason_key("0/0: Unexpected recompilation: runtime guards failed. Please open an issue: https://x") == \
        "Unexpected recompilation: runtime guards failed."


def test_the_verdict_evidence_round_trips_as_its_family():
    verdict = Verdict(False, "recompiles", "unsound-recompile", "guard", "unsound-recompile-0123456789", 3,
                      UnsoundRecompile(detail="d", recompile_reason="0/1: r", admitted_by=["0/1"], reasons={"<own frame>": ["r"]}))
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict and isinstance(again.evidence, UnsoundRecompile)
    assert again.evidence.guard_manager_accepted is True


def test_execute_counts_a_resume_recompile_as_explained_and_reports_an_unsound_one():
    """x1 is first read after the graph break, so only the resume function guards
    its size: the program's frame reuses its graph, the resume function recompiles."""
    program = Program((Input("x0", "float32", ("s0",)), Input("x1", "float32", ("s1",))),
                      (OpNode("v1", "relu", ("x0",), {}), GraphBreakNode(), OpNode("v2", "sum", ("x1",), {})),
                      ("v1", "v2"))
    calls = tuple(Call((ArgSpec((3,), "float32", 1), ArgSpec((n,), "float32", 2))) for n in (4, 5))
    run = execute(Case(program, Schedule(None, calls)), get_lane("eager"))
    assert run.calls[1].predicted_reuse is True and run.calls[1].graphs > 0
    assert run.calls[1].compiled["recompile"]["class"] == "resume-recompile"
    assert {k: run.guards[k] for k in ("unpredicted_recompiles", "recompiles_explained", "recompiles_unexplained",
                                       "unexplained_recompiles", "recompile_classes")} == {
        "unpredicted_recompiles": 1, "recompiles_explained": 1, "recompiles_unexplained": 0,
        "unexplained_recompiles": 0, "recompile_classes": {"resume-recompile": 1}}
    assert recompiles_oracle(run.case, run).ok
    # The same run, with the explanation of a real unsound recompile (see the grad-mode test) at call 1.
    x = torch.ones(3, 2)
    unsound = watched_calls(plain, [(x, 2), (x, 2)], around=lambda i: torch.no_grad() if i == 1 else torch.enable_grad())
    run.calls[1].compiled["recompile"] = unsound[1][1]["recompile"]
    verdict = recompiles_oracle(run.case, run)
    assert (verdict.symptom, verdict.stage, verdict.call_index) == ("unsound-recompile", "guard", 1)
    assert verdict.signature == script_runtime.signature("unsound-recompile", "eager", unsound[1][1]["recompile"]["key"])
    assert verdict.evidence.admitted_by == ["0/0"] and "grad_mode" in verdict.evidence.recompile_reason
