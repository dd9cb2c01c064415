"""`symfuzz minify script.py -- ARGS`: the script's own arguments reach it, in the capture and in the advice."""

import os
import subprocess
import sys

import pytest
from conftest import planted_env
from symfuzz.corpus.inductor_cache import fresh_cache

SCRIPT = '''
import sys
import torch

op = torch.cos if sys.argv[1:] == ["cos"] else torch.sin

def f(x):
    return op(x) + 1

torch.compile(f, backend="eager")(torch.randn(4, 3))
'''


def run(tmp_path, *args):
    env = {**os.environ, **planted_env("segfault-cos"), "TORCHINDUCTOR_CACHE_DIR": fresh_cache(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "symfuzz.cli", "minify", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


# Two minifications of a script (about 80 s): slow, for the default suite's time. The default run
# keeps script minification itself (test_minify_script, test_quality_minify_script).
@pytest.mark.slow
def test_script_arguments_decide_what_is_captured(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(SCRIPT)
    # The planted bug: the Dynamo-only backend segfaults on a graph with cos.
    found = run(tmp_path, str(script), "--budget", "3m", "--out", str(tmp_path / "small.py"), "--", "cos")
    assert found.returncode == 0, found.stderr[-3000:]
    repro = (tmp_path / "small.py").read_text()
    assert "torch.cos" in repro and "torch.sin" not in repro
    without = run(tmp_path, str(script), "--budget", "3m", "--out", str(tmp_path / "other.py"))
    assert without.returncode == 2 and "Traceback" not in without.stderr
    assert "crash.py runs without a compiled failure" in without.stderr, without.stderr[-2000:]
    assert "none of the 1 graphs captured from it failed" in without.stderr, without.stderr[-2000:]
