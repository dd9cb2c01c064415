"""A directory store of findings, one folder per signature.

    ROOT/<signature>/finding.json    the representative case
    ROOT/<signature>/repro.py        its standalone repro script
    ROOT/<signature>/duplicates.jsonl   every later case with that signature

A folder appears whole (written under a hidden temp name, then renamed into
place) and each file in it atomically, so a campaign killed at any moment
leaves only whole findings behind.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from symfuzz.corpus.atomic import (
    FOLDER_MODE,
    TMP_SUFFIX,
    DiskFullError,
    append_line,
    disk_full_as,
    fsync_dir,
    locked,
    write_json,
    write_text,
)
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

        The folder is written under a hidden temp name (``.<sig>.XXXX.tmp``: repro.py, then
        finding.json) and renamed into place, so a writer killed at any stage leaves no
        finding or a whole one; a temp folder it left is swept by the store's next writer.
        The store is locked meanwhile: two processes adding one signature give one finding
        and one duplicate, never one's repro.py beside the other's finding.json."""
        folder = self.path(finding.signature)
        with locked(self.root):
            if finding.signature in self:
                append_line(folder / "duplicates.jsonl", {"case": finding.case, "verdict": finding.verdict.to_json()})
                return False
            _sweep_temp_folders(self.root)
            with disk_full_as(folder):
                tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=f".{finding.signature}.", suffix=TMP_SUFFIX))
            try:
                with disk_full_as(folder):
                    os.chmod(tmp, FOLDER_MODE)  # mkdtemp's private 0700 would stay on the renamed folder
                try:
                    write_text(tmp / "repro.py", render_repro(finding), mode=0o755)
                    write_json(tmp / "finding.json", finding.to_json())
                except DiskFullError as exc:  # named as the file it was to become
                    raise DiskFullError(folder / exc.path.name, exc.errno) from exc
                _rename_into_place(tmp, folder)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return True

    def __iter__(self) -> Iterator[Finding]:
        for path in sorted(self.root.glob("*/finding.json")):
            yield Finding.from_json(json.loads(path.read_text()))

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/finding.json"))


def _sweep_temp_folders(root: Path) -> None:
    """Remove the temp folders a killed writer left in ``root`` (called under the store's
    lock: no other writer has one in flight)."""
    for stale in root.glob(f".*{TMP_SUFFIX}"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


def _rename_into_place(tmp: Path, folder: Path) -> None:
    """Rename the finished folder ``tmp`` to ``folder``. A folder already there has no
    finding.json (the caller checked, under the lock): what a writer of an older symfuzz
    left when it was killed; it is moved aside and removed."""
    try:
        os.rename(tmp, folder)  # onto an empty folder too
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        aside = folder.with_name(f".{folder.name}.stale-{secrets.token_hex(4)}{TMP_SUFFIX}")
        os.rename(folder, aside)
        os.rename(tmp, folder)
        shutil.rmtree(aside, ignore_errors=True)
    fsync_dir(folder.parent)


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
