"""Atomic file writes: a reader (or a crash) never sees half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def _read_umask() -> int:
    umask = os.umask(0o022)  # reading it means setting it; done once, at import, not while threads write
    os.umask(umask)
    return umask


_UMASK = _read_umask()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically. The file keeps its mode if it
    existed, else gets the one ``open()`` would give it (mkstemp's private
    0600 would hide a store or report meant to be shared or checked in)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def append_line(path: Path, data) -> None:
    """Append one JSON line; a line is written with one write() call."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(json.dumps(data, sort_keys=True, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
