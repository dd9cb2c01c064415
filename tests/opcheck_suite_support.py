"""Run the fixture op library's own test suite (tests/opcheck_suites/quantlib) in a subprocess.

quantlib is laid out like a real custom-op library (ops defined by schema string,
fake kernels, backends with ctypes-loaded C kernels) with its own pytest suite.
Tests of the opcheck plugin run that suite with and without --opcheck and compare:
the plugin must never change the suite's own outcomes.

The suite, run plainly (see SUITE_OUTCOMES): 9 passed, 1 skipped, 1 xfailed. Its
recorded calls always pass the 256-entry `code` table; A's shape and the
blocksize vary. The C kernels of quantize_blockwise and dequantize_blockwise
kill the process with SIGSEGV when `code` has any other number of entries.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

SUITES = Path(__file__).resolve().parent / "opcheck_suites"
SUITE = SUITES / "quantlib"

# What the plain suite does (no plugin): test id -> outcome.
SUITE_OUTCOMES = {
    "tests/test_quantlib.py::test_quantize_blockwise_matches_reference": "passed",
    "tests/test_quantlib.py::test_dequantize_blockwise_matches_reference": "passed",
    "tests/test_quantlib.py::test_roundtrip[16]": "passed",
    "tests/test_quantlib.py::test_roundtrip[64]": "passed",
    "tests/test_quantlib.py::test_roundtrip[256]": "passed",
    "tests/test_quantlib.py::test_wrappers_roundtrip": "passed",
    "tests/test_quantlib.py::test_scale_rows": "passed",
    "tests/test_quantlib.py::test_row_absmax": "passed",
    "tests/test_quantlib.py::test_row_absmax_empty_rows": "passed",
    "tests/test_quantlib.py::test_quantize_blockwise_cuda": "skipped",
    "tests/test_quantlib.py::test_nan_survives_roundtrip": "xfailed",
}

# The suite's ops (all in namespace "quantlib").
SUITE_OPS = ("quantize_blockwise", "dequantize_blockwise", "scale_rows", "row_absmax")

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", ".symfuzz", "*.so")

# When one test id has several junit entries (a failing call plus a teardown
# error), the first of these wins.
_PRECEDENCE = ("error", "failed", "xpassed", "xfailed", "skipped", "passed")


@dataclass
class SuiteRun:
    returncode: int
    outcomes: dict[str, str]  # test id (pytest node id) -> passed/failed/skipped/xfailed/xpassed/error
    output: str  # stdout and stderr, interleaved
    root: Path  # the copy of the suite the run used
    junit: Path | None = field(default=None, repr=False)  # None when pytest wrote none (e.g. it crashed)


def copy_suite(tmp_path: Path, suite: str = "quantlib") -> Path:
    """A fresh copy of the suite (a folder of tests/opcheck_suites) at tmp_path/suite (an existing one is replaced)."""
    root = Path(tmp_path) / suite
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(SUITES / suite, root, ignore=_IGNORE)
    return root


def run_suite(tmp_path, extra_args=(), env=None, timeout=900, *, reuse=False, suite="quantlib") -> SuiteRun:
    """Run the quantlib suite in a fresh pytest subprocess; extra_args go on its command line.

    The run uses a copy of the suite at tmp_path/"quantlib" (fresh unless reuse=True
    and one is there already, e.g. to run again with what a first run wrote), with
    the copy first on PYTHONPATH so that `import quantlib` finds it. env is added to
    this process's environment. The run is killed (its whole process group) after
    timeout seconds and subprocess.TimeoutExpired is raised, its output attached.
    """
    tmp_path = Path(tmp_path)
    root = tmp_path / suite
    if not (reuse and root.exists()):
        root = copy_suite(tmp_path, suite)
    junit = tmp_path / "junit.xml"
    junit.unlink(missing_ok=True)
    log = tmp_path / "suite-output.txt"

    run_env = {**os.environ, **(env or {})}
    run_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), run_env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", f"--junitxml={junit}", *map(str, extra_args)]
    # Output goes to a file, not a pipe: a grandchild that outlives pytest cannot block the read.
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=run_env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            e.output = log.read_text(errors="replace")
            raise
    output = log.read_text(errors="replace")
    outcomes = parse_junit(junit, root) if junit.exists() else {}
    # junit writes a non-strict XPASS as a plain pass; the -rA summary tells them apart.
    for line in output.splitlines():
        if line.startswith("XPASS "):
            test = line[len("XPASS "):].split(" - ", 1)[0].strip()
            if outcomes.get(test) == "passed":
                outcomes[test] = "xpassed"
    return SuiteRun(returncode, outcomes, output, root, junit if junit.exists() else None)


def parse_junit(path: Path, root: Path) -> dict[str, str]:
    """Test id -> outcome from a pytest junit xml file.

    junit has no xfail/xpass: an xfail is <skipped type="pytest.xfail">, a strict
    XPASS a <failure> (reported here as "failed", as pytest counts it) and a
    non-strict XPASS a plain pass (run_suite corrects those from the -rA summary).
    """
    outcomes: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test = _node_id(case.get("classname", ""), case.get("name", ""), root)
        tags = {child.tag: child for child in case}
        if "error" in tags:
            outcome = "error"
        elif "failure" in tags:
            outcome = "failed"
        elif "skipped" in tags:
            outcome = "xfailed" if tags["skipped"].get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        if test not in outcomes or _PRECEDENCE.index(outcome) < _PRECEDENCE.index(outcomes[test]):
            outcomes[test] = outcome
    return outcomes


def _node_id(classname: str, name: str, root: Path) -> str:
    """Undo junit's mangling (tests/test_x.py::TestC::test_y[p] -> classname
    tests.test_x.TestC, name test_y[p]) by finding the test file under root."""
    if not classname:  # a collection error of a module: name is its dotted path
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    for k in range(len(parts), 0, -1):
        module = "/".join(parts[:k]) + ".py"
        if (root / module).is_file():
            return "::".join([module, *parts[k:], name])
    return f"{classname}::{name}"
