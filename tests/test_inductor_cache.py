"""Fresh Inductor caches hold the machine's probes, made once (corpus.inductor_cache)."""

import os
import subprocess
import sys

from symfuzz.corpus import inductor_cache
from symfuzz.corpus.inductor_cache import STORE_ENV, fresh_cache

COMPILE = "import torch; torch.compile(lambda x: x.sin() + 1, dynamic=True)(torch.randn(5))"


def probe_files(cache):
    return sorted(p.name for p in cache.rglob("*.cpp") if "_chk_kernel" in p.read_text())


def test_a_fresh_cache_gets_the_probes_and_a_compile_in_it_probes_nothing_again(tmp_path, monkeypatch):
    # The session's store (tests/conftest.py): its probes are made once for every test that
    # compiles (making them is the background-probe test's subject, below).
    seeded = tmp_path / "seeded"
    assert fresh_cache(seeded) == str(seeded)
    probes = probe_files(seeded)
    assert probes, "the store's probes were copied in"
    assert not list(seeded.rglob("*.lock")), "no lock files travel"
    before = sorted(p.name for p in seeded.rglob("*.cpp"))
    done = subprocess.run([sys.executable, "-c", COMPILE], env={**os.environ,
                          "TORCHINDUCTOR_CACHE_DIR": str(seeded)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert probe_files(seeded) == probes, "Inductor found every probe it needed: it built none"
    assert len(list(seeded.rglob("*.cpp"))) > len(before), "the program's own kernel was compiled"
    # A second fresh cache costs a copy, not a probe.
    calls = []
    monkeypatch.setattr(inductor_cache.subprocess, "run", lambda *a, **k: calls.append(a))
    fresh_cache(tmp_path / "another")
    assert calls == [] and probe_files(tmp_path / "another") == probes


def test_probes_that_cannot_be_made_leave_the_cache_empty_and_are_not_tried_again(tmp_path, monkeypatch):
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "store"))
    calls = []

    def failing(*args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, 1, b"", b"no compiler")

    monkeypatch.setattr(inductor_cache.subprocess, "run", failing)
    for name in ("a", "b"):
        assert fresh_cache(tmp_path / name) == str(tmp_path / name)
        assert not list((tmp_path / name).iterdir())
    assert len(calls) == 1, "a failed probe is remembered, not rerun for every cache"


def test_the_probe_made_in_the_background_lands_in_the_cache_its_env_names_once(tmp_path):
    cache = tmp_path / "users-cache"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    probe = inductor_cache.probe_in_background(env)
    assert probe is not None
    assert probe.wait(timeout=300) == 0
    assert probe_files(cache), "Inductor's probe files were built there"
    assert (cache / inductor_cache._marker()).exists()
    assert inductor_cache.probe_in_background(env) is None, "made once: the marker stops a second one"
    # A cache symfuzz seeds from the store (the tests' own, made once) has them too: nothing to start for it.
    seeded = fresh_cache(tmp_path / "seeded")
    assert inductor_cache.probe_in_background({**os.environ, "TORCHINDUCTOR_CACHE_DIR": seeded}) is None
