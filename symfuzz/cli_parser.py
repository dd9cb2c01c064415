"""The ``symfuzz`` command's parser: its options, the type functions that check their values,
the help texts (the exit codes of each command), and ``--version``.

It imports no torch: ``symfuzz --help`` and a bad option answer at once.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import re
import sys
from pathlib import Path

from symfuzz.corpus.baseline import DEFAULT_BASELINE
from symfuzz.exit_codes import EXIT_OK, EXIT_USAGE
from symfuzz.gate import POLICIES
from symfuzz.opcheck.cli import add_parser as add_opcheck_parser
from symfuzz.settings import CASE_TIMEOUT_FLOOR, GUIDANCE, MODEL_CASE_TIMEOUT, REUSE_CALLS, parse_source


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


def fail_on_choice(text: str) -> str:
    if text not in POLICIES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(POLICIES)}, got {text!r}")
    return text


def source_choice(text: str) -> str:
    try:
        return parse_source(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    fuzz.add_argument("--case-timeout", type=case_timeout, default=None,
                      help=f"kill a worker stuck on one case this long (default 3m, {MODEL_CASE_TIMEOUT / 60:.0f}m "
                           f"with --source models, whose cases compile a real model several times; at least "
                           f"{CASE_TIMEOUT_FLOOR:.0f}s: a case compiles once per recompile)")
    fuzz.add_argument("--memory-limit", type=memory_mb, default=6144, metavar="MB",
                      help=f"per-worker resident memory limit (default 6144; at least {MEMORY_FLOOR_MB})")
    fuzz.add_argument("--max-cases", type=positive_int, default=None, help="stop after this many programs (default: no limit)")
    fuzz.add_argument("--max-ops", type=positive_int, default=12, help="most ops per generated program")
    fuzz.add_argument("--max-findings", type=positive_int, default=None,
                      help="stop once this many findings are confirmed; no new case starts while that many "
                           "candidates are being confirmed (default: no limit)")
    fuzz.add_argument("--ops", default=None,
                      help="comma-separated op names: generate only these (see `symfuzz ops`; default: all)")
    fuzz.add_argument("--canary-timeout", type=duration, default=None,
                      help="limit for the canary program, a fresh worker's first (cold) compile (default: the "
                           "larger of --case-timeout and 2m)")
    fuzz.add_argument("--confirm-timeout", type=duration, default=None,
                      help=f"limit for one fresh-process confirmation (default 5m, {MODEL_CASE_TIMEOUT / 60:.0f}m with "
                           "--source models: a model's repro compiles it afresh, as slowly as its case did)")
    fuzz.add_argument("--no-confirm", action="store_true", help="report candidates without re-running them in a fresh process")
    fuzz.add_argument("--quiet", action="store_true", help="no progress output")
    fuzz.add_argument("--no-guard-planning", action="store_true",
                      help="make only the drawn calls (no calls solved from the installed guards)")
    fuzz.add_argument("--reuse-calls", type=nonnegative_int, default=REUSE_CALLS, metavar="N",
                      help="with guard planning, N more calls per symbolic compile at new sizes inside its guards, "
                           "and up to 2 more per call that compiled at its sizes with new tensor values: a cached graph "
                           f"runs them without compiling, each checked against eager (default {REUSE_CALLS}; 0: none)")
    fuzz.add_argument("--guidance", type=share, default=GUIDANCE, metavar="SHARE",
                      help="share of generated cases that are guided: mutants of earlier cases that reached a "
                           "compiler feature no case before them did, or draws steered toward the ops the run used "
                           f"least (0-1; default {GUIDANCE}; 0: every case a fresh draw)")
    fuzz.add_argument("--source", type=source_choice, default="random", metavar="SOURCE",
                      help="where generated cases come from: random (random programs), models (small randomly "
                           "initialised real architectures from transformers, called at the sizes users change: "
                           "sequence lengths, padding, KV-cache decoding, training steps), or random,models "
                           "(each case one or the other, half and half); default random. `symfuzz lanes` says whether "
                           "the model source can run here")
    fuzz.add_argument("--models", default=None, metavar="ARCHS",
                      help="with --source models: only these architectures (comma-separated; `symfuzz lanes` lists "
                           "them); default every one")
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


