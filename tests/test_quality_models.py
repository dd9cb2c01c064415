"""Quality: bugs planted in torch where real model code meets changing sizes are found by a model
campaign (``--source models``) within a few CPU-minutes, confirmed in a fresh process, and each
repro passes once the plant is gone.

The plants (tests/plants/sitecustomize.py):
- "heads-transpose-symbolic": an index bug in attention's heads split and merge, only in graphs
  compiled with symbolic sizes;
- "kv-cache-length-unguarded": the cache tensors' guard does not check their length, so a decode
  step reuses the graph of the step before, one shorter;
- "embedding-specializes-length": torch's own nn.Embedding turns the sequence length into a
  constant, so a dim marked dynamic is specialized and every new length recompiles.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import planted_env
from test_campaign import symfuzz

pytest.importorskip("transformers")
pytestmark = [pytest.mark.quality, pytest.mark.slow]

DECODERS = "llama,gpt2,qwen2"


def _campaign(tmp_path, plant, archs, budget="120s"):
    out = tmp_path / "out"
    proc = symfuzz(["--source", "models", "--models", archs, "--lane", "eager", "--jobs", "1", "--seed", "0",
                    "--budget", budget, "--max-findings", "1", "--out", str(out)], planted_env(plant), timeout=900)
    found = [json.loads(p.read_text()) for p in sorted((out / "findings").glob("*/finding.json"))]
    assert proc.returncode == 1 and found, (proc.stdout + proc.stderr)[-3000:]
    return out, found[0]


def _passes_without_the_plant(out, finding):
    """The judged script (judge.py beside a short repro.py, else repro.py) passes, and so does the
    short one, each in a fresh process without the plant."""
    folder = out / "findings" / finding["verdict"]["signature"]
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    scripts = [("judge.py", '"ok": true'), ("repro.py", "no failure")] if (folder / "judge.py").is_file() else \
        [("repro.py", '"ok": true')]
    for script, fixed in scripts:
        run = subprocess.run([sys.executable, str(folder / script)], cwd=folder, env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0 and fixed in run.stdout, (script, (run.stdout + run.stderr)[-3000:])


def _short_repro_shows_it(out, finding):
    """repro.py is the short script (torch and transformers, a screenful) and, run fresh with the
    plant at confirmation, it showed the bug."""
    folder = out / "findings" / finding["verdict"]["signature"]
    assert (finding["confirmation"].get("short_repro") or "").startswith("shows the bug"), finding["confirmation"]
    repro = (folder / "repro.py").read_text()
    assert (folder / "judge.py").is_file() and len(repro.splitlines()) <= 110, repro
    assert finding["case"]["arch"] in repro.split("\n", 3)[1]  # the title names the architecture


def test_an_index_bug_in_the_heads_split_is_found_in_real_attention(tmp_path):
    out, finding = _campaign(tmp_path, "heads-transpose-symbolic", DECODERS + ",bert")
    assert finding["verdict"]["symptom"] == "value-mismatch"
    assert finding["confirmation"]["status"] == "reproduced"
    _short_repro_shows_it(out, finding)
    _passes_without_the_plant(out, finding)
    # The wrong values lie inside one compiled graph: the graph-level minifier cuts the model's
    # graph (dozens of nodes, module floats like eps passed as floats) to a torch-only script of it.
    folder = out / "findings" / finding["verdict"]["signature"]
    proc = subprocess.run([sys.executable, "-m", "symfuzz.cli", "minify", str(folder), "--budget", "5m"],
                          env={**os.environ, **planted_env("heads-transpose-symbolic")}, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    minified = (folder / "minified" / "repro.py").read_text()
    body = minified[minified.index("def fn("):minified.index("def make_inputs(")]
    assert "transpose" in body and body.count("\n") <= 12 and "transformers" not in minified, body
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    run = subprocess.run([sys.executable, "repro.py"], cwd=folder / "minified", env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-2000:]


def test_a_guard_that_misses_a_kv_cache_growing_by_one_is_found_in_a_decode_loop(tmp_path):
    out, finding = _campaign(tmp_path, "kv-cache-length-unguarded", DECODERS)
    assert finding["verdict"]["symptom"] in ("crash", "value-mismatch")
    call = finding["case"]["calls"][finding["verdict"]["call_index"]]
    assert call["kind"] == "decode"
    _short_repro_shows_it(out, finding)
    _passes_without_the_plant(out, finding)


def test_a_dim_marked_dynamic_that_torch_specializes_is_found_and_blamed_on_torch(tmp_path):
    out, finding = _campaign(tmp_path, "embedding-specializes-length", DECODERS + ",bert")
    verdict = finding["verdict"]
    assert verdict["symptom"] in ("over-specialization", "excess-recompiles")
    # The guard's origin is torch's own Python (here, the planted nn.Embedding.forward), not the model's.
    assert "torch: Python code Dynamo traced (tests/plants/sitecustomize.py)" in verdict["evidence"]["detail"]
    _short_repro_shows_it(out, finding)
    _passes_without_the_plant(out, finding)
