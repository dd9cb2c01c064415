"""Quality: planted bugs found in generated programs are minified into small repros that stay dynamic.

Each test makes a real finding first: generated programs run under a planted
torch bug (tests/plants/sitecustomize.py) until one fails. Then the finding is
minified end to end (fresh-process queries, the planted bug active in each),
and the result is checked independently: the repro fails with the plant,
passes without it, and still compiles with symbolic sizes.
"""

import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import planted_env
from symfuzz.corpus.replay import replay_finding
from symfuzz.minifier.case_subject import CaseSubject, dynamic_dims
from symfuzz.minifier.run import MinifyOptions, minify_finding
from minify_support import planted_finding
from symfuzz.corpus.inductor_cache import fresh_cache

pytestmark = pytest.mark.quality

POINTWISE_MIX = ["abs", "add", "mul", "relu", "sin", "cos", "tanh", "sum_dim", "transpose", "unsqueeze", "exp",
                 "sigmoid", "sub", "neg", "cat", "reshape", "mean_dim"]


def run_script(path, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    env.update(env_extra)
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(tmp_path / f"cache-{len(list(tmp_path.iterdir()))}")
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # ~1.5 min to find, 5-10 min to minify on 2 cores (Inductor compiles in every query)
def test_planted_miscompile_in_a_30_op_program_shrinks_to_3_ops(tmp_path):
    plant = planted_env("abs-symbolic")
    folder = planted_finding(tmp_path, "abs-symbolic", lane="inductor-cpp", needs_op="abs",
                             symptom="value-mismatch", min_ops=30,
                             gen={"min_ops": 32, "max_ops": 40, "ops": POINTWISE_MIX,
                                  "translation_validation_rate": 0.0})
    original = json.loads((folder / "finding.json").read_text())
    before = CaseSubject.from_json({**original, "environment": {}}).measure()
    assert before["ops"] >= 30

    result = minify_finding(folder, MinifyOptions(budget=1500, jobs=2, env=plant), lambda m: None)
    after = result.best.measure()
    assert after["ops"] <= 3, result.best.case.source
    assert "abs" in result.best.case.program.ops()
    # Still compiled dynamically: a dynamic=True compile or a dim marked dynamic, with a
    # dim of size >= 2 that the compile treats as symbolic (the plant needs a symbolic size).
    assert dynamic_dims(result.best.case), result.best.case.to_json()
    repro = result.repro_path
    text = repro.read_text()
    assert "dynamic=True" in text or "mark_dynamic" in text
    assert result.repro_check["same_bug"] and result.repro_check["short"]
    # A script to paste, not the judged one: its outputs are floats, so no shadow interpreter for rounding.
    assert "class RoundingShadow" not in text and len(text.splitlines()) <= 50, text

    with_bug = run_script(repro, plant, tmp_path)
    assert with_bug.returncode == 1, with_bug.stderr[-2000:]
    assert re.search(r"AssertionError: call \d+: outputs \[0\]: Tensor-likes are not close", with_bug.stderr), \
        with_bug.stderr[-2000:]
    fixed = run_script(repro, {}, tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    report = json.loads((result.work_dir / "report.json").read_text())
    assert report["before"]["ops"] == before["ops"] and report["after"]["ops"] == after["ops"]
    assert report["passes"]["drop_statements"]["accepted"] + report["passes"]["keep_one_output"]["accepted"] > 0


def test_planted_guard_fault_keeps_exactly_the_calls_it_needs(tmp_path):
    """dropped-comparison-guard: ``if x.size(d) > k`` is not guarded, so a later call on
    the other side of k reuses an earlier call's graph. One call alone cannot show it: under
    dynamic=True two calls are needed (compile, reuse); under automatic dynamic (dynamic=None)
    three (a static compile, the dynamic recompile, the reuse)."""
    plant = planted_env("dropped-comparison-guard")
    folder = planted_finding(tmp_path, "dropped-comparison-guard", lane="eager", needs_op="add",
                             symptom="unsound-guard", seed=18, gen={"max_ops": 4, "ops": ["add", "mul", "relu", "sum_dim", "sin"],
                                                                    "translation_validation_rate": 0.0})
    original = json.loads((folder / "finding.json").read_text())
    assert len(original["case"]["schedule"]["calls"]) > 3

    result = minify_finding(folder, MinifyOptions(budget=900, jobs=2, env=plant), lambda m: None)
    best = result.best
    calls = best.case.schedule.calls
    needed = 2 if best.case.schedule.dynamic is True else 3
    assert len(calls) == needed, (best.case.schedule.dynamic, [c.to_json() for c in calls])
    assert len({tuple(a.shape for a in c.args) for c in calls}) > 1
    assert result.repro_check["same_bug"]

    # Independently of the driver: without any one of the calls it does not fail; with all, it does.
    everything = list(range(needed))
    for keep in [everything] + [[i for i in everything if i != drop] for drop in everything]:
        case = replace(best.case, schedule=replace(best.case.schedule, calls=tuple(calls[i] for i in keep)))
        at = keep.index(best.verdict.call_index) if best.verdict.call_index in keep else len(keep) - 1
        outcome = replay_finding(best.with_case(case, at).finding(), timeout=300, env_extra=plant)
        assert (outcome.status == "reproduced") == (keep == everything), (keep, outcome.status, outcome.output_tail[-1500:])


@pytest.mark.slow  # a campaign, then a minify run: about 10 minutes on 2 cores
def test_campaign_minify_shrinks_each_confirmed_finding(tmp_path):
    from test_campaign import symfuzz

    out = tmp_path / "out"
    plant = planted_env("abs-symbolic")
    # Pointwise ops only: the full generator also finds real torch bugs (a torch.cond crash in
    # Dynamo's fake run) before the plant's, and --max-findings 1 would stop on one of those.
    proc = symfuzz(["--lane", "inductor-cpp", "--ops", ",".join(POINTWISE_MIX), "--max-ops", "6", "--max-cases", "40",
                    "--max-findings", "1",
                    "--jobs", "2", "--budget", "12m", "--seed", "0", "--out", str(out), "--minify",
                    "--minify-budget", "6m"], plant, timeout=1800)
    assert proc.returncode == 1, proc.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text())
    # Two workers may confirm a finding each before --max-findings stops them: every one is minified.
    assert set(stats["findings"]["minified"]) == set(stats["findings"]["signatures"]) != set()
    for sig, minified in stats["findings"]["minified"].items():
        assert minified["same_bug"] is True, minified
        assert minified["after"]["ops"] <= minified["before"]["ops"]
        repro = out / "findings" / sig / "minified" / "repro.py"
        assert str(repro) == minified["repro"]
        assert run_script(repro, plant, tmp_path).returncode == 1
        assert run_script(repro, {}, tmp_path).returncode == 0
