"""Fresh Inductor caches that do not probe the machine again.

symfuzz gives its processes fresh Inductor caches (a campaign's workers, its
confirmations, corpus replays, the minifier's queries), so that no compiled
program leaks from one to another. But Inductor's first compile in an empty cache
also probes the machine: it builds a small C++ file per vector instruction set the
CPU claims (AVX2, AVX-512, AMX, ...) to learn which ones its compiler can build
for. That is about ten compiles, some 8 seconds on 2 cores, in every fresh cache.

The answer is a fact about the machine, not about any program: the probe files are
named by a hash of their code, the compiler's version, the flags and torch's
version. So the probes are made once per machine, in a store of their own
(``SYMFUZZ_PROBE_CACHE``, else ``~/.cache/symfuzz/inductor-probes``), and copied
into each fresh cache. Another compiler or torch names other files: they miss,
and Inductor probes again, as it would have. Inductor still loads each probe in a
subprocess to confirm it, as always. Anything failing here leaves the cache fresh
and empty: this only saves time.

A process that will compile in the user's own Inductor cache later (the opcheck
plugin's checks, after the tests) can instead have the probe made there in the
background, at low priority, while it does other work: ``probe_in_background``.
"""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from filelock import FileLock, Timeout

STORE_ENV = "SYMFUZZ_PROBE_CACHE"
# Runs Inductor's probe in a cache of its own (the store's): the same call Inductor makes on its first C++ compile.
_PROBE = "from torch._inductor import cpu_vec_isa; cpu_vec_isa.valid_vec_isa_list()"
_PROBE_SECONDS = 300
# The background probe in the user's cache: skipped when this torch's marker is there, and leaves one when done.
_PROBE_AND_MARK = """
import os, sys
try:
    os.nice(19)  # the lowest priority, for its compilers too: it uses what the caller leaves idle
except OSError:
    pass
import torch
from torch._inductor.runtime.cache_dir_utils import cache_dir
marker = os.path.join(cache_dir(), sys.argv[1])
if not os.path.exists(marker):
    from torch._inductor import cpu_vec_isa
    cpu_vec_isa.valid_vec_isa_list()
    open(marker, "w").close()
"""


def fresh_cache(path) -> str:
    """Make ``path`` an Inductor cache that holds only this machine's probes (see
    the module's docstring); returns it as a string, for TORCHINDUCTOR_CACHE_DIR."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    probes = _probes()
    if probes is not None:
        try:
            shutil.copytree(probes, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("locks", "*.lock"))
            (path / _marker()).touch()  # nothing for probe_in_background to do here
        except OSError:
            pass  # only time is lost: Inductor probes in this cache itself
    return str(path)


def _store() -> Path:
    configured = os.environ.get(STORE_ENV)
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "symfuzz" / "inductor-probes"


def _probes() -> Path | None:
    """The folder of this machine's probes for this Python and torch, made on first use
    (once, whoever asks first: the others wait for it); None when they can't be made."""
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None
    # One per interpreter and torch: another venv may hold another torch of the same version string.
    interpreter = hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    folder = _store() / f"torch-{version}-py{sys.version_info[0]}{sys.version_info[1]}-{interpreter}"
    done, failed = folder / "done", folder / "failed"
    if done.exists():
        return folder / "cache"
    if failed.exists():
        return None  # tried once; Inductor probes in each cache itself, as it would without symfuzz
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder / "make.lock"), timeout=_PROBE_SECONDS + 60):
            if failed.exists():
                return None
            if not done.exists():
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(folder / "cache")}
                made = subprocess.run([sys.executable, "-c", _PROBE], env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, timeout=_PROBE_SECONDS)
                if made.returncode != 0:
                    failed.write_text(made.stderr.decode(errors="replace")[-4000:])
                    return None
                done.write_text("")
    except (OSError, Timeout, subprocess.SubprocessError):
        return None
    return folder / "cache"


def probe_in_background(env=None):
    """Start Inductor's probe of the machine in the Inductor cache that processes with
    ``env`` (default: this one's) will use, unless it was made there already; returns
    the process, or None when none was started.

    It runs at the lowest priority, in a session of its own, and is never waited for
    or killed: a process that compiles before it is done waits on Inductor's own lock
    for a probe under way and makes the rest itself; killing a compile could leave a
    half-written library that Inductor would then read as "not supported". Its cost
    on a machine that has it already is one look for a file, here.
    """
    env = dict(os.environ if env is None else env)
    marker = _marker()
    if not marker:
        return None
    # Inductor's default cache (torch/_inductor/runtime/cache_dir_utils.py), read without importing torch;
    # were it to move, the child (which asks torch) finds the marker there and stops.
    where = env.get("TORCHINDUCTOR_CACHE_DIR") or _default_inductor_cache()
    if where and os.path.exists(os.path.join(where, marker)):
        return None
    try:
        return subprocess.Popen([sys.executable, "-c", _PROBE_AND_MARK, marker], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None  # only time is lost: the first compile probes, as it would have


def _marker() -> str:
    """The file that says a cache holds this torch's probes ("" without torch)."""
    try:
        return f"symfuzz-probed-torch-{metadata.version('torch')}"
    except metadata.PackageNotFoundError:
        return ""


def _default_inductor_cache() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        return ""
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))
