"""Reports on a campaign's OUT folder: JUnit XML, a Markdown summary and an HTML page.

``symfuzz report OUT`` and ``symfuzz fuzz --report`` write them to OUT/report/. They read
only the files a campaign leaves (docs/output.md): stats.json, and where present
timeline.jsonl, gate.json and findings/<sig>/. This module imports neither torch nor
anything that does, so a CI job that only downloaded the OUT artifact can report on it.

- ``junit.xml``: one testcase per confirmed finding (a failure when it fails the run, skipped
  when it is known or the policy lets it pass), and one passing testcase per lane, so that
  a run without findings is still a test that ran;
- ``summary.md``: the headline, the findings table and each finding's program, for a pull
  request or ``$GITHUB_STEP_SUMMARY`` (appended to when that variable is set);
- ``report.html``: one self-contained page with plots (``report_html``).
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from symfuzz.corpus.atomic import write_text
from symfuzz.corpus.finding import read_finding
from symfuzz.oracles.verdict import eager_side, error_headline
from symfuzz.report_html import render_html
from symfuzz.stats_schema import COUNTS, SECTIONS, keys_of

REPORT_DIR = "report"
REPRO_LINES = 25  # a finding's program beyond this is cut: the whole script is in repro.py
PROGRAM_MARKER = "# ---------------------------------------------------------------- the program"
SECTION_MARKER = "# ----------------------------------------------------------------"  # corpus/scripts.py's sections

EXIT_MEANINGS = {
    0: "nothing fails under the policy",
    1: "findings fail the run",
    2: "usage error or bad input",
    3: "could not judge every finding, or symfuzz or its environment broke",
    130: "interrupted (SIGINT)",
    143: "terminated (SIGTERM)",
}
TABLE_COLUMNS = ("signature", "symptom", "lane", "layer", "regression class", "known/new")

# Characters XML 1.0 cannot hold even escaped (torch's output can carry ANSI escapes).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass
class FindingRow:
    """One confirmed finding, as the reports show it."""

    signature: str
    symptom: str
    lane: str
    layer: str
    description: str
    folder: Path
    regression: Optional[str] = None  # gate.json's regression class, None without a reference
    known: bool = False  # in the baseline
    fails: bool = True  # fails the run under the policy (every finding when there is no gate.json)
    unjudged: bool = False  # the policy needed a judgement the gate could not make
    program: list[str] = field(default_factory=list)  # the program section of repro.py, trimmed
    output_tail: str = ""  # what the repro printed when it was confirmed

    @property
    def repro(self) -> Path:
        return self.folder / "repro.py"

    @property
    def status(self) -> str:
        """"unjudged", "fails", "known" or "passes" (not failing under the policy, not known)."""
        if self.unjudged:
            return "unjudged"
        if self.known:
            return "known"
        return "fails" if self.fails else "passes"

    @property
    def known_or_new(self) -> str:
        return "known" if self.known else "new"

    def cells(self) -> list[str]:
        """The findings table's row (``TABLE_COLUMNS``)."""
        return [self.signature, self.symptom, self.lane, self.layer, self.regression or "-", self.known_or_new]


@dataclass
class RunReport:
    """What one OUT folder says, read once for all three reports."""

    out: Path
    stats: dict
    gate: Optional[dict]  # None: no gate.json (a run from before the gate, or one that was cut short)
    timeline: list[dict]  # [] when no timeline.jsonl was recorded
    findings: list[FindingRow]

    table_columns = TABLE_COLUMNS

    @property
    def lanes(self) -> list[str]:
        lane = self.stats.get("lane")
        if isinstance(lane, list):
            return [str(x) for x in lane] or ["unknown"]
        return [str(lane)] if lane else sorted({f.lane for f in self.findings}) or ["unknown"]

    @property
    def programs(self) -> int:
        return int((self.stats.get("programs") or {}).get("generated") or 0)

    @property
    def checked(self) -> int:
        return int((self.stats.get("calls") or {}).get("checked") or 0)

    @property
    def shard(self) -> str:
        shard = self.stats.get("shard")
        if not shard:
            return "-"
        if "merged" in shard:
            parts = [f"{p[0]}/{p[1]}" if isinstance(p, list) and len(p) == 2 else str(p) for p in shard["merged"]]
            return "merged " + ", ".join(parts)
        return f"{shard.get('index')}/{shard.get('count')}"

    @property
    def exit_code(self) -> Optional[int]:
        return self.gate.get("exit_code") if self.gate else None

    @property
    def verdict(self) -> str:
        """The run's outcome in a few words: the gate's exit code when there is one."""
        if self.exit_code is not None:
            meaning = EXIT_MEANINGS.get(self.exit_code, "")
            return f"exit {self.exit_code}" + (f": {meaning}" if meaning else "")
        failing = sum(f.status == "fails" for f in self.findings)
        return f"no gate recorded; {failing} confirmed finding{'s' * (failing != 1)}"

    @property
    def passed(self) -> bool:
        if self.exit_code is not None:
            return self.exit_code == 0
        return not any(f.status in ("fails", "unjudged") for f in self.findings)

    def headline(self) -> list[tuple[str, str]]:
        """(label, value) pairs for the top of the Markdown and the HTML."""
        env = self.stats.get("environment") or {}
        wall = self.stats.get("wall_seconds")
        return [("seed", str(self.stats.get("seed", "-"))), ("lane", ", ".join(self.lanes)), ("shard", self.shard),
                ("programs", str(self.programs)), ("checked calls", str(self.checked)),
                ("wall", f"{wall:.1f} s" if isinstance(wall, (int, float)) else "-"),
                ("torch", str(env.get("torch", "-"))), ("verdict", self.verdict)]

    def side_notes(self) -> list[str]:
        """Candidates that did not become findings, and health problems: one line each."""
        counts = self.stats.get("findings") or {}
        notes = [f"{counts[k]} {k}" for k in ("flaky", "unconfirmed", "suspect", "duplicates") if counts.get(k)]
        lines = ["also: " + ", ".join(notes)] if notes else []
        lines += [f"health: {p}" for p in (self.stats.get("health") or {}).get("problems") or []]
        if self.gate and self.gate.get("unjudged"):
            lines.append("unjudged: " + ", ".join(map(str, self.gate["unjudged"])))
        return lines


# ---------------------------------------------------------------- reading OUT


_NUMBER = (int, float)
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "a whole number", bool: "true or false",
               _NUMBER: "a number", (str, list): "a string or a list", (int, str): "a number or a string",
               (int, list): "a whole number or a list"}

# stats.json's shape (docs/output.md), as far as the reports and ``symfuzz merge`` read it. A key
# may be absent or null (an older symfuzz wrote fewer); present, it has this type.
STATS_TYPES = {
    "programs": dict, "calls": dict, "guards": dict, "ops": dict, "time_seconds": dict, "time_share": dict,
    "findings": dict, "replay": dict, "health": dict, "environment": dict, "canary": dict, "shard": dict,
    "lane": (str, list), "seed": (int, list), "seeds": list, "jobs": int, "max_cases": int,
    "distinct_ops": int, "indices": list, "executor": str, "motifs": dict, "models": dict, "throughput": dict, "features": dict,
    "guidance": dict, "oracle_seconds": dict,
    "wall_seconds": _NUMBER, "wall_seconds_total": _NUMBER, "budget_seconds": _NUMBER,
}
# Inside a section: the values are counts (numbers) unless named here; None: any value.
SECTION_TYPES = {
    # The counted sections (stats_schema): numbers, and objects of counts.
    **{name: ({key: dict for key in keys_of(name, COUNTS)}, _NUMBER) for name in SECTIONS},
    "ops": ({}, _NUMBER), "time_seconds": ({}, _NUMBER), "time_share": ({}, _NUMBER), "throughput": ({}, _NUMBER),
    "findings": ({"signatures": list, "minified": dict, "interrupted": bool, "interrupted_by": str}, _NUMBER),
    "replay": ({"signatures": list}, _NUMBER),
    "health": ({"problems": list, "internal_error_causes": list}, None),
}
LIST_ITEMS = {"findings.signatures": str, "replay.signatures": str, "health.problems": str,
              "health.internal_error_causes": dict, "indices": (int, str), "seeds": int}


def throughput(programs: int, checked: int, regions_covered: int, wall: float, worker_seconds: float) -> dict:
    """stats.json "throughput": programs per minute of wall time, and checked calls and
    guard regions covered per CPU-minute. A CPU-minute is a minute of one worker slot
    (each worker holds one CPU while the workers are up, idle or not; fresh-process
    confirmations add theirs): the same worker time "time_seconds" divides up, so the
    campaign and ``symfuzz merge`` (from the merged sums) compute them alike."""
    cpu_minutes = worker_seconds / 60
    return {
        "programs_per_minute": round(programs / (wall / 60), 3) if wall > 0 else 0,
        "cpu_minutes": round(cpu_minutes, 3),
        "checked_calls_per_cpu_minute": round(checked / cpu_minutes, 3) if cpu_minutes > 0 else 0,
        "guard_regions_per_cpu_minute": round(regions_covered / cpu_minutes, 3) if cpu_minutes > 0 else 0,
    }


def _wrong_type(value, kind) -> bool:
    if value is None or kind is None:
        return False
    if isinstance(value, bool):
        return kind is not bool
    return not isinstance(value, kind)


def stats_problem(stats) -> Optional[str]:
    """What is wrong with a stats.json's content (``STATS_TYPES``), in a few words; None if nothing."""
    if not isinstance(stats, dict):
        return f"it holds {type(stats).__name__}, not an object"
    checks = [(key, stats.get(key), kind) for key, kind in STATS_TYPES.items()]
    for section, (named, default) in SECTION_TYPES.items():
        if isinstance(stats.get(section), dict):
            checks += [(f"{section}.{k}", v, named.get(k, default)) for k, v in stats[section].items()]
    for key, value, kind in checks:
        if _wrong_type(value, kind):
            return f"{key!r} is {json.dumps(value)[:40]}, not {_TYPE_NAMES.get(kind, kind)}"
        if key in LIST_ITEMS and isinstance(value, list):
            for item in value:
                if _wrong_type(item, LIST_ITEMS[key]) or item is None:
                    return f"{key!r} holds {json.dumps(item)[:40]}, not {_TYPE_NAMES.get(LIST_ITEMS[key])}"
    return None


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not readable {what}: {exc}") from None


def read_timeline(path: Path) -> list[dict]:
    """timeline.jsonl's lines; [] when it is absent. A line that is not a JSON object is skipped."""
    if not path.exists():
        return []
    lines = []
    for text in path.read_text(errors="replace").splitlines():
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict) and isinstance(line.get("t"), (int, float)):
            lines.append(line)
    return lines


def program_lines(repro: Path, limit: int = REPRO_LINES) -> list[str]:
    """The program section of a repro script (corpus/scripts.py's markers), at most ``limit`` lines."""
    try:
        lines = repro.read_text(errors="replace").splitlines()
    except OSError:
        return []
    if PROGRAM_MARKER not in lines:
        return []
    start = lines.index(PROGRAM_MARKER) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(SECTION_MARKER)), len(lines))
    section = lines[start:end]
    while section and not section[-1].strip():
        section.pop()
    if len(section) > limit:
        section = section[: limit - 1] + [f"# ... {len(section) - limit + 1} more lines in repro.py"]
    return section


def describe(finding: dict) -> str:
    """One line from a finding's verdict: what goes wrong, where (the gate's description when there is none)."""
    verdict = finding.get("verdict") or {}
    evidence = verdict.get("evidence") or {}
    if isinstance(evidence.get("error"), dict):
        what = f"{evidence['error'].get('type', 'error')}: {error_headline(evidence['error'].get('message'))}"
    elif "timeout_seconds" in evidence:
        what = f"ran past {evidence['timeout_seconds']:.0f}s"
    elif "cause" in evidence:
        what = f"the process died ({evidence['cause']})"
    elif "path" in evidence:
        what = f"{evidence.get('path') or 'out'}: {evidence.get('detail', '')}"
    else:
        what = str(evidence.get("detail", ""))
    where = f" at call {verdict['call_index']}" if verdict.get("call_index") is not None else ""
    side = eager_side(str(evidence.get("detail", "")))
    if side is not None:  # first, before the cut: the reader must not take it for the compiler's bug
        where += f" (eager's {side[0]} left its meta function: the bug may be eager's)"
    line = f"{verdict.get('symptom', '?')}{where}: {what}"
    return " ".join(line.split())[:300]


def _finding_row(folder: Path, finding: dict, gate: Optional[dict]) -> FindingRow:
    sig = str(finding.get("signature") or folder.name)
    verdict = finding.get("verdict") or {}
    lane = finding.get("lane")
    judged = ((gate or {}).get("findings") or {}).get(sig) or {}
    layer = judged.get("layer") or (finding.get("triage") or {}).get("stage") or verdict.get("stage") or "-"
    return FindingRow(
        signature=sig,
        symptom=str(judged.get("symptom") or verdict.get("symptom") or "?"),
        lane=str(judged.get("lane") or (lane.get("name") if isinstance(lane, dict) else lane) or "?"),
        layer=str(layer),
        description=str(judged.get("description") or describe(finding)),
        folder=folder,
        regression=judged.get("regression"),
        known=bool(judged.get("known")),
        # Without a gate, or for a finding the gate did not judge, it fails: nothing said it may pass.
        fails=bool(judged.get("fails", True)),
        unjudged=sig in ((gate or {}).get("unjudged") or []),
        program=program_lines(folder / "repro.py"),
        output_tail=str((finding.get("confirmation") or {}).get("output_tail") or ""),
    )


def load_run(out) -> RunReport:
    """Read an OUT folder; ValueError (one line) when it is not a symfuzz output folder."""
    out = Path(out)
    if not (out / "stats.json").is_file():
        raise ValueError(f"{out} is not a symfuzz output folder (no stats.json)")
    stats = _read_json(out / "stats.json", "JSON")
    problem = stats_problem(stats)
    if problem:
        raise ValueError(f"{out / 'stats.json'} is not a symfuzz stats.json: {problem}")
    gate = _read_json(out / "gate.json", "JSON") if (out / "gate.json").is_file() else None
    gate = gate if isinstance(gate, dict) else None
    findings = []
    for path in sorted((out / "findings").glob("*/finding.json")):
        # read_finding checks every field (a ValueError naming the file and the field, if not)
        findings.append(_finding_row(path.parent, read_finding(path).to_json(), gate))
    return RunReport(out, stats, gate, read_timeline(out / "timeline.jsonl"), findings)


# ---------------------------------------------------------------- JUnit XML


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("?", str(text))


def _failure_body(row: FindingRow) -> str:
    lines = [row.description, f"layer: {row.layer}", f"regression class: {row.regression or '-'}",
             f"repro: python {row.repro}  (exit 1 while the bug is present)"]
    if (row.folder / "minified" / "repro.py").exists():
        lines.append(f"minified repro: {row.folder / 'minified' / 'repro.py'}")
    if row.program:
        lines += ["", "the program:", *row.program]
    return "\n".join(lines)


def junit_xml(run: RunReport) -> str:
    """The JUnit XML document: testsuites > testsuite "symfuzz" > testcases."""
    suite = ET.Element("testsuite", name="symfuzz")
    props = ET.SubElement(suite, "properties")
    for name, value in run.headline():
        ET.SubElement(props, "property", name=name, value=_xml_text(value))
    counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
    multi = len(run.lanes) > 1
    for lane in run.lanes:
        counts["tests"] += 1
        name = f"lane {lane}: {run.programs} programs, {run.checked} calls checked" + (" (all lanes)" * multi)
        ET.SubElement(suite, "testcase", classname=f"symfuzz.{lane}", name=_xml_text(name))
    for row in run.findings:
        counts["tests"] += 1
        case = ET.SubElement(suite, "testcase", classname=_xml_text(f"symfuzz.{row.lane}"), name=row.signature)
        message = _xml_text(row.description)
        if row.status == "unjudged":
            counts["errors"] += 1
            error = ET.SubElement(case, "error", message=f"unjudged: {message}", type=row.symptom)
            error.text = _xml_text(_failure_body(row))
        elif row.status == "fails":
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=message, type=row.symptom)
            failure.text = _xml_text(_failure_body(row))
        else:
            counts["skipped"] += 1
            why = "in the baseline" if row.known else "the policy lets it pass" + (
                f" ({row.regression})" if row.regression else "")
            ET.SubElement(case, "skipped", message=_xml_text(f"known: {why}: {row.description}"))
        if row.output_tail:
            ET.SubElement(case, "system-out").text = _xml_text(row.output_tail)
    wall = run.stats.get("wall_seconds")
    suite.attrib.update({k: str(v) for k, v in counts.items()})
    suite.set("time", f"{wall:.3f}" if isinstance(wall, (int, float)) else "0")
    root = ET.Element("testsuites", name="symfuzz", **{k: suite.get(k) for k in (*counts, "time")})
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# ---------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks inside the block."""
    longest = max((len(m) for line in lines for m in re.findall("`+", line)), default=0)
    return "`" * max(3, longest + 1)


def markdown(run: RunReport) -> str:
    mark = "PASS" if run.passed else "FAIL"
    out = [f"## symfuzz: {mark} ({_md_cell(run.verdict)})", ""]
    out.append(" · ".join(f"**{label}** {_md_cell(value)}" for label, value in run.headline()[:-1]))
    notes = [f"- {_md_cell(line)}" for line in run.side_notes()]
    out += ["", *notes] if notes else []
    if not run.findings:
        out += ["", "No confirmed findings.", ""]
        return "\n".join(out)
    out += ["", "| " + " | ".join(TABLE_COLUMNS) + " |", "|" + " --- |" * len(TABLE_COLUMNS)]
    for row in run.findings:
        cells = [f"`{row.signature}`", *row.cells()[1:]]
        out.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    for row in run.findings:
        out += ["", f"### `{row.signature}`: {row.status}", "", _md_cell(row.description), "",
                f"Repro: `python {row.repro}`"]
        if row.program:
            fence = _fence(row.program)
            out += ["", fence + "python", *row.program, fence]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- writing


def write_reports(out: Path, dest: Optional[Path] = None) -> dict[str, Path]:
    """Write OUT/report/{junit.xml, summary.md, report.html} (or into ``dest``);
    return {"junit": path, "markdown": path, "html": path}.

    Appends summary.md to $GITHUB_STEP_SUMMARY when that variable is set. Raises
    ValueError (a one-line message) for a folder that is not a symfuzz OUT.
    """
    run = load_run(out)
    dest = Path(dest) if dest is not None else Path(out) / REPORT_DIR
    paths = {"junit": dest / "junit.xml", "markdown": dest / "summary.md", "html": dest / "report.html"}
    summary = markdown(run)
    write_text(paths["junit"], junit_xml(run))
    write_text(paths["markdown"], summary)
    write_text(paths["html"], render_html(run))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(summary + "\n")
    return paths
