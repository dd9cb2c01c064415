"""The finding store, repro scripts, and replay."""

import json
import os
import re
import subprocess
import sys

from conftest import ROOT
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.replay import replay_finding
from symfuzz.corpus.scripts import render_repro
from symfuzz.corpus.store import FindingStore, load_findings
from symfuzz.fuzz.generate import GenConfig
from symfuzz.fuzz.drawing import generate
from symfuzz.oracles.lanes.lane import get_lane
from symfuzz.oracles.verdict import Died, Evidence, Hung, OutputMismatch, Verdict


def finding(index=0, signature="value-mismatch-0123456789", lane="eager"):
    case = generate(0, index, GenConfig(max_ops=3, ops=("add", "mul", "relu", "sum_dim", "reshape")))
    verdict = Verdict(ok=False, oracle="differential", symptom="value-mismatch", stage="runtime",
                      signature=signature, call_index=1)
    return Finding(case=case.to_json(), verdict=verdict, lane=get_lane(lane).to_json())


def test_store_deduplicates_by_signature_and_keeps_every_case(tmp_path):
    store = FindingStore(tmp_path)
    assert store.add(finding(0)) is True
    assert store.add(finding(1)) is False
    assert store.add(finding(2, signature="crash-abcdef0123")) is True
    assert len(store) == 2
    dupes = (tmp_path / "value-mismatch-0123456789" / "duplicates.jsonl").read_text().splitlines()
    assert len(dupes) == 1 and json.loads(dupes[0])["case"]["origin"]["index"] == 1
    assert {f.signature for f in store} == {"value-mismatch-0123456789", "crash-abcdef0123"}
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no debris


def test_finding_json_round_trip():
    f = finding()
    assert Finding.from_json(json.loads(json.dumps(f.to_json()))).to_json() == f.to_json()


def test_a_finding_written_before_typed_evidence_loads_and_writes_back_the_same(tmp_path):
    """A finding.json from a campaign run before the verdict's evidence was typed, kept verbatim."""
    fixture = ROOT / "tests" / "fixtures" / "finding-v1-metadata-mismatch.json"
    data = json.loads(fixture.read_text())
    [(_, f)] = load_findings(fixture)
    assert isinstance(f.verdict, Verdict) and f.signature == "metadata-mismatch-dda589485d"
    assert f.verdict.evidence == OutputMismatch(path="out[0][3]", graphs_at_call=1,
                                                detail="compiled torch.bfloat16[2], eager torch.float32[2]")
    assert f.to_json() == data
    assert "def fn(" in render_repro(f)


def test_isolation_evidence_of_earlier_campaigns_loads_typed():
    """Evidence objects as campaigns wrote them before typed evidence, and keys no version declares."""
    tail = "Fatal Python error: Segmentation fault"
    old = {"ok": False, "oracle": "isolation", "stage": "unknown", "call_index": None}
    died = Verdict.from_json({**old, "symptom": "process-death", "signature": "process-death-0123456789",
                              "evidence": {"cause": "SIGSEGV", "returncode": -11, "worker_log_tail": tail}})
    assert died.evidence == Died(cause="SIGSEGV", returncode=-11, worker_log_tail=tail)
    oom = {"cause": "out-of-memory", "limit_mb": 2048, "worker_log_tail": "", "from_a_later_version": [1]}
    v = Verdict.from_json({**old, "symptom": "process-death", "signature": "process-death-abcdef0123", "evidence": oom})
    assert v.evidence.out_of_memory and v.evidence.limit_mb == 2048 and v.evidence.extra == {"from_a_later_version": [1]}
    assert v.to_json()["evidence"] == oom
    hung = Verdict.from_json({**old, "symptom": "timeout", "signature": "timeout-0123456789",
                              "evidence": {"timeout_seconds": 120.0}})
    assert hung.evidence == Hung(timeout_seconds=120.0) and hung.to_json()["evidence"] == {"timeout_seconds": 120.0}
    # Evidence that fits no family of its symptom is kept whole, untyped.
    odd = Verdict.from_json({**old, "symptom": "timeout", "signature": "timeout-0123456789", "evidence": {"why": 1}})
    assert type(odd.evidence) is Evidence and odd.to_json()["evidence"] == {"why": 1}


def test_repro_needs_only_torch_and_holds_the_program():
    source = render_repro(finding())
    imports = set(re.findall(r"^\s*(?:import|from)\s+([\w.]+)", source, re.M))
    assert {i.split(".")[0] for i in imports} <= {"os", "json", "sys", "math", "torch", "hashlib", "re", "time",
                                                  "faulthandler", "signal",
                                                  "traceback", "triton"}
    assert "def fn(" in source and "torch.compile(fn, backend='eager'" in source
    compile(source, "repro.py", "exec")


def test_repro_exits_zero_when_compiled_matches_eager(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text(render_repro(finding()))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].startswith("torch ")
    assert proc.stdout.strip().endswith('SYMFUZZ-RESULT {"ok": true}')


def test_replay_reports_fixed_for_a_finding_that_no_longer_fails(tmp_path):
    FindingStore(tmp_path / "findings").add(finding())
    [(folder, loaded)] = load_findings(tmp_path / "findings")
    assert replay_finding(loaded, timeout=300).status == "fixed"
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "replay", str(tmp_path / "findings")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "fixed" in proc.stdout and "0/1 reproduced" in proc.stdout


def test_replay_of_a_missing_path_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "replay", str(tmp_path / "nope")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def test_triton_interpreter_repro_runs_standalone(tmp_path):
    """The lane's CPU adaptation is inlined into the script and must coexist with the judging code."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("triton") is None:  # the probe in this process would see pytest's own imports
        pytest.skip("triton is not installed")
    script = tmp_path / "repro.py"
    script.write_text(render_repro(finding(lane="inductor-triton-interpret")))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| triton 3" in proc.stdout.splitlines()[0] or "| triton" in proc.stdout.splitlines()[0]


def _outcome(symptom, code, out, evidence=None, exceeded=False):
    from symfuzz.corpus.replay import classify

    f = finding()
    f.verdict = Verdict.from_json({**f.verdict.to_json(), "symptom": symptom, "evidence": evidence or {}})
    return classify(f, code, out, 1.0, exceeded).status


def test_confirmation_demands_the_same_failure():
    sig = finding().signature
    line = 'SYMFUZZ-RESULT {"ok": false, "signature": "%s"}' % sig
    assert _outcome("value-mismatch", 1, "x\n" + line) == "reproduced"
    assert _outcome("value-mismatch", 1, "Traceback ... ImportError") == "broken"  # exit 1, but judged nothing
    assert _outcome("value-mismatch", 0, 'SYMFUZZ-RESULT {"ok": true}') == "fixed"
    assert _outcome("process-death", -11, "", {"cause": "SIGSEGV"}) == "reproduced"
    assert _outcome("process-death", -2, "", {"cause": "SIGSEGV"}) != "reproduced"  # Ctrl-C is not a segfault
    assert _outcome("process-death", 1, "", {"cause": "out-of-memory"}) != "reproduced"
    assert _outcome("process-death", -9, "", {"cause": "out-of-memory"}, exceeded=True) == "reproduced"
    assert _outcome("timeout", None, "") == "reproduced"
    assert _outcome("timeout", 1, "") != "reproduced"


def test_a_process_that_has_not_imported_torch_reads_its_versions_without_importing_it():
    """A campaign's coordinator records the environment at its start; importing torch for two
    strings would cost it seconds. The versions read from torch's version.py are torch's own."""
    code = ("import sys\nfrom symfuzz.corpus.finding import environment\nenv = environment()\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
            "import torch\nassert (env['torch'], env['torch_git']) == (torch.__version__, torch.version.git_version), env\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
