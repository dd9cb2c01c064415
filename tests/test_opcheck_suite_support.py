"""The fixture op library's suite, run plainly through run_suite: the outcomes other tests compare against."""

import pytest

from opcheck_suite_support import SUITE, SUITE_OUTCOMES, parse_junit, run_suite


@pytest.mark.slow  # test_opcheck_retrofit runs the plain suite too, and compares against it
def test_plain_suite_outcomes(tmp_path):
    run = run_suite(tmp_path, timeout=300)
    assert run.returncode == 0, run.output[-4000:]
    assert run.outcomes == SUITE_OUTCOMES, run.output[-4000:]
    assert "9 passed, 1 skipped, 1 xfailed" in run.output
    assert run.root == tmp_path / "quantlib" and run.root != SUITE
    assert not (SUITE / ".pytest_cache").exists()


def test_parse_junit_outcomes(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text("")
    (tmp_path / "junit.xml").write_text("""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_m" name="test_pass[1.5-a]" time="0.1"/>
<testcase classname="tests.test_m.TestC" name="test_fail"><failure message="boom">x</failure></testcase>
<testcase classname="tests.test_m" name="test_skip"><skipped type="pytest.skip" message="no"/></testcase>
<testcase classname="tests.test_m" name="test_xfail"><skipped type="pytest.xfail" message="known"/></testcase>
<testcase classname="tests.test_m" name="test_strict_xpass"><failure message="[XPASS(strict)] known"/></testcase>
<testcase classname="tests.test_m" name="test_both"><failure message="call"/></testcase>
<testcase classname="tests.test_m" name="test_both"><error message="failed on teardown"/></testcase>
<testcase classname="" name="tests.test_broken"><error message="collection failure"/></testcase>
</testsuite></testsuites>""")
    assert parse_junit(tmp_path / "junit.xml", tmp_path) == {
        "tests/test_m.py::test_pass[1.5-a]": "passed",
        "tests/test_m.py::TestC::test_fail": "failed",
        "tests/test_m.py::test_skip": "skipped",
        "tests/test_m.py::test_xfail": "xfailed",
        "tests/test_m.py::test_strict_xpass": "failed",
        "tests/test_m.py::test_both": "error",
        "tests/test_broken.py": "error",
    }
