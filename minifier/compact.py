"""The short repro of a minified finding: a script to paste into a bug report.

``corpus.scripts.render_compact`` renders it: the program, the calls' inputs
(``make_input``, as the campaign built them), the marks and flags, one
``torch.compile``, and the same judging function as the campaign
(``compare``), which raises on the first call where compiled differs from
eager. Here: whether a run of it shows the subject's failure.

Not every finding fits this shape: runner lanes (torch.export), the Triton
interpreter lane and symptoms judged from the compile's bookkeeping
(recompiles, specialization, fake tensors) keep the judged repro.
"""

from __future__ import annotations

import re
from typing import Optional

from symfuzz.corpus import scripts
from symfuzz.corpus.deaths import cause_of, place_from_evidence, same_place
from symfuzz.minifier.case_eager import compares_only_floats
from symfuzz.oracles.verdict import OUT_OF_MEMORY, RaisedError


# A traceback's exception line: "pkg.module.SomeError: message" (or no message), unindented,
# a class name last.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:?$)")


def render_compact(subject) -> Optional[str]:
    """The short script for a CaseSubject, or None when its finding needs the judged repro.
    It pastes rounding's explainer only where a compared leaf may be discrete."""
    return scripts.render_compact(subject.case, subject.verdict, subject.lane, subject.environment,
                                  discrete=not compares_only_floats(subject.case))


def compact_matches(subject, outcome) -> bool:
    """Does a run of the short repro show the subject's failure?

    It prints no signature, so this checks what it can see: a mismatch of
    the same kind, the same exception type for a crash, the same signal or
    a timeout for a dead process.
    """
    symptom, evidence = subject.verdict.symptom, subject.verdict.evidence
    text = outcome.output[-20000:]
    if symptom in ("timeout", "process-death"):
        cause = cause_of(symptom, evidence)
        if symptom == "timeout":
            died = outcome.timed_out
        else:
            died = outcome.memory_exceeded if cause == OUT_OF_MEMORY else outcome.signal_name == cause
        # In the same place, where the finding recorded one (corpus/deaths.py).
        expected = place_from_evidence(evidence)
        return died and (expected is None or outcome.place is None or same_place(expected, outcome.place))
    if outcome.returncode in (0, None):
        return False
    if symptom in ("value-mismatch", "metadata-mismatch", "gradient-mismatch", "accepts-invalid"):
        return f"AssertionError: {symptom} at call" in text
    if symptom == "unsound-guard":
        return re.search(r"AssertionError: (value|metadata|gradient)-mismatch at call", text) is not None
    if symptom == "crash":
        error = (evidence.error if isinstance(evidence, RaisedError) else None) or {}
        name = (error.get("type") or "").rsplit(".", 1)[-1]
        # The exception line of the traceback's last block: the message's later lines (a
        # wrapped error's own "SomeError: ..." among them) and Dynamo's hints follow it.
        block = text.rsplit("Traceback (most recent call last):", 1)[-1]
        last = [line for line in block.splitlines() if _EXCEPTION_LINE.match(line)][:1]
        # The exception must come out of the compiled call (or its backward), not out of eager.
        from_compiled = scripts.COMPILED_CALL in text or scripts.COMPILED_BACKWARD in text
        # The repro's own checks raise AssertionError too ("value-mismatch at call 0: ..."):
        # such a line is a mismatch, not the crash, even where the crash is an AssertionError.
        own_check = re.match(r"AssertionError: [\w-]+ at call \d+", last[0]) if last else None
        return bool(name) and bool(last) and from_compiled and name in last[0].split(":")[0] and own_check is None
    return False
