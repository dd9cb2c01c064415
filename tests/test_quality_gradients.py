"""Quality: a wrong gradient planted in one backward decomposition, only under symbolic sizes,
is found by the gradient oracle, confirmed, reproduced and minified to a repro that keeps its backward.

The plant (tests/plants/sitecustomize.py, "grad-symbolic") scales the gradient of
aten.tanh_backward's decomposition, which Inductor hands AOTAutograd, by 1.5 when a
size of its input is symbolic: forward values, static compiles and the aot_eager lane
stay right, so only a compiled backward at a symbolic size shows it.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import assert_short_repro, planted_env
from minify_support import planted_finding
from symfuzz.minifier.case_subject import dynamic_dims
from symfuzz.minifier.run import MinifyOptions, minify_finding
from test_campaign import symfuzz
from symfuzz.corpus.inductor_cache import fresh_cache

pytestmark = pytest.mark.quality

PLANT = "grad-symbolic"
# A few ops, tanh among them: most programs use tanh, and a good share take inputs that require grad.
FEW_OPS = "tanh,add,mul,sum_dim,transpose"


def run_script(path, env_extra, tmp_path, tag):
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    env.update(env_extra)
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(tmp_path / f"cache-{tag}")
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)


def test_planted_symbolic_only_wrong_gradient_is_found(tmp_path):
    """A default campaign (gradients drawn as usual) finds the wrong gradient within 40
    programs, confirms it in a fresh process, and writes a repro that fails while the bug
    is planted and passes on unmodified torch."""
    out = tmp_path / "out"
    plant = planted_env(PLANT)
    proc = symfuzz(
        ["--lane", "inductor-cpp", "--ops", FEW_OPS, "--max-ops", "4", "--max-cases", "40", "--max-findings", "1",
         "--jobs", "1", "--budget", "12m", "--seed", "3", "--out", str(out)],  # (one worker: seed 3 meets it at case 1)
        plant, timeout=900,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    found = [json.loads(p.read_text()) for p in (out / "findings").glob("*/finding.json")]
    wrong = [f for f in found if f["verdict"]["symptom"] == "gradient-mismatch"]
    assert wrong, [f["verdict"] for f in found]
    finding = wrong[0]
    assert finding["verdict"]["evidence"]["path"].startswith("out[2]")  # the gradients part of each call's record
    assert finding["triage"]["stage"] == "inductor"  # eager and aot_eager lanes pass
    assert finding["confirmation"]["status"] == "reproduced"
    assert finding["case"]["origin"]["index"] < 40
    assert any(a.get("requires_grad") for call in finding["case"]["schedule"]["calls"] for a in call["args"])

    # repro.py, the short script, checks the gradients plainly; judge.py beside it names the finding.
    # Confirmation ran both in fresh processes with the bug planted: judge.py gave the finding's
    # signature, and repro.py failed with its check of the finding's call (short_repro).
    folder = out / "findings" / finding["signature"]
    repro = folder / "repro.py"
    assert finding["confirmation"]["signature"] == finding["signature"]
    text = assert_short_repro(folder, finding)
    assert "torch.autograd.grad" in text and 'check(f"call {i}: gradients"' in text
    fixed = run_script(repro, {}, tmp_path, "fixed")
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]


@pytest.mark.slow  # ~1 min to find, several to minify on 2 cores (Inductor compiles forward and backward per query)
def test_planted_wrong_gradient_minifies_to_a_small_repro_that_keeps_its_backward(tmp_path):
    plant = planted_env(PLANT)
    folder = planted_finding(tmp_path, PLANT, lane="inductor-cpp", needs_op="tanh", symptom="gradient-mismatch",
                             min_ops=3, gen={"min_ops": 4, "max_ops": 6, "ops": FEW_OPS.split(","),
                                             "gradient_share": 1.0, "translation_validation_rate": 0.0})
    result = minify_finding(folder, MinifyOptions(budget=1200, jobs=2, env=plant), lambda m: None)
    best = result.best
    assert best.measure()["ops"] <= 2, best.case.source
    assert "tanh" in best.case.program.ops()
    assert any(a.requires_grad for c in best.case.schedule.calls for a in c.args)  # the backward stays
    assert dynamic_dims(best.case), best.case.to_json()  # and so does a symbolic size
    assert result.repro_check["same_bug"] and result.repro_check["short"]

    text = result.repro_path.read_text()
    assert ".requires_grad_()" in text and "input_gradients(" in text
    with_bug = run_script(result.repro_path, plant, tmp_path, "bug")
    assert with_bug.returncode == 1 and "gradient-mismatch at call" in with_bug.stderr, with_bug.stderr[-2000:]
    fixed = run_script(result.repro_path, {}, tmp_path, "fixed")
    assert fixed.returncode == 0, fixed.stderr[-2000:]
