"""``symfuzz opcheck``: check custom ops from the command line.

    symfuzz opcheck mylib::op [mylib::other ...] --module mylib.ops
    symfuzz opcheck --namespace mylib --module mylib.ops
    symfuzz opcheck --from .symfuzz/opcheck-calls.jsonl      # stage 2 of the pytest plugin

Samples come from a calls file (recorded by ``pytest --opcheck``); an op
without one gets a sample made from its schema. Each op is checked in a
child process (``opcheck.runner``), so a crashing kernel is a result, not the
end of the run. An op with no autograd formula is reported as not
differentiable (an info line), not as a failure, unless --require-autograd or
the store's per-op "require_autograd" setting asks for one. Exit codes: see
EXIT_CODES (the --help epilog).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from symfuzz.opcheck.checklist import CHECKS, SPECS, check_names
from symfuzz.opcheck.contracts import parse_fixed
from symfuzz.opcheck.outcomes import FAILING, internal_errors, judge, store_results
from symfuzz.opcheck.runner import ChildImportError, Task, run_ops
from symfuzz.opcheck.snippet_files import write_snippet
from symfuzz.opcheck.store import StoreError, XfailStore, apply_results, normalize_op

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNJUDGED = 0, 1, 2, 3


def _checks_help() -> str:
    """The epilog: each check and what it checks, from opcheck.checklist."""
    width = max(len(spec.name) for spec in SPECS)
    lines = [f"  {spec.name:<{width}}  {spec.description}" for spec in SPECS]
    return "checks, in the order they run (--checks takes their names):\n" + "\n".join(lines) + "\n\n" + EXIT_CODES


EXIT_CODES = """\
exit codes:
  0    every result is what the store expects (no store: every check passed);
       with --accept, the store now expects this run's results
  1    an unexpected result: a check failed that the store does not mark xfail, a
       check passed that it marks xfail (strict), or an op could not be checked
       (its kernel hung, or the child could not rebuild it); with --accept, only
       the last
  2    usage mistake or bad input, found before any op is checked: a bad flag, an
       unknown op or namespace, a --module that does not import, a calls file or
       store that cannot be read (the store is then left as it is), a read-only
       store with --accept
  3    nothing was judged: the child process that checks the ops could not import
       what registers them, or symfuzz or its environment failed (with a traceback)
  130 / 143  interrupted by SIGINT / SIGTERM
repro snippets (--repro-dir) exit 1 while the bug reproduces, 0 once it passes, and
2 when they cannot run (the module that registers the op does not import)
"""


def add_parser(sub, duration):
    p = sub.add_parser(
        "opcheck", help="check custom ops: schema, autograd, fake kernels (swept and symbolic), compile",
        description="Check custom ops on their samples and on shapes swept from them.",
        epilog=_checks_help(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("ops", nargs="*", metavar="NS::OP", help="ops to check (default: every op in the calls file)")
    p.add_argument("--namespace", action="append", default=[], metavar="NS",
                   help="check every op registered in this namespace (repeatable, or comma-separated)")
    p.add_argument("--module", action="append", default=[], metavar="MOD",
                   help="import this module first: it registers the ops (repeatable)")
    p.add_argument("--from", dest="calls_file", type=Path, default=None, metavar="CALLS",
                   help="recorded calls (pytest --opcheck writes .symfuzz/opcheck-calls.jsonl)")
    p.add_argument("--store", type=Path, default=None, help="xfail store (PyTorch failures_dict.json format)")
    p.add_argument("--accept", action="store_true", help="rewrite the store from these results")
    p.add_argument("--checks", default=None, metavar="CHECK[,CHECK...]",
                   help=f"comma-separated checks (default all: {', '.join(CHECKS)})")
    p.add_argument("--budget", type=duration, default=None, help="time per op, e.g. 60s (default 120s)")
    p.add_argument("--op-timeout", type=duration, default=None,
                   help="report an op as hung and move on after this long (default 2 x budget + 300s)")
    p.add_argument("--no-sweep", action="store_true", help="check only the samples, like torch.library.opcheck")
    p.add_argument("--quick", action="store_true",
                   help="sweep only the edge variants (no random ones) and leave out the checks that compile with "
                        "Inductor: near torch.library.opcheck's time")
    p.add_argument("--seed", type=int, default=0, help="seed for the generated inputs")
    p.add_argument("--json", type=Path, default=None, help="also write the reports here")
    p.add_argument("--repro-dir", type=Path, default=Path(".symfuzz/opcheck"),
                   help="where each failure's repro snippet is written (default .symfuzz/opcheck)")
    p.add_argument("--in-process", action="store_true", help="check in this process (no crash isolation)")
    p.add_argument("--fixed", action="append", default=[], metavar="NS::OP=ARG[,ARG]",
                   help="tensor arguments the sweep must not resize (a lookup table, a codebook); NS::OP= holds "
                        "none fixed; repeatable (default: inferred from the recorded calls)")
    p.add_argument("--require-autograd", action="store_true",
                   help="a missing gradient formula is a failure, on every op checked (default: off: an op with no "
                        "autograd formula is reported as not differentiable, an info line, and the checks that need "
                        "gradients skip; a store entry \"require_autograd\" under an op turns it on for that op)")
    p.add_argument("--quiet", action="store_true", help="only the summary")
    return p


class OpcheckUsage(Exception):
    pass


def cmd_opcheck(args) -> int:
    try:
        return _run(args)
    except OpcheckUsage as exc:
        print(f"symfuzz opcheck: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _validate(args):
    """The mistakes that need no torch, found before anything is imported or run:
    (checks, store, fixed). The store is read here; when it cannot be, nothing writes it."""
    if args.accept and args.store is None:
        raise OpcheckUsage("--accept needs --store PATH (the file to rewrite)")
    for flag, value in (("--budget", args.budget), ("--op-timeout", args.op_timeout)):
        if value is not None and not value > 0:
            raise OpcheckUsage(f"{flag} must be a positive duration, e.g. 60s")
    checks = None
    if args.checks is not None:
        names = [c for c in args.checks.split(",") if c.strip()]
        if not names:
            raise OpcheckUsage(f"--checks names no check; choose from {', '.join(CHECKS)}")
        try:
            checks = check_names(names)
        except ValueError as exc:
            raise OpcheckUsage(f"--checks: {exc}") from None
    bad = [ns for value in args.namespace for ns in value.split(",") if ns.strip()
           and ("::" in ns or not ns.strip().isidentifier())]
    if bad:
        raise OpcheckUsage(f"--namespace: {', '.join(bad)} is not a namespace (mylib, not mylib::op)")
    store = None
    if args.store is not None:
        try:
            store = XfailStore.load(args.store)
            if args.accept:
                XfailStore.check_writable(args.store)
        except StoreError as exc:
            raise OpcheckUsage(f"--store: {exc}") from None
    if args.json is not None and args.json.is_dir():
        raise OpcheckUsage(f"--json {args.json} is a folder; name the file to write the reports to")
    if args.repro_dir.exists() and not args.repro_dir.is_dir():
        raise OpcheckUsage(f"--repro-dir {args.repro_dir} is a file; name a folder for the repro snippets")
    try:
        fixed = parse_fixed(args.fixed)
    except ValueError as exc:
        raise OpcheckUsage(f"--fixed: {exc}") from None
    return checks, store, fixed


def _run(args) -> int:
    checks, store, fixed = _validate(args)
    # deferred: these import torch, and the symfuzz CLI builds its parser from this module without it
    from symfuzz.opcheck.calls import CallsFileError, read_calls, read_header
    from symfuzz.opcheck.checks.common import OpCheckUsageError, op_name, resolve_op

    sys.path.insert(0, str(Path.cwd()))
    for module in args.module:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module failing to import is their error
            raise OpcheckUsage(f"cannot import --module {module}: {type(exc).__name__}: {exc}") from None
    calls_ops, header = [], {}
    if args.calls_file is not None:
        try:
            header = read_header(args.calls_file)
            calls_ops = list(dict.fromkeys(c.op for c in read_calls(args.calls_file)))
        except CallsFileError as exc:
            raise OpcheckUsage(str(exc)) from None
        # The recording run noted which modules register the ops and where they import from.
        for path in header.get("paths", []):
            if os.path.isdir(path) and path not in sys.path:
                sys.path.append(path)
        for module in header.get("modules", []):
            try:
                importlib.import_module(module)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - the recorded module may be gone; say so, go on
                print(f"symfuzz opcheck: warning: cannot import {module} (recorded in {args.calls_file}): "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
            else:
                args.module.append(module)
    names = list(args.ops)
    for ns in (n.strip() for value in args.namespace for n in value.split(",") if n.strip()):
        found = _ops_in_namespace(ns)
        if not found:
            raise OpcheckUsage(f"no ops registered in namespace {ns!r} (import the module that defines them with --module)")
        names.extend(found)
    if not names:
        names = calls_ops
    if not names:
        raise OpcheckUsage("nothing to check: name ops (NS::OP), --namespace NS, or --from CALLS")
    try:
        ops = list(dict.fromkeys(op_name(resolve_op(n)) for n in names))
    except OpCheckUsageError as exc:
        raise OpcheckUsage(str(exc)) from None
    unknown = sorted(set(fixed) - {normalize_op(op) for op in ops})
    if unknown:
        raise OpcheckUsage(f"--fixed names {', '.join(unknown)}, which is not among the ops to check")
    # The flag requires autograd of every op; the store, of the ops it names.
    required = [op for op in ops if args.require_autograd or (store is not None and store.requires_autograd(op))]
    task = Task(ops=ops, calls_file=str(args.calls_file) if args.calls_file else None, modules=list(args.module),
                extra_modules=header.get("extra_modules", []), libraries=header.get("libraries", []),
                registrations=header.get("registrations", {}),
                fixed={op: fixed[normalize_op(op)] for op in ops if normalize_op(op) in fixed},
                sys_path=list(sys.path), checks=checks, budget=args.budget, seed=args.seed, sweep=not args.no_sweep,
                quick=args.quick, timeout=args.op_timeout, require_autograd=required)
    print(f"symfuzz opcheck: {len(ops)} op(s)" + (f", samples from {args.calls_file}" if args.calls_file else ""),
          file=sys.stderr)

    def on_start(op):
        if not args.quiet:
            print(f"  checking {op} ...", file=sys.stderr, flush=True)

    def on_report(report):
        if not args.quiet:
            print(f"  {report.summary_line()}  [{report.seconds:.1f}s]", file=sys.stderr, flush=True)

    try:
        reports = run_ops(task, isolate=not args.in_process, on_start=on_start, on_report=on_report)
    except ChildImportError as exc:
        print(f"symfuzz opcheck: the child process that checks the ops could not import what registers them "
              f"({exc}); nothing was judged (--in-process checks them in this process)", file=sys.stderr)
        return EXIT_UNJUDGED
    return _summarize(reports, store, args, apply_results)


def _ops_in_namespace(ns: str) -> list[str]:
    # deferred: see _run
    import torch

    names = []
    for schema in torch._C._jit_get_all_schemas():
        if schema.name.startswith(ns + "::"):
            names.append(schema.name + (f".{schema.overload_name}" if schema.overload_name else ""))
    return sorted(set(names))


def _summarize(reports, store, args, apply_results) -> int:
    expected = store if store is not None else XfailStore("(no store: every failure is unexpected)")
    outcomes = judge({r.op: r for r in reports if not r.error}, expected)
    unexpected = 0
    print()
    for report in reports:
        if report.error:
            print(f"ERROR {report.op}: {report.error}")
            unexpected += 1
            continue
        mine = [o for o in outcomes if o.op == report.op]
        unexpected += sum(o.outcome in FAILING for o in mine)
        print(f"{report.op}: " + ", ".join(f"{o.check} {_MARK[o.outcome]}" for o in mine) + f"  ({report.seconds:.1f}s)")
        for line in dict.fromkeys(report.info):  # notes on the op (not differentiable, ...): never a failure
            print(f"  info: {line}")
        for failure in report.failures:
            if expected.judge(report.op, failure.check, False) == "xfailed":
                continue
            path = _write_repro(args.repro_dir, report.op, failure)
            print(f"  FAIL {failure.check} [{failure.kind}]" + (f" revealed by {failure.axis}" if failure.axis else ""))
            print(f"    input: {failure.input}" + ("  (shrunk)" if failure.shrunk else ""))
            for line in failure.message.splitlines()[:8]:
                print(f"    {line}")
            print(f"    repro: {path}")
        for result in report.results.values():
            for note in result.notes[:3]:
                print(f"  note {result.check}: {note}")
    internal = internal_errors(reports)
    for error in internal:
        print(f"INTERNAL ERROR of symfuzz, checking {error.op}: {error.line}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.to_json() for r in reports], indent=2) + "\n")
    if args.accept:
        before = store.to_text()
        try:
            after = apply_results(str(args.store), store_results(outcomes))
        except StoreError as exc:  # changed under us since _validate read it: left as it is
            raise OpcheckUsage(f"--store: {exc}; not rewritten") from None
        print(f"\nstore {args.store}: " + ("updated" if after.to_text() != before else "unchanged"))
        return EXIT_OK if not any(r.error for r in reports) else EXIT_FAILED
    apart = f", {len(internal)} internal error(s) of symfuzz (not the ops')" if internal else ""
    print(f"\n{len(reports)} op(s) checked, {unexpected} unexpected result(s){apart}")
    return EXIT_FAILED if unexpected else EXIT_OK


_MARK = {"passed": "ok", "failed": "FAIL", "xfailed": "xfail", "xpassed": "XPASS(strict)", "skipped": "skip"}


def _write_repro(directory: Path, op: str, failure) -> Path:
    return write_snippet(directory, op, failure.check, failure.repro)
