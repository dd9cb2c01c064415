"""The known-findings baseline: the fuzz counterpart of opcheck's xfail store.

``symfuzz accept OUT`` records OUT's confirmed findings in a JSON file
(default ``symfuzz-baseline.json``); ``symfuzz fuzz --baseline FILE`` then
counts a finding whose signature is listed as *known*: reported, not failing.

The file is made to be read in a diff and checked in: sorted keys, one entry
per signature, and accepting the same findings again leaves it byte-for-byte
unchanged (an entry, once written, keeps its first-seen date, its torch
version and the reason a person wrote). Each entry carries the finding itself
(case, verdict, lane) as its ``repro``, so ``symfuzz replay --baseline`` can run
it again from the file alone and report the entries that are fixed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from symfuzz.corpus.atomic import locked, write_text
from symfuzz.corpus.finding import Finding
from symfuzz.oracles.verdict import Died, FakeRealMismatch, Hung, OutputMismatch, RaisedError, UnsoundGuard

BASELINE_VERSION = 1
DEFAULT_BASELINE = Path("symfuzz-baseline.json")


class BaselineError(ValueError):
    """A baseline file that cannot be read: one line that says which and why."""


@dataclass
class Baseline:
    path: Path
    entries: dict  # signature -> entry

    def __contains__(self, signature: str) -> bool:
        return signature in self.entries

    def findings(self) -> list[tuple[str, Finding]]:
        """(signature, the entry's finding) for every entry, to replay them."""
        out = []
        for sig, entry in sorted(self.entries.items()):
            repro = entry.get("repro") or {}
            try:
                out.append((sig, Finding.from_json({**repro, "signature": sig})))
            except (KeyError, TypeError, ValueError) as exc:
                raise BaselineError(f"{self.path}: entry {sig} has no replayable repro ({exc})") from None
        return out

    def accept(self, findings: list[Finding]) -> list[str]:
        """Add the findings not listed yet; returns their signatures (existing entries are left as they are)."""
        added = []
        for finding in sorted(findings, key=lambda f: f.signature):
            if finding.signature in self.entries:
                continue
            self.entries[finding.signature] = entry_for(finding)
            added.append(finding.signature)
        return added

    def save(self) -> None:
        """Write the file. Under a lock, entries another process saved since this one was
        loaded are kept (two `symfuzz accept` runs at once both land); this one's entries,
        edited or not, are written as they are."""
        with locked(self.path.parent.resolve()):
            try:
                on_disk = load_baseline(self.path, missing_ok=True).entries
            except BaselineError:
                on_disk = {}  # unreadable now: it was readable when loaded, so this run's copy replaces it
            self.entries = {**on_disk, **self.entries}
            write_text(self.path, render(self.entries))


def render(entries: dict) -> str:
    return json.dumps({"baseline_version": BASELINE_VERSION, "entries": entries}, indent=2, sort_keys=True) + "\n"


def load_baseline(path, missing_ok: bool = False) -> Baseline:
    """The baseline at ``path``; an empty one if it does not exist and ``missing_ok``."""
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return Baseline(path, {})
        raise BaselineError(f"baseline {path} does not exist (create it with `symfuzz accept OUT --baseline {path}`)")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"baseline {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise BaselineError(f"baseline {path} is not a symfuzz baseline (no \"entries\" object)")
    if data.get("baseline_version", 1) > BASELINE_VERSION:
        raise BaselineError(f"baseline {path} was written by a newer symfuzz; upgrade symfuzz to read it")
    return Baseline(path, data["entries"])


def entry_for(finding: Finding) -> dict:
    verdict = finding.verdict
    return {
        "signature": finding.signature,
        "symptom": verdict.symptom,
        "lane": finding.lane.get("name"),
        "layer": (finding.triage or {}).get("stage") or verdict.stage,
        "description": describe(finding),
        "torch": finding.environment.get("torch"),
        "first_seen": time.strftime("%Y-%m-%d", time.gmtime()),
        "reason": "",  # for a person: why it is known, e.g. a link to the upstream issue
        "repro": {"case": _without_choices(finding.case), "verdict": verdict.to_json(), "lane": finding.lane,
                  "environment": finding.environment, "triage": finding.triage},
    }


def _without_choices(case: dict) -> dict:
    """The case as it replays: the generator's raw choices (hundreds of numbers, one per line in
    the file) only serve shrinking, not replaying, so they stay out of a file made to be diffed."""
    origin = {k: v for k, v in (case.get("origin") or {}).items() if k != "choices"}
    return {**case, "origin": origin}


def describe(finding: Finding) -> str:
    """One line: what goes wrong, where, in which program."""
    verdict = finding.verdict
    evidence = verdict.evidence
    if isinstance(evidence, RaisedError):
        message = (evidence.error.get("message") or "").strip().splitlines()
        what = f"{evidence.error.get('type', 'error')}: {message[0] if message else ''}"
    elif isinstance(evidence, (OutputMismatch, UnsoundGuard)):
        what = f"{evidence.path or 'out'}: {evidence.detail}"
    elif isinstance(evidence, FakeRealMismatch):
        what = evidence.detail
    elif isinstance(evidence, Hung):
        what = f"ran past {evidence.timeout_seconds:.0f}s"
    elif isinstance(evidence, Died):
        what = f"the process died ({evidence.cause})"
    else:
        what = getattr(evidence, "detail", "") or type(evidence).__name__
    ops = _program_ops(finding.case)
    where = f" at call {verdict.call_index}" if verdict.call_index is not None else ""
    layer = (finding.triage or {}).get("stage") or verdict.stage
    line = f"{verdict.symptom} in {layer}{where}: {what}" + (f" (ops: {', '.join(ops)})" if ops else "")
    return " ".join(line.split())[:300]


def _program_ops(case: dict) -> list[str]:
    nodes = ((case or {}).get("program") or {}).get("body") or []
    seen = []
    for node in nodes:
        op = node.get("op") if isinstance(node, dict) else None
        if isinstance(op, str) and op not in seen:
            seen.append(op)
    return seen[:8]
