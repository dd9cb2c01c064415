#!/usr/bin/env python
"""torch.library.opcheck against symfuzz's opcheck, side by side on the same ops and sample.

The ops are the fixtures of the opcheck quality tests: tests/opcheck_ops/buggy.py
(10 custom ops, each with one planted bug named in its docstring),
tests/opcheck_ops/sweep_bugs.py (14 more, each with a bug one float32 sample
hides: dtype and value classes, argument kinds, devices, layouts, broadcasting,
an undeclared write), and the correct ops of tests/opcheck_ops/correct.py and
sweep_ok.py (correct twins of the sweep bugs, and forward-only ops: no gradient
formula on purpose). Each op has exactly one sample in its module's
``SAMPLES``: the one ordinary sample an author would write. Every tool gets
that sample and nothing else, in one process, one after the other:

- **torch**: ``torch.library.opcheck(op, args, kwargs, raise_exception=False)``
  with its default test_utils (test_schema, test_autograd_registration,
  test_faketensor, test_aot_dispatch_dynamic); it checks the sample as given.
- **symfuzz**, ``opcheck.check(op, [(args, kwargs)], budget=--budget,
  seed=--seed)`` with every check, in three modes (``MODES``; --modes picks):
  - **old**: the method before the sweep stopped on information (``_legacy=True``): every edge
    variant and every random one, until the variants or the budget run out;
  - **full**: the default: a check skips an edge variant that brings it no
    new information (dtype class, layout, value class, size class, size
    relation, guard: ``opcheck.variants.info_key``) and stops drawing random
    ones after a few in a row bring none; the Inductor compile is shared by
    the op's inputs;
  - **quick**: ``quick=True`` (``--quick``): the edge variants only, AOT
    dispatch on the sample only, no Inductor compile.
  smooth's bug is a missing gradient formula, a failure only where autograd
  is required: symfuzz gets ``require_autograd=True`` there (as the quality test).

Each tool gets its own deep copy of the sample (some ops mutate their input),
and torch's opcheck runs first on every op. Times are wall-clock seconds
(time.perf_counter) around each call. The first check in a process pays a
one-off warm-up (lazy imports, fake-tensor and AOTAutograd set-up; for symfuzz
also Dynamo, Inductor and its C++ toolchain), which would land on whichever
tool ran first on the first op; so before anything is timed, every tool runs
once, untimed, on a throwaway trivial custom op defined here
(``symfuzz_bench::warm_up``), and no op's time includes that warm-up.
symfuzz compiles with Inductor (torch's opcheck does not); each symfuzz mode
gets a fresh, empty Inductor cache on every op (on disk and in memory:
torch._inductor.utils.fresh_cache), so its times are those of an op compiled
for the first time, whatever earlier runs or an earlier mode compiled;
--keep-cache uses the environment's cache instead.

    python benchmarks/opcheck.py                      # every op and mode, symfuzz budget 60s per op
    python benchmarks/opcheck.py --ops half_cols,scaled_add --modes full,quick
    python benchmarks/opcheck.py --json /tmp/opcheck-bench.json

Columns:

- op: the op's name (``symfuzz_buggy::<op>`` or ``symfuzz_ok::<op>``).
- planted bug: the op's bug class, short (from its docstring), or
  "none (correct)" for the ops of correct.py.
- torch.library.opcheck flags: the test_utils that failed on the sample ("-": none).
- symfuzz flags (full): ``check[kind]`` for each failure the full mode
  reported ("-": none); "error: ..." if it could not check the op at all.
- torch s, old s, full s, quick s: wall seconds of each tool on the op.
- note: "<mode> MISSED" when a mode flags nothing on a buggy op, "<mode>: not
  by <check>" when it flags it but not with the check meant for the bug,
  "<mode> FALSE ALARM" when it flags a correct op, CRASH when a tool raised
  (see stderr).

Then, per tool: total seconds, seconds per op, the ratio to torch's total, the
planted bugs flagged (by any check), those caught by the check and kind meant
for each (``MEANT``, sweep_bugs.EXPECTED), and false alarms on the correct ops.
Last, the time of each phase (each check; "(other)": building the samples'
templates and asking whether the op is differentiable) per mode, all ops
together: seconds, its share of that mode's total, the inputs it judged and
the edge variants it skipped as bringing nothing new.
The exit code is 0 unless a tool or the benchmark itself crashed (1).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A fresh Inductor cache, set before torch is imported: symfuzz's compile
# times must not depend on what earlier runs left in the shared one.
FRESH_CACHE = None if "--keep-cache" in sys.argv[1:] else tempfile.mkdtemp(prefix="symfuzz-opcheck-bench-cache-")
if FRESH_CACHE:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = FRESH_CACHE
# The planted and correct test ops live in tests/opcheck_ops.
sys.path.insert(0, str(ROOT / "tests"))

import torch
from opcheck_ops import buggy, correct, sweep_bugs, sweep_ok

from symfuzz import opcheck

# Short labels of the bug classes the docstrings of buggy.py name.
BUG_LABELS = {
    "half_cols": "fake shape (odd sizes)",
    "scale2": "fake strides",
    "soft_gate": "fake dtype",
    "row_sum": "size-specializing fake",
    "positives": "data-dependent, not unbacked",
    "add_one": "undeclared mutation",
    "flat": "undeclared alias",
    "cube": "wrong gradient",
    "smooth": "missing autograd",
    "peek": "fake reads data",
}
CORRECT_LABEL = "none (correct)"


# The three ways symfuzz runs, each timed on every op (--modes picks some):
# the method before the sweep stopped on information (every edge and random variant, no early stop, no
# compile shared), today's default, and --quick.
MODES = {
    "old": {"_legacy": True},
    "full": {},
    "quick": {"quick": True},
}

# The check and kind meant for each planted bug (buggy.EXPECTED and sweep_bugs.EXPECTED).
MEANT = buggy.EXPECTED
# A missing gradient formula is a failure only where the author requires autograd
# (as the quality test does for smooth): symfuzz gets require_autograd=True there.
REQUIRES_AUTOGRAD = {"smooth"}


@dataclass
class SymfuzzRun:
    """One symfuzz mode on one op."""

    flags: list[str] = field(default_factory=list)  # "check[kind]"
    failures: list[dict] = field(default_factory=list)  # check, kind, input, shrunk, message
    statuses: dict[str, str] = field(default_factory=dict)  # check -> passed/failed/skipped
    check_seconds: dict[str, float] = field(default_factory=dict)  # check -> its seconds on this op
    inputs: dict[str, list[int]] = field(default_factory=dict)  # check -> [tried, rejected, skipped]
    error: str = ""  # Report.error: the op could not be checked
    seconds: float | None = None
    crash: str = ""

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    def caught_by(self, meant) -> bool:
        return meant is not None and any((f["check"], f["kind"]) == tuple(meant) for f in self.failures)


@dataclass
class Row:
    op: str
    bug: str
    buggy: bool
    meant: tuple | None = None  # (check, kind) meant to catch the planted bug
    torch_flags: list[str] = field(default_factory=list)  # failing test_utils
    torch_messages: dict[str, str] = field(default_factory=dict)  # test_util -> first line of its exception
    torch_seconds: float | None = None
    torch_crash: str = ""
    symfuzz: dict[str, SymfuzzRun] = field(default_factory=dict)  # mode -> its run

    @property
    def torch_flagged(self) -> bool:
        return bool(self.torch_flags)

    def note(self) -> str:
        notes = []
        if self.torch_crash or any(run.crash for run in self.symfuzz.values()):
            notes.append("CRASH")
        for mode, run in self.symfuzz.items():
            if self.buggy and not run.flagged:
                notes.append(f"{mode} MISSED")
            elif self.buggy and self.meant and not run.caught_by(self.meant):
                notes.append(f"{mode}: not by {self.meant[0]}")
            elif not self.buggy and run.flagged:
                notes.append(f"{mode} FALSE ALARM")
        return ", ".join(notes)


def first_line(exc: BaseException | str) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    name = type(exc).__name__ if isinstance(exc, BaseException) else ""
    return f"{name}: {line}"[:200] if name else line[:200]


def quiet_warnings() -> None:
    # Deprecation and "this is experimental" chatter from torch would bury the table.
    for category in (FutureWarning, UserWarning):
        warnings.filterwarnings("ignore", category=category, module=r"torch(\.|$)")


# ------------------------------------------------------------------ the ops


def all_ops() -> dict[str, tuple[object, tuple, str, bool, tuple | None]]:
    """name -> (OpOverload, (args, kwargs), bug label, is buggy, (check, kind) meant for its bug), buggy ops first."""
    ops = {}
    for module in (buggy, sweep_bugs):
        for name, op in module.OPS.items():
            meant = MEANT.get(name) or sweep_bugs.EXPECTED.get(name, (None, None))[:2]
            ops[name] = (op, module.SAMPLES[name], BUG_LABELS.get(name) or docstring_bug(module, name), True,
                         tuple(meant) if meant[0] else None)
    for module in (correct, sweep_ok):
        for name, op in module.OPS.items():
            label = "none (forward-only)" if name in getattr(module, "FORWARD_ONLY", ()) else CORRECT_LABEL
            ops[name] = (op, module.SAMPLES[name], label, False, None)
    return ops


def docstring_bug(module, name: str) -> str:
    """The 'Bug class: ...' line of a buggy op's kernel docstring, for an op with no short label here."""
    for fn in (getattr(module, name, None), getattr(module, f"_{name}_impl", None)):
        for line in (getattr(fn, "__doc__", None) or "").splitlines():
            if line.strip().startswith("Bug class:"):
                return line.strip().removeprefix("Bug class:").strip().rstrip(".")[:40]
    return "?"


@torch.library.custom_op("symfuzz_bench::warm_up", mutates_args=())
def warm_up(x: torch.Tensor) -> torch.Tensor:
    """A trivial correct op, checked once by both tools before anything is timed."""
    return x * 2


@warm_up.register_fake
def _(x):
    return torch.empty_like(x)


warm_up.register_autograd(lambda ctx, grad: grad * 2, setup_context=lambda ctx, inputs, output: None)


# ------------------------------------------------------------------ running


def run_torch(op, sample, row: Row) -> None:
    args, kwargs = copy.deepcopy(sample)
    start = time.perf_counter()
    try:
        results = torch.library.opcheck(op, args, kwargs, raise_exception=False)
    except Exception as exc:  # noqa: BLE001 -- one op's crash must not cost the others' rows
        row.torch_seconds = time.perf_counter() - start
        row.torch_crash = first_line(exc)
        print(f"[{row.op}] torch.library.opcheck crashed:\n{traceback.format_exc()}", file=sys.stderr)
        return
    row.torch_seconds = time.perf_counter() - start
    for test_util, outcome in results.items():
        if outcome != "SUCCESS":
            row.torch_flags.append(test_util)
            row.torch_messages[test_util] = first_line(outcome)


def fresh_inductor_cache(keep: bool):
    """Each symfuzz mode compiles every op as for the first time: an empty Inductor cache
    on disk and in memory, or a later mode would reuse the kernels an earlier one built."""
    if keep:
        return contextlib.nullcontext()
    # private torch API, looked up at use (this script's torch only)
    from torch._inductor.utils import fresh_cache

    return fresh_cache()


def run_symfuzz(op, sample, row: Row, mode: str, budget: float, seed: int, keep_cache: bool = False) -> None:
    run = row.symfuzz[mode] = SymfuzzRun()
    args, kwargs = copy.deepcopy(sample)
    with fresh_inductor_cache(keep_cache):
        start = time.perf_counter()
        try:
            report = opcheck.check(op, [(args, kwargs)], budget=budget, seed=seed,
                                   require_autograd=row.op in REQUIRES_AUTOGRAD, **MODES[mode])
        except Exception as exc:  # noqa: BLE001
            run.seconds = time.perf_counter() - start
            run.crash = first_line(exc)
            print(f"[{row.op}] opcheck.check ({mode}) crashed:\n{traceback.format_exc()}", file=sys.stderr)
            return
        run.seconds = time.perf_counter() - start
    run.error = report.error
    for name, result in report.results.items():
        run.statuses[name] = result.status
        run.check_seconds[name] = result.seconds
        run.inputs[name] = [result.inputs_tried, result.inputs_rejected, result.inputs_skipped]
        if result.status != "failed":
            continue
        if not result.failures:
            run.flags.append(name)
        for f in result.failures:
            run.flags.append(f"{name}[{f.kind}]")
            run.failures.append({"check": name, "kind": f.kind, "input": f.input, "shrunk": f.shrunk,
                                 "message": first_line(f.message)})


def warm_up_all(modes, budget: float, seed: int) -> str:
    """Run every tool once, untimed, on the trivial op; '' or what crashed."""
    sample = ((torch.randn(4, 8),), {})
    row = Row("warm_up", CORRECT_LABEL, False)
    run_torch(torch.ops.symfuzz_bench.warm_up.default, sample, row)
    for mode in modes:
        run_symfuzz(torch.ops.symfuzz_bench.warm_up.default, sample, row, mode, budget, seed)
    crashes = [c for c in [row.torch_crash] + [r.crash for r in row.symfuzz.values()] if c]
    if row.torch_flags or any(r.flags for r in row.symfuzz.values()):
        # Not fatal, but the warm-up op is correct: say so.
        print(f"warning: the warm-up op was flagged: torch {row.torch_flags}, symfuzz "
              f"{ {m: r.flags for m, r in row.symfuzz.items()} }", file=sys.stderr)
    return f"warm-up crashed: {crashes[0]}" if crashes else ""


# ------------------------------------------------------------------ output


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def print_table(rows: list[Row], modes: list[str]) -> None:
    shown = "full" if "full" in modes else modes[0]
    header = ["op", "planted bug", "torch.library.opcheck flags", f"symfuzz flags ({shown})", "torch s",
              *[f"{m} s" for m in modes], "note"]
    table = [header]
    for r in rows:
        torch_cell = f"crash: {r.torch_crash}" if r.torch_crash else (", ".join(r.torch_flags) or "-")
        run = r.symfuzz[shown]
        if run.crash:
            sym_cell = f"crash: {run.crash}"
        elif run.error:
            sym_cell = f"error: {run.error}"
        else:
            sym_cell = ", ".join(run.flags) or "-"
        table.append([r.op, r.bug, torch_cell, sym_cell, seconds(r.torch_seconds),
                      *[seconds(r.symfuzz[m].seconds) for m in modes], r.note()])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    right = set(range(4, 5 + len(modes)))  # numbers
    for n, line in enumerate(table):
        cells = [cell.rjust(w) if i in right and n else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths))]
        print("  ".join(cells).rstrip())

    buggy_rows = [r for r in rows if r.buggy]
    ok_rows = [r for r in rows if not r.buggy]
    meant = [r for r in buggy_rows if r.meant]
    t_torch = sum(r.torch_seconds or 0.0 for r in rows)
    print()
    print(f"{'tool':<24}{'total s':>9}{'s/op':>7}{'x torch':>9}  {'caught':>8}  {'by its check':>12}  "
          f"{'false alarms':>12}")
    n = len(rows) or 1
    print(f"{'torch.library.opcheck':<24}{t_torch:>9.1f}{t_torch / n:>7.2f}{1:>9.1f}  "
          f"{sum(r.torch_flagged for r in buggy_rows):>3} / {len(buggy_rows):<2}  {'-':>12}  "
          f"{sum(r.torch_flagged for r in ok_rows):>4} / {len(ok_rows):<5}")
    for m in modes:
        total = sum(r.symfuzz[m].seconds or 0.0 for r in rows)
        ratio = f"{total / t_torch:.1f}" if t_torch > 0 else "n/a"
        print(f"{'symfuzz ' + m:<24}{total:>9.1f}{total / n:>7.2f}{ratio:>9}  "
              f"{sum(r.symfuzz[m].flagged for r in buggy_rows):>3} / {len(buggy_rows):<2}  "
              f"{sum(r.symfuzz[m].caught_by(r.meant) for r in meant):>6} / {len(meant):<3}  "
              f"{sum(r.symfuzz[m].flagged for r in ok_rows):>4} / {len(ok_rows):<5}")
    print("(caught: buggy ops flagged by any check; by its check: with the check and kind meant for the bug; "
          "false alarms: correct ops flagged)")
    print_phases(rows, modes)


def print_phases(rows: list[Row], modes: list[str]) -> None:
    """Seconds per check (all ops together), each mode's share of its own total, and inputs judged."""
    checks = list(dict.fromkeys(c for r in rows for m in modes for c in r.symfuzz[m].check_seconds))
    if not checks:
        return
    totals = {m: sum(r.symfuzz[m].seconds or 0.0 for r in rows) for m in modes}
    print()
    print("time per phase (check), all ops together: seconds, share of the mode's total, inputs judged "
          "(skipped: no new information)")
    header = f"{'phase':<22}" + "".join(f"{m + ' s':>9}{'share':>7}{'judged':>8}{'skipped':>8}" for m in modes)
    print(header)
    for c in checks + ["(other)"]:
        cells = []
        for m in modes:
            if c == "(other)":  # building templates, asking whether the op is differentiable, ...
                secs = totals[m] - sum(r.symfuzz[m].check_seconds.get(x, 0.0) for r in rows for x in checks)
                judged = skipped = ""
            else:
                secs = sum(r.symfuzz[m].check_seconds.get(c, 0.0) for r in rows)
                judged = str(sum(r.symfuzz[m].inputs.get(c, [0, 0, 0])[0] for r in rows))
                skipped = str(sum(r.symfuzz[m].inputs.get(c, [0, 0, 0])[2] for r in rows))
            share = f"{100 * secs / totals[m]:.0f}%" if totals[m] > 0 else "-"
            cells.append(f"{secs:>9.1f}{share:>7}{judged:>8}{skipped:>8}")
        print(f"{c:<22}" + "".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="symfuzz's budget in seconds per op (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="symfuzz's seed (default 0)")
    parser.add_argument("--ops", default=None, help="comma-separated op names (default: all)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated symfuzz modes to time (default all: {', '.join(MODES)})")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    parser.add_argument("--keep-cache", action="store_true",
                        help="use the environment's Inductor cache instead of a fresh one per mode and op "
                             "(warm-cache figures)")
    try:
        args = parser.parse_args()
        return run_all(parser, args)
    finally:
        if FRESH_CACHE:
            shutil.rmtree(FRESH_CACHE, ignore_errors=True)


def run_all(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    quiet_warnings()
    ops = all_ops()
    names = [n.strip() for n in args.ops.split(",") if n.strip()] if args.ops else list(ops)
    unknown = [n for n in names if n not in ops]
    if unknown:
        parser.error(f"unknown op(s) {', '.join(unknown)}; known: {', '.join(ops)}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes: choose from {', '.join(MODES)}")

    print(f"torch.library.opcheck (torch {torch.__version__}) vs symfuzz opcheck.check, modes {', '.join(modes)} "
          f"(budget {args.budget:.0f}s per op, seed {args.seed}), one sample per op, torch first; after an untimed "
          f"warm-up of each; {'the environment' if args.keep_cache else 'a fresh'} Inductor cache "
          f"{'' if args.keep_cache else 'for each mode on each op'}", flush=True)
    print("warming up every tool on symfuzz_bench::warm_up ...", file=sys.stderr, flush=True)
    crashed = warm_up_all(modes, args.budget, args.seed)
    if crashed:
        print(crashed, file=sys.stderr)

    rows = []
    for name in names:
        op, sample, label, is_buggy, meant = ops[name]
        row = Row(name, label, is_buggy, meant)
        print(f"[{name}] torch.library.opcheck ...", file=sys.stderr, flush=True)
        run_torch(op, sample, row)
        for mode in modes:
            print(f"[{name}] symfuzz opcheck.check ({mode}) ...", file=sys.stderr, flush=True)
            run_symfuzz(op, sample, row, mode, args.budget, args.seed, keep_cache=args.keep_cache)
        rows.append(row)

    print_table(rows, modes)
    if args.json:
        data = {"budget": args.budget, "seed": args.seed, "torch": torch.__version__, "modes": modes,
                "rows": [{**asdict(r), "note": r.note()} for r in rows]}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    any_crash = bool(crashed) or any(r.torch_crash or any(x.crash for x in r.symfuzz.values()) for r in rows)
    return 1 if any_crash else 0


if __name__ == "__main__":
    sys.exit(main())
