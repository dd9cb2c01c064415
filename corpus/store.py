"""A directory store of findings, one folder per signature.

    ROOT/<signature>/finding.json    the representative case
    ROOT/<signature>/repro.py        its standalone repro script
    ROOT/<signature>/duplicates.jsonl   every later case with that signature

Each file appears atomically, so a campaign killed at any moment leaves
only whole findings behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from symfuzz.corpus.atomic import TMP_SUFFIX, append_line, locked, write_json, write_text
from symfuzz.corpus.finding import Finding
from symfuzz.corpus.scripts import render_repro


class FindingStore:
    def __init__(self, root):
        self.root = Path(root)

    def path(self, signature: str) -> Path:
        return self.root / signature

    def __contains__(self, signature: str) -> bool:
        return (self.path(signature) / "finding.json").exists()

    def add(self, finding: Finding) -> bool:
        """Store a finding; True if its signature is new, False if a duplicate.

        A folder is written in place, finding.json last: its presence marks the folder
        complete, so a writer killed at any stage leaves no finding or a whole one (and at
        most hidden temp files, swept by the next writer of that folder). The store is
        locked meanwhile: two processes adding one signature give one finding and one
        duplicate, never one's repro.py beside the other's finding.json."""
        folder = self.path(finding.signature)
        with locked(self.root):
            if finding.signature in self:
                append_line(folder / "duplicates.jsonl", {"case": finding.case, "verdict": finding.verdict.to_json()})
                return False
            folder.mkdir(parents=True, exist_ok=True)
            _sweep_temp_files(folder)
            write_text(folder / "repro.py", render_repro(finding), mode=0o755)
            write_json(folder / "finding.json", finding.to_json())
            return True

    def __iter__(self) -> Iterator[Finding]:
        for path in sorted(self.root.glob("*/finding.json")):
            yield Finding.from_json(json.loads(path.read_text()))

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/finding.json"))


def _sweep_temp_files(folder: Path) -> None:
    """Remove the temp files a killed writer left in ``folder`` (called under the store's lock,
    before the folder is written: no other writer has a temp file there)."""
    for stale in folder.glob(f".*{TMP_SUFFIX}"):
        if stale.is_file():
            stale.unlink(missing_ok=True)


def load_findings(path) -> list[tuple[Path, Finding]]:
    """Findings at ``path``: a finding folder, a finding.json, or a tree of them."""
    path = Path(path)
    if path.is_file():
        files = [path]
    elif (path / "finding.json").exists():
        files = [path / "finding.json"]
    else:
        files = sorted(path.rglob("finding.json"))
    out = []
    for file in files:
        try:
            out.append((file.parent, Finding.from_json(json.loads(file.read_text()))))
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            raise ValueError(f"{file} is not a readable symfuzz finding: {exc}") from exc
    return out
