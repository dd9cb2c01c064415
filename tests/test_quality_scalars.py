"""Quality: a planted int guard that admits a changed value is found through Python int inputs.

The plant (``int-guard`` in tests/plants/sitecustomize.py) drops the guard Dynamo installs on
the value of an int argument it specialized, so a graph compiled for ``k=2`` is reused for
``k=3``. Only a program that takes an int, called again with another value, can show it: the
generator must draw int inputs and vary them across calls. The campaign must report it as an
unsound guard (the reused graph is wrong; a fresh compile is right), confirmed in a fresh
process, and the minifier must keep the int input while it shrinks the rest.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import assert_short_repro, planted_env
from symfuzz.fuzz.case import Case
from symfuzz.minifier.run import MinifyOptions, minify_finding
from test_campaign import symfuzz
from symfuzz.corpus.inductor_cache import fresh_cache

pytestmark = pytest.mark.quality

OPS = "add,mul,relu,sum_dim,narrow"


def run_script(path, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    env.update(env_extra)
    env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(tmp_path / f"cache-{len(list(tmp_path.iterdir()))}")
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=600)


def int_inputs(case_json) -> list[str]:
    return [i.name for i in Case.from_json(case_json).program.inputs if i.kind == "int"]


@pytest.fixture(scope="module")
def planted_campaign(tmp_path_factory):
    """A short campaign on the default lane under the int-guard plant; (out folder, finding)."""
    tmp = tmp_path_factory.mktemp("int-guard")
    out = tmp / "out"
    # Plain programs only (no nn.Module programs): the plant is about a function's int arguments.
    # Seed 13 reaches the bug at case 5 (seed 3 at case 33; seeds 14 and 18 not within 20): the
    # test's claim is "within 40 programs", and each program costs the suite seconds.
    proc = symfuzz(["--lane", "inductor-cpp", "--ops", OPS, "--max-ops", "3", "--max-cases", "40",
                    "--module-rate", "0", "--max-findings", "1", "--jobs", "2", "--budget", "8m", "--seed", "13",
                    "--out", str(out)], planted_env("int-guard"), timeout=900)
    found = [json.loads(p.read_text()) for p in sorted((out / "findings").glob("*/finding.json"))]
    assert found, proc.stdout[-3000:] + proc.stderr[-3000:]
    found.sort(key=lambda f: f["verdict"]["symptom"] != "unsound-guard")
    return tmp, out, found[0]


def test_int_guard_that_admits_a_changed_value_is_found(planted_campaign):
    tmp, out, finding = planted_campaign
    verdict = finding["verdict"]
    assert verdict["symptom"] in ("unsound-guard", "value-mismatch"), verdict
    assert finding["confirmation"]["status"] == "reproduced"
    assert finding["case"]["origin"]["index"] < 40
    # The failing call reused a graph compiled at an earlier call with another value of an int input.
    ints = int_inputs(finding["case"])
    assert ints, finding["case"]["program"]
    calls = finding["case"]["schedule"]["calls"]
    names = [i["name"] for i in finding["case"]["program"]["inputs"]]
    failing = verdict["call_index"]
    assert failing > 0
    assert any(calls[failing]["args"][names.index(k)]["value"] != calls[0]["args"][names.index(k)]["value"]
               for k in ints)
    # The campaign ran repro.py in a fresh process with the plant: it failed the same way. It is
    # the short script.
    assert finding["confirmation"]["returncode"] == 1
    assert_short_repro(out / "findings" / finding["signature"], finding)
    repro = out / "findings" / finding["signature"] / "repro.py"
    fixed = run_script(repro, {}, tmp)
    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]


@pytest.mark.slow  # a minify run on Inductor: several minutes on 2 cores
def test_int_guard_finding_minifies_to_a_small_repro_that_keeps_the_int(planted_campaign):
    tmp, out, finding = planted_campaign
    plant = planted_env("int-guard")
    result = minify_finding(out / "findings" / finding["signature"], MinifyOptions(budget=900, jobs=2, env=plant),
                            lambda message: None)
    best = result.best
    assert best.verdict.symptom == finding["verdict"]["symptom"]
    assert int_inputs(best.case.to_json()), best.case.source  # the bug needs the int: it stays an input
    assert best.measure()["nodes"] <= 3, best.case.source
    assert len(best.case.schedule.calls) == 2, [c.to_json() for c in best.case.schedule.calls]
    assert result.repro_check["same_bug"]
    repro = result.repro_path
    assert run_script(repro, plant, tmp).returncode == 1
    assert run_script(repro, {}, tmp).returncode == 0
