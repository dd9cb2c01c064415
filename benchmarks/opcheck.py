#!/usr/bin/env python
"""torch.library.opcheck against symfuzz's opcheck, side by side on the same ops and sample.

The ops are the fixtures of the opcheck quality tests: tests/opcheck_ops/buggy.py
(10 custom ops, each with one planted bug named in its docstring),
tests/opcheck_ops/sweep_bugs.py (14 more, each with a bug one float32 sample
hides: dtype and value classes, argument kinds, devices, layouts, broadcasting,
an undeclared write), and the correct ops of tests/opcheck_ops/correct.py and
sweep_ok.py (correct twins of the sweep bugs, and forward-only ops: no gradient
formula on purpose). Each op has exactly one sample in its module's
``SAMPLES``: the one ordinary sample an author would write. Both
tools get that sample and nothing else, in one process, one after the other:

- **torch**: ``torch.library.opcheck(op, args, kwargs, raise_exception=False)``
  with its default test_utils (test_schema, test_autograd_registration,
  test_faketensor, test_aot_dispatch_dynamic); it checks the sample as given.
- **symfuzz**: ``opcheck.check(op, [(args, kwargs)], budget=--budget,
  seed=--seed)`` with every check; it checks the sample and then sweeps shapes,
  layouts and dtypes generated from it, within the budget.

Each tool gets its own deep copy of the sample (some ops mutate their input),
and torch's opcheck runs first on every op. Times are wall-clock seconds
(time.perf_counter) around each call. The first check in a process pays a
one-off warm-up (lazy imports, fake-tensor and AOTAutograd set-up; for symfuzz
also Dynamo, Inductor and its C++ toolchain), which would land on whichever
tool ran first on the first op; so before anything is timed, both tools run
once, untimed, on a throwaway trivial custom op defined here
(``symfuzz_bench::warm_up``), and no op's time includes that warm-up.
symfuzz compiles with Inductor (torch's opcheck does not); it gets a fresh,
empty Inductor cache (TORCHINDUCTOR_CACHE_DIR, deleted at the end), so its
times are those of an op compiled for the first time, whatever earlier runs
left in the shared cache; --keep-cache uses the environment's cache instead.

    python benchmarks/opcheck.py                      # every op, symfuzz budget 60s per op
    python benchmarks/opcheck.py --ops half_cols,scaled_add --budget 20
    python benchmarks/opcheck.py --json /tmp/opcheck-bench.json

Columns:

- op: the op's name (``symfuzz_buggy::<op>`` or ``symfuzz_ok::<op>``).
- planted bug: the op's bug class, short (from its docstring), or
  "none (correct)" for the ops of correct.py.
- torch.library.opcheck: the test_utils that failed on the sample ("-": none).
- symfuzz: ``check[kind]`` for each failure symfuzz reported ("-": none);
  "error: ..." if it could not check the op at all.
- torch s / symfuzz s: wall seconds of each tool on the op. symfuzz's is
  bounded by --budget (plus the check in progress when it runs out); a check
  that finds nothing more to try stops early.
- note: MISSED when symfuzz flags nothing on a buggy op, FALSE ALARM when it
  flags a correct op, CRASH when a tool raised (see stderr).

The totals say how many of the planted bugs each tool flagged (any failure
on a buggy op counts; the table shows which checks), how many symfuzz caught
with the check meant for the bug (sweep_bugs.EXPECTED), how many of the correct
ops each flagged (false alarms), the total seconds of each and the ratio
symfuzz/torch. The exit code is 0 unless a tool or the benchmark itself crashed (1).
"""

from __future__ import annotations

import argparse
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


@dataclass
class Row:
    op: str
    bug: str
    buggy: bool
    torch_flags: list[str] = field(default_factory=list)  # failing test_utils
    torch_messages: dict[str, str] = field(default_factory=dict)  # test_util -> first line of its exception
    torch_seconds: float | None = None
    torch_crash: str = ""
    symfuzz_flags: list[str] = field(default_factory=list)  # "check[kind]"
    symfuzz_failures: list[dict] = field(default_factory=list)  # check, kind, input, shrunk, message
    symfuzz_statuses: dict[str, str] = field(default_factory=dict)  # check -> passed/failed/skipped
    symfuzz_check_seconds: dict[str, float] = field(default_factory=dict)  # check -> its seconds on this op
    symfuzz_error: str = ""  # Report.error: the op could not be checked
    symfuzz_seconds: float | None = None
    symfuzz_crash: str = ""

    @property
    def symfuzz_flagged(self) -> bool:
        return bool(self.symfuzz_flags)

    @property
    def torch_flagged(self) -> bool:
        return bool(self.torch_flags)

    def note(self) -> str:
        notes = []
        if self.torch_crash or self.symfuzz_crash:
            notes.append("CRASH")
        elif self.buggy and not self.symfuzz_flagged:
            notes.append("MISSED")
        elif not self.buggy and self.symfuzz_flagged:
            notes.append("FALSE ALARM")
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


def all_ops() -> dict[str, tuple[object, tuple, str, bool]]:
    """name -> (OpOverload, (args, kwargs), bug label, is buggy), buggy ops first."""
    ops = {}
    for module in (buggy, sweep_bugs):
        for name, op in module.OPS.items():
            ops[name] = (op, module.SAMPLES[name], BUG_LABELS.get(name) or docstring_bug(module, name), True)
    for module in (correct, sweep_ok):
        for name, op in module.OPS.items():
            label = "none (forward-only)" if name in getattr(module, "FORWARD_ONLY", ()) else CORRECT_LABEL
            ops[name] = (op, module.SAMPLES[name], label, False)
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


def run_symfuzz(op, sample, row: Row, budget: float, seed: int) -> None:
    args, kwargs = copy.deepcopy(sample)
    start = time.perf_counter()
    try:
        report = opcheck.check(op, [(args, kwargs)], budget=budget, seed=seed)
    except Exception as exc:  # noqa: BLE001
        row.symfuzz_seconds = time.perf_counter() - start
        row.symfuzz_crash = first_line(exc)
        print(f"[{row.op}] opcheck.check crashed:\n{traceback.format_exc()}", file=sys.stderr)
        return
    row.symfuzz_seconds = time.perf_counter() - start
    row.symfuzz_error = report.error
    for name, result in report.results.items():
        row.symfuzz_statuses[name] = result.status
        row.symfuzz_check_seconds[name] = result.seconds
        if result.status != "failed":
            continue
        if not result.failures:
            row.symfuzz_flags.append(name)
        for f in result.failures:
            row.symfuzz_flags.append(f"{name}[{f.kind}]")
            row.symfuzz_failures.append({"check": name, "kind": f.kind, "input": f.input, "shrunk": f.shrunk,
                                         "message": first_line(f.message)})


def warm_up_both(budget: float, seed: int) -> str:
    """Run both tools once, untimed, on the trivial op; '' or what crashed."""
    sample = ((torch.randn(4, 8),), {})
    problems = []
    row = Row("warm_up", CORRECT_LABEL, False)
    run_torch(torch.ops.symfuzz_bench.warm_up.default, sample, row)
    run_symfuzz(torch.ops.symfuzz_bench.warm_up.default, sample, row, budget, seed)
    if row.torch_crash or row.symfuzz_crash:
        problems.append(f"warm-up crashed: {row.torch_crash or row.symfuzz_crash}")
    if row.torch_flags or row.symfuzz_flags:
        # Not fatal, but the warm-up op is correct: say so.
        print(f"warning: the warm-up op was flagged: torch {row.torch_flags}, symfuzz {row.symfuzz_flags}",
              file=sys.stderr)
    return "; ".join(problems)


# ------------------------------------------------------------------ output


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def print_table(rows: list[Row]) -> None:
    header = ["op", "planted bug", "torch.library.opcheck flags", "symfuzz flags", "torch s", "symfuzz s", "note"]
    table = [header]
    for r in rows:
        torch_cell = f"crash: {r.torch_crash}" if r.torch_crash else (", ".join(r.torch_flags) or "-")
        if r.symfuzz_crash:
            sym_cell = f"crash: {r.symfuzz_crash}"
        elif r.symfuzz_error:
            sym_cell = f"error: {r.symfuzz_error}"
        else:
            sym_cell = ", ".join(r.symfuzz_flags) or "-"
        table.append([r.op, r.bug, torch_cell, sym_cell, seconds(r.torch_seconds), seconds(r.symfuzz_seconds),
                      r.note()])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    right = {4, 5}  # numbers
    for n, line in enumerate(table):
        cells = [cell.rjust(w) if i in right and n else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths))]
        print("  ".join(cells).rstrip())

    buggy_rows = [r for r in rows if r.buggy]
    ok_rows = [r for r in rows if not r.buggy]
    t_torch = sum(r.torch_seconds or 0.0 for r in rows)
    t_sym = sum(r.symfuzz_seconds or 0.0 for r in rows)
    print()
    print(f"bugs caught (of {len(buggy_rows)} buggy ops):    torch {sum(r.torch_flagged for r in buggy_rows)}, "
          f"symfuzz {sum(r.symfuzz_flagged for r in buggy_rows)}")
    meant = [r for r in buggy_rows if r.op in sweep_bugs.EXPECTED]
    if meant:
        by_its_check = sum(any(f["check"] == sweep_bugs.EXPECTED[r.op][0] and f["kind"] == sweep_bugs.EXPECTED[r.op][1]
                               for f in r.symfuzz_failures) for r in meant)
        print(f"  of the {len(meant)} sweep bugs, symfuzz caught {by_its_check} with the check meant for it; "
              f"torch {sum(r.torch_flagged for r in meant)}")
    print(f"false alarms (of {len(ok_rows)} correct ops):  torch {sum(r.torch_flagged for r in ok_rows)}, "
          f"symfuzz {sum(r.symfuzz_flagged for r in ok_rows)}")
    checks = list(dict.fromkeys(c for r in rows for c in r.symfuzz_check_seconds))
    if checks:
        print("symfuzz seconds per check, mean over all ops (a skipped check counts 0): "
              + ", ".join(f"{c} {sum(r.symfuzz_check_seconds.get(c, 0.0) for r in rows) / len(rows):.2f}"
                          for c in checks))
    ratio = f"{t_sym / t_torch:.1f}" if t_torch > 0 else "n/a"
    print(f"total seconds:                   torch {t_torch:.1f}, symfuzz {t_sym:.1f}, ratio symfuzz/torch {ratio}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0, help="symfuzz's budget in seconds per op (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="symfuzz's seed (default 0)")
    parser.add_argument("--ops", default=None, help="comma-separated op names (default: all)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    parser.add_argument("--keep-cache", action="store_true",
                        help="use the environment's Inductor cache instead of a fresh one (warm-cache figures)")
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

    print(f"torch.library.opcheck (torch {torch.__version__}) vs symfuzz opcheck.check (budget {args.budget:.0f}s "
          f"per op, seed {args.seed}), one sample per op, torch first; after an untimed warm-up of both; "
          f"{'the environment' if args.keep_cache else 'a fresh'} Inductor cache", flush=True)
    print("warming up both tools on symfuzz_bench::warm_up ...", file=sys.stderr, flush=True)
    crashed = warm_up_both(args.budget, args.seed)
    if crashed:
        print(crashed, file=sys.stderr)

    rows = []
    for name in names:
        op, sample, label, is_buggy = ops[name]
        row = Row(name, label, is_buggy)
        print(f"[{name}] torch.library.opcheck ...", file=sys.stderr, flush=True)
        run_torch(op, sample, row)
        print(f"[{name}] symfuzz opcheck.check ...", file=sys.stderr, flush=True)
        run_symfuzz(op, sample, row, args.budget, args.seed)
        rows.append(row)

    print_table(rows)
    if args.json:
        data = {"budget": args.budget, "seed": args.seed, "torch": torch.__version__,
                "rows": [{**asdict(r), "note": r.note()} for r in rows]}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    any_crash = bool(crashed) or any(r.torch_crash or r.symfuzz_crash for r in rows)
    return 1 if any_crash else 0


if __name__ == "__main__":
    sys.exit(main())
