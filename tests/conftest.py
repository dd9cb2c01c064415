import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANTS = Path(__file__).resolve().parent / "plants"

collect_ignore_glob = ["opcheck_suites/*"]  # fixture projects with their own test suites (run by opcheck_suite_support)


@pytest.fixture(autouse=True)
def _isolated_inductor_cache(tmp_path, monkeypatch):
    """No test may read or leave compiled artifacts in a shared cache."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-cache"))


def planted_env(plant: str) -> dict:
    """Environment that makes every new Python process run with a planted torch bug.

    tests/plants/sitecustomize.py reads SYMFUZZ_PLANT at interpreter start,
    so campaign workers and fresh-process repro runs all see the same bug.
    """
    path = os.pathsep.join([str(PLANTS), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {"SYMFUZZ_PLANT": plant, "PYTHONPATH": path}
