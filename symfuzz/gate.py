"""The CI gate: which of a run's findings fail it, and the exit code that says so.

Each confirmed finding is *known* (its signature is in the baseline) or new,
and, with a reference Python, a ``regression``, ``pre-existing`` or ``unknown``
(``corpus.regression``). ``--fail-on`` picks the findings that fail the run:

- ``new`` (the default): findings not in the baseline;
- ``regression``: findings that pass under the reference torch (and are not known);
- ``any``: every finding.

The judgement is written to OUT/gate.json (docs/output.md); reports read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from symfuzz.corpus.atomic import write_json
from symfuzz.corpus.baseline import Baseline, describe
from symfuzz.corpus.regression import REGRESSION, UNKNOWN, judge_against_reference
from symfuzz.corpus.replay import ScriptRunner
from symfuzz.corpus.store import scan_findings
from symfuzz.exit_codes import EXIT_ENVIRONMENT, EXIT_FINDINGS, EXIT_OK

POLICIES = ("regression", "new", "any")


def judge_findings(out: Path, policy: str, baseline: Optional[Baseline], reference_python: Optional[str],
                   timeout: float, note: Callable[[str], None] = lambda message: None,
                   runner: Optional[ScriptRunner] = None, signatures=None) -> dict:
    """gate.json's content for the confirmed findings in ``out``/findings; ``signatures``: only
    these (a reused output folder holds earlier runs' findings too)."""
    findings, unreadable = scan_findings(out / "findings") if (out / "findings").exists() else ([], [])
    judged, unjudged = {}, []
    for path, why in unreadable:  # edited or damaged after the run wrote it: nothing to judge it by
        note(f"symfuzz: {why}" if str(path) in why else f"symfuzz: {path}: {why}")
        unjudged.append(Path(path).parent.name if Path(path).name == "finding.json" else Path(path).name)
    for _, finding in findings:
        sig = finding.signature
        if signatures is not None and sig not in signatures:
            continue
        known = baseline is not None and sig in baseline
        entry = {"symptom": finding.verdict.symptom, "lane": finding.lane.get("name"),
                 "layer": (finding.triage or {}).get("stage") or finding.verdict.stage,
                 "description": describe(finding), "known": known, "regression": None, "reference": None}
        # A known finding is not run there: it cannot fail the run (but under "any", it is reported)
        if reference_python and (not known or policy == "any"):
            note(f"{sig}: running its repro under the reference Python {reference_python} ...")
            verdict = judge_against_reference(finding, reference_python, timeout, runner=runner)
            entry["regression"], entry["reference"] = verdict.status, verdict.to_json()
            note(f"{sig}: {verdict.status} ({verdict.reason})")
        entry["fails"] = fails(policy, entry)
        if policy == "regression" and not known and entry["regression"] in (None, UNKNOWN):
            unjudged.append(sig)
        judged[sig] = entry
    gate = {"policy": policy, "baseline": str(baseline.path) if baseline is not None else None,
            "reference_python": reference_python, "findings": judged, "unjudged": sorted(unjudged)}
    return gate


def fails(policy: str, entry: dict) -> bool:
    if policy == "any":
        return True
    if entry["known"]:
        return False
    if policy == "new":
        return True
    return entry["regression"] == REGRESSION


def gate_exit_code(gate: dict) -> int:
    """1 when a finding fails under the policy; else 3 when one could not be judged; else 0.

    (The campaign's own states come first: an interrupted run is 130/143 and a
    run that tested too little is 3, whatever its findings; see the CLI.)
    """
    if any(entry["fails"] for entry in gate["findings"].values()):
        return EXIT_FINDINGS
    if gate["unjudged"]:
        return EXIT_ENVIRONMENT  # 3: could not judge (docs/exit-codes.md)
    return EXIT_OK


def write_gate(out: Path, gate: dict, exit_code: int) -> None:
    write_json(out / "gate.json", {**gate, "exit_code": exit_code})
