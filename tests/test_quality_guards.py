"""Quality: planted missing-guard faults are found, and only through schedules.

Each plant (tests/plants/sitecustomize.py) removes one kind of shape guard
from the checks Dynamo installs, while the ShapeEnv still knows the guard,
as in a real missing-guard bug. None of them can show with one call per
program: the first call compiles a graph that is right for its own shapes;
only a later call at other shapes, which the missing guard should have
sent to a recompile, reuses that graph and gets a wrong result. The
campaign must report it as an unsound guard (wrong on reuse, right on a
fresh compile), confirmed in a fresh process, within a bounded budget.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import assert_short_repro, planted_env
from test_campaign import findings, symfuzz
from symfuzz.corpus.inductor_cache import fresh_cache

pytestmark = pytest.mark.quality


def run_planted(tmp_path, plant, lane, ops, max_cases, seed=0, max_ops="4", max_findings=2):
    out = tmp_path / "out"
    proc = symfuzz(
        ["--lane", lane, "--ops", ops, "--max-ops", max_ops, "--max-cases", str(max_cases),
         "--max-findings", str(max_findings),
         "--jobs", "2", "--budget", "12m", "--seed", str(seed), "--out", str(out)],
        planted_env(plant),
    )
    unsound = findings(out, "unsound-guard")
    assert unsound, proc.stdout[-3000:] + proc.stderr[-3000:]
    finding = unsound[0]
    assert finding["confirmation"]["status"] == "reproduced"
    assert finding["case"]["origin"]["index"] < max_cases
    call = finding["verdict"]["call_index"]
    assert call > 0  # never the first call: the fault needs a schedule
    # repro.py is the short script, and it passes on unmodified torch: the plant, not torch, is at fault.
    assert_short_repro(out / "findings" / finding["signature"], finding)
    repro = out / "findings" / finding["signature"] / "repro.py"
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(tmp_path / "cache-repro")
    fixed = subprocess.run([sys.executable, str(repro)], env=env, capture_output=True, text=True, timeout=600)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    return finding, json.loads((out / "stats.json").read_text())


def test_dropped_size_comparison_guard_is_found(tmp_path):
    """``if x.size(d) > k`` installs a range guard; planted: it is not checked."""
    # Seed 18 draws size comparisons early (most generated branches test Python numbers or equalities):
    # the unsound guard is its first finding, at case 4, so the campaign ends once that one is confirmed.
    finding, stats = run_planted(tmp_path, "dropped-comparison-guard", "eager", "add,mul,relu,sum_dim,sin", 60,
                                 seed=18, max_findings=1)
    assert stats["guards"]["programs_with_guards"] > 0


@pytest.mark.slow  # Inductor compiles: about 6 minutes on 2 cores
def test_unguarded_zero_one_specialization_is_found(tmp_path):
    """A dynamic graph assumes sizes >= 2; planted: the ``2 <= size`` guard is
    not checked, so a later call with a size-1 dim (squeeze!) reuses it."""
    finding, _ = run_planted(tmp_path, "unguarded-zero-one", "inductor-cpp", "squeeze,add,mul,relu", 40)
    shapes = [a["shape"] for a in finding["case"]["schedule"]["calls"][finding["verdict"]["call_index"]]["args"]]
    assert any(s in (0, 1) for shape in shapes for s in shape)


@pytest.mark.slow  # Inductor compiles: about 5 minutes on 2 cores
def test_unguarded_duck_size_unification_is_found(tmp_path):
    """Equal sizes at compile time share one symbol; planted: the equality
    guard between them is not checked, so unequal sizes reuse the graph."""
    finding, _ = run_planted(tmp_path, "unguarded-duck-sizing", "inductor-cpp", "add,mul,sum,arange,new_zeros,relu", 40)
    call = finding["case"]["schedule"]["calls"][finding["verdict"]["call_index"]]
    assert len({a["shape"][0] for a in call["args"] if a["shape"]}) > 1 or len(call["args"]) == 1
