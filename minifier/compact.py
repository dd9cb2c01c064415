"""The short repro of a minified finding: a script to paste into a bug report.

``corpus.short_repro.render_short`` renders it: the program, the calls' inputs
on one line each, the marks and flags, one ``torch.compile`` and plain checks
against eager, which raise on the first call where compiled differs. A module
program gets ``corpus.scripts.render_compact``'s instead (its own model per side,
judged by the campaign's ``compare``). Here: whether a run of it shows the
subject's failure. The judged script goes beside it as judge.py (minifier/driver.py).

Not every finding fits this shape: runner lanes (torch.export), the Triton
interpreter lane and symptoms judged from the compile's bookkeeping
(recompiles, specialization, fake tensors) keep the judged repro.
"""

from __future__ import annotations

import re
from typing import Optional

from symfuzz.corpus import scripts
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.short_repro import render_short, short_mismatch, shown_plainly
from symfuzz.corpus.deaths import cause_of, place_from_evidence, same_place
from symfuzz.minifier.case_eager import compares_only_floats
from symfuzz.oracles.verdict import OUT_OF_MEMORY, RaisedError


# A traceback's exception line: "pkg.module.SomeError: message" (or no message), unindented,
# a class name last.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:?$)")


def render_compact(subject) -> Optional[str]:
    """The short script for a CaseSubject, or None when its finding needs the judged repro: the plain
    script of corpus/short_repro.py, else (a module program) the compact one of corpus/scripts.py, which
    pastes rounding's explainer only where a compared leaf may be discrete."""
    plain = render_short(_on_its_lane(subject), minified=True)
    if plain is not None:
        return plain
    return scripts.render_compact(subject.case, subject.verdict, subject.lane, subject.environment,
                                  discrete=not compares_only_floats(subject.case))


def _on_its_lane(subject) -> Finding:
    """The subject as a finding on the finding's own lane (its queries may run on a cheaper one)."""
    return Finding(case=subject.case.to_json(), verdict=subject.verdict, lane=subject.lane,
                   environment=subject.environment)


def compact_matches(subject, outcome) -> bool:
    """Does a run of the short repro show the subject's failure?

    It prints no signature, so this checks what it can see: a mismatch of
    the same kind, the same exception type for a crash, the same signal or
    a timeout for a dead process.
    """
    symptom, evidence = subject.verdict.symptom, subject.verdict.evidence
    text = outcome.output[-20000:]
    plain = symptom not in ("timeout", "process-death") and shown_plainly(subject.verdict, subject.lane, subject.case)
    if plain:
        code = None if outcome.timed_out else outcome.returncode
        return short_mismatch(_on_its_lane(subject), code, text, outcome.memory_exceeded) is None
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
