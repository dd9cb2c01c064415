"""The HTML report: one self-contained page about a campaign's OUT folder.

Nothing on the page comes from the network: the CSS is inline, the plots are SVG drawn
here, there is no script, and a Content-Security-Policy forbids any load, so the page
opens the same from a CI artifact on a machine without network. ``render_html`` takes the
``report.RunReport`` that ``report.write_reports`` read (it is passed in, not imported,
so that the two modules do not import each other).
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
TIME_PARTS = ("generating", "compiling", "running", "oracles", "overhead")
WIDTH = 640
NO_TIMELINE = '<p class="empty">no timeline recorded</p>'  # an OUT from before timeline.jsonl, or one cut short
SINGLE_RUN = "run"  # the series name of a timeline without sources
MAX_MARKERS = 200  # a series longer than this is drawn as a line only (a long run writes a line every 5 s)

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 980px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h1 .pass { color: #2a7a2a; } h1 .fail { color: #b42318; }
h1 small { font-weight: normal; color: #555; font-size: 15px; }
dl.headline { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; }
dl.headline dt { color: #555; } dl.headline dd { margin: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr.fails td:first-child, tr.unjudged td:first-child { border-left: 4px solid #b42318; }
tr.known td:first-child, tr.passes td:first-child { border-left: 4px solid #999; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12px; }
figure { margin: 16px 0 24px; } figcaption { font-weight: 600; margin-bottom: 4px; }
p.empty { color: #777; font-style: italic; }
svg.plot { display: block; max-width: 100%; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""


# ---------------------------------------------------------------- SVG


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _svg(plot: str, height: int, body: list[str], label: str) -> str:
    return (f'<svg class="plot" data-plot="{escape(plot)}" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(label)}">'
            f"<title>{escape(label)}</title>" + "".join(body) + "</svg>")


def line_chart(plot: str, series: dict[str, list[tuple[float, float]]], y_label: str, y_max: float = 0.0) -> str:
    """One line per series over time (x: seconds since the run started), with a legend below."""
    left, right, top, height = 56, 16, 12, 170
    x_max = _nice_max(max((t for points in series.values() for t, _ in points), default=0))
    y_max = y_max or _nice_max(max((v for points in series.values() for _, v in points), default=0))
    plot_w = WIDTH - left - right

    def xy(t: float, v: float) -> tuple[float, float]:
        return left + plot_w * t / x_max, top + height - height * v / y_max

    body = []
    counts = all(float(v).is_integer() for points in series.values() for _, v in points)
    y_ticks = next((n for n in (4, 5, 2, 1) if (y_max / n).is_integer()), 4) if counts else 4  # no "1.25 findings"
    for i in range(y_ticks + 1):
        y = top + height - height * i / y_ticks
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_num(y_max * i / y_ticks)}</text>')
    for i in range(5):
        x = left + plot_w * i / 4
        body.append(f'<text x="{x:.1f}" y="{top + height + 16}" text-anchor="middle">{_num(x_max * i / 4)}</text>')
    body.append(f'<text x="{left + plot_w / 2}" y="{top + height + 32}" text-anchor="middle">seconds since start</text>')
    body.append(f'<text x="12" y="{top + height / 2}" text-anchor="middle" '
                f'transform="rotate(-90 12 {top + height / 2})">{escape(y_label)}</text>')
    body.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{height}" fill="none" stroke="#999"/>')
    legend = list(series) != [SINGLE_RUN]  # a run that was not merged has one unnamed series
    for n, (name, points) in enumerate(sorted(series.items())):
        color = PALETTE[n % len(PALETTE)]
        coords = [xy(t, v) for t, v in points]
        body.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                    f'points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in coords)}"/>')
        if len(points) <= MAX_MARKERS:
            for (t, v), (x, y) in zip(points, coords):
                body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
                            f"<title>{escape(name)}: {_num(v)} at {_num(t)} s</title></circle>")
        if legend:
            ly = top + height + 52 + 16 * n
            body.append(f'<rect x="{left}" y="{ly - 9}" width="12" height="10" fill="{color}"/>')
            body.append(f'<text x="{left + 18}" y="{ly}">{escape(name)}</text>')
    return _svg(plot, top + height + 42 + 16 * len(series) * legend, body, f"{y_label} over time")


def bar_chart(plot: str, bars: list[tuple[str, float, str]], scale: float = 0.0) -> str:
    """Horizontal bars: (label, value, the text after the bar); ``scale`` is the full bar's value."""
    label_w, row, text_w = 150, 18, 130
    scale = scale or max((v for _, v, _ in bars), default=0) or 1
    bar_w = WIDTH - label_w - text_w
    body = []
    for i, (label, value, note) in enumerate(bars):
        y = 4 + i * row
        w = bar_w * value / scale
        body.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>')
        body.append(f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="{row - 5}" fill="#f0f0f0"/>')
        body.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="{PALETTE[0]}">'
                    f"<title>{escape(label)}: {escape(note)}</title></rect>")
        body.append(f'<text x="{label_w + bar_w + 6}" y="{y + 12}">{escape(note)}</text>')
    return _svg(plot, 8 + row * max(len(bars), 1), body, plot)


def stacked_bar(plot: str, parts: list[tuple[str, float]]) -> str:
    """One bar split into parts (label, value), with a legend of values and shares below."""
    total = sum(v for _, v in parts) or 1
    body, x = [], 0.0
    for n, (label, value) in enumerate(parts):
        color, w = PALETTE[n % len(PALETTE)], (WIDTH - 2) * value / total
        body.append(f'<rect x="{x + 1:.1f}" y="4" width="{w:.1f}" height="26" fill="{color}">'
                    f"<title>{escape(label)}: {_num(round(value, 2))} s</title></rect>")
        ly = 50 + 16 * n
        body.append(f'<rect x="1" y="{ly - 9}" width="12" height="10" fill="{color}"/>')
        body.append(f'<text x="20" y="{ly}">{escape(label)}: {_num(round(value, 2))} s '
                    f"({100 * value / total:.1f}%)</text>")
        x += w
    return _svg(plot, 44 + 16 * len(parts), body, "where the time went")


# ---------------------------------------------------------------- the plots


def _series(timeline: list[dict], value) -> dict[str, list[tuple[float, float]]]:
    """{source: [(t, value(line))]}: one series per source of a merged OUT (SINGLE_RUN otherwise)."""
    series: dict[str, list[tuple[float, float]]] = {}
    for line in timeline:
        v = value(line)
        if isinstance(v, (int, float)):
            series.setdefault(str(line.get("source") or SINGLE_RUN), []).append((float(line["t"]), float(v)))
    return {name: sorted(points) for name, points in series.items()}


def _guard_share(line: dict):
    regions, covered = line.get("guard_regions"), line.get("guard_regions_covered")
    if isinstance(regions, (int, float)) and isinstance(covered, (int, float)) and regions > 0:
        return 100.0 * covered / regions
    return None


def _figure(plot_id: str, caption: str, content: str) -> str:
    return f'<figure id="plot-{escape(plot_id)}"><figcaption>{escape(caption)}</figcaption>{content}</figure>'


def _timeline_plot(plot: str, series: dict, y_label: str, y_max: float = 0.0) -> str:
    if not series:
        return NO_TIMELINE
    return line_chart(plot, series, y_label, y_max)


def plots(run) -> list[str]:
    stats, timeline = run.stats, run.timeline
    figures = [_figure("findings", "Confirmed findings over time",
                       _timeline_plot("findings", _series(timeline, lambda line: line.get("findings")), "findings"))]
    checked = _series(timeline, lambda line: line.get("checked"))
    programs = _series(timeline, lambda line: line.get("programs"))
    # Two charts: checked calls outnumber programs about tenfold, one scale would flatten programs.
    progress = (line_chart("checked", checked, "checked calls") if checked else "") + \
        (line_chart("programs", programs, "programs") if programs else "")
    figures.append(_figure("progress", "Checked calls and programs over time",
                           progress or NO_TIMELINE))

    ops = sorted((stats.get("ops") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    total = sum(count for _, count in ops) or 1
    op_bars = [(op, count, f"{count} ({100 * count / total:.0f}%)") for op, count in ops]
    figures.append(_figure("ops", f"Op coverage: {stats.get('distinct_ops', len(ops))} distinct ops",
                           bar_chart("ops", op_bars) if ops else '<p class="empty">no ops recorded</p>'))

    guards = stats.get("guards") or {}
    regions, covered = guards.get("regions") or 0, guards.get("regions_covered") or 0
    share = f"{covered} of {regions} ({100 * covered / regions:.1f}%)" if regions else "no guard regions"
    over_time = _series(timeline, _guard_share)
    figures.append(_figure("guards", f"Guard-region coverage: {share}",
                           bar_chart("guards", [("regions covered", covered, share)], scale=regions or 1)
                           + (line_chart("guards-over-time", over_time, "% of guard regions covered", 100)
                              if over_time else NO_TIMELINE)))

    figures.append(_features_figure(stats.get("features") or {}, timeline))

    seconds = stats.get("time_seconds") or {}
    parts = [(name, float(seconds.get(name) or 0)) for name in TIME_PARTS]
    parts += [(name, float(v)) for name, v in sorted(seconds.items()) if name not in TIME_PARTS
              and isinstance(v, (int, float))]
    figures.append(_figure("time", "Where the time went",
                           stacked_bar("time", parts) if any(v for _, v in parts)
                           else '<p class="empty">no time recorded</p>'))
    return figures


def _features_figure(features: dict, timeline: list[dict]) -> str:
    """Compiler features reached (symfuzz.coverage): distinct per family, and the total over time."""
    families = sorted((features.get("by_family") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    bars = [(family, count, str(count)) for family, count in families]
    over_time = _series(timeline, lambda line: line.get("features"))
    if not over_time and features.get("over_time"):
        over_time = {SINGLE_RUN: [(float(t), float(n)) for t, n in features["over_time"]]}
    figure = _figure("features", f"Compiler features reached: {features.get('distinct', 0)} distinct, by family",
                     (bar_chart("features", bars) if bars else '<p class="empty">no features recorded</p>')
                     + (line_chart("features-over-time", over_time, "distinct features") if over_time else NO_TIMELINE))
    cases, classes = features.get("cases") or 0, features.get("classes") or {}
    if not cases or not classes:  # a run from before the classes were counted
        return figure
    rows = [(name, n, f"{n} of {cases} cases") for name, n in classes.items()]
    return figure + _figure("rare-paths", "Rare compiler paths: the cases that reached each",
                            bar_chart("rare-paths", rows, scale=cases))


# ---------------------------------------------------------------- the page


def _findings_section(run, columns) -> list[str]:
    if not run.findings:
        return ["<p>No confirmed findings.</p>"]
    out = ["<table><thead><tr>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr></thead><tbody>"]
    for row in run.findings:
        cells = "".join(f"<td>{escape(c)}</td>" for c in row.cells())
        out.append(f'<tr class="{escape(row.status)}">{cells}</tr>')
    out.append("</tbody></table>")
    for row in run.findings:
        out.append(f"<h3><code>{escape(row.signature)}</code>: {escape(row.status)}</h3>")
        out.append(f"<p>{escape(row.description)}</p><p>Repro: <code>python {escape(str(row.repro))}</code></p>")
        if row.program:
            out.append("<pre><code>" + escape("\n".join(row.program)) + "</code></pre>")
    return out


def _models_section(stats: dict) -> list[str]:
    """The model source's table (stats.json "models"): a row per architecture."""
    models = stats.get("models") or {}
    if not isinstance(models, dict) or not models:
        return []
    columns = ("cases", "calls", "checked", "graphs", "recompiles", "notes", "findings", "seconds")
    out = ["<h2>Real models</h2>", "<p>Per architecture of the model source: cases, forwards made and checked "
           "against eager, graphs compiled, recompiles, recompiles the model's own code asked for (notes), "
           "confirmed findings, worker seconds.</p>",
           "<table><thead><tr><th>architecture</th>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr></thead><tbody>"]
    for arch, row in sorted(models.items()):
        row = row if isinstance(row, dict) else {}
        out.append(f"<tr><td>{escape(str(arch))}</td>" + "".join(f"<td>{escape(str(row.get(c, 0)))}</td>"
                                                                     for c in columns) + "</tr>")
    out.append("</tbody></table>")
    return out


def render_html(run) -> str:
    """The page for a ``report.RunReport``."""
    columns = run.table_columns  # the Markdown's columns (report.TABLE_COLUMNS), handed over with the rows
    mark = '<span class="pass">PASS</span>' if run.passed else '<span class="fail">FAIL</span>'
    head = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in run.headline())
    notes = "".join(f"<li>{escape(line)}</li>" for line in run.side_notes())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # No load of any kind: the page must open the same without network.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>symfuzz report: {escape(str(run.out))}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>symfuzz: {mark} <small>{escape(run.verdict)}</small></h1>",
        f'<dl class="headline">{head}</dl>',
        f"<ul>{notes}</ul>" if notes else "",
        "<h2>Findings</h2>",
        *_findings_section(run, columns),
        *_models_section(run.stats),
        "<h2>Coverage, progress and time</h2>",
        *plots(run),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
