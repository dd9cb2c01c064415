"""A one-line progress bar on a terminal, periodic plain lines otherwise."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, budget: float, enabled: bool = True, stream=None):
        self.budget = max(budget, 1e-9)
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last = 0.0
        self.width = 0

    def update(self, elapsed: float, counts, summary) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < (0.5 if self.tty else 15.0):
            return
        self.last = now
        frac = min(elapsed / self.budget, 1.0)
        bar = "#" * int(frac * 24)
        line = (
            f"[{bar:<24}] {elapsed:5.0f}/{self.budget:.0f}s  programs {counts['programs_generated']}"
            f" (valid {counts['programs_valid']})  calls checked {counts['calls_checked']}"
            f"  recompiles {counts['recompiles']}  candidates {counts['candidates'] + counts['worker_deaths']}"
            f"  findings {summary['findings']}"
        )
        if counts["internal_errors"]:  # symfuzz's own trouble shows while it happens, not only at the end
            line += f"  internal errors {counts['internal_errors']}"
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        if not self.enabled:
            return
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
        self.stream.write(message + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
