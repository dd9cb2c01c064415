"""Run the checks for many ops in a child process that may crash.

A custom op's kernel can segfault, hang or exhaust memory, and the checks
call it thousands of times on shapes its author never tried. ``run_ops``
therefore checks ops in a fresh child process (``python -m opcheck.runner
TASK.json``) that appends one JSON line per event to a results file:
``{"start": op}`` before an op and ``{"report": {...}}`` after it. When the
child dies or overruns an op's time limit, the op it had started gets a
Report saying so (that is a finding too), and a new child carries on with the
rest. Nothing already checked is lost.

``run_ops(..., isolate=False)`` runs in this process (for tests and for
callers that are themselves disposable).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from opcheck.report import Report


class ChildImportError(Exception):
    """The child could not import a module that registers the ops."""


@dataclass
class Task:
    ops: list[str]  # op names, in order
    calls_file: str | None = None  # recorded samples (opcheck.calls); ops without any get one from their schema
    modules: list[str] = field(default_factory=list)  # imported first: they register the ops
    libraries: list[str] = field(default_factory=list)  # torch.ops.load_library'd first (ops registered in C++)
    sys_path: list[str] = field(default_factory=list)  # prepended to the child's sys.path
    checks: list[str] | None = None
    budget: float | None = None  # seconds per op
    seed: int = 0
    sweep: bool = True
    timeout: float | None = None  # seconds one op may take before it counts as hung (default: op_timeout)


def op_timeout(task: Task) -> float:
    """How long one op may take before its child is killed as hung: the
    budget bounds the search, not one kernel call or the first compile."""
    from opcheck.api import DEFAULT_BUDGET

    if task.timeout is not None:
        return task.timeout
    budget = DEFAULT_BUDGET if task.budget is None else task.budget
    return 2 * budget + 300


def run_ops(task: Task, *, isolate: bool = True, on_report=None, on_start=None) -> list[Report]:
    if not isolate:
        return _check_all(task, on_start=on_start, on_report=on_report)
    reports: dict[str, Report] = {}
    remaining = list(task.ops)
    with tempfile.TemporaryDirectory(prefix="symfuzz-opcheck-") as tmp:
        attempt = 0
        while remaining:
            attempt += 1
            task_path = os.path.join(tmp, f"task{attempt}.json")
            out_path = os.path.join(tmp, f"results{attempt}.jsonl")
            with open(task_path, "w") as f:
                json.dump({**task.__dict__, "ops": remaining}, f)
            open(out_path, "w").close()
            started, status = _run_child(task_path, out_path, op_timeout(task), reports, on_start, on_report)
            remaining = [op for op in remaining if op not in reports]
            if started is not None and started not in reports:
                report = Report(op=started, error=status)
                reports[started] = report
                remaining = [op for op in remaining if op != started]
                if on_report:
                    on_report(report)
            elif remaining:
                # The child stopped without starting an op (it died while loading, or
                # exited early): retrying would do the same.
                status = status or "the checking process stopped before checking these ops"
                for op in remaining:
                    reports[op] = Report(op=op, error=status)
                    if on_report:
                        on_report(reports[op])
                remaining = []
    return [reports[op] for op in task.ops if op in reports]


def _run_child(task_path, out_path, timeout, reports, on_start, on_report):
    """Run one child until it finishes, dies or overruns; returns (op it was
    checking when it stopped or None, why it stopped or "")."""
    with tempfile.TemporaryFile() as stderr:
        return _watch(task_path, out_path, timeout, reports, on_start, on_report, stderr)


def _watch(task_path, out_path, timeout, reports, on_start, on_report, stderr):
    child = subprocess.Popen([sys.executable, "-m", "opcheck.runner", task_path, out_path],
                             stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    state = {"current": None, "since": time.monotonic(), "last_input": None}

    def handle(events):
        for event in events:
            if "import_error" in event:
                _kill(child)
                raise ChildImportError(event["import_error"])
            if "input" in event:
                state["last_input"] = event["input"]
            elif "start" in event:
                state.update(current=event["start"], since=time.monotonic(), last_input=None)
                if on_start:
                    on_start(event["start"])
            elif "report" in event:
                report = Report.from_json(event["report"])
                reports[report.op] = report
                state["current"] = None
                if on_report:
                    on_report(report)

    offset = 0
    try:
        while True:
            offset, events = _read_events(out_path, offset)
            handle(events)
            code = child.poll()
            if code is not None:
                offset, events = _read_events(out_path, offset)
                handle(events)  # the last lines written before it exited
                current, during = state["current"], _during(state["last_input"])
                if code == 0 and current is None:
                    return None, ""
                if code == 0:  # e.g. the kernel called sys.exit(): that op is the one to blame
                    return current, "the checking process exited (code 0) while checking this op" + during
                return current, _death(code, stderr) + during
            current = state["current"]
            if current is not None and time.monotonic() - state["since"] > timeout:
                _kill(child)
                return current, (f"hang: still running after {timeout:.0f}s; the child was killed"
                                 + _during(state["last_input"]))
            time.sleep(0.2)
    except BaseException:
        _kill(child)
        raise


def _during(last_input) -> str:
    if not last_input:
        return ""
    check_name, described = last_input
    return f" (during {check_name}, on input {described})"


def _read_events(path, offset):
    with open(path) as f:
        f.seek(offset)
        data = f.read()
    complete = data[: data.rfind("\n") + 1]
    events = [json.loads(line) for line in complete.splitlines() if line.strip()]
    return offset + len(complete), events


def _death(code, stderr) -> str:
    stderr.seek(0)
    tail = stderr.read().decode(errors="replace").strip().splitlines()[-3:]
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        why = f"crash: the process died of {name} while checking this op"
    else:
        why = f"the checking process exited with code {code}"
    return why + (": " + " | ".join(tail) if tail else "")


def _kill(child):
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


# ------------------------------------------------------------------ in-process


def _check_all(task: Task, *, on_start=None, on_report=None, emit=None) -> list[Report]:
    from opcheck.api import check
    from opcheck.checks.common import OpCheckUsageError

    for entry in reversed(task.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    def load(kind, name):
        if kind == "library":
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
    samples = _samples(task)
    reports = []
    for op in task.ops:
        if on_start:
            on_start(op)
        if emit:
            emit({"start": op})
        try:
            op_samples = samples.get(op)
            if not op_samples:
                from opcheck.checks.common import resolve_op
                from opcheck.schema_samples import sample_from_schema

                op_samples = [sample_from_schema(resolve_op(op))]
            on_input = None
            if emit:
                def on_input(check_name, case):
                    emit({"input": [check_name, case.describe()]}, sync=False)
            report = check(op, op_samples, checks=task.checks, budget=task.budget, seed=task.seed, sweep=task.sweep,
                           on_input=on_input)
        except OpCheckUsageError as exc:
            report = Report(op=op, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - one op's checker failure must not lose the others
            report = Report(op=op, error=f"the checker itself failed: {type(exc).__name__}: {exc}")
        reports.append(report)
        if emit:
            emit({"report": report.to_json()})
        if on_report:
            on_report(report)
    return reports


def _samples(task: Task) -> dict:
    if not task.calls_file:
        return {}
    from opcheck.calls import read_calls

    out: dict = {}
    for call in read_calls(task.calls_file):
        out.setdefault(call.op, []).append((call.args, call.kwargs))
    return out


def _child_main(task_path, out_path) -> int:
    with open(task_path) as f:
        task = Task(**json.load(f))

    def emit(event, sync=True):
        # Written before the kernel runs, so a crash can say which input did it.
        # Unsynced lines survive the process dying (the OS has them); only a
        # machine crash would lose them.
        with open(out_path, "a") as f:
            f.write(json.dumps(event) + "\n")
            if sync:
                f.flush()
                os.fsync(f.fileno())

    _check_all(task, emit=emit)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1], sys.argv[2]))
