"""Warm query servers (minifier/warm_queries.py): a forked query ends as ``python SCRIPT``
would, starts from a fresh state whatever the query before it did, and a broken server
costs speed, never an answer."""

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from symfuzz.minifier.driver import query_env
from symfuzz.minifier.warm_queries import WarmPool, WarmRunner


@pytest.fixture(scope="module")
def pool():
    cache = tempfile.mkdtemp(prefix="symfuzz-warm-test-")
    env = query_env(Path(cache), {})
    pool = WarmPool(env, 1)
    yield pool, env
    pool.close()


def run(pool_env, tmp_path, text, timeout=120.0, name="q.py"):
    pool, env = pool_env
    script = tmp_path / name
    script.write_text(text)
    return WarmRunner(pool).run_command([sys.executable, str(script)], tmp_path, env, timeout)


def test_a_forked_query_ends_as_a_fresh_interpreter_would(pool, tmp_path):
    code, out, _, exceeded = run(pool, tmp_path, "import os, sys\nprint('in', os.getcwd(), __name__)\n"
                                                 "print('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    assert (code, exceeded) == (3, False)
    assert f"in {tmp_path} __main__" in out and "to stderr" in out
    code, out, _, _ = run(pool, tmp_path, "def f():\n    raise ValueError('boom')\nf()\n")
    assert code == 1 and "Traceback" in out and "ValueError: boom" in out
    code, out, _, _ = run(pool, tmp_path, "import sys\nsys.exit('a message')\n")
    assert code == 1 and "a message" in out
    code, _, _, _ = run(pool, tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert code == -signal.SIGSEGV
    assert pool[0].retired == 0  # none of that broke the server


def test_a_query_starts_from_fresh_dynamo_state_whatever_the_one_before_did(pool, tmp_path):
    first = """
import torch, torch._dynamo
torch._dynamo.config.cache_size_limit = 1
f = torch.compile(lambda x: x * 2, backend="eager", dynamic=True)
f(torch.ones(3)); f(torch.ones(4))
print("frames", torch._dynamo.utils.counters["stats"]["unique_graphs"])
"""
    code, out, _, _ = run(pool, tmp_path, first)
    assert code == 0 and "frames 1" in out, out
    second = """
import os, torch, torch._dynamo
print("limit", torch._dynamo.config.cache_size_limit, "graphs", dict(torch._dynamo.utils.counters["stats"]))
print("pid", os.getpid())
"""
    code, out, _, _ = run(pool, tmp_path, second)
    import torch._dynamo

    default = torch._dynamo.config.cache_size_limit
    assert code == 0 and f"limit {default} graphs {{}}" in out, out


def test_a_query_past_its_time_is_killed_with_everything_it_started(pool, tmp_path):
    marker = tmp_path / "grandchild"
    text = (f"import subprocess, sys, time\np = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(marker)!r}, 'w').write(str(p.pid))\ntime.sleep(60)\n")
    code, _, seconds, _ = run(pool, tmp_path, text, timeout=5.0)
    assert code is None and seconds < 40
    grandchild = int(marker.read_text())
    # SIGKILL was sent to its whole group; give the kernel a moment to deliver it (the query
    # itself may have ended already: it is asked for its stack first, which ends one that
    # does not catch the signal).
    state = "R"
    for _ in range(50):
        try:
            state = open(f"/proc/{grandchild}/stat").read().split()[2]
        except OSError:
            state = "gone"
        if state in ("Z", "X", "gone"):
            break
        time.sleep(0.1)
    assert state in ("Z", "X", "gone"), "a process the query started outlived its timeout"


def test_a_dead_server_is_replaced_and_its_query_runs_cold(tmp_path):
    env = query_env(tmp_path / "cache", {})
    pool = WarmPool(env, 1)
    try:
        server = pool.servers[0]
        server.wait_ready()
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        script = tmp_path / "q.py"
        script.write_text("print('answer', 6 * 7)\n")
        code, out, _, _ = WarmRunner(pool).run_command([sys.executable, str(script)], tmp_path, env, 60)
        assert code == 0 and "answer 42" in out
        assert pool.retired == 1 and len(pool.servers) == 1 and pool.servers[0] is not server
        # Another environment (another command) is never served warm: it runs cold, as asked.
        assert not pool.serves([sys.executable, str(script)], {**env, "EXTRA": "1"})
        assert not pool.serves(["bash", str(script)], env)
    finally:
        pool.close()
