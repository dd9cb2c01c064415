"""Holding SIGINT and SIGTERM over a step that must not be cut in half.

The CLI turns SIGTERM into an exception in the main thread (``Terminated``), so a
signal can land between any two lines. Some steps must finish once begun: a worker
process that was started must be tracked (or it outlives the run), and a candidate
must be logged whole (or the stop that should keep it loses it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading


@contextlib.contextmanager
def signals_deferred():
    """SIGINT and SIGTERM received inside the block take effect when it ends (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)  # raises KeyboardInterrupt or Terminated
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), caught[0])
