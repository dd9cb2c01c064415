"""A directory store of findings, one folder per signature.

    ROOT/<signature>/finding.json    the representative case
    ROOT/<signature>/repro.py        its standalone repro script, short (corpus/short_repro.py) where it can be
    ROOT/<signature>/judge.py        beside a short repro.py: the full judged script (corpus/scripts.py)
    ROOT/<signature>/duplicates.jsonl   every later case with that signature

A folder appears whole (written under a hidden temp name, then renamed into
place) and each file in it atomically, so a campaign killed at any moment
leaves only whole findings behind.
"""

from __future__ import annotations

import errno
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
from symfuzz.corpus.finding import MAX_FINDING_BYTES, Finding, FindingFormatError, read_finding, read_json_file
from symfuzz.corpus.scripts import render_repro
from symfuzz.corpus.short_repro import JUDGE_NAME, short_repro_for
from symfuzz.oracles.verdict import SYMPTOMS


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
                    judged, short = render_repro(finding), short_repro_for(finding)
                    write_text(tmp / "repro.py", short or judged, mode=0o755)
                    if short:
                        write_text(tmp / JUDGE_NAME, judged, mode=0o755)
                    write_json(tmp / "finding.json", finding.to_json())
                except DiskFullError as exc:  # named as the file it was to become
                    raise DiskFullError(folder / exc.path.name, exc.errno) from exc
                _rename_into_place(tmp, folder)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            return True

    def _files(self) -> list[Path]:
        # (a hidden folder is a finding a writer has not yet renamed into place)
        return sorted(p for p in self.root.glob("*/finding.json") if not p.parent.name.startswith("."))

    def __iter__(self) -> Iterator[Finding]:
        for path in self._files():
            yield read_finding(path)

    def __len__(self) -> int:
        return len(self._files())


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
    """Findings at ``path``: a finding folder, a finding.json, or a tree of them.
    The first one that cannot be read raises FindingFormatError (a ValueError)
    naming its file; ``scan_findings`` reads past them instead."""
    found, unreadable = scan_findings(path)
    if unreadable:
        where, why = unreadable[0]
        raise FindingFormatError(f"{where}: {why}")
    return found


def scan_findings(path) -> tuple[list[tuple[Path, Finding]], list[tuple[Path, str]]]:
    """(the findings at ``path`` as (folder, finding), the ones that cannot be read as
    (path, why)). ``path`` is a finding folder, a finding.json, or a tree of them; in a
    tree, a signature-named folder holding a repro.py or duplicates.jsonl but no
    finding.json is unreadable too (a writer stopped before finishing it, or the file was
    removed). Reading runs nothing: see ``read_finding``."""
    path = Path(path)
    tree = path.is_dir() and path.name != "finding.json" and not os.path.lexists(path / "finding.json")
    if not tree:
        files = [path / "finding.json" if path.is_dir() and path.name != "finding.json" else path]
    else:
        files, leftovers = _walk(path)
    found, unreadable = [], []
    for file in files:
        try:
            found.append((file.parent, Finding.from_json(read_json_file(file, MAX_FINDING_BYTES))))
        except FindingFormatError as exc:
            unreadable.append((file, str(exc)))
    if tree:
        unreadable += [(folder, _MISSING) for folder in leftovers]
    return found, sorted(unreadable)


_MISSING = ("has no finding.json: a campaign stopped while writing it, or the file was removed "
            "(run the campaign again, or remove the folder)")


def _looks_like_a_finding_folder(folder: Path) -> bool:
    """A folder named like a signature that holds what a store writes before finding.json."""
    return (folder.name.split("-", 1)[0] in _SYMPTOM_HEADS and
            any((folder / name).exists() for name in ("repro.py", "duplicates.jsonl")))


# A store's folders are named by signature, "<symptom>-<digest>"; the symptoms' first words.
_SYMPTOM_HEADS = {symptom.split("-", 1)[0] for symptom in SYMPTOMS}


def _walk(root: Path) -> tuple[list[Path], list[Path]]:
    """(every finding.json under ``root``, the finding folders without one that are not
    inside a finding's folder), in one walk that does not follow symlinked folders nor
    enter hidden ones (a writer's ``.<sig>.XXXX.tmp``: not a finding until renamed)."""
    files, candidates = [], []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "finding.json" in names or "finding.json" in dirs:
            files.append(Path(folder) / "finding.json")
        elif {"repro.py", "duplicates.jsonl"} & set(names) and _looks_like_a_finding_folder(Path(folder)):
            candidates.append(Path(folder))
    holders = {file.parent for file in files}
    leftovers = [c for c in candidates if not any(parent in holders for parent in c.parents)]
    return sorted(files), leftovers
