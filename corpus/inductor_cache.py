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
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from filelock import FileLock, Timeout

STORE_ENV = "SYMFUZZ_PROBE_CACHE"
# Runs Inductor's probe in a cache of its own (the store's): the same call Inductor makes on its first C++ compile.
_PROBE = "from torch._inductor import cpu_vec_isa; cpu_vec_isa.valid_vec_isa_list()"
_PROBE_SECONDS = 300


def fresh_cache(path) -> str:
    """Make ``path`` an Inductor cache that holds only this machine's probes (see
    the module's docstring); returns it as a string, for TORCHINDUCTOR_CACHE_DIR."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    probes = _probes()
    if probes is not None:
        try:
            shutil.copytree(probes, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("locks", "*.lock"))
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
