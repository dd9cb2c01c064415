"""Reports on an OUT folder (symfuzz/report.py): JUnit XML, Markdown, a self-contained HTML page.

Every report here is rendered from one real campaign (a planted miscompile on the eager lane,
about 25 s), copied and edited where a test needs a gate, a timeline or no findings.
"""

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import ROOT
from symfuzz.report import TABLE_COLUMNS, write_reports

UNIT_TIER = True  # its tests are the fast tier (-m unit), but those marked integration: tests/conftest.py


@pytest.fixture(scope="module")
def real_out(tanh_campaign):
    """An OUT folder with at least one confirmed finding (exit 1): the shared planted campaign."""
    return tanh_campaign


@pytest.fixture
def out_copy(real_out, tmp_path, monkeypatch):
    """A private copy of the real OUT (without reports or a gate) that a test may edit."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    copy = tmp_path / "out"
    shutil.copytree(real_out, copy, ignore=shutil.ignore_patterns("report"))
    (copy / "gate.json").unlink(missing_ok=True)
    return copy


def signatures(out: Path) -> list[str]:
    return sorted(p.parent.name for p in (out / "findings").glob("*/finding.json"))


def write_gate(out: Path, **judged) -> None:
    """A gate.json judging each signature given as keyword ``sig={...}``."""
    (out / "gate.json").write_text(json.dumps({"policy": "new", "exit_code": 1, "unjudged": [], "findings": judged}))


def junit(out: Path) -> ET.Element:
    root = ET.parse(write_reports(out)["junit"]).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1 and suites[0].get("name") == "symfuzz"
    suite = suites[0]
    cases = suite.findall("testcase")
    assert cases, "a JUnit file without a testcase reads as 'ran no test'"
    for case in cases:
        assert case.get("classname", "").startswith("symfuzz.") and case.get("name")
    count = {tag: sum(case.find(tag) is not None for case in cases) for tag in ("failure", "skipped", "error")}
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == count["failure"]
    assert int(suite.get("skipped")) == count["skipped"]
    assert int(suite.get("errors")) == count["error"]
    assert float(suite.get("time")) >= 0
    assert root.get("tests") == suite.get("tests") and root.get("failures") == suite.get("failures")
    return suite


def lane_cases(suite: ET.Element) -> list[ET.Element]:
    return [c for c in suite.findall("testcase") if c.get("name", "").startswith("lane ") and len(c) == 0]


# ---------------------------------------------------------------- JUnit


def test_junit_without_a_gate_fails_every_finding(out_copy):
    suite = junit(out_copy)
    sigs = signatures(out_copy)
    by_name = {c.get("name"): c for c in suite.findall("testcase")}
    for sig in sigs:
        failure = by_name[sig].find("failure")
        assert failure is not None, sig
        assert failure.get("type") == sig.rsplit("-", 1)[0]  # the symptom
        assert failure.get("message")
        assert str(out_copy / "findings" / sig / "repro.py") in failure.text
        assert "def fn(" in failure.text  # the program's key lines
        assert by_name[sig].get("classname") == "symfuzz.eager"
    (lane,) = lane_cases(suite)
    assert lane.get("name").startswith("lane eager: 4 programs, ")
    assert lane.get("classname") == "symfuzz.eager"


def test_junit_skips_a_known_finding_and_fails_a_new_one(out_copy):
    sigs = signatures(out_copy)
    known = sigs[0]
    gate = {known: {"symptom": "value-mismatch", "lane": "eager", "layer": "runtime", "description": "known one",
                    "known": True, "regression": None, "reference": None, "fails": False}}
    for sig in sigs[1:]:
        gate[sig] = {"known": False, "fails": True, "regression": "regression"}
    write_gate(out_copy, **gate)
    suite = junit(out_copy)
    by_name = {c.get("name"): c for c in suite.findall("testcase")}
    skipped = by_name[known].find("skipped")
    assert skipped is not None and by_name[known].find("failure") is None
    assert skipped.get("message").startswith("known: ")
    for sig in sigs[1:]:
        assert by_name[sig].find("failure") is not None
    assert int(suite.get("skipped")) == 1


def test_junit_of_a_run_without_findings_still_has_a_testcase(out_copy):
    shutil.rmtree(out_copy / "findings")
    suite = junit(out_copy)
    assert suite.get("failures") == "0"
    assert len(lane_cases(suite)) == 1


def test_junit_escapes_what_xml_cannot_hold(out_copy):
    sig = signatures(out_copy)[0]
    nasty = "\x1b[31mboom\x1b[0m <tag> & \"quotes\" ]]> \x00"
    write_gate(out_copy, **{sig: {"known": False, "fails": True, "description": nasty}})
    suite = junit(out_copy)  # parses
    failure = [c for c in suite.findall("testcase") if c.get("name") == sig][0].find("failure")
    assert "<tag> & \"quotes\" ]]>" in failure.get("message")


# ---------------------------------------------------------------- Markdown


def test_markdown_has_the_findings_table_and_each_repro(out_copy):
    text = write_reports(out_copy)["markdown"].read_text()
    assert text.startswith("## symfuzz: FAIL")
    assert "| " + " | ".join(TABLE_COLUMNS) + " |" in text
    for sig in signatures(out_copy):
        assert f"| `{sig}` | {sig.rsplit('-', 1)[0]} | eager | " in text
        assert f"### `{sig}`" in text
    block = text.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert block.startswith("def fn(") and "torch.tanh" in block
    assert len(block.splitlines()) <= 25
    assert "**seed** 0" in text and "**checked calls** " in text


def test_markdown_is_appended_to_the_github_step_summary(out_copy, tmp_path, monkeypatch):
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    first = write_reports(out_copy)["markdown"].read_text()
    write_reports(out_copy)
    assert summary.read_text() == "earlier step\n" + (first + "\n") * 2


def test_markdown_of_a_passing_run(out_copy):
    shutil.rmtree(out_copy / "findings")
    write_gate(out_copy)
    gate = json.loads((out_copy / "gate.json").read_text())
    (out_copy / "gate.json").write_text(json.dumps({**gate, "exit_code": 0}))
    text = write_reports(out_copy)["markdown"].read_text()
    assert text.startswith("## symfuzz: PASS (exit 0: ")
    assert "No confirmed findings." in text and "```" not in text


# ---------------------------------------------------------------- HTML


class PageParser(HTMLParser):
    """Collects what would make a browser load anything, and the plots."""

    def __init__(self):
        super().__init__()
        self.loads, self.scripts, self.links, self.plots, self.styles = [], 0, 0, [], []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href", "xlink:href", "srcset", "action", "data", "poster", "background"):
            if attrs.get(name) is not None:
                self.loads.append(f"<{tag} {name}={attrs[name]!r}>")
        if "url(" in (attrs.get("style") or ""):
            self.loads.append(f"<{tag} style={attrs['style']!r}>")
        self.scripts += tag == "script"
        self.links += tag == "link"
        if tag == "svg":
            self.plots.append(attrs.get("data-plot"))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def parse_page(path: Path) -> PageParser:
    parser = PageParser()
    parser.feed(path.read_text())
    parser.close()
    assert not parser.loads, parser.loads
    assert parser.scripts == 0 and parser.links == 0
    css = "".join(parser.styles)
    assert css and "url(" not in css and "@import" not in css
    for outside in ("http:", "https:", "file:", "//"):
        assert outside not in css
    return parser


TIMELINE_PLOTS = {"findings", "checked", "programs", "guards-over-time", "features-over-time"}
STATS_PLOTS = {"ops", "guards", "time", "features", "rare-paths"}


def test_html_is_self_contained_and_has_every_plot(real_out, tmp_path):
    paths = write_reports(real_out, dest=tmp_path / "report")
    assert set(paths) == {"junit", "markdown", "html"} and all(p.parent == tmp_path / "report" for p in paths.values())
    page = parse_page(paths["html"])
    text = paths["html"].read_text()
    if (real_out / "timeline.jsonl").exists():
        assert set(page.plots) == TIMELINE_PLOTS | STATS_PLOTS
    else:
        # (the features curve is in stats.json too)
        assert set(page.plots) - {"features-over-time"} == STATS_PLOTS and "no timeline recorded" in text
    features = json.loads((real_out / "stats.json").read_text())["features"]
    assert features["distinct"] > 0 and f"Compiler features reached: {features['distinct']} distinct" in text
    assert features["cases"] > 0 and sum(features["classes"].values()) > 0
    for name, n in features["classes"].items():  # each rare path's count of cases is drawn, with the total
        assert f"{name}: {n} of {features['cases']} cases" in text
    for sig in signatures(real_out):
        assert sig in text
    assert "tanh" in text  # the op coverage names the ops


def test_html_draws_one_findings_series_per_merged_source(out_copy):
    (out_copy / "timeline.jsonl").unlink(missing_ok=True)
    lines = []
    for source, rate in (("1/2", 1), ("2/2", 2)):
        for t in range(5):
            lines.append({"t": 5.0 * t, "programs": 3 * t, "valid": 3 * t, "calls": 30 * t, "checked": 28 * t,
                          "findings": rate * t // 2, "candidates": t, "distinct_ops": 3, "guard_regions": 10 * t,
                          "guard_regions_covered": 4 * t, "seconds": {"compiling": t}, "source": source})
    text = "\n".join(json.dumps(line) for line in lines) + "\nnot json, a line cut short\n"
    (out_copy / "timeline.jsonl").write_text(text)
    html = write_reports(out_copy)["html"].read_text()
    assert set(parse_page(out_copy / "report" / "report.html").plots) == TIMELINE_PLOTS | STATS_PLOTS
    findings_svg = html.split('data-plot="findings"', 1)[1].split("</svg>", 1)[0]
    assert findings_svg.count("<polyline") == 2
    assert ">1/2</text>" in findings_svg and ">2/2</text>" in findings_svg
    assert "no timeline recorded" not in html


def test_html_escapes_finding_text(out_copy):
    sig = signatures(out_copy)[0]
    write_gate(out_copy, **{sig: {"known": False, "fails": True, "description": "<script>alert(1)</script>"}})
    page = parse_page(write_reports(out_copy)["html"])
    assert page.scripts == 0
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in (out_copy / "report" / "report.html").read_text()


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")
def test_html_loads_in_a_headless_browser_without_network(real_out, tmp_path):
    html = write_reports(real_out, dest=tmp_path / "report")["html"]
    proc = subprocess.run(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", html.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<svg" in proc.stdout and 'data-plot="ops"' in proc.stdout


# ---------------------------------------------------------------- what is not an OUT, and an old one


def test_a_folder_without_stats_is_not_an_out(tmp_path):
    with pytest.raises(ValueError, match="not a symfuzz output folder"):
        write_reports(tmp_path)
    assert not (tmp_path / "report").exists()


def test_an_old_out_with_only_stats_is_reported(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps({"programs": {"generated": 2}, "calls": {"checked": 5}}))
    paths = write_reports(tmp_path)
    assert "no timeline recorded" in paths["html"].read_text()
    assert "**programs** 2" in paths["markdown"].read_text()
    suite = ET.parse(paths["junit"]).getroot().find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "0"


@pytest.mark.integration
def test_reporting_never_imports_torch(real_out, tmp_path):
    """A CI job that only downloaded the artifact can report without torch."""
    code = ("import sys; from symfuzz.report import write_reports; "
            f"write_reports({str(real_out)!r}, {str(tmp_path / 'r')!r}); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r" / "report.html").exists()
