"""Atomic file writes: a reader (or a crash) never sees half a file.

- ``write_text`` / ``write_json``: the bytes go to a temp file beside the target
  (``.NAME.XXXX.tmp``: no reader globs for it), are fsynced, then renamed over it.
  A write that fails (a full disk) removes the temp file and leaves the old file
  as it was; one killed outright leaves at most that hidden temp file.
- ``append_line``: one JSON line appended under an exclusive lock. A write that
  fails is cut back off, so the file still ends on a whole line; a torn last line
  that a killed writer left is cut off by the next append.
- ``locked(folder)``: an exclusive lock on a folder (no lock file is left behind),
  for read-check-write sequences that other processes may run at the same time.

A write that fails for want of space raises ``DiskFullError``, which names the file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: writes stay atomic, but concurrent appends go unlocked
    fcntl = None

TMP_SUFFIX = ".tmp"  # the temp files' names: "." + the target's name + random + this
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class DiskFullError(OSError):
    """A write failed because the disk (or the user's quota) is full. Nothing
    already written was changed; ``str()`` says which file could not be written."""

    def __init__(self, path, code: int = errno.ENOSPC):
        super().__init__(code, os.strerror(code), str(path))
        self.path = Path(path)

    def __str__(self) -> str:
        return f"disk full writing {self.path}"


def _read_umask() -> int:
    umask = os.umask(0o022)  # reading it means setting it; done once, at import, not while threads write
    os.umask(umask)
    return umask


_UMASK = _read_umask()
FOLDER_MODE = 0o777 & ~_UMASK  # the mode mkdir() gives a folder


@contextlib.contextmanager
def disk_full_as(path: Path):
    """Turn a want-of-space OSError into a DiskFullError naming ``path``."""
    try:
        yield
    except DiskFullError:
        raise
    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise DiskFullError(path, exc.errno) from exc
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_dir(folder: Path) -> None:
    """Make a rename into ``folder`` durable (a power cut, not only a kill)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a folder; the rename itself is still atomic
    finally:
        os.close(fd)


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` atomically. The file gets ``mode`` if given, else
    keeps its mode if it existed, else gets the one ``open()`` would give it
    (mkstemp's private 0600 would hide a store or report meant to be shared or
    checked in)."""
    path = Path(path)
    with disk_full_as(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o777
            except FileNotFoundError:
                mode = 0o666 & ~_UMASK
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
        try:
            try:
                _write_all(fd, text.encode("utf-8"))
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        fsync_dir(path.parent)


def write_json(path: Path, data) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def append_line(path: Path, data) -> None:
    """Append one JSON line, whole or not at all (see the module docstring)."""
    path = Path(path)
    line = (json.dumps(data, sort_keys=True, default=str) + "\n").encode("utf-8")
    with disk_full_as(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released on close, or by the kernel if this process is killed
            end = _mend_last_line(fd)
            try:
                _write_all(fd, line)
                os.fsync(fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, end)  # the line, or the part of it that fitted, is taken back
                raise
        finally:
            os.close(fd)


def _mend_last_line(fd: int) -> int:
    """Make the file end on a whole line; return its size. A last line without its
    newline is one a killed (or disk-full) writer left half-written: it is cut off,
    unless it is whole JSON (a file someone wrote by hand), which gets its newline."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    start, tail = size, b""
    while start > 0:
        block_start = max(0, start - 65536)
        block = os.pread(fd, start - block_start, block_start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            start, tail = block_start + cut + 1, block[cut + 1:] + tail
            break
        start, tail = block_start, block + tail
    try:
        json.loads(tail)
    except ValueError:
        os.ftruncate(fd, start)
        return start
    _write_all(fd, b"\n")
    return size + 1


@contextlib.contextmanager
def locked(folder: Path):
    """Hold an exclusive lock on ``folder`` (created if missing) against other
    processes and threads that lock it too. The lock is on the folder itself, so no
    lock file is left behind; the kernel drops it if the holder is killed."""
    folder = Path(folder)
    with disk_full_as(folder):
        folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
