"""The ``symfuzz`` command line."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import traceback
from pathlib import Path

from symfuzz.campaign import Campaign, Terminated
from symfuzz.corpus.atomic import DiskFullError
from symfuzz.corpus.case_corpus import CorpusError
from symfuzz.corpus.baseline import BaselineError, load_baseline, old_signing
from symfuzz.corpus.regression import ReferenceError, judge_against_reference, reference_torch
from symfuzz.corpus.replay import replay_finding
from symfuzz.corpus.finding import FindingFormatError, check_case
from symfuzz.corpus.store import scan_findings
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.model_case import ARCHS, is_model_case, model_source_description, model_source_unavailable_reason, unsupported_lane_reason
from symfuzz.fuzz.specs import all_specs
from symfuzz.exit_codes import EXIT_ENVIRONMENT, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE
from symfuzz.fuzz_run import GateOptions, run_fuzz, write_report_files
from symfuzz.gate import fails, gate_exit_code, judge_findings, write_gate
from symfuzz.merge import MergeError, merge_outputs
from symfuzz.minifier.driver import format_report
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_path
from symfuzz.opcheck.cli import cmd_opcheck as run_opcheck
from symfuzz.oracles.lanes.lane import LANES, get_lane
from symfuzz.settings import MODEL_CASE_TIMEOUT, CampaignConfig
from symfuzz.cli_parser import (
    UsageError,
    build_parser,
    join_negative_values,
    local_jobs_max,
    value_options,
)
from symfuzz.issue_report import IssueError, issue_report
from symfuzz.report import load_run
from symfuzz.resume import OutFolderError


def _raise_terminated(signum, frame):
    raise Terminated()


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` belongs to the script being minified (argparse would
    # let a positional swallow the options before it).
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = parser.parse_args(join_negative_values(argv, value_options(parser)))
    args.script_args = tuple(script_args)
    if script_args and args.command != "minify":
        parser.error(f"arguments after `--` are only for `symfuzz minify script.py`: {' '.join(script_args)}")
    try:
        signal.signal(signal.SIGTERM, _raise_terminated)
        return {"fuzz": cmd_fuzz, "lanes": cmd_lanes, "ops": cmd_ops, "replay": cmd_replay,
                "minify": cmd_minify, "opcheck": cmd_opcheck, "accept": cmd_accept, "merge": cmd_merge,
                "report": cmd_report}[args.command](args)
    except UsageError as exc:
        print(f"symfuzz {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        print("terminated (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except DiskFullError as exc:  # what was written before is whole (corpus/atomic.py)
        print(f"symfuzz {args.command}: {exc}: the disk is full; free space and run it again", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except Exception:  # noqa: BLE001 - never exit 1 ("findings") for a symfuzz or environment failure
        traceback.print_exc()
        print(f"symfuzz {args.command}: internal error (above): symfuzz or its environment failed, "
              "not torch; nothing was judged", file=sys.stderr)
        return EXIT_ENVIRONMENT


def writable_folder(path: Path, flag: str, advice: str = "pick a writable folder") -> None:
    """Make sure ``path`` is (or can become) a folder that takes files: UsageError, one line, if not.

    Creates the folder (the run would, a moment later) and a probe file in it, removed at once.
    """
    parent = next((p for p in (path, *path.parents) if p.exists() or p.is_symlink()), None)
    if parent is not None and not parent.is_dir():
        what = "is a file" if parent == path else f"lies under {parent}, which is a file"
        raise UsageError(f"cannot write to {flag}{' ' * bool(flag)}{path}: it {what}, not a folder; {advice}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".symfuzz-write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"cannot write to {flag}{' ' * bool(flag)}{path}: {exc.strerror or exc}; {advice}") from None


def cmd_opcheck(args) -> int:
    return run_opcheck(args)


def _lane(name: str):
    try:
        lane = get_lane(name)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    reason = lane.unavailable_reason()
    if reason:
        raise UsageError(f"lane {name!r} cannot run on this machine: {reason}")
    return lane


def cmd_lanes(args) -> int:
    rows = []
    for lane in LANES.values():
        reason = lane.unavailable_reason()
        rows.append((lane.name, "yes" if reason is None else "no", reason or lane.description))
    width = max(len(r[0]) for r in rows)
    print(f"{'lane':<{width}}  available  notes")
    for name, ok, note in rows:
        print(f"{name:<{width}}  {ok:<9}  {note}")
    print()
    print(model_source_description())
    return EXIT_OK


def cmd_ops(args) -> int:
    by_family: dict[str, list[str]] = {}
    for spec in all_specs():
        by_family.setdefault(spec.family, []).append(spec.name)
    for family, names in by_family.items():
        print(f"{family} ({len(names)}): {', '.join(names)}")
    print(f"{sum(len(v) for v in by_family.values())} op specs")
    return EXIT_OK


def cmd_fuzz(args) -> int:
    lane = _lane(args.lane)
    if args.budget <= 0:
        raise UsageError("--budget must be positive")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"cannot write to --out {args.out}: it is a file, not a folder; pick a writable folder")
    if args.executor == "local" and args.jobs > local_jobs_max():
        raise UsageError(f"--jobs must be at most {local_jobs_max()} with the local executor (4 per CPU, "
                         f"{os.cpu_count() or 1} here), got {args.jobs}: each worker is a Python process holding "
                         f"torch; for more workers, use --executor ray")
    if args.report and (args.out / "report").exists() and not (args.out / "report").is_dir():
        raise UsageError(f"--report writes {args.out / 'report'}/, which is a file; move it away")
    baseline = _baseline(args.baseline) if args.baseline else None
    _check_gate(args)
    if args.corpus is not None:
        try:
            (args.corpus / "cases").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--corpus {args.corpus} cannot hold a corpus: {exc}") from None
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address is for --executor ray")
    if args.executor == "ray":
        _check_ray()
    if "models" in args.source:
        why = unsupported_lane_reason(lane) or model_source_unavailable_reason()
        if why:
            raise UsageError(f"--source {args.source} cannot run here: {why}")
    gen_config = {"max_ops": args.max_ops, "translation_validation_rate": args.translation_validation}
    if args.module_rate is not None:
        gen_config["module_rate"] = args.module_rate
    if args.gradient_share is not None:
        gen_config["gradient_share"] = args.gradient_share
    if args.ops is not None:
        names = [n.strip() for n in args.ops.split(",") if n.strip()]
        if not names:
            raise UsageError(f"--ops names no op ({args.ops!r}); give comma-separated names (`symfuzz ops` lists "
                             f"them), or leave --ops out to draw from every op")
        known = {s.name for s in all_specs()}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown op(s) {', '.join(unknown)}; `symfuzz ops` lists the {len(known)} known ones")
        gen_config["ops"] = names
    models = ()
    if args.models is not None:
        if "models" not in args.source:
            raise UsageError("--models picks architectures of the model source: add --source models "
                             "(or random,models)")
        archs = [n.strip() for n in args.models.split(",") if n.strip()]
        unknown = [n for n in archs if n not in ARCHS]
        if not archs or unknown:
            raise UsageError(f"unknown architecture(s) {', '.join(unknown) or repr(args.models)}; known: "
                             f"{', '.join(ARCHS)}")
        models = tuple(archs)
    writable_folder(args.out, "--out")  # before the campaign: a read-only --out fails here, not mid-run
    config = CampaignConfig(
        out=args.out,
        lane=lane,
        budget=args.budget,
        seed=args.seed,
        jobs=args.jobs,
        case_timeout=args.case_timeout if args.case_timeout is not None else
        (MODEL_CASE_TIMEOUT if "models" in args.source else 180.0),
        canary_timeout=args.canary_timeout,
        memory_limit_mb=args.memory_limit,
        confirm=not args.no_confirm,
        max_cases=args.max_cases,
        max_findings=args.max_findings,
        confirm_timeout=args.confirm_timeout if args.confirm_timeout is not None else
        (MODEL_CASE_TIMEOUT if "models" in args.source else 300.0),
        gen_config=gen_config,
        quiet=args.quiet,
        minify_budget=args.minify_budget if args.minify else None,
        shard=args.shard,
        corpus=args.corpus,
        executor=args.executor,
        ray_address=args.ray_address,
        resume=args.resume,
        reuse_calls=args.reuse_calls,
        guidance=args.guidance,
        source=args.source,
        models=models,
        throughput_settings=not args.no_throughput_settings,
        guard_planning=not args.no_guard_planning,
    )
    try:
        campaign = Campaign(config)  # refuses an --out that holds another run (unless --resume)
    except (OutFolderError, CorpusError) as exc:
        raise UsageError(str(exc)) from None
    gate = GateOptions(args.fail_on, baseline, args.reference_python, args.reference_timeout)
    return run_fuzz(config, gate, reports=args.report, campaign=campaign).code


def _baseline(path: Path):
    try:
        baseline = load_baseline(path)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None
    _say_old_signed(baseline)
    return baseline


def _say_old_signed(baseline) -> None:
    """Say once, on stderr, which entries an older symfuzz signed for a whole class of bugs."""
    for line in baseline.old_signed_notes():
        print(f"note: {line}", file=sys.stderr)


def _resign_evidence(finding, outcome) -> dict:
    """What a re-signed baseline entry's evidence gains: where a death or hang happened
    (from the replay), or which input's gradient differs (from its case)."""
    if outcome.place is not None:
        return dict(outcome.place)
    path = getattr(finding.verdict.evidence, "path", None)
    if is_model_case(finding.case):
        return {}  # a model finding's output names its parameter itself ("grad:..."), not an input's position
    # deferred: it imports torch, which only a replay that got this far has loaded
    from symfuzz.fuzz.script_runtime import gradient_of

    consumers = gradient_of(path, Case.from_json(finding.case).gradient_ops())
    return {"gradient_of": consumers} if consumers else {}


def _check_gate(args) -> None:
    """Check --fail-on against --reference-python, and make the latter an absolute path
    (repros run in their own folders) that can import torch."""
    policy, reference_python = args.fail_on, args.reference_python
    if policy == "regression" and not reference_python:
        raise UsageError("--fail-on regression needs --reference-python: a regression is a finding that passes there")
    if reference_python:
        found = shutil.which(reference_python) if os.sep not in reference_python else reference_python
        if not found:
            raise UsageError(f"--reference-python {reference_python} is not a file or a command on PATH")
        # absolute, but not resolved: a venv's python is a symlink whose target is another environment
        args.reference_python = reference_python = os.path.abspath(found)
        try:
            version = reference_torch(reference_python)
        except ReferenceError as exc:
            raise UsageError(str(exc)) from None
        print(f"symfuzz: reference torch {version} at {reference_python}", file=sys.stderr)


def _check_ray() -> None:
    try:
        # deferred: ray is an optional extra; only --executor ray needs it
        import ray  # noqa: F401
    except ImportError:
        raise UsageError("--executor ray needs Ray: pip install 'symfuzz[ray]'") from None


def cmd_replay(args) -> int:
    """Replay findings (PATH's, or the baseline's entries): reproduced, fixed, or could not run.

    Every readable finding under PATH is replayed; each one that cannot be read is named
    on one line ("skipped PATH: why") and counted. The exit code, first match wins:
    1 findings still fail under --fail-on; 3 findings could not be judged (a repro that
    could not run); 2 some findings could not be read (all the rest passed or are known);
    0 otherwise. Nothing readable at all, or a bad --baseline (any entry), is 2 at once."""
    if args.path is None and args.baseline is None:
        raise UsageError("give a finding path, --baseline FILE, or both")
    baseline = _baseline(args.baseline) if args.baseline else None
    _check_gate(args)
    if args.path is not None:
        if not args.path.exists():
            raise UsageError(f"{args.path} does not exist")
        found, unreadable = scan_findings(args.path)
        findings = [(folder / "repro.py", f) for folder, f in found]
    else:
        unreadable = []
        try:
            findings = [(f"{args.baseline}#{sig}", f) for sig, f in baseline.findings()]
            for _, f in findings:
                check_case(f.case)
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
        except FindingFormatError as exc:
            raise UsageError(f"baseline {args.baseline}: entry {f.signature!r} has no replayable repro: {exc}") from None
    for where, why in unreadable:
        print(f"skipped {where}: {why}", file=sys.stderr)
    if not findings:
        if unreadable:
            raise UsageError(f"none of the {len(unreadable)} findings in {args.path} can be read (above); "
                             "nothing was replayed")
        raise UsageError(f"no findings in {args.path or args.baseline} (give a finding folder, a finding.json, "
                         "or a folder of them)")
    counts = {"reproduced": 0, "fixed": 0, "failing": 0, "unjudged": 0}
    fixed_known = []
    resigned = []  # (old, new) baseline signatures
    for where, finding in findings:
        sig = finding.signature
        known = baseline is not None and sig in baseline
        print(f"{sig}: replaying ({finding.verdict.symptom} on {finding.lane['name']}"
              f"{', known' if known else ''}) ...", flush=True)
        outcome = replay_finding(finding, timeout=args.timeout)
        still_fails = outcome.status == "reproduced" or (outcome.status == "different" and bool(outcome.signature))
        note = {"reproduced": "REPRODUCED: the bug is still present",
                "different": f"FAILS DIFFERENTLY (signature {outcome.signature})",
                "fixed": "FIXED: compiled now matches eager" + ("; prune it from the baseline" if known else ""),
                "broken": f"could not run ({outcome.reason}); output tail:\n{outcome.output_tail[-1500:]}"}[outcome.status]
        regression = None
        if still_fails and args.reference_python and (not known or args.fail_on == "any"):
            verdict = judge_against_reference(finding, args.reference_python, args.timeout)
            regression = verdict.status
            note += f"; {verdict.status} ({verdict.reason})"
        print(f"{sig}: {note}  [{outcome.seconds}s]  repro: {where}")
        if (args.path is None and still_fails and outcome.signature and outcome.signature != sig
                and old_signing(baseline.entries[sig])):
            baseline.resign(sig, outcome.signature, _resign_evidence(finding, outcome))
            resigned.append((sig, outcome.signature))
            print(f"{sig}: re-signed as {outcome.signature} (where it fails now names it, not its lane alone)")
        if outcome.status == "fixed" and known:
            fixed_known.append(sig)
        counts["reproduced"] += still_fails
        counts["fixed"] += outcome.status == "fixed"
        if still_fails:
            entry = {"known": known, "regression": regression}
            if fails(args.fail_on, entry):
                counts["failing"] += 1
            elif args.fail_on == "regression" and not known and regression in (None, "unknown"):
                counts["unjudged"] += 1
        elif outcome.status in ("broken", "different"):  # could not run, or ended without a verdict
            counts["unjudged"] += 1
    print(f"{counts['reproduced']}/{len(findings)} reproduced, {counts['fixed']} fixed"
          + (f" ({len(fixed_known)} baseline entries no longer reproduce: {', '.join(fixed_known)})" if fixed_known else "")
          + (f", {counts['unjudged']} could not be judged" if counts["unjudged"] else "")
          + (f", {len(unreadable)} skipped: cannot be read (listed on stderr)" if unreadable else ""))
    if resigned:
        baseline.save()
        print(f"{args.baseline}: {len(resigned)} entries re-signed: "
              + ", ".join(f"{old} -> {new}" for old, new in resigned))
    if counts["failing"]:
        return EXIT_FINDINGS
    if counts["unjudged"]:
        return EXIT_ENVIRONMENT
    return EXIT_USAGE if unreadable else EXIT_OK


def cmd_accept(args) -> int:
    """Record OUT's confirmed findings in the baseline (existing entries stay as they are).
    All or nothing: a finding that cannot be read, or a baseline that cannot, is exit 2
    with each one named, and the baseline is left as it was."""
    findings_dir = args.out / "findings"
    if not (args.out / "stats.json").exists() and not findings_dir.is_dir():
        raise UsageError(f"{args.out} is not a symfuzz output folder (no stats.json, no findings/)")
    found, unreadable = scan_findings(findings_dir) if findings_dir.is_dir() else ([], [])
    if unreadable:
        raise UsageError(f"{len(unreadable)} finding(s) in {findings_dir} cannot be read, so nothing was accepted "
                         f"({args.baseline} is unchanged); regenerate or remove each one, then accept again:\n"
                         + "\n".join(f"  {where}: {why}" for where, why in unreadable))
    findings = [f for _, f in found]
    try:
        baseline = load_baseline(args.baseline, missing_ok=True)
    except BaselineError as exc:
        raise UsageError(f"{exc} (nothing was accepted; the file is unchanged)") from None
    _say_old_signed(baseline)
    added = baseline.accept(findings)
    if added or not args.baseline.exists():
        baseline.save()
    for sig in added:
        print(f"accepted {sig}: {baseline.entries[sig]['description']}")
    print(f"{args.baseline}: {len(added)} new, {len(findings) - len(added)} already known, "
          f"{len(baseline.entries)} entries (fill in each entry's \"reason\", e.g. a link to the upstream issue)")
    return EXIT_OK


def cmd_merge(args) -> int:
    baseline = _baseline(args.baseline) if args.baseline else None
    _check_gate(args)
    try:
        stats = merge_outputs(list(args.outs), args.out)
    except MergeError as exc:
        raise UsageError(str(exc)) from None
    f = stats.get("findings") or {}
    print(f"merged {len(args.outs)} folders into {args.out}: {(stats.get('programs') or {}).get('generated', 0)} "
          f"programs, {(stats.get('calls') or {}).get('checked', 0)} calls checked, {f.get('confirmed', 0)} findings "
          f"({', '.join(f.get('signatures') or []) or 'none'})")
    # The merged run is judged as one run: the same gate, the same exit codes.
    gate = judge_findings(args.out, args.fail_on, baseline, args.reference_python, args.reference_timeout,
                          note=lambda message: print(message, file=sys.stderr))
    # A shard that was interrupted still counts for what it ran; one that tested too little does
    # not, nor a set of shards with one missing (a shard job that failed before its upload).
    missing = _missing_shards(stats)
    if missing:
        print(f"symfuzz merge: shard(s) {', '.join(missing)} missing: the merged run tested less than asked",
              file=sys.stderr)
    code = EXIT_ENVIRONMENT if stats["health"]["problems"] or missing else gate_exit_code(gate)
    write_gate(args.out, gate, code)
    for sig, entry in gate["findings"].items():
        label = ("known" if entry["known"] else "NEW") + (f", {entry['regression']}" if entry["regression"] else "")
        print(f"  {sig}: [{label}{', fails' if entry['fails'] else ''}] {entry['description']}")
    return code


def _missing_shards(stats: dict) -> list[str]:
    """The K/N of shards absent from a merge of shards (none when the sources were not shards)."""
    merged = (stats.get("shard") or {}).get("merged") if isinstance(stats.get("shard"), dict) else None
    if not merged or not all(isinstance(s, (list, tuple)) and len(s) == 2 for s in merged):
        return []
    count = merged[0][1]
    held = {k for k, _ in merged}
    return [f"{k}/{count}" for k in range(1, count + 1) if k not in held]


def cmd_report(args) -> int:
    if args.issue is not None:
        if args.out is not None or args.dest is not None:
            raise UsageError("--issue prints one finding: give it alone, without an output folder or --dest")
        try:
            print(issue_report(args.issue), end="")
        except IssueError as exc:
            raise UsageError(str(exc)) from None
        return EXIT_OK
    if args.out is None:
        raise UsageError("give a campaign's output folder (or --issue FINDING)")
    if not (args.out / "stats.json").exists():
        raise UsageError(f"{args.out} is not a symfuzz output folder (no stats.json)")
    try:
        load_run(args.out)  # a bad OUT is refused before anything is written
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.dest is None:
        writable_folder(args.out / "report", "", "give --dest a writable folder")
    else:
        writable_folder(args.dest, "--dest")
    try:
        print(write_report_files(args.out, args.dest))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        print(f"symfuzz report: cannot write the reports: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    return EXIT_OK


def cmd_minify(args) -> int:
    if args.budget <= 0:
        raise UsageError("--budget must be positive")
    script_args = args.script_args
    if script_args and args.path.suffix != ".py":
        raise UsageError("arguments after `--` are for a script.py; a finding replays from its JSON alone")
    options = MinifyOptions(out=args.out, match=args.match, accuracy=args.accuracy, test=args.test,
                            budget=args.budget, jobs=args.jobs, query_timeout=args.timeout, quiet=args.quiet,
                            script_args=script_args, warm=not args.cold_queries,
                            cheapest_lane_first=not args.own_lane_only, skip_fruitless=not args.rerun_passes)
    try:
        result = minify_path(args.path, options)
    except MinifyError as exc:
        raise UsageError(str(exc)) from None
    check = result.repro_check or {}
    repro = result.repro_path
    print(format_report(result))
    if check.get("same_bug"):
        print(f"repro      {repro}  (checked in a fresh process: it fails the same way)")
    else:
        print(f"repro      {repro}  (WARNING: in a fresh process it did not fail the same way; "
              f"see {result.work_dir / 'report.json'})")
    return EXIT_OK if check.get("same_bug") else EXIT_FINDINGS


if __name__ == "__main__":
    sys.exit(main())
