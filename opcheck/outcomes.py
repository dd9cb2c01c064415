"""A run's reports judged against the xfail store: one path for the pytest plugin and the CLI.

``judge`` gives each (op, check) result its outcome (passed, failed, xfailed, xpassed,
skipped); ``FAILING`` says which outcomes make a run red; ``store_results`` is what accept
mode writes to the store; ``internal_errors`` are symfuzz's own failures, counted apart
from the ops'. Nothing here imports torch: the plugin judges in the pytest process.
"""

from __future__ import annotations

from dataclasses import dataclass

from symfuzz.opcheck.checklist import CHECKS
from symfuzz.opcheck.store import XfailStore

FAILING = ("failed", "xpassed")  # the outcomes that fail a run (an xfail that passes: the store is stale)


@dataclass
class Outcome:
    op: str
    check: str
    outcome: str  # passed | failed | xfailed | xpassed | skipped
    result: object  # the (merged) opcheck.report.CheckResult
    comment: str = ""  # the store's comment on this (op, check), if any


@dataclass
class InternalError:
    """symfuzz itself failed on an op (pytest's stats hold these: other plugins read them as report objects)."""
    op: str
    line: str


def judge(reports, store: XfailStore) -> list[Outcome]:
    """[Outcome] for every (op, check) that has a result, op by op, in check order; ``reports``: {op: Report}."""
    out = []
    for op, report in reports.items():
        for check in CHECKS:
            result = report.results.get(check)
            if result is None:
                continue
            _, comment = store.expected(op, check)
            out.append(Outcome(op, check, store.outcome(op, check, result.status), result, comment))
    return out


def store_results(outcomes: list[Outcome]) -> list[tuple]:
    """(op, check, passed, message) for ``store.apply_results``: every check that ran. The store keeps
    a failure's whole message: its headline and the details a headline introduces."""
    results = []
    for o in outcomes:
        if o.result.status == "skipped":
            continue
        failure = o.result.failures[0] if o.result.failures else None
        results.append((o.op, o.check, o.result.passed, f"[{failure.kind}] {failure.message.strip()}" if failure else ""))
    return results


def internal_errors(reports) -> list[InternalError]:
    """symfuzz's own errors in ``reports`` (an iterable of Report): not results of the ops."""
    return [InternalError(r.op, line) for r in reports for line in r.internal_errors()]
