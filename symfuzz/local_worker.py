"""A worker process on this machine, and the thread that reads its protocol stream.

``symfuzz.ray_executor.RayWorker`` is the same slot on a Ray node; what they share is
``symfuzz.worker_slot.WorkerSlot``.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from typing import Optional

from symfuzz.corpus.deaths import ask_for_stack
from symfuzz.corpus.replay import resident_mb
from symfuzz.messages import decode_event
from symfuzz.settings import CampaignConfig
from symfuzz.worker_slot import WorkerSlot, worker_args, worker_env


class Worker(WorkerSlot):
    """One local worker process and the thread that reads its protocol stream."""

    def __init__(self, slot: int, config: CampaignConfig, events: queue.Queue):
        super().__init__(slot, config, events)
        self.log = open(self.log_path, "a")
        env = worker_env(config)
        self.proc = subprocess.Popen(
            [sys.executable, *worker_args(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True, bufsize=1,
            # Its own session: a Ctrl-C or SIGTERM sent to the job's process group reaches the
            # campaign, which stops its workers itself, rather than killing workers mid-case and
            # looking like crashes. (If the campaign is killed outright, a worker's stdin closes
            # and it exits after its case.)
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            event = decode_event(line)
            if event is not None:  # a line cut short by a death is no event
                self.events.put((self, event))
        self.proc.wait()
        self.events.put((self, None))

    def _send(self, line: str) -> bool:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def rss_mb(self) -> float:
        return resident_mb(self.proc.pid)

    def wait(self) -> Optional[int]:
        """The process's exit status, once its stream has ended."""
        return self.proc.wait()

    def kill(self, reason: str) -> None:
        self.killed_for = reason
        if reason in ("timeout", "out-of-memory"):  # where it is, for the finding's signature (corpus/deaths.py)
            ask_for_stack(self.proc)
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
