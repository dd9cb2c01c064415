"""Campaign workers on a Ray cluster (``symfuzz fuzz --executor ray``).

Ray is the engine here: it places one actor per ``--jobs`` slot on a CPU
somewhere in the cluster, and that actor (``WorkerHost``) starts the same
``python -m symfuzz.worker`` process on its node that the local executor
starts on this machine, with the same protocol and the same isolation: the
worker runs in its own OS process and session, so a segfault, a hang or a
runaway allocation kills only it. The campaign (the driver) keeps doing the
scheduling it does for local workers: it hands out case indices one at a time,
its watchdog kills a worker past the case timeout or the memory limit, and a
worker's death becomes a finding and a fresh worker takes the slot.

``RayWorker`` is the driver's side of one actor: it offers the campaign the
interface of ``symfuzz.local_worker.Worker``, and a thread that asks the actor for
what its worker wrote (protocol lines, stderr, resident memory) and puts each
protocol message on the campaign's event queue, then ``(worker, None)`` once
the worker process has ended. The worker's stderr is gathered on the driver
into OUT/workers/ray-worker-<slot>.log, so the whole output folder is on the
driver.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import ray

from symfuzz.corpus.deaths import ask_for_stack
from symfuzz.corpus.replay import resident_mb
from symfuzz.messages import decode_event
from symfuzz.worker_slot import WorkerSlot, throughput_env, worker_args, worker_env

POLL_SECONDS = 0.5  # how long one read_events call waits for the worker to write something
STDERR_CHUNK = 1 << 20  # at most this much new stderr per reply (more is skipped, with a note)
CALL_TIMEOUT = 30.0  # seconds to wait for an actor to answer a control call (send, kill, close)
_ROOT = str(Path(__file__).resolve().parent.parent)  # the checkout or install that holds symfuzz


class WorkerHost:
    """A Ray actor that runs one worker process on its node and relays its streams.

    Methods run on the actor's threads (``max_concurrency``), so ``read_events``
    may wait for output while ``send`` or ``kill`` arrive.
    """

    def __init__(self, args: list, env: dict, inherit_env: bool, cwd: Optional[str]):
        if inherit_env:
            # A node of a real cluster: its own environment, with the lane's settings on top,
            # and this node's symfuzz first on the path.
            env = {**os.environ, **env}
            env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), "symfuzz-inductor-cache"))
            env["PYTHONPATH"] = _ROOT + os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else _ROOT
        # Unnamed: it goes away with the actor and its worker, however they end.
        self.stderr = tempfile.TemporaryFile(prefix="symfuzz-ray-worker-")
        self.stderr_offset = 0
        self.lines: queue.Queue = queue.Queue()
        self.finished = False  # the end of the stream was reported
        self.proc = subprocess.Popen(
            [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=env, text=True, bufsize=1, cwd=cwd,
            # Its own session, as local workers: a signal sent to the actor's process group
            # (Ray cleaning up, a Ctrl-C on a local instance) does not reach a worker mid-case.
            start_new_session=True,
        )
        self.send_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.proc.wait()
        self.lines.put(None)  # the end: everything it wrote is queued before this

    def send(self, line: str) -> bool:
        """Write one request line to the worker; False if it is gone."""
        with self.send_lock:
            try:
                self.proc.stdin.write(line + "\n")
                self.proc.stdin.flush()
                return True
            except (BrokenPipeError, OSError, ValueError):
                return False

    def read_events(self, timeout: float) -> dict:
        """What the worker wrote since the last call, waiting up to ``timeout`` for
        the first line: its protocol lines, its new stderr, its resident memory,
        and, once its stream has ended (``ended``), its exit status."""
        lines, ended = [], self.finished
        if not ended:
            try:
                item = self.lines.get(timeout=timeout)
                while True:
                    if item is None:
                        ended = True
                        break
                    lines.append(item)
                    item = self.lines.get_nowait()
            except queue.Empty:
                pass
        self.finished = ended
        return {"lines": lines, "stderr": self._new_stderr(), "ended": ended,
                "returncode": self.proc.returncode if ended else None,
                "rss_mb": 0.0 if ended else resident_mb(self.proc.pid)}

    def _new_stderr(self) -> str:
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        skipped = max(0, size - self.stderr_offset - STDERR_CHUNK)
        data = os.pread(fd, size - self.stderr_offset - skipped, self.stderr_offset + skipped)
        self.stderr_offset += skipped + len(data)
        text = data.decode(errors="replace")
        return (f"[symfuzz: {skipped} bytes of worker stderr skipped]\n" if skipped else "") + text

    def kill(self) -> bool:
        # Asked first where it is (a hang's or runaway's signature: corpus/deaths.py); its stderr
        # reaches the campaign with the next poll.
        ask_for_stack(self.proc)
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        return True

    def close(self, timeout: float) -> None:
        """Close the worker's stdin (it exits after its case); kill it after ``timeout``."""
        with self.send_lock:
            try:
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# One CPU each: Ray spreads the slots over the cluster's CPUs. No restarts: a
# worker that died is the campaign's to record and replace, with a fresh actor.
RemoteWorkerHost = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=4)(WorkerHost)


class RayWorker(WorkerSlot):
    """The campaign's handle on one remote worker: a ``WorkerSlot`` whose requests go to a Ray actor."""

    LOG_NAME = "ray-worker-{slot}.log"

    def __init__(self, slot: int, config, events: queue.Queue):
        super().__init__(slot, config, events)
        self.returncode: Optional[int] = None
        self._rss = 0.0
        self._ended = threading.Event()
        self._answered = False  # the actor has answered once: it runs, and so does its worker
        self._closed = False
        self._log_lock = threading.Lock()
        self.log = open(self.log_path, "a")
        self.host = None
        failure = connect(config)
        if failure is None:
            args = worker_args(config)
            if _connection.get("local"):
                # Our own instance on this machine: exactly the local executor's environment and folder.
                env, cwd = worker_env(config), os.getcwd()
            else:
                env, cwd = {**config.lane.env, **throughput_env(config), "PYTHONHASHSEED": "0"}, None
            self.host = RemoteWorkerHost.remote(args, env, not _connection.get("local"), cwd)
        else:
            self._write_log(failure + "\n")
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        """Forward what the remote worker writes, in order, then ``(self, None)`` once it has ended."""
        try:
            while self.host is not None:
                reply = ray.get(self.host.read_events.remote(POLL_SECONDS))
                self._answered = True
                self._write_log(reply["stderr"])
                self._rss = reply["rss_mb"]
                for line in reply["lines"]:
                    event = decode_event(line)
                    if event is not None:  # a line cut short by a death is no event
                        self.events.put((self, event))
                if reply["ended"]:
                    self.returncode = reply["returncode"]
                    break
        except Exception as exc:  # noqa: BLE001 - the actor or its node is gone: the worker with it
            self._write_log(f"\n[symfuzz] the Ray actor hosting worker {self.slot} is gone: "
                            f"{type(exc).__name__}: {exc}\n")
        self._rss = 0.0
        self._ended.set()
        self.events.put((self, None))

    def _write_log(self, text: str) -> None:
        with self._log_lock:
            if text and not self.log.closed:
                self.log.write(text)
                self.log.flush()

    def _call(self, method: str, *args) -> Optional[object]:
        """Run one of the actor's methods and wait for it; None if it cannot answer."""
        if self.host is None:
            return None
        try:
            return ray.get(getattr(self.host, method).remote(*args), timeout=CALL_TIMEOUT)
        except Exception:  # noqa: BLE001 - the actor is gone or unreachable; its poll thread says so
            return None

    def _send(self, line: str) -> bool:
        sent = self._call("send", line)
        if sent is None and not self._ended.is_set():
            self.kill("unreachable")  # the actor did not answer: end it, so that its end-of-stream event comes
        return bool(sent)

    def rss_mb(self) -> float:
        """The worker's resident memory as of the last poll (at most POLL_SECONDS old)."""
        return self._rss

    def wait(self) -> Optional[int]:
        """The worker's exit status once its stream has ended (negative: the signal
        that killed it, as Popen says it); None if the actor hosting it died."""
        self._ended.wait()
        return self.returncode

    def log_tail(self, limit: int = 4000) -> str:
        with self._log_lock:
            if not self.log.closed:
                self.log.flush()
        return super().log_tail(limit)

    def kill(self, reason: str) -> None:
        self.killed_for = reason
        if self.host is None or self._ended.is_set():
            return
        # An actor still waiting for a CPU cannot be asked (it would answer once placed): end it.
        if not self._answered or self._call("kill") is None:
            self._kill_actor()  # its worker's stdin closes with it

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.host is not None:
            if self._answered:
                self._call("close", 10.0)
                self._ended.wait(timeout=5)  # let the poll thread forward the last lines first
            self._kill_actor()  # frees its CPU for the next actor
        with self._log_lock:
            self.log.close()

    def _kill_actor(self) -> None:
        try:
            ray.kill(self.host)
        except Exception:  # noqa: BLE001 - already gone
            pass


_connection: dict = {}  # "local": we started a local instance; "failure": why joining Ray failed


def connect(config) -> Optional[str]:
    """Join the Ray cluster at ``config.ray_address``, or start a local instance with
    ``config.jobs`` CPUs; once per driver process. Returns None, or why it failed
    (each worker then ends before it is ready, and the campaign stops with that line)."""
    if ray.is_initialized():
        return None
    if "failure" in _connection:
        return _connection["failure"]
    address = config.ray_address
    try:
        unreachable = _unreachable(address) if address else None
        if unreachable:
            raise ConnectionError(unreachable)
        if address:
            with _signal_handlers_kept():
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        else:
            _start_local(config.jobs)
            _connection["local"] = True
            atexit.register(ray.shutdown)  # we started it: stop it when the campaign's process exits
    except Exception as exc:  # noqa: BLE001 - any failure to join is reported as one line
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        _connection["failure"] = f"symfuzz could not connect to {where}: {type(exc).__name__}: {exc}"
        return _connection["failure"]
    return None


def _start_local(cpus: int, tries: int = 2) -> None:
    """Start a local Ray instance of our own ("local": never a cluster found on this
    machine). Ray gives its node 30 s to start; on a machine busy compiling that can
    run out, so a start that timed out is tried once more."""
    for attempt in range(tries):
        try:
            with _python_path(_ROOT), _signal_handlers_kept():
                ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a plain Exception for this
            if "timed out during startup" not in str(exc) or attempt == tries - 1:
                raise
            ray.shutdown()  # stop what did start before trying again


@contextmanager
def _signal_handlers_kept():
    """Keep the campaign's SIGINT and SIGTERM handlers: Ray's core worker installs its
    own at the C level when the driver connects, and its SIGTERM handler aborts the
    process (exit -6) where the campaign would stop cleanly (stats written, exit 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


@contextmanager
def _python_path(path: str):
    """PYTHONPATH is ``path`` while Ray starts its processes: they inherit the driver's
    environment, and a PYTHONPATH that carries a sitecustomize (a plugin, the test
    suite's planted bugs, which import torch) would run in each of them, slowing
    Ray's agents past the 30 s it gives a node to start. Workers get the driver's
    full environment anyway (``worker_env``)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _unreachable(address: str, timeout: float = 10.0) -> Optional[str]:
    """Why a plain ``host:port`` address cannot be reached (ray.init would retry it
    for minutes); None for one that answers, and for "auto" or ray:// addresses."""
    host, _, port = address.rpartition(":")
    if "://" in address or not host or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return f"nothing answers at {address} ({exc})"
    return None
