"""One self-contained HTML page: the verdict, the charts, the findings with their evidence, hints
and log lines, and the coverage. Made to be attached to a bug report or opened from CI artifacts.

Self-contained: CSS inline, charts as inline SVG, no script at all, no font, image, style sheet or
script fetched from anywhere; a Content-Security-Policy meta tag (`default-src 'none'`) makes the
browser refuse any fetch that might slip in. Deterministic: the same report gives the same bytes.

The charts are drawn by pygal (pure Python, SVG out, imported only here, so only `-o html` pays
its ~45 ms import): memory and loss per worker against step, with what the text chart draws (see
memlog.render.chart): the fitted tail of each drawn series (dashed), the warmup knee (dotted
vertical), the capacity line when the data reaches half of it, and the pipeline-parallel
placeholder losses as grey marks. At most MAX_SERIES workers per chart, chosen as every chart
chooses them (memlog.render.selection: the workers that findings name first, then the lowest,
median and highest of the rest); the caption says what is left out.

Everything from a log (worker labels, file names, log lines, messages that quote them) is
escaped with html.escape after `safe()`; inside the SVG, pygal writes text through ElementTree,
which escapes it as XML, and the SVG's text is HTML-escaped again where the page repeats it.
"""

from __future__ import annotations

import html
import json
import math
import re
import sys
from typing import Any

from memlog import __version__
from memlog.base.phrases import workers_phrase
from memlog.render.chart import _nice_ticks
from memlog.render.mermaid import PALETTE, chart_subject
from memlog.render.outputs import RenderOptions
from memlog.render.safety import safe
from memlog.render.selection import MAX_LINES, SHOW_COMMAND, UNNAMED, select
from memlog.render.shared import CAPACITY_IN_VIEW, axis_word, buckets, by_severity, capacity_phrase, panel_capacity, restarts_sentence, workers_phrase_of
from memlog.report.report import Report, SeriesView, source_damage

MAX_SERIES = MAX_LINES
CHART_WIDTH = 960
MEMORY_HEIGHT = 420
LOSS_HEIGHT = 300
POINTS_PER_SERIES = 2 * CHART_WIDTH // 3  # each bucket keeps its lowest and highest reading
MAX_EVIDENCE_JSON = 20_000
MAX_KNEES = 3
FIT_COLOUR, KNEE_COLOUR, CAPACITY_COLOUR, PLACEHOLDER_COLOUR = "#555555", "#c0392b", "#7f7f7f", "#999999"
PANELS = (("device", "Device memory"), ("host", "Host memory"), ("loss", "Loss"))
_PYGAL_COMMENT = re.compile(r"<!--.*?-->", re.S)
_SEVERITY_LABEL = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}

CSS = """
:root { color-scheme: light; --fg: #1d2125; --muted: #5b636b; --line: #d8dde2; --bg-soft: #f5f7f9;
  --error: #b42318; --warning: #a15c07; --info: #175cd3; --calm: #067647; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--fg); background: #fff; }
main { max-width: 1040px; margin: 0 auto; padding: 0 20px 40px; }
header.verdict { padding: 22px 20px 18px; color: #fff; }
header.verdict > div { max-width: 1000px; margin: 0 auto; }
header.verdict h1 { margin: 0 0 4px; font-size: 26px; line-height: 1.25; }
header.verdict p { margin: 0; opacity: .95; }
.v-error { background: var(--error); } .v-warning { background: var(--warning); }
.v-calm { background: var(--calm); } .v-unknown { background: #475467; }
h2 { font-size: 19px; margin: 30px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0 0 6px; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; vertical-align: baseline; padding: 4px 8px; border-bottom: 1px solid var(--line); }
td code, th code { white-space: nowrap; }
table.env th { width: 130px; white-space: nowrap; }
th { background: var(--bg-soft); font-weight: 600; }
td.num { font-variant-numeric: tabular-nums; }
code, pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
pre { background: var(--bg-soft); border: 1px solid var(--line); padding: 8px 10px; overflow-x: auto; white-space: pre; }
pre.log { white-space: pre-wrap; overflow-wrap: anywhere; }
figure { margin: 14px 0 22px; }
figure > svg { display: block; width: 100%; height: auto; max-width: 960px; }
svg.swatch { flex: none; width: 28px; height: 12px; }
figcaption { color: var(--muted); font-size: 14px; margin-top: 4px; }
ul.legend { list-style: none; margin: 2px 0 6px; padding: 0 0 0 60px; display: flex; flex-wrap: wrap; gap: 4px 18px; font-size: 14px; }
ul.legend li { display: inline-flex; align-items: center; gap: 6px; white-space: nowrap; }
.badge { display: inline-block; min-width: 74px; text-align: center; padding: 1px 8px; border-radius: 4px;
  color: #fff; font-size: 12px; font-weight: 700; letter-spacing: .03em; }
.b-error { background: var(--error); } .b-warning { background: var(--warning); } .b-info { background: var(--info); }
article.finding { border: 1px solid var(--line); border-left: 5px solid var(--info); border-radius: 4px;
  padding: 12px 14px; margin: 12px 0; }
article.finding.s-error { border-left-color: var(--error); }
article.finding.s-warning { border-left-color: var(--warning); }
article.finding ul { margin: 6px 0; padding-left: 22px; }
.evidence { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0; }
.evidence table { width: auto; min-width: 260px; }
details { margin: 8px 0; } summary { cursor: pointer; color: var(--muted); }
.muted { color: var(--muted); }
footer { color: var(--muted); font-size: 13px; margin-top: 36px; }
"""


def esc(text: Any, limit: int | None = None) -> str:
    """Log-derived (or any) text for the page: inert controls replaced, HTML specials escaped."""
    text = safe(str(text))
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return html.escape(text, quote=True)


def render_html(report: Report) -> str:
    sources = report.coverage.get("sources") or []
    title = f"memlog: {report.headline.title}" + (f" — {sources[0]['name']}" if len(sources) == 1 else "")
    body = [
        _verdict(report),
        "<main>",
        _summary(report),
        _charts(report),
        _findings(report),
        _environment(report),
        f"<footer>memlog {esc(__version__)} · <code>{esc(report.command or '(library call)')}</code></footer>",
        "</main>",
    ]
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # No fetch of any kind: the page is complete as it is.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="memlog">',
        f"<title>{esc(title, 200)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
    ]
    return "\n".join(head + [part for part in body if part] + ["</body>", "</html>"]) + "\n"


def _verdict(report: Report) -> str:
    verdict = report.headline
    worst = report.worst_severity()
    if verdict.name == "inconclusive":
        tone = "unknown"
    elif verdict.calm and worst != "error":
        tone = "calm"
    else:
        tone = "error" if worst == "error" or not verdict.calm else "warning"
    cov = report.coverage
    context = [", ".join(cov.get("formats") or {}) or "no format"]
    if cov.get("workers"):
        context.append(workers_phrase_of(cov))
    if cov.get("steps"):
        context.append(f"steps {cov['steps'][0]:,}–{cov['steps'][1]:,}")
    return (
        f'<header class="verdict v-{tone}"><div>'
        f"<h1>memlog verdict: {esc(verdict.title)}</h1>"
        f"<p>{esc(verdict.meaning)} <span>({esc(', '.join(context))})</span></p>"
        + (f"<p>{esc(restarts)}</p>" if (restarts := restarts_sentence(cov)) else "")
        + "</div></header>"
    )


def _summary(report: Report) -> str:
    if not report.findings:
        return '<h2 id="findings-at-a-glance">Findings</h2><p>No rule fired.</p>'
    rows = []
    for i, f in enumerate(by_severity(report), 1):
        first = f.message if len(f.message) <= 220 else f.message[:220].rsplit(" ", 1)[0] + " …"
        rows.append(
            f'<tr><td><span class="badge b-{f.severity}">{_SEVERITY_LABEL[f.severity]}</span></td>'
            f'<td><a href="#finding-{i}"><code>{esc(f.rule)}</code></a></td><td>{esc(first, 300)}</td></tr>'
        )
    return (
        '<h2 id="findings-at-a-glance">Findings</h2>'
        "<table><thead><tr><th>Severity</th><th>Rule</th><th>Finding</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


# -- charts --------------------------------------------------------------------------------------


def _charts(report: Report) -> str:
    figures = []
    sentinel = report.marked("placeholder")
    # The memory the findings are about comes first (a host leak: host memory before device).
    first = chart_subject(report)
    for subject, title in sorted(PANELS, key=lambda panel: panel[0] != first):
        views = [v for v in report.series if v.subject == subject and any(math.isfinite(x) for x in v.values)]
        if not views:
            continue
        figures.append(_figure(report, subject, title, views, panel_capacity(views), sentinel if subject == "loss" else set()))
    if not figures:
        return ""
    return '<h2 id="charts">Charts</h2>' + "".join(figures)


def _figure(report: Report, subject: str, title: str, views: list[SeriesView], capacity: float | None, sentinel: set[str]) -> str:
    import pygal
    from pygal.style import Style

    placeholders = [v for v in views if v.label in sentinel]
    real = [v for v in views if v.label not in sentinel]
    drawn = [(pick.view, pick.why) for pick in select(report, real, subject, MAX_SERIES).picks]
    hidden = len(real) - len(drawn)
    metric = ", ".join(sorted({v.metric for v, _ in drawn} or {views[0].metric}))
    unit = "GiB" if all(v.metric.endswith("_gib") for v in views) else ""
    per = "rank" if all(v.rank is not None for v in views) else "worker"

    # (title, points, pygal options, colour, CSS for its lines): pygal's own per-series stroke
    # style loses to its global line width, so widths and dashes go in a CSS rule of ours.
    series: list[tuple[str, list, dict, str, str]] = []
    all_values: list[float] = []
    all_steps: list[float] = []
    for i, (view, _) in enumerate(drawn):
        steps, values = _thin(view)
        all_values += values
        all_steps += steps[:1] + steps[-1:]
        series.append(
            (safe(view.label), list(zip(steps, values)), {"show_dots": len(steps) == 1, "dots_size": 3}, PALETTE[i % len(PALETTE)][1], "stroke-width:2")
        )
    marks = []
    for view in placeholders:
        steps, values = _thin(view)
        all_values += values
        all_steps += steps[:1] + steps[-1:]
        marks += list(zip(steps, values)) + [(None, None)]
    if placeholders:
        value = placeholders[0].values[0] if placeholders[0].values else -1
        label = f"{workers_phrase([v.label for v in placeholders])}: {value:g} placeholder (pipeline parallel, not a loss)"
        series.append((safe(label), marks[:-1], {"stroke": False, "show_dots": True, "dots_size": 2.5, "allow_interruptions": True}, PLACEHOLDER_COLOUR, ""))
    if not all_values:
        return ""

    fits = [v.fit for v, _ in drawn if v.fit is not None and v.fit.to_step > v.fit.from_step and math.isfinite(v.fit.at(v.fit.to_step))]
    low, high = min(all_values), max(all_values)
    if fits:
        segments: list = []
        for fit in fits:
            ends = [(fit.from_step, fit.at(fit.from_step)), (fit.to_step, fit.at(fit.to_step))]
            segments += [*ends, (None, None)]
            low, high = min(low, *(y for _, y in ends)), max(high, *(y for _, y in ends))
        series.append(("tail fit", segments[:-1], {"allow_interruptions": True}, FIT_COLOUR, "stroke-width:1.5;stroke-dasharray:7,5"))
    notes = []
    if capacity and high >= CAPACITY_IN_VIEW * capacity:
        series.append((f"capacity {capacity:g} GiB", [(min(all_steps), capacity), (max(all_steps), capacity)], {}, CAPACITY_COLOUR, "stroke-width:3"))
        high = max(high, capacity)
    elif capacity:
        notes.append(f"The {capacity:g} GiB capacity is far above the chart (the data stays under {CAPACITY_IN_VIEW:.0%} of it).")
    y_ticks = _value_ticks(low, high)
    knees = sorted({v.knee_step for v, _ in drawn if v.knee_step is not None})[:MAX_KNEES]
    if knees:
        segments = []
        for knee in knees:
            segments += [(knee, y_ticks[0]), (knee, y_ticks[-1]), (None, None)]
        series.append(
            (
                f"warmup knee at step {', '.join(map(str, knees))}",
                segments[:-1],
                {"allow_interruptions": True},
                KNEE_COLOUR,
                "stroke-width:2;stroke-dasharray:2,4",
            )
        )

    style = Style(
        background="#ffffff",
        plot_background="#ffffff",
        foreground="#333333",
        foreground_strong="#1d2125",
        foreground_subtle="#d8dde2",
        guide_stroke_color="#e3e7eb",
        major_guide_stroke_color="#e3e7eb",
        guide_stroke_dasharray="0",
        major_guide_stroke_dasharray="0",
        opacity="1",
        opacity_hover="1",
        stroke_opacity="1",
        stroke_opacity_hover="1",
        transition="0ms",
        font_family="system-ui, -apple-system, 'Segoe UI', Roboto, Arial, sans-serif",
        label_font_size=12,
        major_label_font_size=12,
        legend_font_size=13,
        title_font_size=14,
        colors=tuple(colour for _, _, _, colour, _ in series),
    )
    scope = f"memlog-{subject}"
    strokes = "".join(f"#chart-{scope} .serie-{i} .line.reactive{{{css}}}" for i, (*_, css) in enumerate(series) if css)
    x_ticks = _nice_ticks(math.floor(min(all_steps)), math.ceil(max(all_steps)))
    chart = pygal.XY(
        style=style,
        css=["file://style.css", "file://graph.css", "inline:" + strokes],
        width=CHART_WIDTH,
        height=LOSS_HEIGHT if subject == "loss" else MEMORY_HEIGHT,
        explicit_size=False,
        js=[],
        disable_xml_declaration=True,
        show_dots=False,
        show_x_guides=False,
        show_y_guides=True,
        show_legend=False,  # ours, in HTML under the chart: pygal's bottom legend loses rows
        x_title=axis_word(views),
        y_title=unit or metric,
        x_labels=x_ticks,
        y_labels=y_ticks,
        range=(y_ticks[0], y_ticks[-1]),
        xrange=(x_ticks[0], x_ticks[-1]) if len(x_ticks) > 1 else None,
        x_value_formatter=lambda x: f"{x:,.0f}" if float(x).is_integer() else f"{x:g}",
        value_formatter=lambda y: f"{y:g}",
        margin=10,
        print_values=False,
        tooltip_fancy_mode=False,
        pretty_print=False,
    )
    chart.uuid = scope  # the chart's CSS scope: stable, so the page is deterministic
    chart.add_xml_filter(_without_scripts)
    for name, points, options, _, _ in series:
        chart.add(name, points, **options)
    try:
        svg = _PYGAL_COMMENT.sub("", chart.render(is_unicode=True))
    except (OverflowError, ValueError, ZeroDivisionError):
        # Finite but astronomical values (a loss of 1e300) or steps past 2**53 that a float cannot
        # tell apart (found by scripts/fuzz.py): pygal's arithmetic overflows or divides by a zero
        # width. The page still says what the chart would have shown.
        svg = (
            f'<p class="muted">Not drawn: values from {low:g} to {high:g}, steps {min(all_steps):,} to '
            f"{max(all_steps):,}, are beyond what the chart can scale.</p>"
        )

    heading = f"{title} per {per} vs {axis_word(views)} ({metric}{', ' + unit if unit else ''})"
    caption = []
    named = [f"{esc(view.label)} ({esc(why)})" for view, why in drawn if why and why not in UNNAMED]
    if hidden:
        reps = [f"{esc(view.label)} ({why})" for view, why in drawn if why in UNNAMED]
        drawn_text = f"{len(drawn)} of {len(real)} {per}s drawn"
        if named:
            drawn_text += f": {', '.join(named)} named by findings"
        if reps:
            drawn_text += f"{';' if named else ':'} {', '.join(reps)} of the rest by mean level"
        how = f" (<code>{SHOW_COMMAND}</code> draws one)"
        caption.append(f"{drawn_text}; {hidden} not drawn{how}.")
    if fits:
        caption.append("Dashed: the straight line the rules fitted to each drawn series' tail.")
    caption += [esc(note) for note in notes]
    legend = "".join(f"<li>{_swatch(colour, css, options)}{esc(name, 200)}</li>" for name, _, options, colour, css in series)
    return (
        f'<figure id="chart-{subject}"><h3>{esc(heading)}</h3>{svg}<ul class="legend">{legend}</ul>'
        + (f"<figcaption>{' '.join(caption)}</figcaption>" if caption else "")
        + "</figure>"
    )


def _swatch(colour: str, css: str, options: dict) -> str:
    """A small picture of how a series is drawn (line, dashes or marks), for the legend."""
    if options.get("stroke") is False:
        shape = f'<circle cx="14" cy="6" r="3" fill="{colour}"/>'
    else:
        style = dict(part.split(":", 1) for part in css.split(";") if ":" in part)
        dash = f' stroke-dasharray="{style["stroke-dasharray"]}"' if "stroke-dasharray" in style else ""
        width = style.get("stroke-width", "2")
        shape = f'<line x1="1" y1="6" x2="27" y2="6" stroke="{colour}" stroke-width="{width}"{dash}/>'
    return f'<svg class="swatch" width="28" height="12" viewBox="0 0 28 12" aria-hidden="true">{shape}</svg>'


def _value_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """About `count` round values (1, 2 or 5 x 10^k apart) from at or below `low` to at or above `high`."""
    # Equal values, or values too close for a float to space ticks between (1e300 twice, 0 and
    # 5e-324): widen by 1, or by a thousandth of their size where 1 is lost in the rounding.
    scale = max(abs(low), abs(high), 1.0)
    if not high - low >= scale * 1e-9:
        widen = scale * 1e-3 if scale > 1e3 else 1.0
        # Clamped: widening the largest floats (a flat 1.7e308) would overflow to infinity.
        low, high = max(low - widen, -sys.float_info.max), min(high + widen, sys.float_info.max)
    # Two divisions, not one: the difference of -1e308 and 1e308 overflows to infinity.
    raw = high / max(count - 1, 1) - low / max(count - 1, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))  # a float: an int of 10**307 outgrows what a float can hold
    spacing = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    # Ticks past the largest float are drawn at it (a range reaching +-1.8e308 has no rounder end).
    biggest = sys.float_info.max
    first = max(math.floor(low / spacing) * spacing, -biggest)
    ticks = [first]
    while ticks[-1] < high - 1e-9 * spacing and len(ticks) <= 2 * count:
        ticks.append(min(first + len(ticks) * spacing, biggest))
    return [round(t, 10) for t in ticks]


def _without_scripts(root):
    """pygal always writes a <script> with its whole configuration (series titles included) for
    its tooltips; the page has no script, so out it goes."""
    for parent in list(root.iter()):
        for child in list(parent):
            if str(child.tag).rpartition("}")[2] == "script":
                parent.remove(child)
    return root


def _thin(view: SeriesView) -> tuple[list[float], list[float]]:
    """At most about 2 x POINTS_PER_SERIES points, keeping each bucket's lowest and highest
    reading (peaks stay visible), in step order."""
    if len(view.values) <= 2 * POINTS_PER_SERIES:
        points = [(s, v) for s, v in zip(view.steps, view.values) if math.isfinite(v) and math.isfinite(s)]
    else:
        kept: set[tuple[float, float]] = set()
        for row in buckets(view.steps, view.values, POINTS_PER_SERIES).iter_rows(named=True):
            kept.add((row["low_step"], row["low"]))
            kept.add((row["high_step"], row["high"]))
        points = sorted(kept)
    return [float(s) for s, _ in points], [float(v) for _, v in points]


# -- findings ------------------------------------------------------------------------------------


def _findings(report: Report) -> str:
    if not report.findings:
        return ""
    parts = ['<h2 id="findings">Findings in detail</h2>']
    for i, f in enumerate(by_severity(report), 1):
        parts.append(f'<article class="finding s-{f.severity}" id="finding-{i}">')
        parts.append(f'<h3><span class="badge b-{f.severity}">{_SEVERITY_LABEL[f.severity]}</span> <code>{esc(f.rule)}</code></h3>')
        parts.append(f"<p>{esc(f.message)}</p>")
        parts.append(_evidence(f.evidence))
        if f.hints:
            parts.append("<p><strong>What to check</strong></p><ul>" + "".join(f"<li>{esc(h)}</li>" for h in f.hints) + "</ul>")
        parts.append(_lines_of(report, f.lines))
        parts.append("</article>")
    return "\n".join(p for p in parts if p)


def _evidence(evidence: dict[str, Any]) -> str:
    tables = []
    observed = {k: v for k, v in (evidence.get("observed") or {}).items() if v is not None and not isinstance(v, (dict, list))}
    if observed:
        tables.append(_table("Observed", observed))
    thresholds = evidence.get("thresholds") or {}
    if thresholds:
        tables.append(_table("Thresholds", thresholds))
    extra = {}
    if evidence.get("capacity_gib"):
        extra["capacity"] = f"{evidence['capacity_gib']} GiB ({evidence.get('capacity_from')})"
    for key in ("metric", "measures", "pattern", "projected_capacity_step", "projected_capacity_at"):
        if evidence.get(key) not in (None, "", [], {}):
            extra[key] = evidence[key]
    if extra:
        tables.append(_table("Context", extra))
    out = f'<div class="evidence">{"".join(tables)}</div>' if tables else ""
    full = json.dumps(evidence, indent=1, ensure_ascii=False, default=str, allow_nan=True)
    if len(full) > MAX_EVIDENCE_JSON:
        full = full[:MAX_EVIDENCE_JSON] + "\n… (cut here; memlog analyze -o json has all of it)"
    return out + f"<details><summary>All evidence (JSON)</summary><pre>{esc(full)}</pre></details>"


def _table(title: str, values: dict[str, Any]) -> str:
    rows = "".join(f'<tr><td><code>{esc(k)}</code></td><td class="num">{esc(_value(v), 400)}</td></tr>' for k, v in values.items())
    return f'<table><thead><tr><th colspan="2">{esc(title)}</th></tr></thead><tbody>{rows}</tbody></table>'


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    return str(value)


def _lines_of(report: Report, anchors: list[tuple[str, int]]) -> str:
    if not anchors:
        return ""
    many = len({source for source, _ in anchors}) > 1 or len(report.coverage.get("sources") or []) > 1
    quoted = [(source, line, report.log_lines.get((source, line))) for source, line in anchors]
    width = max(len(str(line)) for _, line, _ in quoted)
    rows = []
    for source, line, text in quoted:
        where = f"{source}:{line}" if many else f"{line:>{width}}"
        rows.append(f"{esc(where)}  {esc(text, 2000) if text is not None else '<span class=muted>(not read back)</span>'}")
    anchors_text = ", ".join(f"{s}:{n}" for s, n in anchors) if many else ", ".join(str(n) for _, n in anchors)
    if not any(text is not None for _, _, text in quoted):
        return f'<p class="muted">Log lines: {esc(anchors_text, 2000)}</p>'
    return (
        f"<details open><summary>Log line{'s' if len(anchors) > 1 else ''} behind it"
        f'{"" if many else " (" + esc(anchors[0][0]) + ")"}</summary><pre class="log">' + "\n".join(rows) + "</pre></details>"
    )


# -- environment ---------------------------------------------------------------------------------


def _environment(report: Report) -> str:
    cov = report.coverage
    sources = cov.get("sources") or []
    rows: list[tuple[str, str]] = [("memlog", esc(__version__)), ("command", f"<code>{esc(report.command or '(library call)')}</code>")]
    rows.append(("formats", esc(", ".join(f"{k} ({v:,} records)" for k, v in (cov.get("formats") or {}).items()) or "none")))
    listed = []
    for source in sources[:50]:
        damage = source_damage(source)
        item = f"<code>{esc(source['name'])}</code> ({source['lines']:,} lines{', gzip' if source.get('gzip') else ''})"
        if damage:
            item += f' <strong class="muted">damaged: {esc(damage)}</strong>'
        listed.append(item)
    if len(sources) > 50:
        listed.append(f"and {len(sources) - 50:,} more")
    rows.append(("sources", "<br>".join(listed) or "none"))
    steps = f", steps {cov['steps'][0]:,}–{cov['steps'][1]:,}" if cov.get("steps") else ""
    who = workers_phrase_of(cov)
    if cov.get("ranks"):
        who += f" ({esc(workers_phrase([f'rank{r}' for r in cov['ranks']]))})"
    rows.append(("read", f"{cov.get('lines_read', 0):,} lines, {cov.get('records', 0):,} step records, {who}{steps}"))
    rows.append(("events", esc(", ".join(f"{k} {v}" for k, v in (cov.get("event_counts") or {}).items()) or "none")))
    rows.append(("capacity", esc(capacity_phrase(cov))))
    thresholds = [
        f"<code>{esc(rule_id)}</code>: {esc(' '.join(f'{k}={v:g}' for k, v in values.items()))}" for rule_id, values in report.thresholds.items() if values
    ]
    if thresholds:
        rows.append(("thresholds", "<br>".join(thresholds)))
    for skip in report.skipped[:50]:
        rows.append((f"skipped {esc(skip['rule'])}", esc(" ".join(skip["reason"].split()), 600)))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<h2 id="environment">Coverage and environment</h2><table class="env"><tbody>{body}</tbody></table>'


QUOTES_LOG_LINES = True  # the evidence lines, read back from the logs


def render(report: Report, options: RenderOptions) -> str:
    return render_html(report)
