"""A check task for a child process: the ops, their recorded samples, and what to load first.

Shared by ``opcheck.runner`` (the child that checks the ops) and
``opcheck.crashes`` (the probes that re-run a crashing kernel): both must
rebuild the ops exactly as the session had them.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
from dataclasses import dataclass, field


@dataclass
class Task:
    ops: list[str]  # op names, in order
    calls_file: str | None = None  # recorded samples (opcheck.calls); ops without any get one from their schema
    modules: list[str] = field(default_factory=list)  # imported first: they register the ops
    extra_modules: list[str] = field(default_factory=list)  # imported if they can be: the rest of their packages
    # {op: {"keys": [dispatch keys with a kernel], "fake": bool}} as the session had them
    # (opcheck.provenance.registrations): the child checks it rebuilt each op the same.
    registrations: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)  # {op: [argument names held fixed]}; absent: inferred
    libraries: list[str] = field(default_factory=list)  # torch.ops.load_library'd first (ops registered in C++)
    sys_path: list[str] = field(default_factory=list)  # prepended to the child's sys.path
    checks: list[str] | None = None
    budget: float | None = None  # seconds per op
    seed: int = 0
    sweep: bool = True
    quick: bool = False  # edge variants only, no Inductor compile (opcheck.api.check's quick)
    # The ops (as named in ``ops``) whose missing gradient formula is a failure; the
    # others are reported as not differentiable (an info line) and their gradient checks skip.
    require_autograd: list[str] = field(default_factory=list)
    timeout: float | None = None  # seconds one op may take before it counts as hung (default: op_timeout)
    memory_limit_mb: int = 8192  # resident; a child past it is killed and its op reported as out-of-memory
    workers: int = 1  # checking processes side by side, each with its share of the ops (opcheck.runner.run_ops)


def load_task(task: Task, emit=None) -> list[str]:
    """Import what registers the task's ops, as the session had them (opcheck.provenance).
    Returns what could not be imported of the best-effort ``extra_modules``."""
    for entry in reversed(task.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)

    def load(kind, name):
        if kind == "library":
            # deferred: the plugin's process reads tasks without torch; only the checking child loads ops
            import torch

            if name not in getattr(torch.ops, "loaded_libraries", ()):
                torch.ops.load_library(name)
        else:
            importlib.import_module(name)

    for kind, name in [("library", lib) for lib in task.libraries] + [("module", m) for m in task.modules]:
        try:
            load(kind, name)
        except Exception as exc:  # reported to the parent, which decides what to do
            if emit is None:
                raise
            emit({"import_error": f"cannot load {kind} {name}: {type(exc).__name__}: {exc}"})
            raise SystemExit(3) from None
    failed = []
    for name in task.extra_modules:  # the rest of the packages: per-backend kernels live there
        try:
            load("module", name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - best effort: what matters is checked after
            failed.append(f"could not import {name}: {type(exc).__name__}: {exc}")
    return failed


def schema_samples(op: str) -> list:
    """A sample made from the schema, for an op nobody recorded a call of."""
    # deferred: these import torch (see load above)
    from symfuzz.opcheck.checks.common import resolve_op
    from symfuzz.opcheck.schema_samples import sample_from_schema

    return [sample_from_schema(resolve_op(op))]


def recorded_samples(task: Task) -> dict:
    if not task.calls_file:
        return {}
    # deferred: imports torch (see load above)
    from symfuzz.opcheck.calls import read_calls

    out: dict = {}
    for call in read_calls(task.calls_file):
        out.setdefault(call.op, []).append((call.args, call.kwargs))
    return out


def kill_group(child):
    """Kill a child started with start_new_session, and whatever it started."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def event_writer(path):
    """``emit(event, sync=True)``: append one JSON line to ``path``, the child's
    channel to its parent. Each line is written before the kernel runs, so a
    crash can say which input did it. Unsynced lines survive the process dying
    (the OS has them); only a machine crash would lose them."""
    def emit(event, sync=True):
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")
            if sync:
                f.flush()
                os.fsync(f.fileno())

    return emit
