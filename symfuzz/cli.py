"""The ``symfuzz`` command line."""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import re
import shutil
import signal
import sys
import traceback
from pathlib import Path

from symfuzz.campaign import Campaign, Terminated
from symfuzz.corpus.atomic import DiskFullError
from symfuzz.corpus.case_corpus import CorpusError
from symfuzz.corpus.baseline import DEFAULT_BASELINE, BaselineError, load_baseline, old_signing
from symfuzz.corpus.regression import ReferenceError, judge_against_reference, reference_torch
from symfuzz.corpus.replay import replay_finding
from symfuzz.corpus.finding import FindingFormatError, check_case
from symfuzz.corpus.store import scan_findings
from symfuzz.fuzz.case import Case
from symfuzz.fuzz.specs import all_specs
from symfuzz.fuzz_run import (  # noqa: F401 - the exit codes and summary are re-exported for callers
    EXIT_ENVIRONMENT,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    GateOptions,
    write_report_files,
    fuzz_exit_code,
    print_internal_errors,
    print_summary,
    run_fuzz,
)
from symfuzz.gate import POLICIES, fails, gate_exit_code, judge_findings, write_gate
from symfuzz.merge import MergeError, merge_outputs
from symfuzz.minifier.driver import format_report
from symfuzz.minifier.run import MinifyError, MinifyOptions, minify_path
from symfuzz.opcheck.cli import add_parser as add_opcheck_parser
from symfuzz.opcheck.cli import cmd_opcheck as run_opcheck
from symfuzz.oracles.lanes.lane import LANES, get_lane
from symfuzz.settings import CASE_TIMEOUT_FLOOR, REUSE_CALLS, CampaignConfig
from symfuzz.issue_report import IssueError, issue_report
from symfuzz.report import load_run
from symfuzz.resume import OutFolderError


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
  2    usage mistake or bad input; or, when nothing failed, findings that could not be
       read (each a `skipped PATH: why` line; the others were replayed)
  3    findings that could not be judged (a repro that could not run)
  130 / 143  interrupted by SIGINT / SIGTERM
  The first that applies wins: 1, then 3, then 2, then 0.

Replaying runs each finding's repro.py: code, by design (treat a finding from someone
else like any script you would run). Reading findings and baselines runs nothing: they
are JSON (no pickle, no eval). The full contract: docs/exit-codes.md
"""


def _raise_terminated(signum, frame):
    raise Terminated()


def fail_on_choice(text: str) -> str:
    if text not in POLICIES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(POLICIES)}, got {text!r}")
    return text


def shard_spec(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"must be K/N (shard K of N), e.g. 1/4, got {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"must be K/N with 1 <= K <= N, got {text}")
    return k, n


class UsageError(Exception):
    """A mistake in how symfuzz was called: reported in one line, no traceback."""


# Type functions: argparse calls them with an option's text. Their messages read after
# the option's name ("--budget must be positive, got -5s"; see SymfuzzParser.error).

DURATION_MAX = 7 * 24 * 3600.0  # a week: longer waits overflow poll()'s millisecond timeouts (24.8 days)
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?")


def _seconds(text: str) -> float:
    """'90', '90s', '10m', '1h', '1m30s', '-5s' -> seconds (negative for a leading '-')."""
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    m = _DURATION.fullmatch(body.lstrip("-").strip())
    if not m or not any(m.groups()):
        raise argparse.ArgumentTypeError(f"must be a duration such as 120s, 10m, 1h or 1h30m, got {text!r}")
    h, mins, s = (float(g) if g else 0.0 for g in m.groups())
    return sign * (h * 3600 + mins * 60 + s)


def duration(text: str) -> float:
    """A positive duration of at most a week, in seconds: '90', '90s', '10m', '1h', '1m30s'."""
    seconds = _seconds(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    if seconds > DURATION_MAX:
        raise argparse.ArgumentTypeError(f"must be at most a week (168h), got {text}")
    return seconds


def case_timeout(text: str) -> float:
    """--case-timeout: a duration of at least CASE_TIMEOUT_FLOOR."""
    seconds = _seconds(text)
    if seconds < CASE_TIMEOUT_FLOOR:
        raise argparse.ArgumentTypeError(
            f"must be at least {CASE_TIMEOUT_FLOOR:.0f}s, got {text}: a case compiles its program once per "
            f"recompile (a first compile alone takes about 20 s), so a shorter limit kills programs that are "
            f"merely slow")
    return duration(text)


def _whole_number(text: str, least: int, why: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {why}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "at least 1")


def nonnegative_int(text: str) -> int:
    return _whole_number(text, 0, "0 or more")


SEED_MAX = 2**63 - 1  # a seed fits a signed 64-bit integer, for whatever reads stats.json


def seed_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**63-1 ({SEED_MAX}), got {text}")
    return value


MEMORY_FLOOR_MB = 1024  # a worker that imported torch and compiled once holds 0.5-1 GB


def memory_mb(text: str) -> int:
    value = positive_int(text)
    if value < MEMORY_FLOOR_MB:
        raise argparse.ArgumentTypeError(
            f"must be at least {MEMORY_FLOOR_MB} (MB), got {value}: a worker holds 0.5-1 GB once it has imported "
            f"torch and compiled, so a lower limit kills every worker")
    return value


def local_jobs_max() -> int:
    """The most local worker processes: 4 per CPU (each is a Python holding torch, compiling)."""
    return 4 * (os.cpu_count() or 1)


def local_jobs(text: str) -> int:
    value = positive_int(text)
    if value > local_jobs_max():
        raise argparse.ArgumentTypeError(
            f"must be at most {local_jobs_max()} (4 per CPU, {os.cpu_count() or 1} here), got {value}")
    return value


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a share between 0 and 1, e.g. 0.05, got {text!r}")
    return value


class SymfuzzParser(argparse.ArgumentParser):
    """argparse, with a bad option answered in one line (no usage block): what is wrong, where to look."""

    def error(self, message):
        # "argument --budget: must be positive, got -5s" -> "--budget must be positive, got -5s"
        m = re.fullmatch(r"argument (\S+): (.*)", message, re.S)
        if m:
            message = f"{m[1]}{' ' if m[2].startswith(('must ', 'is ')) else ': '}{m[2]}"
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Epilogs as written; each option's help ends with its default where it has one and does not say it."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text or not action.option_strings or default is None or default is False
                or default is argparse.SUPPRESS or default == []):
            return text
        return text + " (default: %(default)s)"


class VersionAction(argparse.Action):
    """--version: symfuzz's version and those of what it tests and uses, read without importing them."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(versions_text())
        parser.exit(EXIT_OK)


VERSIONED = (("symfuzz", "symfuzz"), ("torch", "torch"), ("triton", "triton"), ("hypothesis", "hypothesis"),
             ("z3", "z3-solver"))


def versions_text() -> str:
    lines = []
    for name, distribution in VERSIONED:
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        lines.append(f"{name} {version}")
    return "\n".join(lines) + "\n"


MAIN_EPILOG = """\
exit codes (every subcommand): 0 ok, 1 failing findings (torch is wrong, or the bug
reproduced), 2 usage mistake or bad input, 3 could not judge (symfuzz or the environment
is broken), 130 SIGINT, 143 SIGTERM. The full contract, per subcommand: docs/exit-codes.md
"""

SIMPLE_EXIT_CODES = """\
exit codes:
  0    done
  2    usage mistake or bad input (one line on stderr says what and what to do)
  3    symfuzz or its environment is broken (a traceback above the last line)
  130 / 143  interrupted by SIGINT / SIGTERM
"""

MINIFY_EXIT_CODES = """\
A script's own arguments go after `--`: symfuzz minify crash.py --jobs 2 -- --steps 3

Minifying runs the finding's repro script, or SCRIPT, and its candidates: code, by
design (treat a finding or script from someone else like any script you would run).
Reading a finding itself runs nothing (finding.json is JSON: no pickle, no eval).

exit codes:
  0    the repro was written and, in a fresh process, it fails the same way
  1    the repro was written, but in a fresh process it did not fail the same way
  2    usage mistake or bad input (no such finding or script, one that does not fail,
       a bad option)
  3    symfuzz or its environment is broken (a traceback above the last line)
  130 / 143  interrupted by SIGINT / SIGTERM
"""

ACCEPT_EXIT_CODES = """\
exit codes:
  0    the baseline was written (or already held every finding)
  2    usage mistake or bad input: not an OUT folder, an unreadable finding or baseline
  3    symfuzz or its environment is broken (a traceback above the last line)
"""

MERGE_EXIT_CODES = """\
exit codes: as `symfuzz fuzz`, for the merged findings:
  0    nothing fails under the --fail-on policy
  1    merged findings fail under the policy
  2    usage mistake or bad input: a folder that is no symfuzz OUT, an unreadable
       stats.json, --out one of the inputs, shards of different runs; --out is unchanged
  3    could not judge: a merged run that tested too little, a shard missing, or
       symfuzz or the environment is broken
  130 / 143  interrupted by SIGINT / SIGTERM
"""

REPORT_EXIT_CODES = """\
exit codes:
  0    the reports were written
  2    usage mistake or bad input: not an OUT folder, an unreadable or malformed
       stats.json or finding.json, a --dest that cannot be written
  3    the reports could not be written for another reason (a full disk), or symfuzz is broken
"""


def build_parser() -> argparse.ArgumentParser:
    parser = SymfuzzParser(prog="symfuzz", description="Fuzz PyTorch's dynamic-shape compiler.", epilog=MAIN_EPILOG,
                           formatter_class=HelpFormatter)
    parser.add_argument("--version", action=VersionAction,
                        help="print the versions of symfuzz, torch, triton, hypothesis and z3, and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=SymfuzzParser)

    fuzz = sub.add_parser("fuzz", help="run a time-boxed fuzz campaign", epilog=FUZZ_EXIT_CODES,
                          formatter_class=HelpFormatter)
    fuzz.add_argument("--budget", type=duration, default=120.0,
                      help="how long to fuzz, e.g. 120s, 10m (default 120s); starts once the canary program passes")
    fuzz.add_argument("--seed", type=seed_number, default=0,
                      help="campaign seed, 0 to 2**63-1; with the torch version it fixes the programs")
    fuzz.add_argument("--lane", default="inductor-cpp", help="compile lane (see `symfuzz lanes`)")
    fuzz.add_argument("--jobs", type=positive_int, default=2,
                      help="worker processes (default 2; with the local executor at most 4 per CPU)")
    fuzz.add_argument("--out", type=Path, default=Path("symfuzz-out"), help="output folder (default ./symfuzz-out)")
    fuzz.add_argument("--resume", action="store_true",
                      help="continue the campaign in --out: same seed, the next case indices, stats carried over "
                           "(without it, an --out holding an earlier run is refused)")
    fuzz.add_argument("--case-timeout", type=case_timeout, default=180.0,
                      help=f"kill a worker stuck on one case this long (default 3m; at least "
                           f"{CASE_TIMEOUT_FLOOR:.0f}s: a case compiles once per recompile)")
    fuzz.add_argument("--memory-limit", type=memory_mb, default=6144, metavar="MB",
                      help=f"per-worker resident memory limit (default 6144; at least {MEMORY_FLOOR_MB})")
    fuzz.add_argument("--max-cases", type=positive_int, default=None, help="stop after this many programs (default: no limit)")
    fuzz.add_argument("--max-ops", type=positive_int, default=12, help="most ops per generated program")
    fuzz.add_argument("--max-findings", type=positive_int, default=None, help="stop once this many findings are confirmed (default: no limit)")
    fuzz.add_argument("--ops", default=None,
                      help="comma-separated op names: generate only these (see `symfuzz ops`; default: all)")
    fuzz.add_argument("--canary-timeout", type=duration, default=None,
                      help="limit for the canary program, a fresh worker's first (cold) compile (default: the "
                           "larger of --case-timeout and 2m)")
    fuzz.add_argument("--confirm-timeout", type=duration, default=300.0,
                      help="limit for one fresh-process confirmation (default 5m)")
    fuzz.add_argument("--no-confirm", action="store_true", help="report candidates without re-running them in a fresh process")
    fuzz.add_argument("--quiet", action="store_true", help="no progress output")
    fuzz.add_argument("--no-guard-planning", action="store_true",
                      help="make only the drawn calls (no calls solved from the installed guards)")
    fuzz.add_argument("--reuse-calls", type=nonnegative_int, default=REUSE_CALLS, metavar="N",
                      help="with guard planning, N more calls per symbolic compile at new sizes inside its guards: "
                           f"a cached graph runs them without compiling, each checked against eager (default {REUSE_CALLS}; "
                           "0: none)")
    fuzz.add_argument("--no-throughput-settings", action="store_true",
                      help="workers keep Inductor's default compile settings (a compile subprocess pool each) and wait "
                           "idle for the canary (the earlier method, for comparison)")
    fuzz.add_argument("--translation-validation", type=share, default=0.02, metavar="RATE",
                      help="share of programs compiled under z3 translation validation (0-1; slow: default 0.02)")
    fuzz.add_argument("--module-rate", type=share, default=None, metavar="RATE",
                      help="share of programs drawn as nn.Module programs: parameters, buffers, train/eval, "
                           "training steps (0-1; default 0.1)")
    fuzz.add_argument("--gradient-share", type=share, default=None, metavar="RATE",
                      help="share of programs with a floating input whose calls compare gradients too, a "
                           "backward compiled by AOTAutograd (0-1; default 0.4)")
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
                      help="run only shard K of N: case indices i with i %% N == K-1, for the same seed "
                           "(default: all cases)")
    gate.add_argument("--report", action="store_true",
                      help="write OUT/report/ (junit.xml, summary.md, report.html) at the end")
    fuzz.add_argument("--executor", choices=("local", "ray"), default="local",
                      help="where workers run: local processes (default), or a Ray cluster (pip install 'symfuzz[ray]')")
    fuzz.add_argument("--ray-address", default=None, metavar="ADDR",
                      help="with --executor ray: the cluster to join (default: start a local Ray instance)")

    minify = sub.add_parser("minify", help="shrink a finding or a failing script into a small repro that stays dynamic",
                            epilog=MINIFY_EXIT_CODES, formatter_class=HelpFormatter)
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
    minify.add_argument("--jobs", type=local_jobs, default=1, help="queries run in parallel (default 1; at most 4 per CPU)")
    minify.add_argument("--timeout", type=duration, default=None,
                        help="limit for one query (default 5m, or a timeout finding's own limit)")
    minify.add_argument("--quiet", action="store_true", help="no progress output")
    minify.add_argument("--cold-queries", action="store_true",
                        help="run each query in a fresh interpreter instead of forking it from a warm one "
                             "(slower; the earlier method, for comparison)")
    minify.add_argument("--own-lane-only", action="store_true",
                        help="minify a finding on its own lane even when a cheaper lane (eager, aot_eager) "
                             "fails the same way (slower; the earlier method, for comparison)")
    minify.add_argument("--rerun-passes", action="store_true",
                        help="after any progress, run every pass again, even a pass over statements that found "
                             "nothing in statements that have not changed since (slower; the earlier method, "
                             "for comparison)")

    sub.add_parser("lanes", help="list the compile lanes and whether each can run here", epilog=SIMPLE_EXIT_CODES,
                   formatter_class=HelpFormatter)
    sub.add_parser("ops", help="list the op specs the generator draws from, by family", epilog=SIMPLE_EXIT_CODES,
                   formatter_class=HelpFormatter)

    replay = sub.add_parser("replay", help="re-run findings in fresh processes: reproduced or fixed?",
                            epilog=REPLAY_EXIT_CODES, formatter_class=HelpFormatter)
    replay.add_argument("path", type=Path, nargs="?", default=None,
                        help="a finding folder, a finding.json, or a folder of findings")
    replay.add_argument("--baseline", type=Path, default=None, metavar="FILE",
                        help="replay the baseline's entries (with PATH: PATH's findings, judged against the baseline); "
                             "entries that pass now are reported as fixed, to prune")
    replay.add_argument("--reference-python", default=None, metavar="PATH",
                        help="also run each reproduced finding under this Python: regression, pre-existing or unknown")
    replay.add_argument("--fail-on", type=fail_on_choice, default="new", metavar="{regression,new,any}",
                        help="which reproduced findings fail (default new: not in --baseline)")
    replay.add_argument("--timeout", type=duration, default=600.0,
                        help="per finding (default 10m); a timeout finding gets at least twice its case timeout "
                             "plus a minute, and then as long again for its calls in eager alone (hung or slow?)")

    accept = sub.add_parser("accept", help="record a run's confirmed findings as known, in a baseline file",
                            epilog=ACCEPT_EXIT_CODES, formatter_class=HelpFormatter)
    accept.add_argument("out", type=Path, help="a campaign's output folder (or a merged one)")
    accept.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE,
                        help=f"the baseline file (default {DEFAULT_BASELINE}); created if missing")

    merge = sub.add_parser("merge", help="combine the output folders of shards or runs, and judge the result",
                           epilog=MERGE_EXIT_CODES, formatter_class=HelpFormatter)
    merge.add_argument("outs", type=Path, nargs="+", metavar="OUT", help="output folders to merge")
    merge.add_argument("--out", type=Path, required=True,
                       help="the merged folder: new, empty, or an earlier merge output (replaced whole)")
    merge.add_argument("--baseline", type=Path, default=None, metavar="FILE",
                       help="judge the merged findings against this baseline (writes DIR/gate.json)")
    merge.add_argument("--fail-on", type=fail_on_choice, default="new", metavar="{regression,new,any}",
                       help="which merged findings fail (exit 1): new (default), regression, any")
    merge.add_argument("--reference-python", default=None, metavar="PATH",
                       help="classify the merged findings against this Python (see fuzz --reference-python)")
    merge.add_argument("--reference-timeout", type=duration, default=600.0, help="per repro (default 10m)")

    report = sub.add_parser("report", help="write JUnit XML, a Markdown summary and an HTML page for a run; "
                                           "or, with --issue, print one finding as an upstream bug report",
                            epilog=REPORT_EXIT_CODES, formatter_class=HelpFormatter)
    report.add_argument("out", type=Path, nargs="?", help="a campaign's (or a merge's) output folder")
    report.add_argument("--dest", type=Path, default=None, help="where the reports go (default OUT/report)")
    report.add_argument("--issue", type=Path, default=None, metavar="FINDING",
                        help="print this finding (its folder or finding.json) as a Markdown bug report to paste "
                             "upstream: title, the short script, expected and actual, the layer at fault, versions")

    add_opcheck_parser(sub, duration)
    return parser


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


_NEGATIVE = re.compile(r"-(?:\d|\.\d|inf|nan)", re.IGNORECASE)


def value_options(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings, of every subcommand, that take one value."""
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.extend(action.choices.values())
    return {option for p in parsers for action in p._actions if action.nargs is None
            for option in action.option_strings}


def join_negative_values(argv: list[str], options: set[str]) -> list[str]:
    """``--budget -5s`` -> ``--budget=-5s``: argparse takes a value that starts with '-' for an option
    (and answers "expected one argument"); joined, the value reaches its type function, which says
    what is wrong with it."""
    joined, i = [], 0
    while i < len(argv):
        if argv[i] in options and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            joined.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            joined.append(argv[i])
            i += 1
    return joined


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
    writable_folder(args.out, "--out")  # before the campaign: a read-only --out fails here, not mid-run
    config = CampaignConfig(
        out=args.out,
        lane=lane,
        budget=args.budget,
        seed=args.seed,
        jobs=args.jobs,
        case_timeout=args.case_timeout,
        canary_timeout=args.canary_timeout,
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
        reuse_calls=args.reuse_calls,
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
