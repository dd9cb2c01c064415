"""Run the checks for many ops in a child process that may crash.

A custom op's kernel can segfault, hang or exhaust memory, and the checks
call it thousands of times on shapes its author never tried. ``run_ops``
therefore checks ops in a fresh child process (``python -m symfuzz.opcheck.runner
TASK.json``) that appends one JSON line per event to a results file:
``{"start": op}`` before an op, ``{"input": ...}`` before each input a check
judges, ``{"check_done": ...}`` after each check and ``{"report": {...}}``
after the op. The child first imports what registers the ops
(``opcheck.provenance``) and checks that it rebuilt them as the session had
them. When the child dies, overruns an op's time limit or its memory limit,
the check it was in fails with the input it was given (``kernel-crash``,
``hang``, ``out-of-memory``; a crash is confirmed and shrunk by
``opcheck.crashes``), the checks it finished keep their results, and a new
child carries on with the rest. Nothing already checked is lost.

``run_ops(..., isolate=False)`` runs in this process (for tests and for
callers that are themselves disposable).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from symfuzz.corpus.deaths import ask_for_stack, place_of
from symfuzz.corpus.deaths import enable as enable_stack_dumps
from symfuzz.corpus.replay import resident_mb
from symfuzz.opcheck.checklist import CHECKS
from symfuzz.opcheck.crashes import SHRINK_SECONDS, kernel_alone_finishes, shrink_crash
from symfuzz.opcheck.report import CheckResult, Failure, Report, internal_error
from symfuzz.opcheck.task import Task, event_writer, kill_group, load_task, recorded_samples, schema_samples


class ChildImportError(Exception):
    """The child could not import a module that registers the ops."""


# How long the real kernel alone gets on the input a check hung on, before the hang is the op's.
HANG_PROBE_SECONDS = 120.0


def op_timeout(task: Task) -> float:
    """How long one op may take before its child is killed as hung: the
    budget bounds the search, not one kernel call or the first compile."""
    # deferred: the API imports torch, and the plugin's process imports this module without it
    from symfuzz.opcheck.api import DEFAULT_BUDGET

    if task.timeout is not None:
        return task.timeout
    budget = DEFAULT_BUDGET if task.budget is None else task.budget
    return 2 * budget + 300


def run_ops(task: Task, *, isolate: bool = True, on_report=None, on_start=None) -> list[Report]:
    if not isolate:
        return _check_all(task, on_start=on_start, on_report=on_report)
    lanes = min(max(task.workers, 1), len(task.ops))
    if lanes <= 1:
        return _run_ops_in_turn(task, on_report=on_report, on_start=on_start)
    # Side by side: each lane is a child (and its successors after a crash) with every
    # lanes-th op. The callbacks are called one at a time.
    lock = threading.Lock()

    def locked(callback):
        if callback is None:
            return None

        def call(*args):
            with lock:
                callback(*args)
        return call

    shares = [task.ops[k::lanes] for k in range(lanes)]
    with ThreadPoolExecutor(lanes) as pool:
        done = pool.map(lambda ops: _run_ops_in_turn(replace(task, ops=ops, workers=1), on_report=locked(on_report),
                                                     on_start=locked(on_start), lanes=lanes), shares)
        by_op = {report.op: report for reports in done for report in reports}
    return [by_op[op] for op in task.ops if op in by_op]


def _run_ops_in_turn(task: Task, *, on_report=None, on_start=None, lanes: int = 1) -> list[Report]:
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
            started, status, state = _run_child(task_path, out_path, op_timeout(task), reports, on_start, on_report,
                                                task.memory_limit_mb, lanes)
            remaining = [op for op in remaining if op not in reports]
            if started is not None and started not in reports:
                report = died_report(task, started, status, state)
                if status["kind"] == "kernel-crash" and state.get("last_input"):
                    _probe_crash(task, report, state["last_input"])
                elif status["kind"] == "hang" and state.get("last_input"):
                    _probe_hang(task, report, state["last_input"])
                reports[started] = report
                remaining = [op for op in remaining if op != started]
                if on_report:
                    on_report(report)
            elif remaining:
                # The child stopped without starting an op (it died while loading, or
                # exited early): retrying would do the same.
                why = status["why"] or "the checking process stopped before checking these ops"
                for op in remaining:
                    reports[op] = Report(op=op, error=why)
                    if on_report:
                        on_report(reports[op])
                remaining = []
    return [reports[op] for op in task.ops if op in reports]


def _child_env(lanes: int = 1) -> dict:
    """The checking child's environment: Inductor compiles in the child itself, as one op's
    graph is a kernel or two; a pool of compile workers would cost more to start (seconds,
    per child) than it saves. Children side by side share the cores between their threads.
    The user's own settings win."""
    env = dict(os.environ)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    if lanes > 1:
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // lanes)))
    return env


def died_report(task: Task, op: str, status: dict, state: dict) -> Report:
    """The report of an op whose checking process died or hung.

    The checks finished before it died keep their results. The one it was in
    fails with the input it had been given, as a ``kernel-crash`` (a signal),
    ``hang`` or ``process-exit``; the checks after it were not run.
    """
    last = state.get("last_input")
    if not last:  # it died outside any input: loading, or the sample itself
        return Report(op=op, error=status["why"] + (f" (during {state['check']})" if state.get("check") else ""))
    check_name, described = last["check"], last["input"]
    report = Report(op=op, samples=state.get("samples", 0), contracts=state.get("contracts", []))
    for name, data in state.get("done", {}).items():
        report.results[name] = CheckResult.from_json(data)
    failure = Failure(check=check_name, kind=status["kind"], message=status["why"], input=described,
                      repro="", case=last.get("case"), axis=last.get("axis") or last.get("argument", ""))  # the probes write the repro
    report.results[check_name] = CheckResult(check_name, "failed", failures=[failure])
    wanted = task.checks or list(CHECKS)
    for name in wanted:
        if name not in report.results:
            report.results[name] = CheckResult(name, "skipped", reason=f"not run: the process died in {check_name}")
    report.results = {name: report.results[name] for name in CHECKS if name in report.results}
    return report


def _probe_hang(task: Task, report: Report, last: dict) -> None:
    """A hang is the op's only when the real kernel alone, in a fresh process, hangs on that
    input too. Where it returns, the check itself ran past the limit (its machinery, or an
    input too costly for it): that check was not judged, which is no failure of the op."""
    result = report.results[last["check"]]
    seconds = min(op_timeout(task), HANG_PROBE_SECONDS)
    alone = kernel_alone_finishes(task, report.op, last, seconds)
    failure = result.failures[0]
    if alone is False:
        failure.message += f"; the real kernel alone hangs on this input too (past {seconds:.0f}s in a fresh process)"
    elif alone:
        result.status, result.failures = "skipped", []
        result.reason = (f"not checked: the check ran past the op's time limit on {failure.input}, while the real "
                         "kernel alone returns on that input in a fresh process: the check's cost (or the op's "
                         "fake kernel), not a hang of the op")
        result.notes.append(result.reason)  # shown wherever notes are (the CLI prints no skip reasons)


def _probe_crash(task: Task, report: Report, last: dict) -> None:
    """Call the real kernel alone on the crashing input, in probe processes:
    a kernel crash is confirmed (and its input shrunk), or the blame moves to
    the check's machinery (opcheck.crashes)."""
    failure = report.results[last["check"]].failures[0]
    # Not tied to the budget: each probe pays a process start, and a crash is worth confirming.
    found = shrink_crash(task, report.op, last, seconds=SHRINK_SECONDS)
    if found["confirmed"] is False:
        failure.kind = "crash"
        failure.message += ("; the real kernel alone does not crash on this input, so the process died in the "
                            f"{last['check']} check's own machinery (a compiler, a fake mode) or in the kernel "
                            "under it")
        return
    if found["confirmed"]:
        failure.message += "; the real kernel alone crashes the process on this input (probed in a fresh process)"
    failure.input, failure.case, failure.repro, failure.shrunk = (
        found["input"], found["case"], found["repro"], found["shrunk"])
    failure.axis = found.get("axis") or failure.axis


def _run_child(task_path, out_path, timeout, reports, on_start, on_report, memory_limit_mb, lanes=1):
    """Run one child until it finishes, dies or overruns; returns (op it was
    checking when it stopped or None, {"why", "kind"}, what it said about that op)."""
    with tempfile.TemporaryFile() as stderr:
        return _watch(task_path, out_path, timeout, reports, on_start, on_report, stderr, memory_limit_mb, lanes)


def _watch(task_path, out_path, timeout, reports, on_start, on_report, stderr, memory_limit_mb, lanes=1):
    child = subprocess.Popen([sys.executable, "-m", "symfuzz.opcheck.runner", task_path, out_path],
                             stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True, env=_child_env(lanes))
    state = {"current": None, "since": time.monotonic(), "last_input": None, "done": {}}

    def handle(events):
        for event in events:
            if "import_error" in event:
                kill_group(child)
                raise ChildImportError(event["import_error"])
            if "input" in event:
                state["last_input"] = event["input"]
            elif "check_started" in event:
                state.update(check=event["check_started"], last_input=None)
            elif "check_done" in event:
                state["done"][event["check_done"]] = event["result"]
                state.update(check=None, last_input=None)  # a death now is not that check's
            elif "op_info" in event:
                state.update(event["op_info"])
            elif "start" in event:
                state.update(current=event["start"], since=time.monotonic(), last_input=None, done={}, check=None)
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
                current = state["current"]
                if code == 0 and current is None:
                    return None, {"why": "", "kind": ""}, state
                if code == 0:  # e.g. the kernel called sys.exit(): that op is the one to blame
                    why = {"why": "the checking process exited (code 0) while checking this op", "kind": "process-exit"}
                else:
                    why = _death(code, stderr)
                return current, why, state
            current = state["current"]
            if current is not None and time.monotonic() - state["since"] > timeout:
                ask_for_stack(child)  # where it is, for the report
                kill_group(child)
                return current, {"why": f"hang: still running after {timeout:.0f}s{_where(stderr, hang=True)}; "
                                        "the child was killed", "kind": "hang"}, state
            if current is not None and resident_mb(child.pid) > memory_limit_mb:
                kill_group(child)
                return current, {"why": f"out of memory: the process grew past {memory_limit_mb} MB resident; "
                                        "the child was killed", "kind": "out-of-memory"}, state
            time.sleep(0.2)
    except BaseException:
        kill_group(child)
        raise


def _read_events(path, offset):
    with open(path) as f:
        f.seek(offset)
        data = f.read()
    complete = data[: data.rfind("\n") + 1]
    events = [json.loads(line) for line in complete.splitlines() if line.strip()]
    return offset + len(complete), events


def _death(code, stderr) -> dict:
    """What a dead child's report says: the signal and where it died (the stack faulthandler
    printed), never whatever else the child wrote last (a library's warning, Dynamo's notes)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return {"why": f"crash: the process died of {name} while checking this op{_where(stderr)}",
                "kind": "kernel-crash"}
    return {"why": f"the checking process exited with code {code}", "kind": "process-exit"}


def _where(stderr, hang: bool = False) -> str:
    """", in FRAME (called from FRAME)" from the stack the child printed ("" where it printed none)."""
    stderr.seek(0)
    place = place_of(stderr.read().decode(errors="replace"), hang=hang)
    if not place.frames:
        return ""
    return f", in {place.frames[0]}" + (f" (called from {place.frames[1]})" if len(place.frames) > 1 else "")


# ------------------------------------------------------------------ in-process


def _check_all(task: Task, *, on_start=None, on_report=None, emit=None) -> list[Report]:
    # deferred: torch, in the checking child only (see DEFAULT_BUDGET above)
    from symfuzz.opcheck.api import check
    from symfuzz.opcheck.checks.common import OpCheckUsageError

    import_failures = load_task(task, emit)
    samples = recorded_samples(task)
    reports = []
    for op in task.ops:
        if on_start:
            on_start(op)
        if emit:
            emit({"start": op})
        try:
            missing = _not_rebuilt(task, op)
            if missing:
                raise OpCheckUsageError(
                    f"a fresh process could not rebuild {op} as the session had it (missing there: {missing}; "
                    "registered while the tests ran, or by a module that is not importable on its own?). "
                    "Check it in-process, without crash isolation: pytest --opcheck-in-process, "
                    "or symfuzz opcheck --in-process --module MODULE"
                    + "".join(f"; {failure}" for failure in import_failures[:3]))
            op_samples = samples.get(op) or schema_samples(op)
            if emit:
                emit({"op_info": {"samples": len(op_samples)}})
            report = check(op, op_samples, checks=task.checks, budget=task.budget, seed=task.seed, sweep=task.sweep,
                           quick=task.quick, fixed=task.fixed.get(op), require_autograd=op in task.require_autograd,
                           **(_announcers(emit) if emit else {}))
        except OpCheckUsageError as exc:
            report = Report(op=op, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - one op's checker failure must not lose the others
            report = Report(op=op, internal=internal_error(exc))
        reports.append(report)
        if emit:
            emit({"report": report.to_json()})
        if on_report:
            on_report(report)
    return reports


def _not_rebuilt(task: Task, op: str) -> str:
    """What the session had registered for ``op`` that this process lacks ("" if nothing)."""
    expected = task.registrations.get(op)
    if not expected:
        return ""
    # deferred: imports torch (see DEFAULT_BUDGET above)
    from symfuzz.opcheck.provenance import missing_registrations

    return ", ".join(missing_registrations(expected, op.split(".")[0]))


def _announcers(emit) -> dict:
    """check()'s callbacks in the child: each input is written down before the
    kernel sees it, so a crash can say which input did it (the crash probes
    rebuild it from this and write its repro: not rendered here, per input)."""
    # deferred: torch, in the checking child only (see DEFAULT_BUDGET above)
    from symfuzz.opcheck.variants import axis_of

    told, lines = set(), []

    def on_input(check_name, case):
        if check_name not in told:
            told.add(check_name)
            emit({"check_started": check_name})
        if id(case.template) not in told:
            told.add(id(case.template))
            contracts = case.template.contracts
            # Every sample's lines, in the order they come: the report's own list (check()) reads the same.
            lines.extend(line for line in (contracts.describe(case.template) if contracts else []) if line not in lines)
            emit({"op_info": {"contracts": list(lines)}})
        emit({"input": {"check": check_name, "input": case.describe(), "case": case.to_json(),
                        "variant": case.variant.to_json() if case.variant else None,
                        "sample": case.template.index, "argument": case.template.axis,
                        "axis": axis_of(case)}}, sync=False)

    def progress(check_name, result):
        emit({"check_done": check_name, "result": result.to_json()})

    return {"on_input": on_input, "progress": progress}


def _child_main(task_path, out_path) -> int:
    enable_stack_dumps()  # a kernel that kills this process says where (the parent's _death)
    with open(task_path) as f:
        task = Task(**json.load(f))

    _check_all(task, emit=event_writer(out_path))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1], sys.argv[2]))
