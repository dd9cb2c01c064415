"""The case corpus: cases worth running again first, as plain files a CI cache can carry.

    DIR/cases/<sha1 of the case JSON>.json   {"case", "lane", "why", "torch", "added", "features"}

A campaign with ``--corpus DIR`` replays every stored case before it generates
any (a fixed bug that comes back is found seconds into the job), and appends the
cases of its findings and the cases that reached something new: an op, a guard
shape or a recompile reason no earlier case of the run reached.

Each file is named by its content's digest and written atomically (a temp file,
then a rename), so two runs appending to one corpus never corrupt it and the
same case stored twice is one file. Merging corpora is the union of their files.

A corpus is often restored from a cache someone else wrote: a stored file that is
not a case (not JSON, not UTF-8, wrong types, a name that is not a digest) is
skipped, listed in ``unreadable``, and left as it is. Reading runs nothing.
A ``--corpus`` that is a file, or a folder this process cannot write, is a
``CorpusError`` at once, before a campaign spends its budget.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from symfuzz.corpus.atomic import write_json
from symfuzz.corpus.finding import FindingFormatError, check_case, kind_of, read_json_file

# A stored case is a few kilobytes; a bigger file is not one (and is not read).
MAX_CASE_BYTES = 10 * 1024 * 1024
DIGEST = re.compile(r"[0-9a-f]{40}")


class CorpusError(ValueError):
    """A --corpus folder a campaign cannot use: one line saying which and what to do."""


def case_digest(case: dict) -> str:
    return hashlib.sha1(json.dumps(case, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class StoredCase:
    name: str  # the file's stem: the case digest
    case: dict
    lane: str
    why: tuple[str, ...]
    # What the compiler did with it when it was stored, as "family:feature" strings (the
    # entry's "features"; none in an entry stored before they were recorded)
    features: tuple[str, ...] = ()


class CaseCorpus:
    def __init__(self, root, check: bool = True):
        self.root = Path(root)
        self.cases_dir = self.root / "cases"
        self.unreadable: list[tuple[Path, str]] = []  # (file, why): the files the last iteration skipped
        if check:
            self.check()

    def check(self) -> None:
        """CorpusError unless cases can be read from and added to the corpus."""
        for path in (self.root, self.cases_dir):
            if os.path.lexists(path) and not path.is_dir():
                raise CorpusError(f"--corpus {self.root}: {path} is not a folder; give a folder (it is created if "
                                  "missing)")
        existing = next((p for p in (self.cases_dir, self.root, *self.root.absolute().parents) if p.is_dir()), None)
        if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
            raise CorpusError(f"--corpus {self.root}: {existing} cannot be written (read-only); a campaign adds "
                              "its findings' cases to the corpus, so make it writable or copy it to a folder that is")

    def add(self, case: dict, lane: str, why: list[str], torch_version: str | None, features=None) -> bool:
        """Store ``case``; False if it is already there (its first reasons are kept).
        ``features``: what the compiler did with it (family -> features), listed with it."""
        path = self.cases_dir / f"{case_digest(case)}.json"
        if path.exists():
            return False
        self.cases_dir.mkdir(parents=True, exist_ok=True)
        write_json(path, {"case": case, "lane": lane, "why": list(why), "torch": torch_version,
                          "added": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                          "features": dict(features or {})})
        return True

    def __iter__(self) -> Iterator[StoredCase]:
        """Stored cases in name order (the same order on every machine). A file that is not a
        stored case is skipped and listed in ``unreadable`` (never changed or removed: it may be
        another tool's, or a newer symfuzz's)."""
        self.unreadable = []
        for path in sorted(self.cases_dir.glob("*.json")):
            try:
                yield read_stored_case(path)
            except FindingFormatError as exc:
                self.unreadable.append((path, str(exc)))

    def replayable(self) -> Iterator[StoredCase]:
        """As iterating, keeping only the cases this symfuzz can parse (``Case.from_json``): a
        case that does not parse would reach a worker as an internal error, not a test."""
        kept = []
        for stored in self:
            try:
                check_case(stored.case, what="stored case")
                kept.append(stored)
            except FindingFormatError as exc:
                self.unreadable.append((self.cases_dir / f"{stored.name}.json", str(exc)))
        self.unreadable.sort()
        yield from kept

    def __len__(self) -> int:
        return sum(1 for _ in self.cases_dir.glob("*.json"))


def read_stored_case(path: Path) -> StoredCase:
    """The stored case in ``path``; FindingFormatError (without the path) if it is not one."""
    if not DIGEST.fullmatch(path.stem):
        raise FindingFormatError("is not named by a case digest (40 hex digits): not a stored case; skipped, left "
                                 "as it is")
    data = read_json_file(path, MAX_CASE_BYTES, what="stored case")
    if not isinstance(data, dict):
        raise FindingFormatError(f"holds {kind_of(data)}, not a stored case object; {NOT_A_CASE}")
    lane, why = data.get("lane", ""), data.get("why", [])
    case = data.get("case")
    if not isinstance(case, dict):
        raise FindingFormatError(f"field 'case' must be an object, got {kind_of(case)}; {NOT_A_CASE}")
    for name in ("program", "schedule"):
        if not isinstance(case.get(name), dict):
            raise FindingFormatError(f"field 'case.{name}' must be an object, got {kind_of(case.get(name))}; "
                                     f"{NOT_A_CASE}")
    if not isinstance(lane, str):
        raise FindingFormatError(f"field 'lane' must be a string, got {kind_of(lane)}; {NOT_A_CASE}")
    if not isinstance(why, list) or not all(isinstance(w, str) for w in why):
        raise FindingFormatError(f"field 'why' must be an array of strings; {NOT_A_CASE}")
    return StoredCase(path.stem, case, lane, tuple(why), _feature_keys(data.get("features")))


def _feature_keys(features) -> tuple[str, ...]:
    """A stored entry's "features" (family -> names) as sorted "family:feature" strings; a field
    of another shape is no features (it only steers guidance, never decides a replay)."""
    if not isinstance(features, dict):
        return ()
    return tuple(sorted({f"{family}:{name}" for family, names in features.items() if isinstance(names, list)
                         for name in names if isinstance(name, str)}))


NOT_A_CASE = "this is not a stored case symfuzz wrote (or it was edited): skipped, left as it is"
