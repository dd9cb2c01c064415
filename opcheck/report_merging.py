"""Merging the opcheck reports of one op from several processes (pytest-xdist workers that each checked it).

Plain data, no torch: the plugin's controller merges its workers' reports (``opcheck.plugin``).
"""

from __future__ import annotations

import copy


def merge_reports(reports):
    """{op: Report}: one report per op from several (xdist workers that each checked it).

    A check failed if it failed anywhere (the failing result, with its failures, is
    kept); else it passed if it ran anywhere; else it was skipped. An op that
    could not be checked (crash, hang) on any worker keeps that error.
    """
    merged = {}
    for report in reports:
        have = merged.get(report.op)
        if have is None:
            merged[report.op] = copy.deepcopy(report)
            continue
        have.samples += report.samples
        have.seconds += report.seconds
        have.info += [line for line in report.info if line not in have.info]
        for name, result in report.results.items():
            mine = have.results.get(name)
            rank = {"failed": 2, "passed": 1, "skipped": 0}
            if mine is None or rank[result.status] > rank[mine.status]:
                keep = copy.deepcopy(result)
                if mine is not None:
                    keep.notes += [n for n in mine.notes if n not in keep.notes]
                have.results[name] = keep
            else:
                mine.notes += [n for n in result.notes if n not in mine.notes]
        # A crash or hang on one worker stays a finding, whatever the others saw.
        have.error = have.error or report.error
        have.internal = have.internal or report.internal
    return {op: merged[op] for op in sorted(merged)}
