"""`symfuzz report --issue FINDING`: a finding as an upstream bug report (symfuzz/issue_report.py)."""

from __future__ import annotations

import json

from symfuzz.cli import main
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.store import FindingStore
from symfuzz.fuzz.case import ArgSpec, Call, Case, Schedule
from symfuzz.fuzz.ir import Input, OpNode, Program
from symfuzz.issue_report import issue_report
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import OutputMismatch, RaisedError, Verdict
from symfuzz.report import describe

UNIT_TIER = True
ENVIRONMENT = {"torch": "2.13.0+cpu", "torch_git": "cf30153", "python": "3.11.7", "triton": "3.8.0",
               "platform": "Linux-x86_64"}


def _finding(symptom="value-mismatch", evidence=None, triage=None):
    program = Program(inputs=(Input("x0", "float32", ("s0", 4)),), body=(OpNode("v1", "abs", ("x0",)),),
                      outputs=("v1",))
    case = Case(program, Schedule(None, tuple(Call((ArgSpec((n, 4), "float32", 1),)) for n in (5, 8))))
    verdict = Verdict(ok=False, oracle="differential", symptom=symptom, stage="inductor",
                      signature=f"{symptom}-0123456789", call_index=1,
                      evidence=evidence or OutputMismatch(path="out[0][0]", detail="2/32 elements differ"))
    return Finding(case=case.to_json(), verdict=verdict, lane=get_lane("inductor-cpp").to_json(),
                   environment=ENVIRONMENT, triage=triage or {"stage": "inductor",
                                                              "lanes": {"eager": "pass", "aot_eager": "pass"}})


def test_a_finding_reads_as_an_upstream_issue(tmp_path):
    FindingStore(tmp_path).add(_finding())
    text = issue_report(tmp_path / "value-mismatch-0123456789")
    lines = text.splitlines()
    assert lines[0] == "### torch.compile (backend=inductor, automatic dynamic shapes, cpu) returns wrong values"
    script = text[text.index("```python\n") + 10:text.index("\n```\n")]
    assert script == (tmp_path / "value-mismatch-0123456789" / "repro.py").read_text().rstrip()
    assert "def fn(x0):" in script and len(script.splitlines()) <= 60
    assert "**Expected:** the compiled function returns what eager returns." in lines
    assert "**Actual:** At output 0: 2/32 elements differ" in lines
    assert any(line.startswith("**Layer at fault:** inductor (the same program passes on backend='aot_eager'")
               for line in lines)
    assert "**Versions:** torch 2.13.0+cpu, git cf30153, triton 3.8.0, Python 3.11.7, on Linux-x86_64" in lines
    # The bug first, the machinery (signature, judge) last.
    assert text.index("finding value-mismatch-0123456789, lane") > text.index("**Versions:**")


def test_a_crash_names_its_error_in_the_title_and_a_lone_finding_json_is_enough(tmp_path):
    crash = _finding("crash", RaisedError(error={"type": "torch._inductor.exc.InductorError",
                                                 "message": "LoweringException: KeyError: 'x'\nmore"}),
                     triage={"stage": "inductor", "lanes": {"eager": "pass"}})
    path = tmp_path / "finding.json"
    path.write_text(json.dumps(crash.to_json()))
    text = issue_report(path)
    assert text.startswith("### torch.compile (backend=inductor, automatic dynamic shapes, cpu) raises InductorError")
    assert "**Actual:** Compiled raised torch._inductor.exc.InductorError: LoweringException: KeyError: 'x'" in text
    assert "written from the finding" in text  # no confirmed short repro beside it: said so


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["report", "--issue", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip() == f"symfuzz report: {tmp_path / 'missing'} is not a finding (no finding.json there)"
    (tmp_path / "finding.json").write_text("{")
    assert main(["report", "--issue", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "cannot be read as a finding" in err
    assert main(["report", "--issue", str(tmp_path), str(tmp_path)]) == 2
    assert "give it alone" in capsys.readouterr().err
    assert main(["report"]) == 2
    assert "give a campaign's output folder (or --issue FINDING)" in capsys.readouterr().err


def test_an_accepted_invalid_call_says_eager_raised_and_compiled_returned(tmp_path):
    """The error an accepts-invalid verdict holds is eager's: the compiled call returned a result."""
    accepted = _finding("accepts-invalid", RaisedError(error={"type": "builtins.IndexError",
                                                              "message": "index out of range in self"}))
    FindingStore(tmp_path).add(accepted)
    repro = (tmp_path / "accepts-invalid-0123456789" / "repro.py").read_text()
    assert "Eager raised builtins.IndexError: index out of range in self; compiled returned a result." in repro
    assert "Compiled raised" not in repro
    text = issue_report(tmp_path / "accepts-invalid-0123456789")
    assert "**Actual:** Eager raised builtins.IndexError: index out of range in self; compiled returned a result." \
        in text


def test_a_finding_whose_eager_kernel_left_its_shape_rule_reads_as_eager_s_bug(tmp_path):
    """Compiled returned where eager raised, but an eager kernel had left its meta function first
    (oracles/eager_meta.py): the issue names that op in eager, not the compiler, as the one at fault."""
    detail = ("eager's aten.pixel_unshuffle.default returned float32[0, 1, 9, 9] where its meta function, the shape "
              "rule the compiler follows, gives float32[0, 9, 3, 3]: eager left torch's own rule, so the bug may "
              "be eager's")
    finding = _finding("accepts-invalid", RaisedError(error={"type": "builtins.RuntimeError",
                                                             "message": "pixel_shuffle expects ..."}, detail=detail))
    path = tmp_path / "finding.json"
    path.write_text(json.dumps(finding.to_json()))
    lines = issue_report(path).splitlines()
    assert lines[0] == ("### aten.pixel_unshuffle.default in eager returns float32[0, 1, 9, 9] where its meta function "
                        "gives float32[0, 9, 3, 3]; torch.compile follows the meta function")
    assert ("**Expected:** eager's aten.pixel_unshuffle.default returns what its meta function gives "
            "(float32[0, 9, 3, 3]), as the compiled function does.") in lines
    assert "**Layer at fault:** eager: the CPU kernel of aten.pixel_unshuffle.default, not the compiler" in lines
    # The campaign report's one line says so before anything else is cut.
    row = describe(finding.to_json())
    assert row.startswith("accepts-invalid at call 1 (eager's aten.pixel_unshuffle.default left its meta function: "
                          "the bug may be eager's): builtins.RuntimeError"), row
    plain = _finding("accepts-invalid", RaisedError(error={"type": "builtins.IndexError", "message": "out of range"},
                                                    detail="compiled returned a result where eager raised"))
    path.write_text(json.dumps(plain.to_json()))
    assert issue_report(path).startswith("### torch.compile (backend=inductor, automatic dynamic shapes, cpu) returns "
                                         "a result where eager raises")
