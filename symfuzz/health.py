"""Is this campaign testing anything? Rules that tell a broken symfuzz or
environment apart from a healthy run.

A run that only produced internal errors or invalid programs tested
nothing, and must not end green. These are pure functions and small
classes, so the rules can be unit-tested without a worker:

- ``cause_of`` / ``InternalErrors``: an internal error is a result; the
  same bug raised at different cases groups under one normalized cause;
- ``ProgramHealth``: stop early when bad programs dominate a window;
- ``too_many_internal_errors``: the share above which a finished run is
  not trusted either.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Optional

# A healthy run has no internal errors and (on torch 2.13, 60 s on the eager
# lane, 2 workers) 57 of 57 programs valid in eager: the generator only emits
# programs it has checked. So the rules below fire only when something is
# broken, with a wide margin over a healthy run:
FIRST_WINDOW = 50  # all of the first 50 programs bad: nothing works at all
RECENT_WINDOW = 200  # of the last 200 programs...
RECENT_BAD_SHARE = 0.5  # ...more than half bad: it broke (or mostly breaks) mid-run
# A finished run with more internal errors than this share of its programs
# tested noticeably less than it claims: not green, whatever else it found.
INTERNAL_ERROR_SHARE = 0.01


def exception_line(text: str) -> str:
    """The line of a traceback that says what went wrong: the final
    exception's ``Type: message`` line (its first line, if the message spans
    several). Text that is not a traceback gives its first non-empty line.
    """
    lines = text.rstrip().splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.startswith("  File ")), default=None)
    if last_frame is not None:
        for line in lines[last_frame + 1:]:
            if line.strip() and not line.startswith((" ", "\t")):
                return line.strip()
    return next((line.strip() for line in lines if line.strip()), "")


_NORMALIZE = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),  # object addresses
    (re.compile(r"(?:/tmp|/var/folders|/private/var)/[^\s'\":,)]*"), "<tmp>"),  # temporary files and folders
    (re.compile(r"\btmp\w+"), "tmp?"),  # tempfile names outside /tmp
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "N"),  # sizes, indices, line numbers, pids
]


def cause_of(text: str) -> str:
    """The normalized cause of an internal error (a traceback or a note):
    its exception line with addresses, temporary paths and numbers blanked,
    so one bug hit by many cases (at other sizes, in other temp folders)
    counts as one cause."""
    line = exception_line(text)
    for pattern, replacement in _NORMALIZE:
        line = pattern.sub(replacement, line)
    return line[:300]


class InternalErrors:
    """Internal errors grouped by cause: a count, the first case and its traceback each."""

    def __init__(self):
        self.groups: dict[str, dict] = {}

    def add(self, index: Optional[int], text: str) -> None:
        cause = cause_of(text)
        group = self.groups.get(cause)
        if group is None:
            self.groups[cause] = {"cause": cause, "count": 1, "first_index": index,
                                  "first_line": exception_line(text), "traceback": text}
        else:
            group["count"] += 1

    @property
    def total(self) -> int:
        return sum(g["count"] for g in self.groups.values())

    def by_count(self) -> list[dict]:
        """The groups, most frequent first (ties: the first seen first)."""
        return sorted(self.groups.values(), key=lambda g: -g["count"])

    def summary(self) -> list[dict]:
        """What stats.json keeps: the groups without their tracebacks."""
        return [{k: v for k, v in g.items() if k != "traceback"} for g in self.by_count()]


class ProgramHealth:
    """Watches programs as they finish; says when bad ones (internal errors,
    programs invalid in eager) dominate, so the campaign stops instead of
    spending its budget on them."""

    def __init__(self, first: int = FIRST_WINDOW, recent: int = RECENT_WINDOW, share: float = RECENT_BAD_SHARE):
        self.first = first
        self.share = share
        self.seen = 0
        self.bad_in_first = 0
        self.recent: deque[bool] = deque(maxlen=recent)

    def record(self, bad: bool) -> None:
        self.seen += 1
        if self.seen <= self.first:
            self.bad_in_first += bad
        self.recent.append(bad)

    def problem(self) -> Optional[str]:
        """Why the run should stop, or None while it is healthy."""
        if self.seen >= self.first and self.bad_in_first == self.first:
            return f"all of the first {self.first} programs were internal errors or invalid in eager"
        bad = sum(self.recent)
        if len(self.recent) == self.recent.maxlen and bad > self.share * len(self.recent):
            return f"{bad} of the last {len(self.recent)} programs were internal errors or invalid in eager"
        return None


def too_many_internal_errors(internal_errors: int, programs: int) -> bool:
    """More internal errors than ``INTERNAL_ERROR_SHARE`` of the programs."""
    return internal_errors > INTERNAL_ERROR_SHARE * max(programs, 1)
