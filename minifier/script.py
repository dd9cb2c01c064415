"""The user-script path of the minifier: from a failing script to a graph subject.

``prepare_script`` runs the script once under the capture bootstrap
(``minifier.capture``), picks the first captured graph that failed (a
crash, or a mismatch with ``accuracy``), and returns it as a
``GraphSubject`` with the graph passes. The driver does the rest.
Mistakes a user can fix raise ``ScriptError`` with a message that says what
went wrong and what to do.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import Optional

from symfuzz.minifier.capture import CaptureRun, run_capture
from symfuzz.minifier.graph_passes import PASSES
from symfuzz.minifier.graph_subject import GraphSubject
from symfuzz.oracles.verdict import error_headline


class ScriptError(Exception):
    """The script cannot be minified as given; the message says why and what to do."""


def prepare_script(path: Path, *, accuracy: bool, timeout: float, work_dir: Path,
                   env: Optional[dict] = None, args: tuple = ()) -> tuple[GraphSubject, list]:
    """Capture ``path``'s graphs and return (the first failing graph, the passes).

    The script runs as ``python path *args`` from the current directory.
    ``env`` is added to its environment (e.g. to plant a bug in tests); give
    the driver the same ``env`` so that candidates see it too. Saved input
    values stay under ``work_dir``: keep it while the repro may load them.
    """
    script = check_script(Path(path))
    run = run_capture(script, Path(work_dir) / "capture", accuracy=accuracy, timeout=timeout, env=env, args=args)
    record = choose_graph(run, script, accuracy)
    return GraphSubject.from_record(record, accuracy=accuracy, script=script.name), list(PASSES)


def _check_path(path: Path) -> Path:
    if not path.exists():
        raise ScriptError(f"{path} does not exist. Give the path of the Python script that fails under torch.compile.")
    if not path.is_file() or path.suffix != ".py":
        raise ScriptError(f"{path} is not a Python script (.py file). Give the script that calls torch.compile "
                          "and fails; for a fuzzer finding, minify its finding JSON instead.")
    return path.resolve()


# A script to minify is a reproducer someone wrote: a bigger file is not one.
MAX_SCRIPT_BYTES = 10 * 1024 * 1024


def check_script(path: Path) -> Path:
    """``path``, resolved, if it is a Python script that can run at all: it exists, is a
    .py file, is not empty, decodes (UTF-8, or the encoding its coding line declares) and
    parses. ScriptError otherwise. Nothing is run: the source is only parsed (``ast``)."""
    script = _check_path(Path(path))
    size = script.stat().st_size
    if size > MAX_SCRIPT_BYTES:
        raise ScriptError(f"{path} is {size / 2**20:.0f} MB: too big for a script to minify "
                          f"(at most {MAX_SCRIPT_BYTES // 2**20} MB)")
    raw = script.read_bytes()
    if not raw.strip():
        raise ScriptError(f"{path} is empty: there is nothing to run. Give the script that calls torch.compile "
                          "and fails.")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        source = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise ScriptError(f"{path} is not UTF-8 text (nor in the encoding a coding line declares): {exc}. Save it "
                          "as UTF-8.") from None
    try:
        ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        where = f" line {exc.lineno}" if exc.lineno else ""
        raise ScriptError(f"{path}{where}: SyntaxError: {exc.msg}. Fix the script so that Python can run it.") from None
    except ValueError as exc:  # e.g. a NUL byte in the source
        raise ScriptError(f"{path} cannot be parsed as Python: {exc}. Fix the script.") from None
    return script


def choose_graph(run: CaptureRun, script: Path, accuracy: bool) -> dict:
    """The first failing graph of the run, or a ScriptError that explains why there is none."""
    failing = run.failing(accuracy)
    if not failing:
        raise ScriptError(_why_nothing_failed(run, script, accuracy))
    record = failing[0]
    graph = record.get("graph")
    problems = list((graph or {}).get("unsupported") or record.get("unsupported") or [])
    if graph is None or problems:
        raise ScriptError(
            f"graph {record['index']} of {script.name} failed ({_status_text(record)}), but it cannot be rebuilt as "
            f"a standalone script: {'; '.join(problems) or 'it was not recorded'}. Minify it by hand with "
            f"TORCHDYNAMO_REPRO_AFTER=dynamo, or report the graph as it is.")
    backend = record.get("backend") or {}
    if not backend.get("registered"):
        raise ScriptError(
            f"graph {record['index']} of {script.name} failed with the backend {backend.get('name')!r}, which a fresh "
            "Python process does not know by name. The minifier re-runs the graph in fresh processes, so it needs "
            "a backend torch.compile knows (e.g. 'inductor', 'aot_eager', 'eager'): check whether the failure "
            "shows with one of them, or register yours with torch._dynamo.register_backend in an installed module.")
    return record


def _why_nothing_failed(run: CaptureRun, script: Path, accuracy: bool) -> str:
    tail = _error_line(run)
    if run.timed_out and not run.records:
        return (f"{script.name} ran past the {run.seconds:.0f}s capture timeout before any graph was compiled. "
                "Give a longer --timeout, or make the script reach the failing torch.compile call sooner.")
    if not run.script.get("compile_calls") and not run.records:
        if tail:
            return (f"{script.name} failed before it called torch.compile: {tail}. Fix the script so that it runs "
                    "up to the compiled call that fails.")
        return (f"{script.name} never called torch.compile (or torch._dynamo.optimize), so there is no graph to "
                "minify. Compile the failing model or function with torch.compile and call it at least once.")
    if not run.records:
        where = f" It ended with: {tail}." if tail else ""
        return (f"{script.name} called torch.compile, but Dynamo handed no graph to the backend (the compiled "
                f"function was never called, or the failure is in Dynamo's own tracing, before any backend).{where} "
                "Run it with TORCHDYNAMO_VERBOSE=1 to see where it fails.")
    what = "ran and matched eager on the checked calls" if accuracy else "compiled and ran without an error"
    advice = ("If the failure is a crash, drop --accuracy." if accuracy else
              "If the failure is a wrong result, use --accuracy.")
    ended = f" The script itself failed outside the compiled graphs: {tail}." if tail else ""
    timed = " (the capture timed out; a longer --timeout may reach the failing graph)" if run.timed_out else ""
    return (f"{script.name} runs without a compiled failure, so there is nothing to minify: none of the "
            f"{len(run.records)} graphs captured from it{timed} failed; each {what}.{ended} "
            f"{advice} To check by hand, run the script with TORCHDYNAMO_VERBOSE=1 and compare with "
            "backend='eager' and backend='aot_eager'.")


def _error_line(run: CaptureRun) -> str:
    error = run.script.get("error")
    if error:
        return f"{error['type'].rsplit('.', 1)[-1]}: {error_headline(error['message'])[:300]}"
    if run.returncode not in (0, None):
        lines = [line for line in run.output.strip().splitlines() if line.strip()]
        return f"exit code {run.returncode}" + (f" ({lines[-1][:300]})" if lines else "")
    return ""


def _status_text(record: dict) -> str:
    status = record.get("status")
    return {
        "compile-failed": "the backend raised while compiling it",
        "run-failed": "the compiled graph raised when called",
        "compiling": "the process died or hung while the backend compiled it",
        "running": "the process died or hung while the compiled graph ran",
        "mismatch": "its compiled output differs from eager",
    }.get(status, status)
