"""Quality: a guard that rejects at frame entry what its guard manager accepts is found.

The plant (tests/plants/sitecustomize.py, ``frame-entry-guard-mismatch``)
adds a guard to every compiled frame that fails when Dynamo evaluates it at
the entry of the compiled function and an input has a dim of size 7, and
passes when the guard manager is asked directly. The campaign asks the
guard managers before each call; a call they accept that recompiles the
program's own frame anyway is an unsound recompile. Its repro asks and
judges the same way in a fresh process, and passes on unmodified torch.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import planted_env
from test_campaign import findings, symfuzz

pytestmark = pytest.mark.quality


def test_guard_rejecting_an_admitted_call_is_an_unsound_recompile(tmp_path):
    out = tmp_path / "out"
    plant = planted_env("frame-entry-guard-mismatch")
    proc = symfuzz(
        ["--lane", "eager", "--ops", "add,mul,relu,sum_dim,sin", "--max-ops", "4", "--max-cases", "12",
         "--max-findings", "1", "--jobs", "2", "--budget", "8m", "--seed", "0", "--out", str(out)],
        plant,
    )
    found = findings(out, "unsound-recompile")
    assert found, proc.stdout[-3000:] + proc.stderr[-3000:]
    finding = found[0]
    assert finding["confirmation"]["status"] == "reproduced"
    verdict = finding["verdict"]
    assert verdict["call_index"] > 0  # the first call compiles without asking a guard
    evidence = verdict["evidence"]
    assert evidence["guard_manager_accepted"] is True and evidence["admitted_by"]
    assert "Unexpected recompilation" in evidence["recompile_reason"]  # Dynamo's own re-check passed the guards
    call = finding["case"]["schedule"]["calls"][verdict["call_index"]]
    assert any(7 in arg.get("shape", ()) for arg in call["args"])

    stats = json.loads((out / "stats.json").read_text())
    assert stats["guards"]["recompiles_unexplained"] >= 1

    repro = out / "findings" / finding["signature"] / "repro.py"
    assert "RecompileWatch(fn)" in repro.read_text()
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    fixed = subprocess.run([sys.executable, str(repro)], env=env, capture_output=True, text=True, timeout=600)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
