"""Shared by the minifier tests: planted findings made from generated programs."""

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, planted_env
from symfuzz.corpus.inductor_cache import fresh_cache

# Runs in a subprocess with the plant active: generates programs until one of
# at least MIN_OPS ops fails under the plant, and writes that finding.
FIND_SCRIPT = r'''
import json, sys
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.store import FindingStore
from symfuzz.fuzz.drawing import generate
from symfuzz.fuzz.generate import GenConfig
from symfuzz.worker import run_case
from symfuzz.minifier.case_passes import dead_code_eliminated
from symfuzz.oracles.verdict import Verdict
from symfuzz.oracles.lanes.lane import get_lane

spec = json.loads(sys.argv[1])
config = GenConfig(**spec["gen"])
lane = get_lane(spec["lane"])
for index in range(spec["tries"]):
    case = generate(spec["seed"], index, config)
    ops = case.program.ops()
    if len(ops) < spec["min_ops"] or spec["needs_op"] not in dead_code_eliminated(case).program.ops():
        continue
    result = run_case(case, lane)
    wanted = [v for v in result["verdicts"] if v["symptom"] == spec["symptom"]]
    if wanted:
        from symfuzz.fuzz.case import Case
        finding = Finding(case=result["case"], verdict=Verdict.from_json(wanted[0]), lane=lane.to_json())
        FindingStore(spec["out"]).add(finding)
        print(json.dumps({"index": index, "signature": finding.signature, "ops": len(ops)}))
        sys.exit(0)
sys.exit(3)
'''


def planted_finding(tmp_path: Path, plant: str, *, lane: str, gen: dict, needs_op: str, symptom: str,
                    min_ops: int = 1, seed: int = 0, tries: int = 60) -> Path:
    """The folder of a finding that ``plant`` causes, found by generating programs."""
    spec = {"gen": gen, "lane": lane, "needs_op": needs_op, "symptom": symptom, "min_ops": min_ops,
            "seed": seed, "tries": tries, "out": str(tmp_path / "findings")}
    env = {**os.environ, **planted_env(plant), "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "find-cache")}
    proc = subprocess.run([sys.executable, "-c", FIND_SCRIPT, json.dumps(spec)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"no planted finding in {tries} programs:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return tmp_path / "findings" / info["signature"]
