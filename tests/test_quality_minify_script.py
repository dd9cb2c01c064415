"""Quality: a planted crash in a user's model shrinks to a tiny repro that stays dynamic.

The user-script path end to end: a script with a 50+ node model hits the
planted bug (Inductor's relu lowering raises on a symbolic size) only
because its batch dim is dynamic. ``prepare_script`` captures the failing
graph, the driver shrinks it with fresh-process queries (plant active in
each), and the final repro is checked on its own: it fails with the plant,
passes without it, and passes with the plant once its dims are no longer
marked dynamic (so the marks it keeps are the ones the bug needs).
"""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import planted_env
from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.minifier.criteria import AccuracyFailure, SameAsOriginal
from symfuzz.minifier.driver import Driver, run_query
from symfuzz.minifier.script import prepare_script

pytestmark = pytest.mark.quality

# Six pre-norm MLP blocks with different activations; only block 3 uses ReLU.
# The batch dim is marked dynamic, so Inductor lowers relu on a symbolic size.
MODEL_SCRIPT = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, width, act):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.act = act

    def forward(self, x):
        return x + 0.5 * self.down(self.act(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        acts = [nn.GELU(), nn.Tanh(), nn.SiLU(), nn.ReLU(), nn.Sigmoid(), nn.GELU()]
        self.blocks = nn.ModuleList(Block(width, act) for act in acts)
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x).softmax(-1)


torch.manual_seed(0)
model = torch.compile(Model())
x = torch.randn(6, 8)
torch._dynamo.mark_dynamic(x, 0)  # any batch size
with torch.no_grad():
    print(model(x).shape)
"""

PLANTED_ERROR = "planted: relu lowering cannot handle the symbolic size"


def run_script(path, env_extra, cache):
    env = {k: v for k, v in os.environ.items() if k != "SYMFUZZ_PLANT"}
    env.update(env_extra, TORCHINDUCTOR_CACHE_DIR=fresh_cache(cache))
    return subprocess.Popen([sys.executable, str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(proc):
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


@pytest.mark.slow  # 6-10 min on 2 busy cores: every query that does not crash compiles C++
def test_planted_lowering_crash_in_a_50_node_model_shrinks_to_5_nodes_and_stays_dynamic(tmp_path):
    plant = planted_env("symbolic-lowering-crash")
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent(MODEL_SCRIPT))

    subject, passes = prepare_script(script, accuracy=False, timeout=600, work_dir=tmp_path / "work", env=plant)
    before = subject.measure()
    assert subject.data["origin"]["nodes"] >= 50 and before["nodes"] >= 50  # the captured FX graph
    assert before["dynamic_dims"] == 1

    out = tmp_path / "out"
    result = Driver(SameAsOriginal(), out, budget=1800, jobs=2, query_timeout=300, env=plant).minify(subject, passes)
    after = result.after
    text = (out / "repro.py").read_text()
    assert after["nodes"] <= 5, text
    assert after["dynamic_dims"] >= 1 and "torch._dynamo.mark_dynamic(" in text
    assert result.repro_check["same_bug"], result.repro_check

    # Checked again, independently of the driver: fails with the plant, passes
    # without it, and passes with it once no dim is marked dynamic.
    unmarked = tmp_path / "unmarked.py"
    unmarked.write_text("\n".join(line for line in text.splitlines() if "torch._dynamo.mark_dynamic(" not in line))
    planted = run_script(out / "repro.py", plant, tmp_path / "cache-planted")
    code, output = finish(planted)
    assert code == 1 and PLANTED_ERROR in output, output[-3000:]
    clean, static = run_script(out / "repro.py", {}, tmp_path / "cache-clean"), run_script(unmarked, plant, tmp_path / "cache-static")
    for proc in (clean, static):
        code, output = finish(proc)
        assert code == 0 and 'SYMFUZZ-RESULT {"ok": true}' in output, output[-3000:]


# abs on a symbolic size is miscompiled (negated) by the abs-symbolic plant; relu is right.
WRONG_RESULT_SCRIPT = """
import torch

def f(x, y):
    return torch.abs(x) * 2 + y.sum(), x.relu()

compiled = torch.compile(f)
x = torch.randn(6, 4)
torch._dynamo.mark_dynamic(x, 0)
print(compiled(x, torch.randn(3))[0].shape)
"""


@pytest.mark.slow  # 3-5 min: Inductor compiles C++ in the capture and in each query
def test_accuracy_capture_picks_the_graph_that_differs_from_eager(tmp_path):
    plant = planted_env("abs-symbolic")
    script = tmp_path / "wrong.py"
    script.write_text(textwrap.dedent(WRONG_RESULT_SCRIPT))
    subject, _ = prepare_script(script, accuracy=True, timeout=600, work_dir=tmp_path / "work", env=plant)
    assert subject.data["origin"]["status"] == "mismatch" and subject.measure()["dynamic_dims"] == 1
    planted = run_query(subject.query_script(), AccuracyFailure(), 600, plant)
    assert AccuracyFailure().interesting(planted), planted.output[-3000:]
    clean = run_query(subject.query_script(), AccuracyFailure(), 600, {})
    assert clean.returncode == 0 and clean.result == {"ok": True}, clean.output[-3000:]
