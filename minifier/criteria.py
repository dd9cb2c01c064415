"""What counts as "the same bug" while minifying.

- ``SameFailure`` (the default): the candidate fails with the same failure id
  as the original: its Verdict signature, or the same signal or a timeout in the
  same place (``corpus/deaths.py``; ``SameDeath`` for a stored death or hang).
  ``SameAsOriginal`` takes that id from the original's own first run.
- ``ErrorMatches`` (``--match REGEX``): the run fails and its output matches.
- ``AccuracyFailure`` (``--accuracy``): compiled output differs from eager,
  whichever output and however (value, metadata, or unsound guard).
- ``ExternalScript`` (``--test CMD``): the user's interestingness script is
  run with the candidate's script path as its last argument; exit 0 means
  interesting, anything else (a timeout included) means not.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from symfuzz.corpus.deaths import DeathPlace, same_place
from symfuzz.minifier.driver import Criterion, QueryOutcome

ACCURACY_SYMPTOMS = ("value-mismatch", "metadata-mismatch", "gradient-mismatch", "unsound-guard")


class SameFailure(Criterion):
    reads_result_line = True

    def __init__(self, failure_id: str):
        self.failure_id = failure_id
        self.description = f"same failure: {failure_id}"

    def interesting(self, outcome: QueryOutcome) -> bool:
        return same_failure(self.failure_id, outcome.failure_id())

    def explain(self, outcome: QueryOutcome) -> str:
        found = outcome.failure_id()
        if self.failure_id is None:
            detail = " (exit code 2: eager itself fails on the rebuilt inputs)" if outcome.returncode == 2 else ""
            return f"it did not fail when run on its own (exit code {outcome.returncode}){detail}"
        if found is None:
            return f"it did not fail (exit code {outcome.returncode}); expected {self.failure_id}"
        return f"it failed differently: {found}, expected {self.failure_id}"


class SameAsOriginal(SameFailure):
    """SameFailure with the failure id taken from the original's own run
    (captured graphs have no stored signature to compare with)."""

    def __init__(self):
        super().__init__(None)
        self.description = "same failure as the original run"

    def calibrate(self, original: QueryOutcome) -> None:
        self.failure_id = original.failure_id()
        if self.failure_id is not None:
            self.description = f"same failure: {self.failure_id}"

    def interesting(self, outcome: QueryOutcome) -> bool:
        return self.failure_id is not None and super().interesting(outcome)


def same_failure(expected, found) -> bool:
    """Do two failure ids (``QueryOutcome.failure_id``) name the same bug? Equal ids do; so
    do two deaths or hangs of one cause in the same place, where a generated kernel may have
    lost fused ops that a dropped statement took with it (``deaths.same_place``)."""
    if expected == found or expected is None or found is None or "@" not in expected or "@" not in found:
        return expected == found
    (cause_a, _, key_a), (cause_b, _, key_b) = expected.partition("@"), found.partition("@")
    return cause_a == cause_b and same_place(DeathPlace.from_key(key_a), DeathPlace.from_key(key_b))


class SameDeath(SameFailure):
    """SameFailure for a stored death or hang. One stored by an older symfuzz records no place
    (its signature was one for every death of its lane and cause): the original's own run
    says where it dies, and that place is kept while shrinking."""

    def calibrate(self, original: QueryOutcome) -> None:
        found = original.failure_id()
        if found and "@" not in self.failure_id and found.partition("@")[0] == self.failure_id:
            self.failure_id = found
            self.description = f"same failure: {found} (stored without its place by an older symfuzz)"


class SameStoredSignature(SameFailure):
    """SameFailure for a finding's stored signature, allowing for a finding that an older
    symfuzz keyed: when the original fails with the same symptom under another signature
    (signatures became more precise), that signature is the bug its repro shows now."""

    lane_free = True

    def __init__(self, failure_id: str, stored: str = ""):
        super().__init__(failure_id)
        if stored and stored != failure_id:  # re-signed from its stored error (minifier.run.resigned)
            self.description = f"same failure: {failure_id} (stored as {stored} by an older symfuzz)"

    def calibrate(self, original: QueryOutcome) -> None:
        found = original.failure_id()
        if found and found != self.failure_id and _symptom(found) == _symptom(self.failure_id):
            self.failure_id = found
            self.description = f"same failure: {found} (stored as {_symptom(found)} under an older signature)"


def _symptom(signature: str) -> str:
    return signature.rsplit("-", 1)[0]


class ErrorMatches(Criterion):
    def __init__(self, pattern: str):
        try:
            self.regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"--match {pattern!r} is not a valid regular expression: {exc}") from None
        self.description = f"failure output matches /{pattern}/"

    def interesting(self, outcome: QueryOutcome) -> bool:
        # Exit 2 (or a result that is not a failure) means the script could not
        # judge anything, e.g. eager itself raised: never the bug, whatever it printed.
        failed = outcome.returncode not in (0, 2) and not outcome.timed_out
        if outcome.result is not None and outcome.result.get("ok") is not False:
            failed = False
        return failed and self.regex.search(outcome.output) is not None

    def explain(self, outcome: QueryOutcome) -> str:
        if outcome.returncode == 0:
            return "it ran without failing"
        if outcome.timed_out:
            return "it timed out (a timeout is not a match)"
        return f"its output does not match /{self.regex.pattern}/"


class AccuracyFailure(Criterion):
    description = "compiled output differs from eager"
    reads_result_line = True

    def interesting(self, outcome: QueryOutcome) -> bool:
        result = outcome.result or {}
        return result.get("ok") is False and result.get("symptom") in ACCURACY_SYMPTOMS


class ExternalScript(Criterion):
    def __init__(self, command: str):
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"--test {command!r} cannot be split into arguments: {exc}") from None
        if not self.argv:
            raise ValueError("--test needs a command")
        # Queries run in temporary folders: paths given relative to here are made absolute.
        self.argv = [str(Path(a).resolve()) if Path(a).exists() else a for a in self.argv]
        if shutil.which(self.argv[0]) is None:
            raise ValueError(f"--test: {self.argv[0]!r} is not an executable file or a command on PATH "
                             "(for a Python script, write --test 'python check.py')")
        self.description = f"`{command} CANDIDATE.py` exits 0"

    def command(self, script: Path) -> list[str]:
        return [*self.argv, str(script)]

    def interesting(self, outcome: QueryOutcome) -> bool:
        return outcome.returncode == 0

    def explain(self, outcome: QueryOutcome) -> str:
        if outcome.timed_out:
            return "the interestingness script timed out (counted as not interesting)"
        return f"the interestingness script exited {outcome.returncode} (0 means interesting)"
