"""A fuzz run as the app runs it, however it is started: the campaign, then the gate, the
summary, the reports and the exit code.

``run_fuzz`` is what ``symfuzz fuzz`` does once its options are checked, and what a
campaign run from Python (a benchmark, a notebook) calls to get the same verdict: the
gate's judgment of the findings (``symfuzz.gate``: new, known, regressed), gate.json,
the printed summary, and the documented exit code (``FUZZ_EXIT_CODES`` in
``symfuzz.cli``). A stopped run (SIGINT, SIGTERM) is judged without reference runs and
exits 130 or 143 with everything it found kept.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from symfuzz.campaign import Campaign, CampaignError, Terminated
from symfuzz.exit_codes import EXIT_ENVIRONMENT, EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED
from symfuzz.gate import gate_exit_code, judge_findings, write_gate
from symfuzz.report import write_reports
from symfuzz.settings import CampaignConfig



@dataclass(frozen=True)
class GateOptions:
    """How the findings are judged (``symfuzz fuzz --fail-on/--baseline/--reference-python``)."""

    fail_on: str = "new"
    baseline: object = None  # a loaded corpus.baseline.Baseline, or None
    reference_python: Optional[str] = None  # an absolute path that imports torch
    reference_timeout: float = 300.0


@dataclass
class FuzzOutcome:
    stats: Optional[dict]  # stats.json's content (None: the campaign could not test anything)
    gate: Optional[dict]
    code: int  # the exit code


def run_fuzz(config: CampaignConfig, gate_options: GateOptions = GateOptions(), *, reports: bool = False,
             campaign: Optional[Campaign] = None) -> FuzzOutcome:
    """Run the campaign of ``config`` (or the ``campaign`` already made from it), judge its
    findings, print the summary, write gate.json (and the reports) and return the exit code.

    Raises OutFolderError or CorpusError (usage mistakes) from making the campaign."""
    campaign = campaign or Campaign(config)  # refuses an --out that holds another run (unless --resume)
    out = Path(config.out)
    # A resumed --out holds the earlier run's gate: this run's gate judges anew.
    (out / "gate.json").unlink(missing_ok=True)
    shard = f", shard {config.shard[0]}/{config.shard[1]}" if config.shard else ""
    resumed = (f" (resuming: {len(campaign.stats.indices)} cases done)" if campaign.stats.prior_wall or
               campaign.stats.indices else "")
    print(f"symfuzz: lane {config.lane.name}, seed {config.seed}{shard}, budget {config.budget:.0f}s, {config.jobs} "
          f"workers -> {out}{resumed}", file=sys.stderr)
    try:
        stats = campaign.run()
    except CampaignError as exc:
        print(f"symfuzz fuzz: {exc}", file=sys.stderr)
        return FuzzOutcome(None, None, EXIT_ENVIRONMENT)
    terminated = stats["findings"].get("interrupted_by") == "SIGTERM"
    gate = None
    # A stopped run (a cancelled CI job has seconds before SIGKILL) is judged without reference runs.
    reference = None if stats["findings"]["interrupted"] else gate_options.reference_python
    try:
        gate = judge_findings(out, gate_options.fail_on, gate_options.baseline, reference,
                              gate_options.reference_timeout,
                              note=lambda message: print(message, file=sys.stderr) if not config.quiet else None,
                              signatures=stats["findings"]["signatures"])
    except KeyboardInterrupt as exc:  # stopped while judging: what was found is kept, unjudged
        terminated = terminated or isinstance(exc, Terminated)
        stats["findings"]["interrupted"] = True
    print_summary(stats, out, gate)
    code = fuzz_exit_code(stats, gate)
    if stats["findings"]["interrupted"] and terminated:
        code = EXIT_TERMINATED
    if gate is not None:
        write_gate(out, gate, code)
    if reports:
        try:
            print(f"reports    {write_report_files(out)}")
        except (OSError, ValueError) as exc:  # the run's verdict stands; only its reports are missing
            print(f"symfuzz fuzz: could not write the reports: {exc}", file=sys.stderr)
    problems = stats["health"]["problems"]
    if problems and code != EXIT_INTERRUPTED:
        found = stats["findings"]["confirmed"] + stats["findings"]["reported_unconfirmed"]
        verdict = ("symfuzz or its environment is wrong, not torch; the run tested less than it claims"
                   + (f"; its {found} finding(s) are real and kept" if found else ""))
        print(f"symfuzz fuzz: {'; '.join(problems)} ({verdict}; causes and tracebacks: "
              f"{out / 'internal_errors.json'})", file=sys.stderr)
    return FuzzOutcome(stats, gate, code)


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


def write_report_files(out: Path, dest: Path | None = None) -> str:
    """Write the run's reports (``symfuzz.report``); the paths written, comma-separated."""
    paths = write_reports(out, dest)
    return ", ".join(str(p) for p in paths.values())


def print_summary(stats: dict, out: Path, gate: dict | None = None) -> None:
    p, c, f = stats["programs"], stats["calls"], stats["findings"]
    share = stats["time_share"]
    print()
    print(f"programs   {p['generated']} generated, {p['valid']} valid in eager ({p['validity_rate']:.1%}), "
          f"{p['compiled']} compiled without error")
    print(f"calls      {c['made']} made, {c['checked']} checked against eager, {c['recompiles']} recompiles")
    if stats["distinct_ops"] or not stats.get("models"):
        print(f"ops        {stats['distinct_ops']} distinct ops exercised")
    models = stats.get("models") or {}
    if models:
        rows = sorted(models.items(), key=lambda kv: -kv[1].get("calls", 0))
        print(f"models     {len(models)} architectures: " + ", ".join(
            f"{arch} {row.get('cases', 0)} case(s), {row.get('checked', 0)} checked" for arch, row in rows))
    features = stats.get("features") or {}
    if features.get("distinct"):
        families = ", ".join(f"{k} {v}" for k, v in sorted(features["by_family"].items(), key=lambda kv: -kv[1]))
        guided = stats.get("guidance") or {}
        print(f"features   {features['distinct']} distinct compiler features reached ({families}); "
              f"{guided.get('mutants', 0)} cases were mutants of cases that reached something new, "
              f"{guided.get('steered', 0)} draws steered toward the least-used ops")
    print("time       " + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))
    rate = stats.get("throughput") or {}
    if rate:
        print(f"throughput {rate['programs_per_minute']:.1f} programs/min, "
              f"{rate['checked_calls_per_cpu_minute']:.1f} checked calls and "
              f"{rate['guard_regions_per_cpu_minute']:.1f} guard regions covered per CPU-minute, "
              f"{c.get('checked_per_compile', 0):.2f} checked calls per compile")
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
