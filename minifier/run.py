"""Entry points: minify a finding folder or a user's script (``symfuzz minify``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from symfuzz.corpus.deaths import cause_of, failure_id, place_from_evidence
from symfuzz.corpus.replay import hang_limit
from symfuzz.corpus.short_repro import JUDGE_NAME
from symfuzz.corpus.store import load_findings
from symfuzz.fuzz.model_case import is_model_case
from symfuzz.minifier.case_passes import CASE_PASSES
from symfuzz.minifier.module_passes import with_module_passes
from symfuzz.minifier.case_subject import CaseSubject
from symfuzz.minifier.criteria import (AccuracyFailure, ErrorMatches, ExternalScript, SameAsOriginal, SameDeath,
                                      SameStoredSignature)
from symfuzz.minifier.driver import Criterion, Driver, OriginalDoesNotFail, Result
from symfuzz.minifier.script import ScriptError, check_script, prepare_script
from symfuzz.oracles.verdict import Died, Hung


class MinifyError(Exception):
    """A user mistake or an input that cannot be minified; the message says what to do."""


@dataclass
class MinifyOptions:
    out: Optional[Path] = None  # a repro file (*.py) or a folder; None: next to the input
    match: Optional[str] = None
    accuracy: bool = False
    test: Optional[str] = None  # an external interestingness command
    budget: float = 600.0
    jobs: int = 1
    query_timeout: Optional[float] = None
    env: Optional[dict] = None  # extra environment for every query (tests plant bugs with it)
    script_args: tuple = ()  # a script's own command-line arguments
    quiet: bool = False
    # The speed-ups, on by default; off gives the earlier method (benchmarks/minify.py compares them).
    warm: bool = True  # queries forked from warm servers (minifier/warm_queries.py), not fresh interpreters
    cheapest_lane_first: bool = True  # minify on eager/aot_eager when the finding fails the same way there
    skip_fruitless: bool = True  # a statement pass that found nothing waits for the statements to change


def _criterion(options: MinifyOptions, default: Criterion) -> Criterion:
    chosen = [flag for flag, on in (("--match", options.match), ("--accuracy", options.accuracy),
                                    ("--test", options.test)) if on]
    if len(chosen) > 1:
        raise MinifyError(f"{' and '.join(chosen)} each say what 'the same bug' is; give one of them")
    try:
        if options.match:
            return ErrorMatches(options.match)
        if options.test:
            return ExternalScript(options.test)
    except ValueError as exc:
        raise MinifyError(str(exc)) from None
    if options.accuracy:
        return AccuracyFailure()
    return default


def _paths(options: MinifyOptions, default_dir: Path) -> tuple[Path, Optional[Path]]:
    """(work folder, repro file) from --out."""
    out = options.out
    if out is None:
        return default_dir, None
    if out.suffix == ".py":
        return out.with_name(out.stem + ".minify"), out
    return out, None


def finding_failure_id(finding) -> str:
    """What the fresh-process run of a finding's repro reports when it reproduces."""
    verdict = finding.verdict
    if verdict.symptom in ("process-death", "timeout"):
        # Where it died or hung (None: stored by an older symfuzz; SameDeath learns it from the original)
        return failure_id(verdict.symptom, cause_of(verdict.symptom, verdict.evidence),
                          place_from_evidence(verdict.evidence))
    now = resigned(finding)
    if now is not None:
        # Signed by an older symfuzz: a confirmation's signature is as old as the stored one.
        return now
    confirmation = finding.confirmation or {}
    if confirmation.get("status") == "different" and confirmation.get("signature"):
        # Confirmed as failing, in a fresh process, under another signature: that is the bug its repro shows.
        return confirmation["signature"]
    return verdict.signature


# The symptoms whose signature is the raised error's type and message (script_runtime.failure_key).
_ERROR_SYMPTOMS = ("crash", "accepts-invalid", "over-specialization")


def resigned(finding) -> Optional[str]:
    """The signature this symfuzz gives the finding's stored error, where it differs
    from the stored one (an older symfuzz normalized messages differently); else None.

    Without it, the first query fails "differently" and the criterion learns the
    new signature only then (``SameStoredSignature.calibrate``), after the cheaper
    lanes were tried under the old one and the original run on its own lane."""
    verdict = finding.verdict
    error = getattr(verdict.evidence, "error", None)
    if verdict.symptom not in _ERROR_SYMPTOMS or not isinstance(error, dict) or not error.get("type"):
        return None
    # Deferred: it imports torch, which `symfuzz minify` loads only once a query needs it.
    from symfuzz.fuzz import script_runtime

    lane = (finding.lane or {}).get("name", "")
    now = script_runtime.signature(verdict.symptom, lane, script_runtime.failure_key(
        {"symptom": verdict.symptom, "error": error}, []))
    return now if now != verdict.signature else None


def minify_finding(path: Path, options: MinifyOptions, say: Callable[[str], None]) -> Result:
    try:
        findings = load_findings(path)
    except ValueError as exc:
        raise MinifyError(str(exc)) from None
    if len(findings) != 1:
        raise MinifyError(f"{path} holds {len(findings)} findings; give one finding folder (with finding.json)"
                          if findings else f"no finding.json under {path}: give a finding folder "
                          "(OUT/findings/<signature>) or a failing script.py")
    folder, finding = findings[0]
    if is_model_case(finding.case):
        return _minify_model_finding(folder, finding, options, say)
    evidence = finding.verdict.evidence
    timeout = options.query_timeout or 300.0
    if isinstance(evidence, Hung):
        # A candidate reproduces the hang only past the longer limit a confirmation uses: under
        # the case timeout alone, a program that is merely slow (a cold compile) would count.
        timeout = hang_limit(evidence.timeout_seconds, options.query_timeout or 0.0)
    memory = evidence.limit_mb if isinstance(evidence, Died) and evidence.out_of_memory else None
    failure_id = finding_failure_id(finding)
    same = SameDeath(failure_id) if failure_id.startswith(("process-death:", "timeout")) \
        else SameStoredSignature(failure_id, stored=finding.verdict.signature)
    criterion = _criterion(options, same)
    work, repro = _paths(options, folder / "minified")
    with _removed_on_failure(work, keep=options.out is not None):
        driver = Driver(criterion, work, budget=options.budget, jobs=options.jobs, query_timeout=timeout,
                        env=options.env, memory_limit_mb=memory, progress=say, repro_path=repro,
                        warm=options.warm, cheapest_lane_first=options.cheapest_lane_first,
                        skip_fruitless=options.skip_fruitless)
        subject = CaseSubject.from_finding(finding)
        return _run(driver, subject, with_module_passes(CASE_PASSES), f"python {folder / 'repro.py'}")


# A model finding's symptoms that lie inside one compiled graph: its error, or its wrong values.
_GRAPH_SYMPTOMS = {"crash": False, "value-mismatch": True, "metadata-mismatch": True}


def _minify_model_finding(folder: Path, finding, options: MinifyOptions, say: Callable[[str], None]) -> Result:
    """A real architecture's failure inside one compiled graph: the graph-level minifier cuts the
    finding's short repro.py (torch and transformers, the backend by name) to a torch-only script of
    that graph, checking values against eager where the symptom is a wrong value."""
    symptom = finding.verdict.symptom
    script = folder / "repro.py"
    if symptom not in _GRAPH_SYMPTOMS:
        raise MinifyError(f"{finding.verdict.signature} is a {symptom}: it lies in the guards between the calls, "
                          f"not inside one compiled graph, so no graph-level script can show it. {script} is the "
                          "smallest script there is.")
    if not (folder / JUDGE_NAME).is_file():  # repro.py is the judged script: its backend wrapper has no name
        raise MinifyError(f"{finding.verdict.signature} has no short repro.py (confirmation found that a plain "
                          f"script does not show it); minify {script} by hand, or report it as it is.")
    if _GRAPH_SYMPTOMS[symptom] and not (options.match or options.test):
        options = dataclasses.replace(options, accuracy=True)
    return minify_script(script, options, say, default=folder / "minified")


def minify_script(path: Path, options: MinifyOptions, say: Callable[[str], None],
                  default: Optional[Path] = None) -> Result:
    work, repro = _paths(options, default or path.with_name(path.stem + ".minified"))
    timeout = options.query_timeout or 300.0
    criterion = _criterion(options, SameAsOriginal())  # before the capture: a bad --match fails at once
    try:
        check_script(path)  # before anything runs or is written: a script that cannot run is said at once
    except ScriptError as exc:
        raise MinifyError(str(exc)) from None
    with _removed_on_failure(work, keep=options.out is not None):
        say(f"minify: running {path} to capture its compiled graphs ...")
        try:
            subject, passes = prepare_script(path, accuracy=options.accuracy, timeout=timeout, work_dir=work,
                                             env=options.env, args=options.script_args)
        except ScriptError as exc:
            raise MinifyError(str(exc)) from None
        driver = Driver(criterion, work, budget=options.budget, jobs=options.jobs, query_timeout=timeout,
                        env=options.env, progress=say, repro_path=repro, warm=options.warm)
        by_hand = " ".join(["python", str(path), *options.script_args])
        return _run(driver, subject, passes, by_hand)


@contextlib.contextmanager
def _removed_on_failure(work: Path, keep: bool):
    """Remove what a minify that fails created under ``work`` (its capture, its queries'
    files): a failed minify leaves nothing behind. Kept: a folder the user named with --out
    (``keep``), one that was there before (only its new capture/ goes), and the best repro
    so far of a minify interrupted after the original was seen to fail (the driver wrote it)."""
    work = Path(work)
    created = [p for p in (work, work / "capture") if not os.path.lexists(p)]
    try:
        yield
    except BaseException as exc:
        saved = isinstance(exc, KeyboardInterrupt) and (work / "best.json").exists()
        if not keep and not saved:
            for path in created:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                    break  # the first is the outermost: the rest went with it
        raise


def _run(driver: Driver, subject, passes, by_hand: str) -> Result:
    try:
        return driver.minify(subject, passes)
    except OriginalDoesNotFail as exc:
        raise MinifyError(
            f"the original does not fail as required ({driver.criterion.description}): {exc}.\n"
            f"Nothing to minify. Check by hand with `{by_hand}`; if it fails in another way, "
            "say what counts with --match REGEX, --accuracy or --test CMD.") from None


def minify_path(path: Path, options: MinifyOptions, say: Optional[Callable[[str], None]] = None) -> Result:
    say = say or (lambda m: None if options.quiet else print(m, file=sys.stderr, flush=True))
    if not path.exists():
        raise MinifyError(f"{path} does not exist; give a finding folder or a failing script.py")
    if path.is_file() and path.suffix == ".py":
        return minify_script(path, options, say)
    if path.is_dir() or path.name == "finding.json":
        return minify_finding(path, options, say)
    raise MinifyError(f"{path} is neither a finding folder (with finding.json) nor a Python script (*.py)")
