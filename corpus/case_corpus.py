"""The case corpus: cases worth running again first, as plain files a CI cache can carry.

    DIR/cases/<sha1 of the case JSON>.json   {"case", "lane", "why", "torch", "added"}

A campaign with ``--corpus DIR`` replays every stored case before it generates
any (a fixed bug that comes back is found seconds into the job), and appends the
cases of its findings and the cases that reached something new: an op, a guard
shape or a recompile reason no earlier case of the run reached.

Each file is named by its content's digest and written atomically (a temp file,
then a rename), so two runs appending to one corpus never corrupt it and the
same case stored twice is one file. Merging corpora is the union of their files.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from symfuzz.corpus.atomic import write_json


def case_digest(case: dict) -> str:
    return hashlib.sha1(json.dumps(case, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class StoredCase:
    name: str  # the file's stem: the case digest
    case: dict
    lane: str
    why: tuple[str, ...]


class CaseCorpus:
    def __init__(self, root):
        self.root = Path(root)
        self.cases_dir = self.root / "cases"

    def add(self, case: dict, lane: str, why: list[str], torch_version: str | None) -> bool:
        """Store ``case``; False if it is already there (its first reasons are kept)."""
        path = self.cases_dir / f"{case_digest(case)}.json"
        if path.exists():
            return False
        self.cases_dir.mkdir(parents=True, exist_ok=True)
        write_json(path, {"case": case, "lane": lane, "why": list(why), "torch": torch_version,
                          "added": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        return True

    def __iter__(self) -> Iterator[StoredCase]:
        """Stored cases in name order (the same order on every machine); unreadable files are skipped."""
        for path in sorted(self.cases_dir.glob("*.json")):
            try:
                data = json.loads(path.read_text())
                yield StoredCase(path.stem, data["case"], data.get("lane", ""), tuple(data.get("why", ())))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a file another tool half-wrote or mangled: not ours to judge

    def __len__(self) -> int:
        return sum(1 for _ in self.cases_dir.glob("*.json"))
