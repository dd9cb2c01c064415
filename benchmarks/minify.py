#!/usr/bin/env python
"""symfuzz's minifier now against its earlier method (and PyTorch's own minifier), side by side.

Cases: the planted faults below (a user script each), and the findings real
campaigns confirmed on unmodified torch 2.13, stored in
benchmarks/minify_cases/findings/<signature>/finding.json (what `symfuzz fuzz`
wrote; minified from the JSON alone, as `symfuzz minify FINDING` does).

Tools, one after the other on each case, never at the same time:

- **symfuzz-before**: ``symfuzz minify ... --cold-queries --own-lane-only
  --rerun-passes``: the earlier method, every query in a fresh interpreter (6-9 s
  of imports each), a finding always minified on its own lane, and every pass
  run again in every round.
- **symfuzz**: ``symfuzz minify ...`` as it is: queries forked from warm servers,
  a finding of an Inductor lane that fails the same way on eager or aot_eager
  minified there, with a final check on its own lane, and a pass over statements
  that found nothing run again only once the program changed.
- **pytorch**, **pytorch-symbolic** (plants only, with --tools): PyTorch's
  after-AOT minifier, described below.

Each symfuzz row prints the time share of its phases (report.json "phases":
the original's check, trying cheaper lanes, the passes, the check back on the
finding's lane, the final repro's check). The summary gives each tool's median
and max wall time over all cases, and on how many cases the minified sizes
(ops, nodes, calls, elements, dynamic dims) are the same for both methods.

    python benchmarks/minify.py                                  # every case, symfuzz-before then symfuzz
    python benchmarks/minify.py --cases abs-symbolic --tools pytorch,symfuzz

For each plant (a torch bug planted by tests/plants/sitecustomize.py) there is
a user script in benchmarks/minify_cases/: a small nn.Module compiled with a
dynamic batch dimension that trips the plant. Both minifiers start from that
script, in one run, one after the other (never at the same time), each with
the plant on and its own fresh Inductor cache:

- **pytorch**: the script is run with TORCHDYNAMO_REPRO_AFTER=aot (and
  TORCHDYNAMO_REPRO_LEVEL=2 for a crash, 4 for an accuracy bug), which makes
  Dynamo write ``<TORCH_COMPILE_DEBUG_DIR>/torch_compile_debug/run_*/minifier/
  minifier_launcher.py``; then ``python minifier_launcher.py minify`` (its
  defaults: one subprocess per query) runs in an empty folder, and the minified
  repro is the ``repro.py`` it copies into that folder (the last checkpoint of
  ``.../minifier/checkpoints/<nodes>.py``).
- **symfuzz**: ``symfuzz minify SCRIPT --out DIR [--accuracy] --budget B --jobs J``;
  the repro is DIR/repro.py and the figures come from DIR/report.json.

Then each repro is re-run by this benchmark in a fresh process, with the plant
on and again with it off.

    python benchmarks/minify.py --cases abs-symbolic --timeout 1200 --keep /tmp/minify-bench
    python benchmarks/minify.py --tools pytorch,pytorch-symbolic,symfuzz

``--tools pytorch-symbolic`` adds a row for the launcher's ``minify
--tracing-mode symbolic``: what a user who knows the bug needs symbolic sizes
can ask of PyTorch's minifier (it reuses the plain row's launcher). It is slow:
PyTorch's minifier starts a fresh process per query, 25-45 s each here.

What to expect from PyTorch's minifier on torch 2.13 (read from
torch/_dynamo/repro/after_aot.py; the table shows whether it holds):
an accuracy failure (REPRO_LEVEL=4) is dumped from the *real* inputs of the
failing call, so the launcher says ``tracing_mode='real'``, re-traces the graph
with static sizes and cannot see a bug that needs symbolic ones. A compile
crash (REPRO_LEVEL=2) is dumped from Dynamo's fake inputs, so its launcher is
symbolic; but every checkpoint, the final repro.py included, is written from
the real inputs the minifier holds, so repro.py says ``tracing_mode='real'``
again.

Columns:

- nodes before→after: FX nodes (placeholders, ops and output) of the graph
  each tool starts from and ends with, each tool counting its own graph.
  pytorch: counted in the ``Repro`` module's ``forward`` of
  minifier_launcher.py and of the final repro.py: a post-AOTAutograd ATen
  graph with the parameters lifted to inputs (the count matches the
  ``checkpoints/<N>.py`` name PyTorch gives it). symfuzz: "nodes" in
  report.json, counted on the Dynamo (torch-level) graph it captured, where
  e.g. a Linear is one node rather than permute + addmm. Before-counts
  differ for that reason; a fully minified one-op repro is 3 nodes in both.
- ops after: call_function nodes only (pytorch: statements calling an op in
  ``forward``; symfuzz: "ops" from report.json).
- queries: candidate checks the minifier made. pytorch: "Made N queries",
  or if it did not finish, the isolate/*.py scripts it wrote (one per query);
  symfuzz: report.json.
- wall s: wall time of the whole tool, start to repro. pytorch: running the
  script to dump the launcher plus the ``minify`` run; symfuzz: the CLI run.
- fails: the repro, run by itself as written (``python repro.py``) with the
  plant on, still shows the planted failure (exits non-zero; for a crash
  plant its output also has "planted"). When a pytorch repro does not, a
  note says whether ``python repro.py run --tracing-mode symbolic`` would.
- clean: with the plant off the same repro exits 0, i.e. what it shows is
  the planted bug and not some other failure.
- dynamic: the final repro still compiles with symbolic sizes.
  pytorch: the repro's ``run_repro(..., tracing_mode=...)`` is 'symbolic'
  (make_fx then traces every input size as a SymInt and Inductor compiles
  with symbolic sizes); 'real' means a static-shape compile. symfuzz:
  report.json after.dynamic_dims >= 1 and the repro calls mark_dynamic.
- status: "ok", or what went wrong (no launcher written, the minifier raised,
  timed out, CLI not available). If a minifier stopped early but left a
  repro.py (PyTorch writes a checkpoint before each round), that file is
  measured, and a note says so.

Ratios (symfuzz / pytorch) are printed where both tools produced a repro.
Everything runs in a temporary folder (or --keep DIR); nothing is written to
the repository.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "benchmarks" / "minify_cases"
PLANT_DIR = ROOT / "tests" / "plants"
PYTHON = sys.executable
SYMFUZZ = Path(sys.executable).with_name("symfuzz")


@dataclass(frozen=True)
class PlantCase:
    """A planted fault and the user script that trips it."""

    plant: str
    script: Path
    accuracy: bool  # a wrong result (else a crash whose message has "planted")

    @property
    def repro_level(self) -> int:
        # 4: check accuracy of every compiled graph and dump the launcher on a
        # mismatch; 2: dump the launcher when compiling or running raises.
        return 4 if self.accuracy else 2


@dataclass(frozen=True)
class FindingCase:
    """A finding a real campaign confirmed on unmodified torch (benchmarks/minify_cases/findings/<name>/finding.json)."""

    name: str
    folder: Path
    plant = None
    accuracy = False

    @property
    def script(self) -> Path:
        return self.folder / "finding.json"


CASES_BY_PLANT = {
    "abs-symbolic": PlantCase("abs-symbolic", CASES / "abs_symbolic.py", accuracy=True),
    "symbolic-lowering-crash": PlantCase("symbolic-lowering-crash", CASES / "symbolic_lowering_crash.py", accuracy=False),
}
FINDINGS = {folder.name: FindingCase(folder.name, folder)
            for folder in sorted((CASES / "findings").glob("*")) if (folder / "finding.json").exists()}
ALL_CASES = {**CASES_BY_PLANT, **FINDINGS}


@dataclass
class Row:
    """One tool's result on one plant."""

    tool: str
    status: str = "ok"
    nodes_before: int | None = None
    nodes_after: int | None = None
    ops_after: int | None = None
    queries: int | None = None
    seconds: float | None = None
    fails: bool | None = None
    clean: bool | None = None
    dynamic: bool | None = None
    dynamic_why: str = ""
    notes: list[str] = field(default_factory=list)
    after: dict = field(default_factory=dict)  # report.json's "after" (symfuzz rows): the minified sizes
    phases: dict = field(default_factory=dict)  # report.json's "phases" (symfuzz rows): seconds per phase


# ---------------------------------------------------------------- processes


def plant_env(plant: str | None, cache_dir: Path, **extra: str) -> dict:
    """The environment of a fresh process with `plant` on (or none), like tests/conftest.py:planted_env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHDYNAMO_REPRO", "SYMFUZZ_PLANT"))}
    env["PYTHONPATH"] = os.pathsep.join([str(PLANT_DIR), str(ROOT), os.environ.get("PYTHONPATH", "")])
    if plant:
        env["SYMFUZZ_PLANT"] = plant
    # A private Inductor cache per tool and plant: a cache filled without the
    # plant must never answer a planted compile (or the reverse).
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    env.update(extra)
    return env


@dataclass
class Ran:
    rc: int | None  # None: timed out
    seconds: float
    output: str


def run(cmd: list, cwd: Path, env: dict, timeout: float, log: Path) -> Ran:
    """Run `cmd`, stdout and stderr together into `log`; never raises on failure or timeout."""
    cwd.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "wb") as out:
        # Its own process group, so a timeout also ends the subprocesses it started.
        proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    seconds = time.monotonic() - start
    return Ran(rc, seconds, log.read_text(errors="replace"))


def exit_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def last_error_line(output: str) -> str:
    """The final 'SomeError: message' line of a traceback, shortened."""
    lines = [ln.strip() for ln in output.splitlines() if re.match(r"^[\w.]+(Error|Exception)\b", ln.strip())]
    return lines[-1][:110] if lines else "no exception line in the output"


# ------------------------------------------------------------ repro checks


def count_repro_nodes(path: Path) -> tuple[int, int]:
    """FX nodes and op nodes of the ``Repro`` module PyTorch's minifier writes.

    Its forward is FX-generated code: one parameter per placeholder, one
    assignment per op node (``x = torch.ops...``, ``getitem = var_mean[0]``,
    ``_tensor_constant0 = self._tensor_constant0``) and one return for the
    output node; the ``x = None`` assignments only free memory.
    """
    tree = ast.parse(path.read_text())
    repro = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Repro")
    forward = next(n for n in repro.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    placeholders = len(forward.args.args) - 1  # less self
    ops = sum(1 for stmt in forward.body if isinstance(stmt, ast.Assign)
              and not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None))
    return placeholders + ops + 1, ops


def tracing_mode(path: Path) -> str:
    m = re.search(r"run_repro\(mod, load_args,[^\n]*tracing_mode=(['\"]?)(\w+)\1", path.read_text())
    return m.group(2) if m else "unknown"


def check_repro(repro: Path, case, work: Path, timeout: float) -> tuple[bool, bool | None, str]:
    """Run `repro` fresh with the plant on and off: (still fails, clean without plant, note).
    A campaign finding has no plant to turn off: (still fails, None, note)."""
    if case.plant is None:
        ran = run([PYTHON, repro], work / "check", plant_env(None, work / "cache-check"), timeout, work / "check.log")
        fails = ran.rc not in (0, None)
        return fails, None, "" if fails else f"the repro does not fail: {exit_text(ran.rc) if ran.rc is not None else 'timed out'}"
    on = run([PYTHON, repro], work / "check-planted", plant_env(case.plant, work / "cache-check-planted"),
             timeout, work / "check-planted.log")
    off = run([PYTHON, repro], work / "check-clean", plant_env(None, work / "cache-check-clean"),
              timeout, work / "check-clean.log")
    fails = on.rc not in (0, None) and (case.accuracy or "planted" in on.output)
    clean = off.rc == 0
    note = ""
    if on.rc is None or off.rc is None:
        note = "repro timed out when re-run"
    elif not fails:
        note = f"plant on: {exit_text(on.rc)}" + ("" if on.rc == 0 else f", {last_error_line(on.output)}")
    elif not clean:
        note = f"plant off: {exit_text(off.rc)}, {last_error_line(off.output)}"
    return fails, clean, note


# ------------------------------------------------------------- the tools


def pytorch_dump(case: PlantCase, work: Path, timeout: float) -> tuple[Path | None, Ran]:
    """Run the user script under TORCHDYNAMO_REPRO_AFTER=aot; return the launcher it wrote, if any."""
    env = plant_env(case.plant, work / "cache", TORCH_COMPILE_DEBUG_DIR=str(work / "debug"),
                    TORCHDYNAMO_REPRO_AFTER="aot", TORCHDYNAMO_REPRO_LEVEL=str(case.repro_level))
    dumped = run([PYTHON, case.script], work / "dump", env, timeout, work / "dump.log")
    launchers = sorted((work / "debug").glob("torch_compile_debug/run_*/minifier/minifier_launcher.py"))
    return (launchers[-1] if launchers else None), dumped


def pytorch_minifier(case: PlantCase, work: Path, args: argparse.Namespace, mode: str | None = None) -> Row:
    """PyTorch's after-AOT minifier: dump a launcher from the user script, then `minify`.

    `mode` None runs the launcher as written; "symbolic" adds --tracing-mode
    symbolic (the launcher's own flag), reusing the dump of the plain run.
    """
    timeout = args.timeout
    row = Row("pytorch" if mode is None else f"pytorch --tracing-mode {mode}")
    dump_work = work.parent / "pytorch"
    if (dump_work / "dump.log").exists():
        launchers = sorted((dump_work / "debug").glob("torch_compile_debug/run_*/minifier/minifier_launcher.py"))
        launcher, seconds = (launchers[-1] if launchers else None), float((dump_work / "dump.seconds").read_text())
        row.notes.append(f"reused the launcher dumped for the plain pytorch row ({seconds:.0f}s, counted here too)")
    else:
        launcher, dumped = pytorch_dump(case, dump_work, timeout)
        seconds = dumped.seconds
        (dump_work / "dump.seconds").write_text(str(seconds))
        if launcher is None:
            why = "timed out" if dumped.rc is None else f"script {exit_text(dumped.rc)}, {last_error_line(dumped.output)}"
            row.status = f"no launcher written ({why})"
    row.seconds = seconds
    if launcher is None:
        if row.status == "ok":
            row.status = "no launcher written (see the plain pytorch row)"
        return row
    row.nodes_before = count_repro_nodes(launcher)[0]
    row.notes.append(f"launcher tracing_mode={tracing_mode(launcher)!r}")

    minify_dir = work / "minify"
    minify_env = plant_env(case.plant, dump_work / "cache", TORCH_COMPILE_DEBUG_DIR=str(work / "debug-minify"))
    extra = [] if mode is None else ["--tracing-mode", mode]
    minified = run([PYTHON, launcher, "minify", *extra], minify_dir, minify_env, timeout, work / "minify.log")
    row.seconds += minified.seconds
    # One isolate/*.py per query in its default (isolated) mode; "Made N queries" only when it finishes.
    m = re.search(r"Made (\d+) queries", minified.output)
    row.queries = int(m.group(1)) if m else (len(list((minify_dir / "isolate").glob("*.py"))) or None)
    if minified.rc is None:
        row.status = f"minify timed out after {timeout:.0f}s"
    elif minified.rc != 0:
        row.status = (f"minifier raised {last_error_line(minified.output)}" if minified.rc > 0
                      else f"minifier {exit_text(minified.rc)}")
    repro = minify_dir / "repro.py"
    if not repro.exists():
        return row
    if row.status != "ok":
        row.notes.append("measured the repro.py it left (a checkpoint, not a finished minification)")
    row.nodes_after, row.ops_after = count_repro_nodes(repro)
    written_mode = tracing_mode(repro)
    row.dynamic = written_mode == "symbolic"
    row.dynamic_why = f"tracing_mode={written_mode!r}"
    row.fails, row.clean, note = check_repro(repro, case, work, timeout)
    if note:
        row.notes.append(note)
    if not row.fails and written_mode != "symbolic":
        # Would it fail if the user knew to trace it symbolically?
        again = run([PYTHON, repro, "run", "--tracing-mode", "symbolic"], work / "check-symbolic",
                    plant_env(case.plant, work / "cache-check-symbolic"), timeout, work / "check-symbolic.log")
        shows = again.rc not in (0, None) and (case.accuracy or "planted" in again.output)
        row.notes.append(f"`python repro.py run --tracing-mode symbolic` with the plant on: "
                         f"{'fails' if shows else 'does not fail'} (exit {again.rc})")
    return row


def pytorch_symbolic(case: PlantCase, work: Path, args: argparse.Namespace) -> Row:
    return pytorch_minifier(case, work, args, mode="symbolic")


def calls_mark_dynamic(path: Path) -> bool:
    """Whether the script calls ``...mark_dynamic(...)`` (a call, not a comment or a string)."""
    return any(isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "mark_dynamic"
               for node in ast.walk(ast.parse(path.read_text())))


def symfuzz_available() -> str | None:
    """None if `symfuzz minify` exists, else why not."""
    if not SYMFUZZ.exists():
        return f"{SYMFUZZ} not found"
    probe = subprocess.run([str(SYMFUZZ), "minify", "--help"], capture_output=True, text=True, timeout=120, check=False)
    return None if probe.returncode == 0 else "`symfuzz minify` CLI not available in this checkout"


def symfuzz_minifier(case, work: Path, args: argparse.Namespace, before: bool = False) -> Row:
    """``symfuzz minify``: as it is now, or (``before``) by the earlier method: every query in a
    fresh interpreter, and a finding always on its own lane."""
    row = Row("symfuzz-before" if before else "symfuzz")
    timeout = args.timeout
    missing = symfuzz_available()
    if missing:
        row.status = missing
        return row
    out = work / "out"
    target = case.folder if isinstance(case, FindingCase) else case.script
    cmd = [SYMFUZZ, "minify", target, "--out", out, "--budget", args.budget, "--jobs", str(args.jobs)]
    if before:
        cmd += ["--cold-queries", "--own-lane-only", "--rerun-passes"]
    if case.accuracy:
        cmd.append("--accuracy")
    ran = run(cmd, work / "cwd", plant_env(case.plant, work / "cache"), timeout, work / "minify.log")
    row.seconds = ran.seconds
    report_path, repro = out / "report.json", out / "repro.py"
    if ran.rc is None:
        row.status = f"timed out after {timeout:.0f}s"
    elif ran.rc == 1 and report_path.exists():
        # `symfuzz minify` finished but its short repro did not fail the same way in a fresh
        # process (repro.py is then the judged script): a finished run, timed like the others.
        row.status = "ok, short repro not the same failure"
    elif ran.rc != 0:
        row.status = f"{exit_text(ran.rc)}: {last_error_line(ran.output)}"
    if report_path.exists():
        report = json.loads(report_path.read_text())
        before, after = report.get("before", {}), report.get("after", {})
        row.nodes_before, row.nodes_after = before.get("nodes"), after.get("nodes")
        row.ops_after, row.queries = after.get("ops"), report.get("queries")
        row.after, row.phases = after, report.get("phases") or {}
        if report.get("stopped") not in ("fixpoint", None):
            row.notes.append(f"stopped before a fixpoint ({report['stopped']}): its sizes are where it stopped")
        if (report.get("lane") or {}).get("minified_on"):
            lane = report["lane"]
            row.notes.append(f"minified on {lane['minified_on']}, checked on the finding's lane: {lane.get('final_check')}")
        check = report.get("repro_check", {})
        row.notes.append(f"its own repro check: fails={check.get('fails')} same_bug={check.get('same_bug')}")
        dims = after.get("dynamic_dims") or 0
        marks = repro.exists() and calls_mark_dynamic(repro)
        if isinstance(case, FindingCase):
            # A finding's case may be dynamic through dynamic=True or automatic dynamic: no mark needed.
            row.dynamic = dims >= 1
            row.dynamic_why = f"dynamic_dims={dims}"
        else:
            row.dynamic = dims >= 1 and marks
            row.dynamic_why = f"dynamic_dims={dims}, {'calls' if marks else 'no'} mark_dynamic"
    elif row.status == "ok":
        row.status = "no report.json written"
    if repro.exists():
        row.fails, row.clean, note = check_repro(repro, case, work, timeout)
        if note:
            row.notes.append(note)
    elif row.status == "ok":
        row.status = "no repro.py written"
    return row


def symfuzz_before(case, work: Path, args: argparse.Namespace) -> Row:
    return symfuzz_minifier(case, work, args, before=True)


TOOLS = {"pytorch": pytorch_minifier, "pytorch-symbolic": pytorch_symbolic, "symfuzz-before": symfuzz_before,
         "symfuzz": symfuzz_minifier}
SCRIPT_ONLY = ("pytorch", "pytorch-symbolic")  # PyTorch's minifier starts from a script, not from a finding


# ------------------------------------------------------------------ output


def yes_no(value: bool | None, why: str = "") -> str:
    text = "—" if value is None else ("yes" if value else "no")
    return f"{text} ({why})" if why and value is not None else text


SIZE_KEYS = ("ops", "nodes", "calls", "elements", "dynamic_dims")


def print_table(case, rows: list[Row]) -> None:
    if isinstance(case, FindingCase):
        print(f"\n== finding {case.name} (a real campaign's, unmodified torch); {case.script.relative_to(ROOT)}")
    else:
        kind = "accuracy bug (wrong result)" if case.accuracy else "crash"
        print(f"\n== plant {case.plant}: {kind}; script {case.script.relative_to(ROOT)}")
    header = ["tool", "nodes before→after", "ops after", "queries", "wall s", "fails", "clean", "dynamic", "status"]
    table = [header]
    for r in rows:
        nodes = f"{r.nodes_before if r.nodes_before is not None else '—'}→{r.nodes_after if r.nodes_after is not None else '—'}"
        table.append([r.tool, nodes, str(r.ops_after if r.ops_after is not None else "—"),
                      str(r.queries if r.queries is not None else "—"),
                      f"{r.seconds:.0f}" if r.seconds is not None else "—",
                      yes_no(r.fails), yes_no(r.clean), yes_no(r.dynamic, r.dynamic_why), r.status])
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    for r in rows:
        if r.phases and r.seconds:
            shares = ", ".join(f"{name} {seconds / r.seconds:.0%}" for name, seconds in r.phases.items())
            print(f"  {r.tool}: time share: {shares} (rest: start-up and the capture of a script)")
        for note in r.notes:
            print(f"  {r.tool}: {note}")
    by_tool = {r.tool: r for r in rows}
    ours, theirs = by_tool.get("symfuzz"), by_tool.get("pytorch")
    if ours and theirs and ours.nodes_after and theirs.nodes_after:
        unfinished = [r.tool for r in (ours, theirs) if r.status != "ok"]
        caveat = f" ({', '.join(unfinished)} did not finish: figures where it stopped)" if unfinished else ""
        print(f"  ratio symfuzz/pytorch: nodes after {ours.nodes_after / theirs.nodes_after:.2f}, "
              f"wall time {ours.seconds / theirs.seconds:.2f}{caveat}")
    before = by_tool.get("symfuzz-before")
    if ours and before and ours.seconds and before.seconds:
        same = {k: ours.after.get(k) for k in SIZE_KEYS} == {k: before.after.get(k) for k in SIZE_KEYS}
        print(f"  symfuzz now vs before: wall time {ours.seconds:.0f}s vs {before.seconds:.0f}s "
              f"(x{before.seconds / ours.seconds:.1f} faster); minified sizes "
              + ("the same" if same else f"differ: now {_sizes(ours.after)}, before {_sizes(before.after)}"))


def _sizes(after: dict) -> str:
    return ", ".join(f"{after.get(k)} {k}" for k in SIZE_KEYS)


def print_summary(results: list[tuple[object, list[Row]]]) -> None:
    """Median and max wall time per tool over every case, and whether the sizes held."""
    import statistics

    print("\n== summary over every case (goal for symfuzz: median <= 60 s, max <= 150 s)")
    tools = list(dict.fromkeys(r.tool for _, rows in results for r in rows))
    for tool in tools:
        times = [r.seconds for _, rows in results for r in rows if r.tool == tool and r.seconds is not None
                 and r.status.startswith("ok")]
        failed = [r for _, rows in results for r in rows if r.tool == tool and not r.status.startswith("ok")]
        if times:
            print(f"  {tool:<15} {len(times)} cases: median {statistics.median(times):.0f}s, max {max(times):.0f}s, "
                  f"total {sum(times):.0f}s" + (f"; {len(failed)} did not finish" if failed else ""))
    pairs = [(by["symfuzz"], by["symfuzz-before"]) for by in ({r.tool: r for r in rows} for _, rows in results)
             if "symfuzz" in by and "symfuzz-before" in by and by["symfuzz"].after and by["symfuzz-before"].after]
    if pairs:
        same = sum({k: a.after.get(k) for k in SIZE_KEYS} == {k: b.after.get(k) for k in SIZE_KEYS} for a, b in pairs)
        print(f"  minified sizes now equal to before's on {same} of {len(pairs)} cases")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", "--plants", dest="cases", default=",".join(ALL_CASES),
                        help=f"comma-separated plants and findings (default: all: {', '.join(ALL_CASES)})")
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds for each step of each tool")
    parser.add_argument("--budget", default="10m", help="symfuzz minify --budget (default 10m)")
    parser.add_argument("--jobs", type=int, default=2, help="symfuzz minify --jobs (default 2)")
    parser.add_argument("--tools", default="symfuzz-before,symfuzz",
                        help="comma-separated, in order, from pytorch, pytorch-symbolic (the launcher's minify "
                             "with --tracing-mode symbolic; slow), symfuzz-before (cold queries, the finding's own "
                             "lane: the earlier method), symfuzz (default: symfuzz-before,symfuzz)")
    parser.add_argument("--keep", type=Path, default=None, help="keep every artifact under this folder")
    args = parser.parse_args()

    names = [p.strip() for p in args.cases.split(",") if p.strip()]
    unknown = [p for p in names if p not in ALL_CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(ALL_CASES)}")
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if not set(tools) <= set(TOOLS):
        parser.error(f"--tools takes a subset of {', '.join(TOOLS)}")

    root = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="symfuzz-minify-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"minifiers: {', '.join(tools)}; timeout {args.timeout:.0f}s per step, symfuzz --budget {args.budget} "
          f"--jobs {args.jobs}; artifacts in {root}{'' if args.keep else ' (deleted at the end)'}")
    results = []
    try:
        for name in names:
            case = ALL_CASES[name]
            shutil.rmtree(root / name, ignore_errors=True)  # a --keep folder from an earlier run
            rows = []
            for tool in tools:
                if tool in SCRIPT_ONLY and isinstance(case, FindingCase):
                    continue
                work = root / name / tool
                print(f"[{name}] running {tool} ...", file=sys.stderr, flush=True)
                try:
                    rows.append(TOOLS[tool](case, work, args))
                except Exception as exc:  # noqa: BLE001 -- a bug here must not cost the other tools' results
                    rows.append(Row(tool, status=f"benchmark error: {type(exc).__name__}: {exc}"))
            print_table(case, rows)
            results.append((case, rows))
            sys.stdout.flush()
        print_summary(results)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
