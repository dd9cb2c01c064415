import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from symfuzz.corpus.inductor_cache import STORE_ENV, fresh_cache

ROOT = Path(__file__).resolve().parent.parent
PLANTS = Path(__file__).resolve().parent / "plants"

collect_ignore_glob = ["opcheck_suites/*"]  # fixture projects with their own test suites (run by opcheck_suite_support)


# Inductor's probes of this machine (corpus.inductor_cache): made once, in the system's
# temporary folder rather than the user's store, and found there by every process the
# tests start (xdist workers and campaigns inherit the variable).
os.environ.setdefault(STORE_ENV, os.path.join(tempfile.gettempdir(), f"symfuzz-test-inductor-probes-{os.getuid()}"))


@pytest.fixture(autouse=True)
def _isolated_inductor_cache(request, tmp_path_factory, monkeypatch):
    """No test may read or leave compiled artifacts in a shared cache: each gets a fresh
    one, holding only the machine's probes (outside its tmp_path, which stays the test's).
    A unit test compiles nothing: it gets a name only."""
    if request.node.get_closest_marker("unit") is not None:
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "unit-inductor-cache"))
        return
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", fresh_cache(tmp_path_factory.mktemp("inductor-cache")))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by markers
def pytest_collection_modifyitems(items):
    """The unit tier: every test of a module that sets ``UNIT_TIER = True``, but those
    marked ``integration`` (they compile or start a process)."""
    for item in items:
        module = getattr(item, "module", None)
        if getattr(module, "UNIT_TIER", False) and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def _unit_tier_stays_fast(request, monkeypatch):
    """A test of the unit tier (``-m unit``) that compiles or starts a process fails, saying
    so: the tier's promise (minutes, not tens of minutes) is checked, not hoped for."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(what):
        def refused(*args, **kwargs):
            raise AssertionError(f"a unit-tier test {what}: mark it (or its file) otherwise, or make it cheaper")
        return refused

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("started a process"))
    torch = sys.modules.get("torch")  # only if the test's module imported it: the tier does not pay for torch
    if torch is not None:
        monkeypatch.setattr(torch, "compile", refuse("called torch.compile"))


def planted_env(plant: str) -> dict:
    """Environment that makes every new Python process run with a planted torch bug.

    tests/plants/sitecustomize.py reads SYMFUZZ_PLANT at interpreter start,
    so campaign workers and fresh-process repro runs all see the same bug.
    """
    path = os.pathsep.join([str(PLANTS), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {"SYMFUZZ_PLANT": plant, "PYTHONPATH": path}


def assert_short_repro(folder: Path, finding: dict, most_lines: int = 100) -> str:
    """The finding's repro.py is the short script a person reads (judge.py beside it, nothing of
    the judge's machinery in it, at most ``most_lines``), and confirmation saw it show the bug."""
    repro = (folder / "repro.py").read_text()
    assert (folder / "judge.py").is_file() and "SYMFUZZ-RESULT" not in repro, repro[:3000]
    assert len(repro.splitlines()) <= most_lines, repro
    assert finding["confirmation"]["short_repro"].startswith("shows the bug"), finding["confirmation"]
    return repro


def once_per_session(tmp_path_factory, name: str, make) -> tuple[Path, dict]:
    """(folder, make's result) of ``make(folder)``, run once per test session, even
    across pytest-xdist workers: the first worker to ask runs it, under a file lock,
    and the others wait and reuse its folder. For expensive read-only inputs (a real
    campaign's output folder); a test that edits one must work on a copy.
    ``make`` returns a JSON-able dict (kept beside the folder)."""
    import json  # (kept local: only the shared fixtures use these)

    from filelock import FileLock  # (a torch dependency, so always installed)

    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker has its own basetemp inside the session's; share the session's.
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, result = root / f"shared-{name}", root / f"shared-{name}.json"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not result.exists():
            folder.mkdir(exist_ok=True)
            result.write_text(json.dumps(make(folder)))
    return folder, json.loads(result.read_text())


# The campaign several modules read: the eager lane, a planted tanh miscompile, 4 cases.
# --guidance 0: merged shards equal the unsharded run only when no case mutates what an earlier one reached
TANH_CAMPAIGN = ["--lane", "eager", "--ops", "tanh,add,mul", "--max-ops", "3", "--jobs", "1", "--quiet", "--seed", "0",
                 "--guidance", "0"]


@pytest.fixture(scope="session")
def tanh_campaign(tmp_path_factory) -> Path:
    """The OUT folder of one real campaign with a confirmed value-mismatch (exit 1), shared
    by every module and xdist worker that asks (test_reports, test_merge). Read-only."""
    import subprocess  # (kept local, as above)
    import sys

    def run(folder: Path) -> dict:
        env = dict(os.environ, **planted_env("tanh-wrong-eager"), TORCHINDUCTOR_CACHE_DIR=str(folder / "cache"))
        env.pop("GITHUB_STEP_SUMMARY", None)
        done = subprocess.run([sys.executable, "-m", "symfuzz.cli", "fuzz", *TANH_CAMPAIGN, "--max-cases", "4",
                               "--out", str(folder / "out")], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)
        return {"returncode": done.returncode, "output": done.stdout + done.stderr}

    folder, result = once_per_session(tmp_path_factory, "tanh-campaign", run)
    out = folder / "out"
    assert result["returncode"] == 1, result["output"]
    assert list((out / "findings").glob("value-mismatch-*/finding.json")), result["output"]
    return out
