"""Regression verdicts: does a finding also fail under a reference torch?

``--reference-python PATH`` names the interpreter of another environment (the
last torch release, or main before the change under test). Each confirmed
finding's repro runs there, in a fresh process, and the finding is:

- ``regression``: it fails here and passes there;
- ``pre-existing``: it fails there too (the same way, or another way);
- ``unknown``: it could not be judged there (the interpreter or its torch does
  not start, the torch there lacks something the repro needs, a timeout), with
  the reason.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from symfuzz.corpus.finding import Finding
from symfuzz.corpus.replay import ScriptRunner, replay_finding

REGRESSION, PRE_EXISTING, UNKNOWN = "regression", "pre-existing", "unknown"


@dataclass
class ReferenceVerdict:
    status: str  # REGRESSION, PRE_EXISTING or UNKNOWN
    reason: str  # one line
    python: str
    torch: Optional[str]

    def to_json(self) -> dict:
        return asdict(self)


class ReferenceError(ValueError):
    """The reference interpreter cannot be used at all: one line that says why."""


@functools.lru_cache(maxsize=None)
def reference_torch(python: str) -> str:
    """The torch version at ``python``; ReferenceError if it cannot import torch."""
    if not Path(python).exists():
        raise ReferenceError(f"--reference-python {python} does not exist")
    try:
        done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReferenceError(f"--reference-python {python} cannot be run: {exc}") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise ReferenceError(f"--reference-python {python} cannot import torch: {lines[-1] if lines else done.returncode}")
    return done.stdout.strip().splitlines()[-1]


def judge_against_reference(finding: Finding, python: str, timeout: float,
                            runner: Optional[ScriptRunner] = None, env_extra: Optional[dict] = None) -> ReferenceVerdict:
    """Run ``finding``'s repro under ``python`` and classify it (see the module doc)."""
    try:
        version = reference_torch(python)
    except ReferenceError as exc:
        return ReferenceVerdict(UNKNOWN, str(exc), python, None)
    outcome = replay_finding(finding, timeout=timeout, runner=runner, python=python, env_extra=env_extra)
    if outcome.status == "fixed":
        return ReferenceVerdict(REGRESSION, f"passes under torch {version}", python, version)
    if outcome.status == "reproduced":
        return ReferenceVerdict(PRE_EXISTING, f"fails the same way under torch {version}", python, version)
    if outcome.status == "different" and outcome.signature:
        return ReferenceVerdict(PRE_EXISTING, f"fails under torch {version} too, with signature {outcome.signature}",
                                python, version)
    if outcome.status == "different":  # a hang or death that ended another way there: no verdict to compare
        return ReferenceVerdict(UNKNOWN, f"under torch {version} it ended another way (exit {outcome.returncode}) "
                                "without a verdict", python, version)
    return ReferenceVerdict(UNKNOWN, f"could not be judged under torch {version}: {outcome.reason}", python, version)
