"""The opcheck plugin's work in one pytest process: ``OpcheckSession``, registered when ``--opcheck`` is on.

Stage 1 records the calls of each test's call phase; at session end it writes the
calls file, checks the ops (in a child process, ``opcheck.runner``), merges the
xdist workers' reports on the controller, judges them against the xfail store and
writes the summary (``opcheck.plugin`` describes the whole run). Loaded by the plugin in
every pytest run, so only the standard library, pytest and torch-free modules at module
level; the modules that need torch are imported where they are used.
"""

from __future__ import annotations

import copy
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import pytest

from symfuzz.corpus.inductor_cache import probe_in_background
from symfuzz.opcheck.checklist import INDUCTOR_DYNAMIC
from symfuzz.opcheck.outcomes import FAILING, internal_errors, judge, store_results
from symfuzz.opcheck.plugin_settings import Settings
from symfuzz.opcheck.report_merging import merge_reports
from symfuzz.opcheck.snippet_files import snippet_path, write_snippet
from symfuzz.opcheck.store import StoreError, XfailStore, apply_results, normalize_op

REPRO_DIR = ".symfuzz/opcheck"  # relative to rootdir; one snippet per failing (op, check)
WORKEROUTPUT_KEY = "symfuzz_opcheck"
_INTERRUPTED = (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR)


def _store_changes(before: dict, after: dict):
    """Readable lines for what accept changed in the store's data."""
    lines = []
    for op in sorted(set(before) | set(after)):
        old, new = before.get(op, {}), after.get(op, {})
        for test in sorted(set(old) | set(new)):
            a, b = old.get(test), new.get(test)
            if a == b:
                continue
            if a is None:
                lines.append(f"added {op} {test}: {b['status']}  ({b['comment']})")
            elif b is None:
                lines.append(f"removed {op} {test} (was {a['status']}): it passes now")
            else:
                comment = "; comment kept" if b["comment"] and b["comment"] == a["comment"] else ""
                lines.append(f"changed {op} {test}: {a['status']} -> {b['status']}{comment}")
    return lines


# ---------------------------------------------------------------- the plugin


class OpcheckSession:
    """Registered only when --opcheck is on; one per process (plain run, xdist worker or controller)."""

    def __init__(self, config, settings: Settings):
        self.config = config
        self.settings = settings
        self.worker_id = config.workerinput["workerid"] if hasattr(config, "workerinput") else None
        self.calls = []  # distinct OpCalls recorded in this process
        self.unrecorded = []  # why some calls could not be recorded (from CallRecorder)
        self.reports = []  # Reports: this process's own, plus the workers' on the controller
        self.notes = []  # lines for the summary: calls not written, workers lost, ...
        self.ncalls = 0  # calls written (merged on the controller)
        self.parts = []  # the workers' calls files (controller)
        self.checks_run = False
        self.outcomes = None  # [Outcome] once judged; None: nothing to summarize
        self.errors = []  # ops that could not be checked
        self.store_changes = None  # [line] in accept mode
        self.finished = False
        self._written_ops = []  # ops with at least one call in this process's calls file
        self.fixed = dict(settings.fixed)  # {op: [argument names]}; markers add to it
        self.suite_started = time.monotonic()
        self.suite_seconds = 0.0  # the tests themselves
        self.check_seconds = 0.0  # stage 2: checking the ops
        self.internal_error = ""  # symfuzz itself failed at session end (not a finding, not green)
        # The checks' first Inductor compile probes the machine (about 8 s of C++ compiles on a fresh one):
        # made now, at low priority, it overlaps the tests instead of adding to the checks' time.
        will_compile = (self.worker_id is None and not settings.record_only and not settings.quick
                        and (settings.checks is None or INDUCTOR_DYNAMIC.name in settings.checks))
        self.probe = probe_in_background() if will_compile else None

    # ---------------------------------------------------------- stage 1: capture

    def pytest_collection_modifyitems(self, items):
        """opcheck_fixed markers, read from every collected test: under xdist each
        worker collects them all, so the op's contract is the same on every worker."""
        for item in items:
            for mark in item.iter_markers("opcheck_fixed"):
                if mark.args and "::" in str(mark.args[0]):
                    self.fixed.setdefault(normalize_op(str(mark.args[0])), [str(a) for a in mark.args[1:]])
                else:
                    self.notes.append(f"{item.nodeid}: the opcheck_fixed marker needs (\"ns::op\", \"arg\", ...); "
                                      "ignored")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        # Only the call phase: fixtures' setup and teardown calls are not the test's samples.
        # torch: imported only here, in processes that run tests, and only with --opcheck.
        from symfuzz.opcheck.calls import CallRecorder, dedupe

        try:
            with CallRecorder(self.settings.namespaces, test=item.nodeid, sink=self.calls, skipped=self.unrecorded):
                return (yield)
        finally:
            # Dedupe as we go, so that a suite calling an op in a loop doesn't hold every input.
            try:
                self.calls[:] = dedupe(self.calls)
            except Exception as exc:  # noqa: BLE001 - never an error in the user's test
                self.notes.append(f"{item.nodeid}: recorded calls could not be compared ({type(exc).__name__}: "
                                  f"{exc}); kept as they are")

    # ---------------------------------------------------------- session end

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        """Controller: collect one worker's reports and calls file (xdist hook)."""
        name = getattr(getattr(node, "gateway", None), "id", "worker")
        payload = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if payload is None:
            if error:
                self.notes.append(f"{name} went down ({error}): its opcheck results are lost")
            return
        from symfuzz.opcheck.report import Report  # plain data, no torch

        data = json.loads(payload)
        reports = [Report.from_json(r) for r in data["reports"]]
        self.reports.extend(reports)
        out = self.config.pluginmanager.get_plugin("terminalreporter")
        if out is not None and reports:
            # The workers check their ops after their tests, silently: say what each did.
            ops = ", ".join(r.op + (" (not checked)" if r.error else "") for r in reports)
            _fresh_line(out)
            out.write_line(f"[{name}] symfuzz opcheck checked {ops} in {sum(r.seconds for r in reports):.1f}s")
        self.notes.extend(f"{name}: {n}" for n in data["notes"])
        self.checks_run |= data["checks_run"]
        self.check_seconds += data.get("check_seconds", 0.0)
        self.internal_error = self.internal_error or data.get("internal_error", "")
        if data["calls_part"]:
            self.parts.append(Path(data["calls_part"]))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        # tryfirst, and not a wrapper: the terminal reporter prints its summary after
        # every plain sessionfinish has run, and must see our results and exit status.
        if self.config.getoption("collectonly") or self.finished:
            return
        self.finished = True
        self.suite_seconds = time.monotonic() - self.suite_started
        stopped = exitstatus in _INTERRUPTED or session.shouldstop or session.shouldfail
        controller = self.worker_id is None and self.config.pluginmanager.has_plugin("dsession")
        try:
            if controller:
                self._merge_calls_files()
            else:
                self._write_calls()
                if not self.settings.record_only:
                    if stopped:
                        self.notes.append("checks not run: the session stopped early; the calls file is written")
                    else:
                        started = time.monotonic()
                        self._check_ops()
                        self.check_seconds = time.monotonic() - started
        except Exception as exc:  # noqa: BLE001 - a symfuzz bug must not turn into a pytest INTERNALERROR
            self._internal_failure(exc)
        if self.worker_id is not None:
            self.config.workeroutput[WORKEROUTPUT_KEY] = json.dumps({
                "reports": [r.to_json() for r in self.reports], "notes": self.notes, "checks_run": self.checks_run,
                "calls_part": str(self.calls_path) if self.ncalls else "", "check_seconds": self.check_seconds,
                "internal_error": self.internal_error,
            })
            return
        if self.checks_run and not self.settings.record_only:
            try:
                self._judge(session)
            except Exception as exc:  # noqa: BLE001 - e.g. a read-only store: a note, not an INTERNALERROR
                self._internal_failure(exc)
        if self.internal_error and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # symfuzz failed: not green, and the note says why

    def _internal_failure(self, exc: Exception) -> None:
        self.internal_error = (f"symfuzz opcheck could not finish ({type(exc).__name__}: {exc}); if this is not "
                               "your environment (a read-only folder, a full disk), it is a symfuzz bug: please "
                               "report it with this traceback:\n" + traceback.format_exc())
        self.notes.append(self.internal_error)

    @property
    def calls_path(self) -> Path:
        path = self.settings.calls
        return path.with_name(f"{path.name}.{self.worker_id}") if self.worker_id else path

    def _write_calls(self):
        self.notes.extend(f"not recorded: {reason}" for reason in dict.fromkeys(self.unrecorded))
        if not self.calls:
            self.calls_path.unlink(missing_ok=True)  # the file describes this run: no stale calls
            return
        # deferred: the recorder imports torch, and this plugin loads in every pytest run
        from symfuzz.opcheck.calls import MAX_STORED_ELEMENTS, encode_call, stored_exactly, write_calls
        from symfuzz.opcheck.provenance import provenance, registrations

        # An argument the file format can't hold (a custom object, ...) drops that call
        # from the file: the child process rebuilds its inputs from the file.
        writable = []
        for call in self.calls:
            try:
                encode_call(call)
            except (TypeError, ValueError) as exc:
                self.notes.append(f"{call.op} ({call.test}): not written to the calls file: {exc}")
            else:
                writable.append(call)
        rebuilt = sorted({call.op for call in writable if not stored_exactly(call)})
        if rebuilt:  # one line: a suite's accuracy tests at production sizes make it true of most ops
            self.notes.append(f"{', '.join(rebuilt)}: a recorded tensor is too large to store exactly (over "
                              f"{MAX_STORED_ELEMENTS:,} elements); the child rebuilds it from its value range")
        self._written_ops = list(dict.fromkeys(call.op for call in writable))
        if not writable:
            self.calls_path.unlink(missing_ok=True)
            return
        # What a fresh process must load to rebuild the ops (stage 2 and the child need it).
        found = provenance(self._written_ops, project_root=self.config.rootpath)
        for op in found.unknown:
            self.notes.append(f"{op}: no registration record names the module that registers it; "
                              "the child imports the project's modules that this session imported instead")
        regs = {op: registrations(op.split(".")[0]) for op in self._written_ops}
        self.ncalls = write_calls(self.calls_path, writable, modules=found.modules, paths=found.paths,
                                  extra_modules=found.extra_modules, libraries=found.libraries, registrations=regs)

    def _merge_calls_files(self):
        """Controller: the workers' calls files into one (deduplicated), parts deleted."""
        calls_path = self.settings.calls
        stale = set(calls_path.parent.glob(calls_path.name + ".gw*")) - set(self.parts)
        for path in stale:  # left by an earlier run that was killed: not this run's calls
            path.unlink(missing_ok=True)
        if not self.parts:
            calls_path.unlink(missing_ok=True)  # the file describes this run: no stale calls
            return
        # This imports torch on the controller too: merging needs call signatures.
        from symfuzz.opcheck.calls import CallsFileError, read_calls, read_header, write_calls

        calls, merged = [], {"modules": [], "paths": [], "extra_modules": [], "libraries": [], "registrations": {}}
        for part in self.parts:
            try:
                calls.extend(read_calls(part))
                header = read_header(part)
            except CallsFileError as exc:
                self.notes.append(f"calls file of a worker not merged: {exc}")
                continue
            for key in ("modules", "paths", "extra_modules", "libraries"):
                merged[key] += header.get(key, [])
            merged["registrations"].update(header.get("registrations", {}))
        self.ncalls = write_calls(calls_path, calls, **merged)
        for part in self.parts:
            part.unlink(missing_ok=True)

    def _check_ops(self):
        """Stage 2: check each op from its recorded calls, in a child process.

        The checks call the op's kernels on thousands of shapes its author never
        tried; one that segfaults or hangs must become a result, not kill the
        test session (opcheck.runner). The child learns what to import from the
        session (opcheck.provenance) and checks that it rebuilt each op the same.
        Only --opcheck-in-process checks here, without that isolation.
        """
        if not self.calls:
            return
        # deferred: these import torch (see above)
        from symfuzz.opcheck.calls import read_header
        from symfuzz.opcheck.report import Report
        from symfuzz.opcheck.runner import ChildImportError, Task, run_ops

        self.checks_run = True
        by_op = {}
        for call in self.calls:
            by_op.setdefault(call.op, []).append(call)
        out = self.config.pluginmanager.get_plugin("terminalreporter") if self.worker_id is None else None
        where = "in this process (no crash isolation)" if self.settings.in_process else "in a child process"
        if out is not None:
            _fresh_line(out)
            lanes = min(self.settings.workers, len(by_op))
            side = f", {lanes} side by side" if lanes > 1 and not self.settings.in_process else ""
            out.write_sep("-", f"symfuzz opcheck: checking {len(by_op)} op(s) {where}, "
                               f"up to {self.settings.budget:g}s each{side}")
        fixed = {op: self.fixed[normalize_op(op)] for op in by_op if normalize_op(op) in self.fixed}
        called = {normalize_op(op) for op in by_op}
        for op in sorted(set(self.fixed) - called):
            self.notes.append(f"--opcheck-fixed / opcheck_fixed names {op}, which no test called here: ignored")
        if self.settings.in_process:
            for op in by_op:
                self._check_in_process(op, by_op[op], out, fixed.get(op))
            return
        isolated = [op for op in by_op if op in self._written_ops]
        for op in by_op:
            if op not in isolated:
                self.reports.append(Report(op=op, samples=len(by_op[op]), error=(
                    "its recorded arguments can't be passed to a child process (see the notes); "
                    "--opcheck-in-process checks it in this process, without crash isolation")))
        if not isolated:
            return
        header = read_header(self.calls_path)
        task = Task(ops=isolated, calls_file=str(self.calls_path), modules=header.get("modules", []),
                    extra_modules=header.get("extra_modules", []), libraries=header.get("libraries", []),
                    registrations=header.get("registrations", {}), fixed=fixed,
                    sys_path=[str(Path.cwd()), *header.get("paths", []), *sys.path], checks=self.settings.checks,
                    budget=self.settings.budget, quick=self.settings.quick, workers=self.settings.workers,
                    require_autograd=[op for op in isolated if self.settings.requires_autograd(op)])
        side_by_side = min(self.settings.workers, len(isolated)) > 1

        def started(op, out=out):
            if out is not None:
                out.write(f"{op} ...", flush=True)

        def finished(report, out=out):
            self.reports.append(report)
            if out is not None:
                # Side by side, an op's line is written whole when it is done: lines must not interleave.
                out.line(f"{report.op} ... {_report_marks(report)}" if side_by_side else f" {_report_marks(report)}")

        try:
            run_ops(task, on_start=None if side_by_side else started, on_report=finished)
        except ChildImportError as exc:
            done = {r.op for r in self.reports}
            for op in isolated:
                if op not in done:
                    self.reports.append(Report(op=op, samples=len(by_op[op]), error=(
                        f"the child process could not load what registers it ({exc}); "
                        "--opcheck-in-process checks it in this process, without crash isolation")))

    def _check_in_process(self, op, calls, out, fixed=None):
        # deferred: these import torch (see above)
        from symfuzz.opcheck.api import check
        from symfuzz.opcheck.checks.common import OpCheckUsageError
        from symfuzz.opcheck.report import Report, internal_error

        samples = [(call.args, call.kwargs) for call in calls]
        if out is not None:
            out.write(f"{op} ({len(samples)} sample(s), in-process):", flush=True)
        try:
            # torch's own warnings while compiling and tracing are not the suite's
            # warnings; they would crowd the user's warnings summary.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                report = check(op, samples, checks=self.settings.checks, budget=self.settings.budget, fixed=fixed,
                               require_autograd=self.settings.requires_autograd(op), quick=self.settings.quick)
        except OpCheckUsageError as exc:
            report = Report(op=op, samples=len(samples), error=str(exc))
        except Exception as exc:  # noqa: BLE001 - symfuzz's own bug: said as such (as in a child), never the op's
            report = Report(op=op, samples=len(samples), internal=internal_error(exc))
        self.reports.append(report)
        if out is not None:
            out.line(f" {_report_marks(report)}")

    def _judge(self, session):
        """Controller or plain run: merge, write repros, judge, accept; fail the session if needed."""
        reports = merge_reports(self.reports)
        self.errors = [r for r in reports.values() if r.error]
        # symfuzz's own errors: counted apart, never a failure of an op nor of the session
        self.internal_errors = internal_errors(reports.values())
        out = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.internal_errors and out is not None:
            out.stats.setdefault("opcheck internal error", []).extend(self.internal_errors)
        self._write_repros(reports)
        try:
            store = XfailStore.load(self.settings.store) if self.settings.store else XfailStore("")
        except StoreError as exc:
            # Read at the start (_settings); changed since. Nothing is judged against it, and it is not rewritten.
            self.notes.append(f"the store cannot be read now ({exc}): nothing was judged, the store is left as it is")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        self.outcomes = judge(reports, store)
        if self.settings.accept:
            results = store_results(self.outcomes)
            before = copy.deepcopy(store.data)
            self.settings.store.parent.mkdir(parents=True, exist_ok=True)
            try:
                after = apply_results(self.settings.store, results)
            except StoreError as exc:  # it changed under the lock into something unreadable: left as it is
                self.notes.append(f"accept mode: the store cannot be read now ({exc}); it is left as it is")
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
                return
            self.store_changes = _store_changes(before, after.data)
            return  # accept mode: the store now expects this run; opcheck fails nothing
        unexpected = [o for o in self.outcomes if o.outcome in FAILING]
        if unexpected or self.errors:
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            out = self.config.pluginmanager.get_plugin("terminalreporter")
            if out is not None:
                # Shows in the final "N passed, ..." line, so a red exit code with all tests passed is explained.
                out.stats.setdefault("opcheck failed", []).extend(unexpected + self.errors)

    def _write_repros(self, reports):
        """One snippet per failing (op, check); a stale snippet of a check that passed now is removed."""
        directory = self.config.rootpath / REPRO_DIR
        for op, report in reports.items():
            for check, result in report.results.items():
                failure = next((f for f in result.failures if f.repro), None)
                if failure is not None:
                    write_snippet(directory, op, check, failure.repro)
                elif result.status == "passed":
                    snippet_path(directory, op, check).unlink(missing_ok=True)

    # ---------------------------------------------------------- summary

    def pytest_terminal_summary(self, terminalreporter):
        if self.worker_id is not None or not self.finished:
            return
        tr = terminalreporter
        tr.write_sep("=", "symfuzz opcheck")
        calls = self._shown(self.settings.calls)
        if self.settings.record_only:
            if self.ncalls:
                tr.write_line(f"record only: {self.ncalls} call(s) written to {calls}; no checks were run")
                tr.write_line(f"check them (stage 2): symfuzz opcheck --from {calls}")
        elif self.outcomes is not None:
            self._write_outcomes(tr)
            tr.write_line(self._cost_line())
        if not self.ncalls and not self.reports:
            ns = ", ".join(self.settings.namespaces)
            tr.write_line(f"warning: no calls to ops in namespace(s) {ns} were captured during the tests' call "
                          "phase: is --opcheck-namespaces right? (nothing was checked)", yellow=True, bold=True)
        for note in self.notes:
            tr.write_line(f"note: {note}", yellow=True)
        if self.ncalls and not self.settings.record_only:
            tr.write_line(f"calls: {calls} ({self.ncalls} call(s)); "
                          f"recheck without the tests: symfuzz opcheck --from {calls}")
        elif self.outcomes is not None:
            tr.write_line("calls: none could be written to a calls file")

    def _write_outcomes(self, tr):
        by_op = {}
        for o in self.outcomes:
            by_op.setdefault(o.op, []).append(o)
        for report in self.errors:
            tr.write_line(f"{report.op}: ERROR not checked: {report.error}", red=True, bold=True)
        for op, line in ((e.op, e.line) for e in getattr(self, "internal_errors", [])):
            tr.write_line(f"{op}: INTERNAL ERROR of symfuzz: {line}", yellow=True, bold=True)
        merged = merge_reports(self.reports).values()
        contracts = {r.op: r.contracts for r in merged}
        info = {r.op: r.info for r in merged}
        for op, outcomes in by_op.items():
            bad = any(o.outcome in FAILING for o in outcomes)
            verdict = ("accepted" if self.settings.accept else "FAILED") if bad else "ok"
            marks = ", ".join(f"{o.check} {o.outcome.upper() if o.outcome in FAILING else o.outcome}"
                              for o in outcomes)
            tr.write_line(f"{op}: {verdict}  [{marks}]", red=bad and not self.settings.accept, green=not bad)
            for line in contracts.get(op, []):
                tr.write_line(f"  contract {line}")
            for line in dict.fromkeys(info.get(op, [])):  # notes on the op (not differentiable, ...): never a failure
                tr.write_line(f"  info: {line}")
        for o in self.outcomes:
            if o.outcome == "xfailed":
                tr.write_line(f"xfailed {o.op} {o.check}: {o.comment or 'expected to fail (store)'}")
        for o in self.outcomes:
            if o.outcome == "failed":
                for f in o.result.failures[:1]:
                    head = "accepted as xfail:" if self.settings.accept else "FAILED"
                    axis = f" revealed by {f.axis}" if f.axis else ""
                    tr.write_line(f"{head} {o.op} {o.check} [{f.kind}]{axis}", red=not self.settings.accept, bold=True)
                    tr.write_line(f"  input: {f.input}" + ("  (shrunk)" if f.shrunk else ""))
                    for line in f.message.strip().splitlines()[:6]:
                        tr.write_line(f"  {line}")
                    if f.repro:
                        repro = snippet_path(self.config.rootpath / REPRO_DIR, o.op, o.check)
                        tr.write_line(f"  repro: {self._shown(repro)}")
            elif o.outcome == "xpassed" and self.settings.accept:
                tr.write_line(f"accepted as passing: {o.op} {o.check} (the store expected a failure)", bold=True)
            elif o.outcome == "xpassed":
                tr.write_line(f"XPASSED {o.op} {o.check}: the store expects a failure ({o.comment or 'no comment'}) "
                              "but it passed: fixed? run with --opcheck-accept to update the store", red=True, bold=True)
        store = self._shown(self.settings.store) if self.settings.store else None
        if self.settings.accept:
            changes = self.store_changes or []
            tr.write_line(f"accept mode ({self.settings.accept}): {store}: "
                          + (f"{len(changes)} change(s)" if changes else "no changes"))
            for line in changes:
                tr.write_line(f"  {line}")
        elif any(o.outcome in FAILING for o in self.outcomes):
            where = store or "a store (--opcheck-store=PATH)"
            tr.write_line(f"known bugs? record them as expected failures in {where} with --opcheck-accept")

    def _cost_line(self) -> str:
        """What opcheck added to the session's time, beside the tests' own."""
        ops = len({r.op for r in self.reports})
        workers = " (summed over the workers)" if self.config.pluginmanager.has_plugin("dsession") else ""
        ratio = (f", {self.check_seconds / self.suite_seconds:.1f}x the tests' time" if self.suite_seconds >= 0.05
                 else "")
        return (f"time: the tests took {self.suite_seconds:.1f}s; checking {ops} op(s) took "
                f"{self.check_seconds:.1f}s{workers}{ratio} (at most {self.settings.budget:g}s per op: "
                "--opcheck-budget)")

    def _shown(self, path: Path) -> str:
        """path relative to where pytest was started, when it is below it."""
        try:
            return str(Path(path).relative_to(self.config.invocation_params.dir))
        except ValueError:
            return str(path)


def _report_marks(report) -> str:
    return report.marks() + ("" if report.error else f"  ({report.seconds:.1f}s)")


def _fresh_line(tr):
    """Start a new line on the terminal: ensure_newline() alone misses -q's progress dots."""
    tr.ensure_newline()
    if getattr(getattr(tr, "_tw", None), "width_of_current_line", 0):
        tr.line("")
