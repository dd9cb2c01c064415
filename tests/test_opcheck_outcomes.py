"""One judge for the opcheck plugin and the CLI (opcheck/outcomes.py): outcomes against the xfail
store, what accept mode writes, and symfuzz's own errors apart from the ops'."""

from __future__ import annotations

import json

from symfuzz.opcheck.checklist import FAKETENSOR, SCHEMA, SYMBOLIC_FAKE
from symfuzz.opcheck.outcomes import FAILING, InternalError, internal_errors, judge, store_results
from symfuzz.opcheck.report import CheckResult, Failure, Report
from symfuzz.opcheck.store import XfailStore

UNIT_TIER = True


def _reports():
    failure = Failure(FAKETENSOR.name, "wrong-strides", "strides differ\n  detail", "x0: float32[2, 2]", "snippet")
    return {
        "lib::a": Report("lib::a", {SYMBOLIC_FAKE.name: CheckResult(SYMBOLIC_FAKE.name, "skipped"),
                                    FAKETENSOR.name: CheckResult(FAKETENSOR.name, "failed", [failure]),
                                    SCHEMA.name: CheckResult(SCHEMA.name, "passed")}),
        "lib::b": Report("lib::b", {SCHEMA.name: CheckResult(SCHEMA.name, "passed")},
                         internal="IndexError: list index out of range (traceback: /tmp/x)"),
    }


def test_outcomes_follow_the_store_and_the_check_order(tmp_path):
    path = tmp_path / "store.json"
    path.write_text(json.dumps({"_version": 1, "data": {"lib::b": {f"test_{SCHEMA.name}": {
        "comment": "known", "status": "xfail"}}}}))
    outcomes = judge(_reports(), XfailStore.load(path))
    assert [(o.op, o.check, o.outcome) for o in outcomes] == [
        ("lib::a", SCHEMA.name, "passed"), ("lib::a", FAKETENSOR.name, "failed"),
        ("lib::a", SYMBOLIC_FAKE.name, "skipped"), ("lib::b", SCHEMA.name, "xpassed")]
    assert [o.outcome for o in outcomes if o.outcome in FAILING] == ["failed", "xpassed"]
    assert outcomes[-1].comment == "known"


def test_accept_writes_every_check_that_ran_with_its_whole_message():
    outcomes = judge(_reports(), XfailStore(""))
    assert store_results(outcomes) == [("lib::a", SCHEMA.name, True, ""),
                                       ("lib::a", FAKETENSOR.name, False, "[wrong-strides] strides differ\n  detail"),
                                       ("lib::b", SCHEMA.name, True, "")]


def test_symfuzz_errors_are_counted_apart_from_the_ops():
    assert internal_errors(_reports().values()) == [
        InternalError("lib::b", "IndexError: list index out of range (traceback: /tmp/x)")]
