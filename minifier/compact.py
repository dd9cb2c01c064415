"""The short repro of a minified finding: a script to paste into a bug report.

``corpus.short_repro.render_short`` renders it: the program, the calls' inputs
on one line each, the marks and flags, one ``torch.compile`` and plain checks
against eager, which raise on the first call where compiled differs (a module
program: a model per side, its state checked too). Here: whether a run of it shows
the subject's failure. The judged script goes beside it as judge.py (minifier/driver.py).

Not every finding fits this shape: runner lanes (torch.export), the Triton
interpreter lane and symptoms judged from the compile's bookkeeping
(recompiles, specialization, fake tensors) keep the judged repro.
"""

from __future__ import annotations

from typing import Optional

from symfuzz.corpus.deaths import cause_of, place_from_evidence, same_place
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.short_repro import render_short, short_mismatch, shown_plainly
from symfuzz.oracles.verdict import OUT_OF_MEMORY


def render_compact(subject) -> Optional[str]:
    """The short script for a CaseSubject (corpus/short_repro.py's, minified), or None when its finding
    needs the judged repro."""
    return render_short(_on_its_lane(subject), minified=True)


def _on_its_lane(subject) -> Finding:
    """The subject as a finding on the finding's own lane (its queries may run on a cheaper one)."""
    return Finding(case=subject.case.to_json(), verdict=subject.verdict, lane=subject.lane,
                   environment=subject.environment)


def compact_matches(subject, outcome) -> bool:
    """Does a run of the short repro show the subject's failure?

    It prints no signature, so this checks what it can see (``short_mismatch``):
    a failed check at the same call, the same exception type out of the compiled
    call for a crash; the same signal, in the same place, or a timeout for a dead process.
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
    return False  # no short script: the judged one is checked by its own criterion
