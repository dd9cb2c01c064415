"""What the campaign holds for one worker slot, whichever executor runs the worker.

A local worker process (``symfuzz.local_worker.Worker``) and a worker on a Ray node
(``symfuzz.ray_executor.RayWorker``) differ only in how a request reaches the
worker (``_send``), how it is stopped, and where its log is; the bookkeeping of
what is in flight, and the requests themselves, are here once.
"""

from __future__ import annotations

import json
import os
import queue
import time
from pathlib import Path
from typing import Optional

from symfuzz.corpus.inductor_cache import fresh_cache
from symfuzz.messages import Assign, RunCanary, Warmup, encode_request

# Worker settings chosen for throughput (``CampaignConfig.throughput_settings``). Each
# one changes how fast a worker compiles, never what it compiles or what the oracles
# compare; the lanes' own settings (``oracles/lanes/lane.py``: no FX graph or autograd
# cache, precision casts emulated) stay as they are. A value already in the
# environment wins.
THROUGHPUT_ENV = {
    # Compile in the worker itself, one kernel at a time. By default Inductor starts a
    # pool of compile subprocesses, one per core, in every worker: with one worker per
    # core already (--jobs), the pools only compete with the other workers for the same
    # cores, cost a start-up and memory per worker, and add a round trip per kernel to
    # programs that have one to three kernels. Inductor generates the same code and
    # calls the C++ compiler with the same flags; only the process that runs it differs
    # (the minifier's graph repros set the same, corpus/scripts.py).
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
}


def worker_args(config) -> list[str]:
    """The ``python -m symfuzz.worker`` arguments of a campaign's workers, whichever executor:
    its settings record (``symfuzz.settings.RunSettings``), as JSON."""
    return ["-m", "symfuzz.worker", "--settings", json.dumps(config.settings.to_json(), sort_keys=True)]


def throughput_env(config) -> dict:
    """``THROUGHPUT_ENV`` when the campaign asks for it, else nothing."""
    return dict(THROUGHPUT_ENV) if config.throughput_settings else {}


# The checkout or install that holds symfuzz: first on a worker's path, whatever the caller's.
_ROOT = str(Path(__file__).resolve().parent.parent)


def worker_env(config) -> dict:
    """A worker's environment on this machine: the lane's settings, the throughput settings
    (where the environment does not set them), its own Inductor cache, fixed hashing."""
    env = dict(os.environ)
    env.update(config.lane.env)
    for key, value in throughput_env(config).items():
        env.setdefault(key, value)
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        env["TORCHINDUCTOR_CACHE_DIR"] = fresh_cache(config.out / "inductor-cache")
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = _ROOT + os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else _ROOT
    return env


class WorkerSlot:
    LOG_NAME = "worker-{slot}.log"  # under OUT/workers/

    def __init__(self, slot: int, config, events: queue.Queue):
        self.slot = slot
        self.config = config
        self.events = events  # (worker, message) for each protocol line; (worker, None) once it ended
        self.index = None  # the case in flight: an index, or "corpus:NAME" for a stored case
        self.case: Optional[dict] = None
        self.judged: list = []  # failing verdicts of the case in flight, before triage
        self.since = 0.0
        self.ready = False
        self.canary = False  # the canary is in flight
        self.warming = False  # a warm-up run of the canary program is in flight (``start_warmup``)
        self.warmed = False  # it was sent one (once is enough)
        self.killed_for: Optional[str] = None
        self.log_mark = 0
        self.log_path.parent.mkdir(parents=True, exist_ok=True)

    def _send(self, line: str) -> bool:
        """Write one request line (``symfuzz.messages.encode_request``) to the worker; False if it is gone."""
        raise NotImplementedError

    def assign(self, index, case: Optional[dict] = None, guide: Optional[dict] = None) -> bool:
        """Hand over case ``index`` (or, for a corpus replay, the stored ``case``
        under the index "corpus:NAME"; ``guide``: how case ``index`` is guided, a mutant
        of a parent or a steered draw, ``messages.Assign``); False if the worker is already gone."""
        self.index, self.case, self.judged, self.since = index, None, [], time.monotonic()
        self.log_mark = _size(self.log_path)  # where this case's output starts (``case_log``)
        if self._send(encode_request(Assign(index, case, guide))):
            return True
        self.index = None  # its end-of-stream event will replace it
        self.ready = False
        return False

    def start_canary(self) -> bool:
        """Hand over the canary; False if the worker is already gone."""
        self.canary, self.since = True, time.monotonic()
        if self._send(encode_request(RunCanary())):
            return True
        self.canary = False  # never sent: its end-of-stream event says why it is gone
        return False

    def start_warmup(self) -> bool:
        """While another worker runs the canary, run the canary program here too, its
        result unused: the first compile of a fresh worker pays for imports and a cold
        C++ toolchain, and would otherwise do so inside the budget, in this worker's
        first case, after it waited idle for the canary. False if the worker is gone."""
        self.warming, self.warmed, self.since = True, True, time.monotonic()
        if self._send(encode_request(Warmup())):
            return True
        self.warming = False
        return False

    @property
    def busy(self) -> bool:
        return self.index is not None or self.canary or self.warming

    @property
    def log_path(self) -> Path:
        return self.config.out / "workers" / self.LOG_NAME.format(slot=self.slot)

    def log_tail(self, limit: int = 4000) -> str:
        return tail(self.log_path, limit)

    def case_log(self, limit: int) -> str:
        """The last ``limit`` bytes of what the worker wrote since its case was assigned: a stack
        that faulthandler printed there is this case's (an earlier worker in this slot may
        have printed one too, and a process killed outright prints none)."""
        text = self.log_tail(limit)
        written = _size(self.log_path) - self.log_mark  # bytes; text[-written:] is close enough for a stack
        if written <= 0:
            return ""
        return text[-written:] if written < len(text) else text


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tail(path: Path, limit: int = 4000) -> str:
    """The last ``limit`` bytes of a file, as text ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
