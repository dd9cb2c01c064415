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
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from symfuzz.corpus.atomic import locked, write_text
from symfuzz.corpus.deaths import place_from_evidence
from symfuzz.corpus.finding import Finding, FindingFormatError, kind_of, read_json_file, signature_problem
from symfuzz.oracles.verdict import (Died, FakeRealMismatch, Hung, OutputMismatch, RaisedError, UnsoundGuard,
                                     error_headline)

BASELINE_VERSION = 1
DEFAULT_BASELINE = Path("symfuzz-baseline.json")


class BaselineError(ValueError):
    """A baseline file that cannot be read: one line that says which and why."""


@dataclass
class Baseline:
    path: Path
    entries: dict  # signature -> entry
    resigned: dict = field(default_factory=dict)  # old signature -> new, by ``resign`` (not kept by ``save``)

    def __contains__(self, signature: str) -> bool:
        return signature in self.entries

    def findings(self) -> list[tuple[str, Finding]]:
        """(signature, the entry's finding) for every entry, to replay them (check each one's case
        with ``finding.check_case`` first); BaselineError naming the first entry without one."""
        out = []
        for sig, entry in sorted(self.entries.items()):
            repro = entry.get("repro")
            if not isinstance(repro, dict):
                raise BaselineError(f"baseline {self.path}: entry {sig!r} has no repro to replay (no \"repro\" "
                                    "object); accept its finding again, or remove the entry")
            try:
                # the case is parsed by the replay (``check_case``), not here: a baseline lists findings
                out.append((sig, Finding.from_json({**repro, "signature": sig}, parse_case=False)))
            except FindingFormatError as exc:
                raise BaselineError(f"baseline {self.path}: entry {sig!r} has no replayable repro: {exc}") from None
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

    def old_signed(self) -> list[tuple[str, str]]:
        """(signature, what it stood for) of each entry signed the way an older symfuzz signed
        a whole class of bugs (``old_signing``), in signature order."""
        return [(sig, what) for sig, entry in sorted(self.entries.items()) if (what := old_signing(entry))]

    def old_signed_notes(self) -> list[str]:
        """One line per old-signed entry: what changed, and how to re-sign it."""
        return [f"baseline {self.path}: entry {sig} was signed by an older symfuzz, which gave {what} that one "
                f"signature; it now stands for its own bug only, so another such bug is new. Re-sign it from "
                f"its repro with `symfuzz replay --baseline {self.path}`" for sig, what in self.old_signed()]

    def resign(self, old: str, new: str, evidence: dict) -> None:
        """Key entry ``old`` by ``new``, its signature from today's symfuzz, with ``evidence``'s
        fields added to its repro's (where it died; which gradient); its date, torch version
        and reason stay. Where ``new`` is listed already, the old entry just goes."""
        entry = self.entries.pop(old)
        self.resigned[old] = new
        if new in self.entries:
            return
        repro = dict(entry.get("repro") or {})
        verdict = dict(repro.get("verdict") or {})
        verdict.update(signature=new, evidence={**(verdict.get("evidence") or {}), **evidence})
        repro["verdict"] = verdict
        self.entries[new] = {**entry, "signature": new, "repro": repro, "resigned_from": old}

    def save(self) -> None:
        """Write the file. Under a lock, entries another process saved since this one was
        loaded are kept (two `symfuzz accept` runs at once both land); this one's entries,
        edited or not, are written as they are."""
        with locked(self.path.parent.resolve()):
            try:
                on_disk = load_baseline(self.path, missing_ok=True).entries
            except BaselineError:
                on_disk = {}  # unreadable now: it was readable when loaded, so this run's copy replaces it
            on_disk = {sig: entry for sig, entry in on_disk.items() if sig not in self.resigned}
            self.entries = {**on_disk, **self.entries}
            write_text(self.path, render(self.entries))


def render(entries: dict) -> str:
    return json.dumps({"baseline_version": BASELINE_VERSION, "entries": entries}, indent=2, sort_keys=True) + "\n"


def load_baseline(path, missing_ok: bool = False) -> Baseline:
    """The baseline at ``path``; an empty one if it does not exist and ``missing_ok``.

    Read strictly and without running anything (JSON, UTF-8, no duplicate keys, at most
    MAX_BASELINE_BYTES): every entry is keyed by a valid signature and holds an object whose
    ``repro`` is a finding; anything else is a BaselineError that names the file and the
    entry. A file that cannot be read is never rewritten: ``accept`` stops first."""
    path = Path(path)
    if not os.path.lexists(path):
        if missing_ok:
            return Baseline(path, {})
        raise BaselineError(f"baseline {path} does not exist (create it with `symfuzz accept OUT --baseline {path}`)")
    try:
        data = read_json_file(path, MAX_BASELINE_BYTES, what="baseline")
    except FindingFormatError as exc:
        raise BaselineError(f"baseline {path} {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise BaselineError(f"baseline {path} is not a symfuzz baseline (no \"entries\" object)")
    version = data.get("baseline_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BaselineError(f"baseline {path}: \"baseline_version\" must be a whole number from 1, got {kind_of(version)}")
    if version > BASELINE_VERSION:
        raise BaselineError(f"baseline {path} was written by a newer symfuzz; upgrade symfuzz to read it")
    for sig, entry in data["entries"].items():
        problem = _entry_problem(sig, entry)
        if problem:
            raise BaselineError(f"baseline {path}: entry {sig[:80]!r} {problem}; fix or remove that entry "
                                "(or the file, and accept again)")
    return Baseline(path, data["entries"])


# A baseline with thousands of entries is a few MB; a bigger file is not one, and is not read.
MAX_BASELINE_BYTES = 50 * 1024 * 1024


def _entry_problem(sig: str, entry) -> str | None:
    """Why the entry ``sig`` -> ``entry`` is not one ``entry_for`` wrote (None: it is)."""
    problem = signature_problem(sig)
    if problem:
        return f"is not keyed by a signature: {problem}"
    if not isinstance(entry, dict):
        return f"must be an object, got {kind_of(entry)}"
    if "signature" in entry and entry["signature"] != sig:
        return f"holds the signature {entry['signature']!r:.80}, not its key"
    for name in ("description", "reason", "symptom", "first_seen"):
        if entry.get(name) is not None and not isinstance(entry[name], str):
            return f"field {name!r} must be a string, got {kind_of(entry[name])}"
    if "repro" in entry:
        if not isinstance(entry["repro"], dict):
            return f"field 'repro' must be an object, got {kind_of(entry['repro'])}"
        try:
            # the case itself is parsed when the entry is replayed (``Baseline.findings``)
            Finding.from_json({**entry["repro"], "signature": sig}, parse_case=False)
        except FindingFormatError as exc:
            return f"has a repro that is not a finding: {exc}"
    return None


def old_signing(entry: dict) -> str | None:
    """What an entry's signature stood for when an older symfuzz gave it to a whole class of
    bugs: every death of a lane by one signal, every hang of a lane, every wrong gradient of a
    lane (of one kind). None for an entry signed by where it failed (corpus/deaths.py: a
    phase in its evidence) or by which input's gradient differs (``gradient_of``)."""
    repro = entry.get("repro") if isinstance(entry.get("repro"), dict) else {}
    verdict = repro.get("verdict") if isinstance(repro.get("verdict"), dict) else {}
    evidence = verdict.get("evidence") if isinstance(verdict.get("evidence"), dict) else {}
    symptom = verdict.get("symptom") or entry.get("symptom")
    lane = entry.get("lane") or (repro.get("lane") or {}).get("name") or "?"
    if symptom == "process-death" and "phase" not in evidence:
        return f"every death by {evidence.get('cause') or 'a signal'} on lane {lane}"
    if symptom == "timeout" and "phase" not in evidence:
        return f"every hang on lane {lane}"
    gradient = symptom == "gradient-mismatch" or evidence.get("reused_symptom") == "gradient-mismatch"
    if gradient and str(evidence.get("path") or "").startswith("out[2]") and "gradient_of" not in evidence:
        return f"every wrong gradient (of one kind) on lane {lane}"
    return None


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
        what = f"{evidence.error.get('type', 'error')}: {error_headline(evidence.error.get('message'))}"
    elif isinstance(evidence, (OutputMismatch, UnsoundGuard)):
        what = f"{evidence.path or 'out'}: {evidence.detail}"
    elif isinstance(evidence, FakeRealMismatch):
        what = evidence.detail
    elif isinstance(evidence, Hung):
        what = f"ran past {evidence.timeout_seconds:.0f}s" + _where(evidence)
    elif isinstance(evidence, Died):
        what = f"the process died ({evidence.cause})" + _where(evidence)
    else:
        what = getattr(evidence, "detail", "") or type(evidence).__name__
    ops = _program_ops(finding.case)
    where = f" at call {verdict.call_index}" if verdict.call_index is not None else ""
    layer = (finding.triage or {}).get("stage") or verdict.stage
    line = f"{verdict.symptom} in {layer}{where}: {what}" + (f" (ops: {', '.join(ops)})" if ops else "")
    return " ".join(line.split())[:300]


def _where(evidence) -> str:
    """Where a death or hang happened, as its evidence records it ("" if it records nothing)."""
    place = place_from_evidence(evidence)
    return f" {place.describe()}" if place is not None else ""


def _program_ops(case: dict) -> list[str]:
    nodes = ((case or {}).get("program") or {}).get("body") or []
    seen = []
    for node in nodes:
        op = node.get("op") if isinstance(node, dict) else None
        if isinstance(op, str) and op not in seen:
            seen.append(op)
    return seen[:8]
