"""Lanes: the registry, `symfuzz lanes`, and which failures a lane cannot vouch for."""

import json
import subprocess
import sys

import pytest
import torch

from conftest import ROOT
from symfuzz.oracles.lanes.lane import LANES, get_lane


def test_the_required_lanes_exist():
    assert {"eager", "aot_eager", "inductor-cpp", "inductor-triton-interpret", "inductor-triton"} <= set(LANES)


def test_symfuzz_lanes_says_what_runs_here_and_why_not():
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "lanes"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=True)
    # Availability is a property of a fresh process (this pytest process has
    # already imported triton without TRITON_INTERPRET), so probe in one.
    probe = subprocess.run(
        [sys.executable, "-c", "import json; from symfuzz.oracles.lanes.lane import LANES; "
         "print(json.dumps({n: l.unavailable_reason() for n, l in LANES.items()}))"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    reasons = json.loads(probe.stdout)
    assert set(reasons) == set(LANES)
    for name, reason in reasons.items():
        line = next(l for l in proc.stdout.splitlines() if l.startswith(name + " "))
        assert ("yes" if reason is None else "no") in line.split()
        if reason:
            assert reason in line
    assert reasons["inductor-cpp"] is None  # the default lane must run on every supported machine


def test_unknown_lane_is_a_one_line_usage_error():
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "fuzz", "--lane", "nope"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and "unknown lane 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def _case(dtype="float32"):
    return {"program": {"inputs": [{"name": "x0", "dtype": dtype, "dims": ["s0"]}], "body": []},
            "schedule": {"calls": [{"args": [{"dtype": dtype}]}]}}


def test_interpreter_lane_marks_its_own_artefacts_suspect():
    lane = get_lane("inductor-triton-interpret")
    interp = {"symptom": "crash", "evidence": {"error": {"type": "InterpreterError", "message": "ufunc bitwise_or"}}}
    real = {"symptom": "crash", "evidence": {"error": {"type": "IndexError", "message": "tuple index out of range"}}}
    mismatch = {"symptom": "value-mismatch", "evidence": {}}
    assert lane.suspect_reason(interp, _case(), {}) is not None
    assert lane.suspect_reason(real, _case(), {}) is None
    assert lane.suspect_reason(mismatch, _case("bfloat16"), {}) is not None
    assert lane.suspect_reason(mismatch, _case("float32"), {}) is None
    # Reproduced on a cheaper lane: no longer an artefact of the interpreter.
    triage = {"lanes": {"inductor-cpp": "value-mismatch (runtime) at call 0 [value-mismatch-0123]"}}
    assert lane.suspect_reason(mismatch, _case("bfloat16"), triage) is None


def test_cpp_lane_vouches_for_its_failures():
    lane = get_lane("inductor-cpp")
    assert lane.suspect_reason({"symptom": "value-mismatch", "evidence": {}}, _case("bfloat16"), {}) is None


def test_a_backend_failure_names_the_lanes_backend_not_symfuzzs_wrapper():
    """Dynamo's BackendCompilerFailed quotes the backend's ``__name__``: a finding's message (and the
    short repro's docstring) says backend='aot_eager', as a user's torch.compile would, and the
    failure is put at AOTAutograd's stage."""
    from symfuzz.fuzz.runtime.running import exception_stage
    from symfuzz.oracles.lanes.guards import recording_backend

    recorder = recording_backend(get_lane("aot_eager"), None)

    def failing(gm, example_inputs):
        raise RuntimeError("planted")

    recorder.inner = failing
    compiled = torch.compile(lambda x: x.sin(), backend=recorder)
    with pytest.raises(Exception) as raised:
        compiled(torch.ones(3))
    assert "backend='aot_eager' raised:" in str(raised.value) and "GuardRecorder" not in str(raised.value)
    assert exception_stage(raised.value) == "aot"
