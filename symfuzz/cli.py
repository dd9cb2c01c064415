"""The ``symfuzz`` command line."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from symfuzz.campaign import Campaign, CampaignConfig, CampaignError
from symfuzz.corpus.replay import replay_finding
from symfuzz.corpus.store import load_findings
from symfuzz.fuzz.specs import all_specs
from symfuzz.minifier.driver import format_report
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_path
from symfuzz.opcheck.cli import add_parser as add_opcheck_parser
from symfuzz.opcheck.cli import cmd_opcheck as run_opcheck
from symfuzz.oracles.lanes.lane import LANES, get_lane

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

FUZZ_EXIT_CODES = """\
exit codes:
  0    nothing was wrong: the canary passed and the programs ran, with no finding
  1    findings: torch is wrong (confirmed in a fresh process, or reported with --no-confirm)
  2    usage mistake (bad option, lane not available here)
  3    symfuzz or the environment is wrong, so the run tested nothing or too little:
       the canary program failed, workers could not start, internal errors or invalid
       programs dominated and the run stopped early, or internal errors exceeded 1%
       of the programs (causes: OUT/internal_errors.json, OUT/canary.log); this wins
       over 1: the run did not test what it was asked to, and any findings it confirmed
       are still listed and kept
  130  interrupted (everything found so far is kept)
"""


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

    replay = sub.add_parser("replay", help="re-run findings in fresh processes: reproduced or fixed?")
    replay.add_argument("path", type=Path, help="a finding folder, a finding.json, or a folder of findings")
    replay.add_argument("--timeout", type=duration, default=600.0, help="per finding (default 10m)")

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
        return {"fuzz": cmd_fuzz, "lanes": cmd_lanes, "ops": cmd_ops, "replay": cmd_replay,
                "minify": cmd_minify, "opcheck": cmd_opcheck}[args.command](args)
    except UsageError as exc:
        print(f"symfuzz {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


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
    )
    print(f"symfuzz: lane {lane.name}, seed {args.seed}, budget {args.budget:.0f}s, {args.jobs} workers -> {args.out}",
          file=sys.stderr)
    try:
        stats = Campaign(config).run()
    except CampaignError as exc:
        print(f"symfuzz fuzz: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    print_summary(stats, args.out)
    code = fuzz_exit_code(stats)
    problems = stats["health"]["problems"]
    if problems and code != EXIT_INTERRUPTED:
        found = stats["findings"]["confirmed"] + stats["findings"]["reported_unconfirmed"]
        verdict = ("symfuzz or its environment is wrong, not torch; the run tested less than it claims"
                   + (f"; its {found} finding(s) are real and kept" if found else ""))
        print(f"symfuzz fuzz: {'; '.join(problems)} ({verdict}; causes and tracebacks: "
              f"{args.out / 'internal_errors.json'})", file=sys.stderr)
    return code


def fuzz_exit_code(stats: dict) -> int:
    """The documented exit code (FUZZ_EXIT_CODES) for a campaign's stats.

    An unhealthy run wins over its findings: it stopped early or tested far
    less than asked, so a green-or-red-for-bugs answer would mislead; the
    findings it did confirm are real, printed and kept beside the cause.
    """
    found = stats["findings"]
    if found["interrupted"]:
        return EXIT_INTERRUPTED
    if stats["health"]["problems"]:
        return EXIT_ENVIRONMENT
    if found["confirmed"] or found["reported_unconfirmed"]:
        return EXIT_FINDINGS
    return EXIT_OK


def print_summary(stats: dict, out: Path) -> None:
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
    for sig in f["signatures"]:
        print(f"  {sig}: python {out / 'findings' / sig / 'repro.py'}")
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
    if not args.path.exists():
        raise UsageError(f"{args.path} does not exist")
    try:
        findings = load_findings(args.path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not findings:
        raise UsageError(f"no finding.json under {args.path}")
    reproduced = 0
    for folder, finding in findings:
        print(f"{finding.signature}: replaying ({finding.verdict.symptom} on {finding.lane['name']}) ...", flush=True)
        outcome = replay_finding(finding, timeout=args.timeout)
        reproduced += outcome.status == "reproduced" or (outcome.status == "different" and bool(outcome.signature))
        note = {"reproduced": "REPRODUCED: the bug is still present",
                "different": f"FAILS DIFFERENTLY (signature {outcome.signature})",
                "fixed": "fixed: compiled now matches eager",
                "broken": f"could not run (exit {outcome.returncode}); output tail:\n{outcome.output_tail[-1500:]}"}[outcome.status]
        print(f"{finding.signature}: {note}  [{outcome.seconds}s]  repro: {folder / 'repro.py'}")
    print(f"{reproduced}/{len(findings)} reproduced")
    return EXIT_FINDINGS if reproduced else EXIT_OK


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
