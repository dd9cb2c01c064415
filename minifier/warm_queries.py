"""Warm query workers for the minifier: a pool of ``query_server`` processes.

Each server imports torch once and forks a fresh child per query
(``minifier/query_server.py`` says why that keeps queries isolated). A
``WarmPool`` holds one server per concurrent query (``--jobs``), all started
with the environment of one minify run. ``WarmRunner`` runs one query on a
server with the same contract as ``corpus.replay.ScriptRunner.run_command``:
(returncode or None on timeout, output, seconds, memory exceeded), and
``cancel()`` for Ctrl-C.

Anything unexpected from a server (it died, it answered nonsense, it did not
become ready) retires it, and that query runs cold, in a fresh interpreter,
as before: a warm pool may only make queries faster, never change an answer.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from symfuzz.corpus.deaths import ask_for_stack
from symfuzz.corpus.replay import ScriptRunner, resident_mb

# How long a server may take to import torch and say it is ready (a loaded 2-core machine takes ~10 s).
READY_TIMEOUT = 120.0


class ServerGone(Exception):
    """The server died or broke the protocol: retire it and run the query cold."""


class QueryServer:
    def __init__(self, env: dict):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "symfuzz.minifier.query_server"], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
            start_new_session=True,  # a Ctrl-C at the terminal is the driver's to handle
        )
        self.ready = False
        # Replies are read from the raw descriptor into our own buffer: a buffered reader could
        # hold a second reply that select() then never reports.
        self.buffer = b""

    def _reply(self, deadline: float) -> Optional[dict]:
        """The next reply line, or None if none came before ``deadline``."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            readable, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not readable:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ServerGone("the query server exited")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            raise ServerGone(f"the query server answered {line!r}") from None

    def wait_ready(self) -> None:
        if self.ready:
            return
        reply = self._reply(time.monotonic() + READY_TIMEOUT)
        if not reply or not reply.get("ready"):
            raise ServerGone("the query server did not become ready")
        self.ready = True

    def start(self, script: Path, cwd: Path, log: Path) -> int:
        self.wait_ready()
        try:
            self.proc.stdin.write(json.dumps({"script": str(script), "cwd": str(cwd), "log": str(log)}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ServerGone(f"the query server is gone: {exc}") from None
        reply = self._reply(time.monotonic() + 30)
        if not reply or "pid" not in reply:
            raise ServerGone("the query server did not start the query")
        return reply["pid"]

    def ended(self, pid: int, wait: float) -> Optional[int]:
        """The child's return code once it ended; None while it runs."""
        reply = self._reply(time.monotonic() + wait)
        if reply is None:
            return None
        if reply.get("pid") != pid or "returncode" not in reply:
            raise ServerGone(f"the query server answered {reply} for query {pid}")
        return reply["returncode"]

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class WarmPool:
    """``size`` warm servers started with ``env`` (on top of this process's environment)."""

    def __init__(self, env: dict, size: int):
        self.env = dict(os.environ)
        self.env.update(env)
        self.env.setdefault("PYTHONHASHSEED", "0")
        self.idle: queue.Queue = queue.Queue()
        self.servers: list[QueryServer] = []
        self.retired = 0
        for _ in range(max(1, size)):
            self._add()

    def _add(self) -> None:
        server = QueryServer(self.env)
        self.servers.append(server)
        self.idle.put(server)

    def serves(self, argv: list, env_extra: dict) -> bool:
        """Can a warm server run this command? Only ``python SCRIPT`` under the pool's environment."""
        env = dict(os.environ)
        env.update(env_extra)
        env.setdefault("PYTHONHASHSEED", "0")
        return len(argv) == 2 and argv[0] == sys.executable and env == self.env

    def take(self) -> QueryServer:
        return self.idle.get()

    def give_back(self, server: QueryServer, broken: bool) -> None:
        if broken:
            # A broken server is replaced, so the pool keeps its size.
            self.retired += 1
            server.close()
            self.servers.remove(server)
            self._add()
        else:
            self.idle.put(server)

    def close(self) -> None:
        for server in self.servers:
            server.close()
        self.servers = []


class WarmRunner(ScriptRunner):
    """One query on a warm server; falls back to a cold interpreter when the pool cannot serve it."""

    def __init__(self, pool: Optional[WarmPool]):
        super().__init__()
        self.pool = pool
        self.pid: Optional[int] = None

    def cancel(self) -> None:
        self.cancelled = True
        pid = self.pid
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        super().cancel()

    def run_command(self, argv: list, cwd: Path, env_extra: dict, timeout: float,
                    memory_limit_mb: Optional[int] = None):
        if self.pool is None or not self.pool.serves(argv, env_extra):
            return super().run_command(argv, cwd, env_extra, timeout, memory_limit_mb)
        server = self.pool.take()
        broken = True  # until the query ended cleanly: an interrupted one may leave a reply unread
        try:
            result = self._warm(server, argv[1], Path(cwd), timeout, memory_limit_mb)
            broken = False
            return result
        except ServerGone:
            pass
        finally:
            self.pid = None
            self.pool.give_back(server, broken or not _alive(server))
        return super().run_command(argv, cwd, env_extra, timeout, memory_limit_mb)

    def _warm(self, server: QueryServer, script: str, cwd: Path, timeout: float, memory_limit_mb: Optional[int]):
        server.wait_ready()  # start-up is not the query's time
        with tempfile.NamedTemporaryFile("w+", prefix="query-", suffix=".log", dir=cwd) as log:
            start = time.monotonic()
            self.pid = pid = server.start(Path(script), cwd, Path(log.name))
            exceeded = timed_out = False
            code = None
            try:
                while True:
                    code = server.ended(pid, 0.2)
                    if code is not None:
                        break
                    if time.monotonic() - start > timeout:
                        timed_out = True
                    elif memory_limit_mb and resident_mb(pid) > memory_limit_mb:
                        exceeded = True
                    if timed_out or exceeded or self.cancelled:
                        if not self.cancelled:  # where it hung or grew, for its signature (corpus/deaths.py)
                            ask_for_stack(pid)
                        _kill_group(pid)
                        code = server.ended(pid, 30)
                        if code is None:
                            raise ServerGone("a killed query did not end")
                        break
            except BaseException:  # Ctrl-C, SIGTERM: the child is in its own session, stop it here
                _kill_group(pid)
                raise
            log.seek(0)
            out = log.read()
        return (None if timed_out else code), out, time.monotonic() - start, exceeded


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(server: QueryServer) -> bool:
    return server.proc.poll() is None
