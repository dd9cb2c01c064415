"""The ``symfuzz`` command line."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sys
import traceback
from pathlib import Path

from symfuzz.campaign import Campaign, CampaignConfig, CampaignError, Terminated
from symfuzz.corpus.baseline import DEFAULT_BASELINE, BaselineError, load_baseline
from symfuzz.corpus.regression import ReferenceError, judge_against_reference, reference_torch
from symfuzz.corpus.replay import replay_finding
from symfuzz.corpus.store import load_findings
from symfuzz.fuzz.specs import all_specs
from symfuzz.gate import POLICIES, fails, gate_exit_code, judge_findings, write_gate
from symfuzz.merge import MergeError, merge_outputs
from symfuzz.minifier.driver import format_report
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_path
from symfuzz.opcheck.cli import add_parser as add_opcheck_parser
from symfuzz.opcheck.cli import cmd_opcheck as run_opcheck
from symfuzz.oracles.lanes.lane import LANES, get_lane
from symfuzz.report import write_reports
from symfuzz.resume import OutFolderError

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143

FUZZ_EXIT_CODES = """\
exit codes:
  0    nothing fails under the --fail-on policy: the canary passed and the programs
       ran; known findings (in --baseline) and, under --fail-on regression,
       pre-existing ones are reported but do not fail the run
  1    failing findings: torch is wrong (confirmed in a fresh process, or reported
       with --no-confirm) and the policy counts them: new (default: not in the
       baseline), regression (passes under --reference-python), or any
  2    usage mistake or bad input (bad option, lane not available here, unreadable
       baseline, a --reference-python that cannot import torch)
  3    something could not be judged: findings the policy needed a verdict on that
       could not get one (a repro that could not run under the reference torch),
       or symfuzz or the environment is wrong, so the run tested nothing or too
       little: the canary failed, workers could not start, internal errors or
       invalid programs dominated, or internal errors exceeded 1% of the programs
       (causes: OUT/internal_errors.json, OUT/canary.log). A run that tested too
       little is 3 even with failing findings, which are still listed and kept
  130  interrupted by SIGINT (Ctrl-C, or the first signal of a cancelled CI job);
  143  terminated by SIGTERM: either way everything found so far is kept, and
       stats.json and gate.json are written (later signals do not cut that short)
"""


REPLAY_EXIT_CODES = """\
exit codes:
  0    nothing fails under the policy: every finding is fixed, known (in --baseline)
       or, under --fail-on regression, pre-existing
  1    findings that still fail and that the policy counts
  2    usage mistake or bad input
  3    findings that could not be judged (a repro that could not run)
  130 / 143  interrupted by SIGINT / SIGTERM
"""


def _raise_terminated(signum, frame):
    raise Terminated()


def fail_on_choice(text: str) -> str:
    if text not in POLICIES:
        raise argparse.ArgumentTypeError(f"{text!r} is not a policy; choose one of {', '.join(POLICIES)}")
    return text


def shard_spec(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a shard; write K/N, e.g. 1/4")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"shard {k}/{n}: K must be between 1 and N")
    return k, n


class UsageError(Exception):
    """A mistake in how symfuzz was called: reported in one line, no traceback."""


def duration(text: str) -> float:
    """'90', '90s', '10m', '1h', '1m30s' -> seconds."""
    m = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not m or not any(m.groups()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write e.g. 120s, 10m or 1h")
    h, mins, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mins * 60 + s


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symfuzz", description="Fuzz PyTorch's dynamic-shape compiler.")
    sub = parser.add_subparsers(dest="command", required=True)

    fuzz = sub.add_parser("fuzz", help="run a time-boxed fuzz campaign", epilog=FUZZ_EXIT_CODES,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    fuzz.add_argument("--budget", type=duration, default=120.0,
                      help="how long to fuzz, e.g. 120s, 10m (default 120s); starts once the canary program passes")
    fuzz.add_argument("--seed", type=int, default=0, help="campaign seed; with the torch version it fixes the programs")
    fuzz.add_argument("--lane", default="inductor-cpp", help="compile lane (see `symfuzz lanes`)")
    fuzz.add_argument("--jobs", type=positive_int, default=2, help="worker processes (default 2)")
    fuzz.add_argument("--out", type=Path, default=Path("symfuzz-out"), help="output folder (default ./symfuzz-out)")
    fuzz.add_argument("--resume", action="store_true",
                      help="continue the campaign in --out: same seed, the next case indices, stats carried over "
                           "(without it, an --out holding an earlier run is refused)")
    fuzz.add_argument("--case-timeout", type=duration, default=180.0, help="kill a worker stuck on one case this long")
    fuzz.add_argument("--memory-limit", type=positive_int, default=6144, metavar="MB", help="per-worker resident memory limit")
    fuzz.add_argument("--max-cases", type=positive_int, default=None, help="stop after this many programs")
    fuzz.add_argument("--max-ops", type=positive_int, default=12, help="most ops per generated program")
    fuzz.add_argument("--max-findings", type=positive_int, default=None, help="stop once this many findings are confirmed")
    fuzz.add_argument("--ops", default=None, help="comma-separated op names: generate only these (see `symfuzz ops`)")
    fuzz.add_argument("--confirm-timeout", type=duration, default=300.0, help="limit for one fresh-process confirmation")
    fuzz.add_argument("--no-confirm", action="store_true", help="report candidates without re-running them in a fresh process")
    fuzz.add_argument("--quiet", action="store_true", help="no progress output")
    fuzz.add_argument("--no-guard-planning", action="store_true",
                      help="make only the drawn calls (no calls solved from the installed guards)")
    fuzz.add_argument("--translation-validation", type=float, default=0.02, metavar="RATE",
                      help="share of programs compiled under z3 translation validation (0-1; slow: default 0.02)")
    fuzz.add_argument("--minify", action="store_true",
                      help="minify each new confirmed finding (writes FINDING/minified/repro.py)")
    fuzz.add_argument("--minify-budget", type=duration, default=300.0, help="time per finding for --minify (default 5m)")
    gate = fuzz.add_argument_group("CI gate")
    gate.add_argument("--baseline", type=Path, default=None, metavar="FILE",
                      help="known findings (written by `symfuzz accept`): reported, but they do not fail the run")
    gate.add_argument("--fail-on", type=fail_on_choice, default="new", metavar="{regression,new,any}",
                      help="which findings fail the run: new (default; not in --baseline), regression (passes "
                           "under --reference-python), any")
    gate.add_argument("--reference-python", default=None, metavar="PATH",
                      help="the Python of another environment (the last torch release, say): each confirmed "
                           "finding's repro runs there too: regression, pre-existing or unknown")
    gate.add_argument("--reference-timeout", type=duration, default=600.0,
                      help="limit for one repro under --reference-python (default 10m)")
    gate.add_argument("--corpus", type=Path, default=None, metavar="DIR",
                      help="replay the cases stored in DIR before generating any, and add this run's "
                           "findings and new-coverage cases to it")
    gate.add_argument("--shard", type=shard_spec, default=None, metavar="K/N",
                      help="run only shard K of N: case indices i with i %% N == K-1, for the same seed")
    gate.add_argument("--report", action="store_true",
                      help="write OUT/report/ (junit.xml, summary.md, report.html) at the end")
    fuzz.add_argument("--executor", choices=("local", "ray"), default="local",
                      help="where workers run: local processes (default), or a Ray cluster (pip install 'symfuzz[ray]')")
    fuzz.add_argument("--ray-address", default=None, metavar="ADDR",
                      help="with --executor ray: the cluster to join (default: start a local Ray instance)")

    minify = sub.add_parser("minify", help="shrink a finding or a failing script into a small repro that stays dynamic",
                            epilog="A script's own arguments go after `--`: symfuzz minify crash.py --jobs 2 -- --steps 3")
    minify.add_argument("path", type=Path, help="a finding folder (with finding.json) or a script.py that fails under torch.compile")
    minify.add_argument("--out", type=Path, default=None,
                        help="where the repro goes: a file.py (reports beside it in file.minify/) or a folder "
                             "(default: FINDING/minified/ or SCRIPT.minified/)")
    same = minify.add_mutually_exclusive_group()
    same.add_argument("--match", metavar="REGEX", default=None,
                      help="same bug = the run fails and its output matches REGEX (default: the same signature)")
    same.add_argument("--accuracy", action="store_true", help="same bug = compiled output differs from eager")
    same.add_argument("--test", metavar="CMD", default=None,
                      help="same bug = `CMD CANDIDATE.py` exits 0 (a timeout counts as not the same)")
    minify.add_argument("--budget", type=duration, default=600.0, help="time limit, e.g. 10m (default 10m)")
    minify.add_argument("--jobs", type=positive_int, default=1, help="queries run in parallel (default 1)")
    minify.add_argument("--timeout", type=duration, default=None,
                        help="limit for one query (default 5m, or a timeout finding's own limit)")
    minify.add_argument("--quiet", action="store_true", help="no progress output")

    sub.add_parser("lanes", help="list the compile lanes and whether each can run here")
    sub.add_parser("ops", help="list the op specs the generator draws from, by family")

    replay = sub.add_parser("replay", help="re-run findings in fresh processes: reproduced or fixed?",
                            epilog=REPLAY_EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    replay.add_argument("path", type=Path, nargs="?", default=None,
                        help="a finding folder, a finding.json, or a folder of findings")
    replay.add_argument("--baseline", type=Path, default=None, metavar="FILE",
                        help="replay the baseline's entries (with PATH: PATH's findings, judged against the baseline); "
                             "entries that pass now are reported as fixed, to prune")
    replay.add_argument("--reference-python", default=None, metavar="PATH",
                        help="also run each reproduced finding under this Python: regression, pre-existing or unknown")
    replay.add_argument("--fail-on", type=fail_on_choice, default="new", metavar="{regression,new,any}",
                        help="which reproduced findings fail (default new: not in --baseline)")
    replay.add_argument("--timeout", type=duration, default=600.0, help="per finding (default 10m)")

    accept = sub.add_parser("accept", help="record a run's confirmed findings as known, in a baseline file")
    accept.add_argument("out", type=Path, help="a campaign's output folder (or a merged one)")
    accept.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE,
                        help=f"the baseline file (default {DEFAULT_BASELINE}); created if missing")

    merge = sub.add_parser("merge", help="combine the output folders of shards or runs, and judge the result",
                           epilog="exit codes: as `symfuzz fuzz` (0, 1, 2, 3), for the merged findings",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_argument("outs", type=Path, nargs="+", metavar="OUT", help="output folders to merge")
    merge.add_argument("--out", type=Path, required=True, help="the merged folder")
    merge.add_argument("--baseline", type=Path, default=None, metavar="FILE",
                       help="judge the merged findings against this baseline (writes DIR/gate.json)")
    merge.add_argument("--fail-on", type=fail_on_choice, default="new", metavar="{regression,new,any}",
                       help="which merged findings fail (exit 1): new (default), regression, any")
    merge.add_argument("--reference-python", default=None, metavar="PATH",
                       help="classify the merged findings against this Python (see fuzz --reference-python)")
    merge.add_argument("--reference-timeout", type=duration, default=600.0, help="per repro (default 10m)")

    report = sub.add_parser("report", help="write JUnit XML, a Markdown summary and an HTML page for a run")
    report.add_argument("out", type=Path, help="a campaign's (or a merge's) output folder")
    report.add_argument("--dest", type=Path, default=None, help="where the reports go (default OUT/report)")

    add_opcheck_parser(sub, duration)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` belongs to the script being minified (argparse would
    # let a positional swallow the options before it).
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = parser.parse_args(argv)
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
    except Exception:  # noqa: BLE001 - never exit 1 ("findings") for a symfuzz or environment failure
        traceback.print_exc()
        print(f"symfuzz {args.command}: internal error (above): symfuzz or its environment failed, "
              "not torch; nothing was judged", file=sys.stderr)
        return EXIT_ENVIRONMENT


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
        raise UsageError(f"--out {args.out} exists and is not a folder")
    if not 0 <= args.translation_validation <= 1:
        raise UsageError("--translation-validation is a share between 0 and 1, e.g. 0.05")
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
    gen_config = {"max_ops": args.max_ops, "translation_validation_rate": args.translation_validation,
                  "guard_planning": not args.no_guard_planning}
    if args.ops:
        names = [n.strip() for n in args.ops.split(",") if n.strip()]
        known = {s.name for s in all_specs()}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown op(s) {', '.join(unknown)}; `symfuzz ops` lists the {len(known)} known ones")
        gen_config["ops"] = names
    config = CampaignConfig(
        out=args.out,
        lane=lane,
        budget=args.budget,
        seed=args.seed,
        jobs=args.jobs,
        case_timeout=args.case_timeout,
        memory_limit_mb=args.memory_limit,
        confirm=not args.no_confirm,
        max_cases=args.max_cases,
        max_findings=args.max_findings,
        confirm_timeout=args.confirm_timeout,
        gen_config=gen_config,
        quiet=args.quiet,
        minify_budget=args.minify_budget if args.minify else None,
        shard=args.shard,
        corpus=args.corpus,
        executor=args.executor,
        ray_address=args.ray_address,
        resume=args.resume,
    )
    try:
        campaign = Campaign(config)  # refuses an --out that holds another run (unless --resume)
    except OutFolderError as exc:
        raise UsageError(str(exc)) from None
    # A resumed --out holds the earlier run's gate: this run's gate judges anew.
    (args.out / "gate.json").unlink(missing_ok=True)
    shard = f", shard {args.shard[0]}/{args.shard[1]}" if args.shard else ""
    resumed = (f" (resuming: {len(campaign.stats.indices)} cases done)" if campaign.stats.prior_wall or
               campaign.stats.indices else "")
    print(f"symfuzz: lane {lane.name}, seed {args.seed}{shard}, budget {args.budget:.0f}s, {args.jobs} workers "
          f"-> {args.out}{resumed}", file=sys.stderr)
    try:
        stats = campaign.run()
    except CampaignError as exc:
        print(f"symfuzz fuzz: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    terminated = stats["findings"].get("interrupted_by") == "SIGTERM"
    gate = None
    # A stopped run (a cancelled CI job has seconds before SIGKILL) is judged without reference runs.
    reference = None if stats["findings"]["interrupted"] else args.reference_python
    try:
        gate = judge_findings(args.out, args.fail_on, baseline, reference, args.reference_timeout,
                              note=lambda message: print(message, file=sys.stderr) if not args.quiet else None,
                              signatures=stats["findings"]["signatures"])
    except KeyboardInterrupt as exc:  # stopped while judging: what was found is kept, unjudged
        terminated = terminated or isinstance(exc, Terminated)
        stats["findings"]["interrupted"] = True
    print_summary(stats, args.out, gate)
    code = fuzz_exit_code(stats, gate)
    if stats["findings"]["interrupted"] and terminated:
        code = EXIT_TERMINATED
    if gate is not None:
        write_gate(args.out, gate, code)
    if args.report:
        try:
            print(f"reports    {_write_reports(args.out)}")
        except (OSError, ValueError) as exc:  # the run's verdict stands; only its reports are missing
            print(f"symfuzz fuzz: could not write the reports: {exc}", file=sys.stderr)
    problems = stats["health"]["problems"]
    if problems and code != EXIT_INTERRUPTED:
        found = stats["findings"]["confirmed"] + stats["findings"]["reported_unconfirmed"]
        verdict = ("symfuzz or its environment is wrong, not torch; the run tested less than it claims"
                   + (f"; its {found} finding(s) are real and kept" if found else ""))
        print(f"symfuzz fuzz: {'; '.join(problems)} ({verdict}; causes and tracebacks: "
              f"{args.out / 'internal_errors.json'})", file=sys.stderr)
    return code


def fuzz_exit_code(stats: dict, gate: dict | None = None) -> int:
    """The documented exit code (FUZZ_EXIT_CODES) for a campaign's stats and its gate.

    An unhealthy run wins over its findings: it stopped early or tested far
    less than asked, so a green-or-red-for-bugs answer would mislead; the
    findings it did confirm are real, printed and kept beside the cause.
    Otherwise the gate (``symfuzz.gate``) decides which findings fail.
    """
    found = stats["findings"]
    if found["interrupted"]:
        return EXIT_TERMINATED if found.get("interrupted_by") == "SIGTERM" else EXIT_INTERRUPTED
    if stats["health"]["problems"]:
        return EXIT_ENVIRONMENT
    if gate is not None:
        return gate_exit_code(gate)
    if found["confirmed"] or found["reported_unconfirmed"]:
        return EXIT_FINDINGS
    return EXIT_OK


def _baseline(path: Path):
    try:
        return load_baseline(path)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


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


def _write_reports(out: Path, dest: Path | None = None) -> str:
    paths = write_reports(out, dest)
    return ", ".join(str(p) for p in paths.values())


def print_summary(stats: dict, out: Path, gate: dict | None = None) -> None:
    p, c, f = stats["programs"], stats["calls"], stats["findings"]
    share = stats["time_share"]
    print()
    print(f"programs   {p['generated']} generated, {p['valid']} valid in eager ({p['validity_rate']:.1%}), "
          f"{p['compiled']} compiled without error")
    print(f"calls      {c['made']} made, {c['checked']} checked against eager, {c['recompiles']} recompiles")
    print(f"ops        {stats['distinct_ops']} distinct ops exercised")
    print("time       " + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))
    print(f"findings   {f['confirmed']} confirmed in a fresh process, {f['flaky']} flaky, "
          f"{f['unconfirmed']} not yet confirmed, {f['suspect']} suspect (lane artefacts?), {f['duplicates']} duplicates"
          + (f", {f['reported_unconfirmed']} reported without confirmation" if f["reported_unconfirmed"] else ""))
    replay = stats.get("replay") or {}
    if replay.get("stored"):
        print(f"corpus     {replay['cases']}/{replay['stored']} stored cases replayed first"
              + (f", failing: {', '.join(replay['signatures'])}" if replay.get("signatures") else ""))
    judged = (gate or {}).get("findings", {})
    for sig in f["signatures"]:
        entry = judged.get(sig)
        label = ""
        if entry is not None:
            label = ("known" if entry["known"] else "NEW") + (f", {entry['regression']}" if entry["regression"] else "")
            label = f"[{label}{', fails the run' if entry['fails'] else ''}] "
        print(f"  {sig}: {label}python {out / 'findings' / sig / 'repro.py'}")
        if entry is not None and entry.get("reference"):
            print(f"    reference: {entry['reference']['reason']}")
        minified = f.get("minified", {}).get(sig)
        if minified and "after" in minified:
            print(f"    minified to {minified['after'].get('ops')} ops, {minified['after'].get('calls')} calls: "
                  f"python {minified['repro']}")
        elif minified:
            print(f"    not minified: {minified['error'].splitlines()[0]}")
    print_internal_errors(stats, out)
    print(f"stats      {out / 'stats.json'}")


def print_internal_errors(stats: dict, out: Path, shown: int = 5) -> None:
    """Every internal error is listed: by cause, most frequent first."""
    causes = stats["health"]["internal_error_causes"]
    if not causes:
        return
    total = stats["programs"]["internal_errors"]
    print(f"internal   {total} symfuzz internal error(s) in {stats['programs']['generated']} programs, "
          f"{len(causes)} distinct cause(s): symfuzz bugs or a broken environment, not torch findings; "
          f"one traceback per cause in {out / 'internal_errors.json'}")
    for group in causes[:shown]:
        print(f"  {group['count']}x {group['first_line']}  (first at case {group['first_index']})")
    if len(causes) > shown:
        print(f"  ... and {len(causes) - shown} more cause(s)")


def cmd_replay(args) -> int:
    """Replay findings (PATH's, or the baseline's entries): reproduced, fixed, or could not run."""
    if args.path is None and args.baseline is None:
        raise UsageError("give a finding path, --baseline FILE, or both")
    baseline = _baseline(args.baseline) if args.baseline else None
    _check_gate(args)
    if args.path is not None:
        if not args.path.exists():
            raise UsageError(f"{args.path} does not exist")
        try:
            findings = [(folder / "repro.py", f) for folder, f in load_findings(args.path)]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    else:
        try:
            findings = [(f"{args.baseline}#{sig}", f) for sig, f in baseline.findings()]
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
    if not findings:
        raise UsageError(f"no findings in {args.path or args.baseline}")
    counts = {"reproduced": 0, "fixed": 0, "failing": 0, "unjudged": 0}
    fixed_known = []
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
          + (f", {counts['unjudged']} could not be judged" if counts["unjudged"] else ""))
    if counts["failing"]:
        return EXIT_FINDINGS
    return EXIT_ENVIRONMENT if counts["unjudged"] else EXIT_OK


def cmd_accept(args) -> int:
    """Record OUT's confirmed findings in the baseline (existing entries stay as they are)."""
    findings_dir = args.out / "findings"
    if not (args.out / "stats.json").exists() and not findings_dir.is_dir():
        raise UsageError(f"{args.out} is not a symfuzz output folder (no stats.json, no findings/)")
    try:
        findings = [f for _, f in load_findings(findings_dir)] if findings_dir.is_dir() else []
        baseline = load_baseline(args.baseline, missing_ok=True)
    except (ValueError, BaselineError) as exc:
        raise UsageError(str(exc)) from None
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
    f = stats["findings"]
    print(f"merged {len(args.outs)} folders into {args.out}: {stats['programs']['generated']} programs, "
          f"{stats['calls']['checked']} calls checked, {f['confirmed']} findings ({', '.join(f['signatures']) or 'none'})")
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
    if not (args.out / "stats.json").exists():
        raise UsageError(f"{args.out} is not a symfuzz output folder (no stats.json)")
    try:
        print(_write_reports(args.out, args.dest))
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
                            script_args=script_args)
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
