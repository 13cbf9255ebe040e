"""The memory chart of the issue markdown as a Mermaid `xychart-beta` block, which GitHub draws in
issues, pull requests and job summaries (elsewhere it shows as code; the sparklines stay below it).

What is drawn: the device memory series (host memory when the log has no device series), at most
MAX_LINES of them, plus the capacity line when the data comes near it (the rule of the text chart):
chosen as every chart chooses (memlog.render.selection): first the workers that error and warning
findings name (the leaking or out-of-memory ranks), then, when not every worker fits, the lowest,
median and highest of the rest by mean level. The
sentence under the chart names the lines in the order drawn, with their colours (xychart has no
legend on GitHub), and says how many workers are not drawn.

Alignment: xychart-beta has one x axis and one value per point per line, and no gaps. The union of
the drawn series' steps is cut into at most MAX_POINTS equal buckets; each position
`low + i * width` takes, per series, the mean of that series' readings nearest to it (within half a
width). A bucket a series has no reading in takes the straight line between its neighbours (what a
line chart draws anyway); before a series' first reading or after its last, it holds that value,
and the sentence says so. `width` is a whole number of steps (a power of two below one for
fractional step positions) so that Mermaid, which spaces the points by adding `width` to `low`,
lands exactly on every position.

Everything that came from a log (worker labels) is reduced to letters, digits and a few inert
punctuation marks before it enters the block: no quote, bracket, backtick, `%`, `#`, `;` or
newline can close a string, start a comment or an entity, or end the code fence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from memlog.render.safety import safe
from memlog.render.selection import MAX_LINES, SHOW_COMMAND, select
from memlog.render.shared import CAPACITY_IN_VIEW, axis_word, grid_means, panel_capacity
from memlog.report.report import Report, SeriesView

MAX_POINTS = 60
MAX_LABEL = 40
# (name, colour) in the order lines take them; the capacity line is grey. Mid tones, readable on
# GitHub's light and dark themes.
PALETTE = (
    ("red", "#d62728"),
    ("blue", "#1f77b4"),
    ("green", "#2ca02c"),
    ("orange", "#ff7f0e"),
    ("purple", "#9467bd"),
    ("brown", "#8c564b"),
    ("pink", "#e377c2"),
    ("teal", "#17becf"),
)
CAPACITY_COLOUR = ("grey", "#7f7f7f")
SUBJECT_TITLES = {"device": "Device memory", "host": "Host memory"}

_NOT_INERT = re.compile(r"[^\w .,:/+=()@-]")
_BRACKETS = str.maketrans("[]{}<>", "()()()")


def mermaid_text(text: str, limit: int = MAX_LABEL) -> str:
    """A label fit for a quoted Mermaid string inside a code fence: one line of letters, digits,
    spaces and `. , : / + = ( ) @ -` (brackets become parentheses); anything else becomes `?`."""
    text = _NOT_INERT.sub("?", safe(" ".join(str(text).split())).translate(_BRACKETS))
    return text if len(text) <= limit else text[: limit - 1] + "~"


def number(value: float, decimals: int = 2) -> str:
    """A number as Mermaid's grammar reads it: digits, an optional point, no exponent."""
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


@dataclass
class Line:
    view: SeriesView
    why: str  # "" or what singles it out: the rule that names it, "lowest", ...
    values: list[float]
    held: bool  # held flat before its first or after its last reading


@dataclass
class Chart:
    """The chosen lines on their common grid, and what the sentence under the chart says."""

    subject: str
    low: float
    width: float
    count: int
    lines: list[Line]
    capacity: float | None
    hidden: int
    noun: str  # rank / worker

    @property
    def positions(self) -> list[float]:
        return [self.low + i * self.width for i in range(self.count)]


def chart_subject(report: Report) -> str | None:
    """Device memory, or host memory when the log has no device series or when error and warning
    findings are about host memory only (an EasyR1 host leak: its device memory is not the story)."""
    has = {s: any(v.subject == s and any(math.isfinite(x) for x in v.values) for v in report.series) for s in ("device", "host")}
    flagged = {f.subject for f in report.findings if f.severity in ("error", "warning")}
    if has["host"] and (not has["device"] or ("host" in flagged and "device" not in flagged)):
        return "host"
    return "device" if has["device"] else None


def chart_data(report: Report) -> Chart | None:
    """What the Mermaid block draws, or None when there is no memory series with two steps."""
    subject = chart_subject(report)
    if subject is None:
        return None
    views = [v for v in report.series if v.subject == subject and any(math.isfinite(x) for x in v.values)]
    selection = select(report, views, subject, MAX_LINES)
    chosen = [(pick.view, pick.why) for pick in selection.picks]
    steps = [s for view, _ in chosen for s, x in zip(view.steps, view.values) if math.isfinite(x)]
    if not steps or max(steps) <= min(steps):
        return None
    low, width, count = step_grid(min(steps), max(steps), MAX_POINTS, whole=all(float(s).is_integer() for s in steps))
    lines = []
    for view, why in chosen:
        filled, held = fill(grid_means(view.steps, view.values, low, width, count))
        if filled:
            lines.append(Line(view, why, filled, held))
    capacity = panel_capacity(views)
    highest = max(max(line.values) for line in lines)
    if not capacity or highest < CAPACITY_IN_VIEW * capacity:
        capacity = None
    return Chart(subject, low, width, count, lines, capacity, len(views) - len(lines), selection.noun)


def step_grid(low: float, high: float, max_points: int, whole: bool = True) -> tuple[float, float, int]:
    """(start, width, count): positions start + i * width, i < count <= max_points, covering
    [low, high]. The width is a whole number of steps (`whole`: the steps are whole numbers), or
    else may be a power of two below one, and the start a multiple of it, so every position is
    exact in binary floating point."""
    raw = (high - low) / max(max_points - 1, 1)
    if whole or raw > 0.5:
        width = float(max(1, math.ceil(raw)))
    else:
        width = 2.0 ** max(-10, math.ceil(math.log2(raw)) if raw > 0 else -10)
    while True:
        start = float(math.floor(low)) if width >= 1 else math.floor(low / width) * width
        count = math.ceil((high - start) / width - 1e-9) + 1
        if count <= max_points:
            return start, width, count
        width = width + 1 if width >= 1 else width * 2


def fill(points: list[float | None]) -> tuple[list[float], bool]:
    """Empty buckets: the straight line between the neighbours inside the series, its first or
    last value outside it. Returns the filled values and whether any were held outside."""
    known = [i for i, v in enumerate(points) if v is not None]
    if not known:
        return [], False
    out = [0.0 if v is None else v for v in points]  # each empty bucket is filled below
    for a, b in zip(known, known[1:]):
        for i in range(a + 1, b):
            out[i] = out[a] + (out[b] - out[a]) * (i - a) / (b - a)
    for i in range(known[0]):
        out[i] = out[known[0]]
    for i in range(known[-1] + 1, len(out)):
        out[i] = out[known[-1]]
    return out, known[0] > 0 or known[-1] < len(points) - 1


def render_mermaid(chart: Chart) -> str:
    """The block's text, without the fence."""
    metrics = sorted({line.view.metric for line in chart.lines})
    unit = "GiB" if all(m.endswith("_gib") for m in metrics) else ""
    palette = [colour for _, colour in PALETTE[: len(chart.lines)]] + ([CAPACITY_COLOUR[1]] if chart.capacity else [])
    values = [v for line in chart.lines for v in line.values] + ([chart.capacity] if chart.capacity else [])
    y_low, y_high = math.floor(min(values)), math.ceil(max(values))
    if y_high <= y_low:
        y_high = y_low + 1
    decimals = 0 if chart.width >= 1 else 10
    x_low, x_high = chart.low, chart.low + (chart.count - 1) * chart.width
    title = f"{SUBJECT_TITLES[chart.subject]} per {chart.noun} ({', '.join(metrics)}{', ' + unit if unit else ''})"
    out = [
        "---",
        "config:",
        "  themeVariables:",
        "    xyChart:",
        f'      plotColorPalette: "{", ".join(palette)}"',
        "---",
        "xychart-beta",
        f'  title "{mermaid_text(title, 120)}"',
        f'  x-axis "{axis_word([line.view for line in chart.lines])}" {number(x_low, decimals)} --> {number(x_high, decimals)}',
        f'  y-axis "{unit or "value"}" {y_low} --> {y_high}',
    ]
    for line in chart.lines:
        out.append(f'  line "{mermaid_text(line.view.label)}" [{", ".join(number(v) for v in line.values)}]')
    if chart.capacity:
        out.append(f'  line "capacity" [{", ".join([number(chart.capacity)] * chart.count)}]')
    return "\n".join(out)


def describe(chart: Chart, text) -> str:
    """The sentence under the chart: the lines in the order drawn (with colours), the capacity
    line, what is not drawn, and how the points were made. `text` escapes log text for markdown."""
    parts = []
    for (colour, _), line in zip(PALETTE, chart.lines):
        why = f" ({line.why})" if line.why else ""
        parts.append(f"{colour} {text(line.view.label)}{why}")
    sentence = "Lines, in the order drawn: " + ", ".join(parts)
    if chart.capacity:
        sentence += f"; {CAPACITY_COLOUR[0]}: the {chart.capacity:g} GiB {chart.subject} capacity"
    sentence += "."
    if chart.hidden:
        plural = "s" if chart.hidden != 1 else ""
        sentence += f" {chart.hidden} more {chart.noun}{plural} not drawn (`{SHOW_COMMAND}` draws one)."
    if chart.width == 1:
        sentence += " One point per step (the mean of the readings at it)"
    else:
        sentence += f" One point per {chart.width:g} steps: the mean of each series' readings in that stretch"
    held = [text(line.view.label) for line in chart.lines if line.held]
    if held:
        sentence += f"; {', '.join(held)} {'is' if len(held) == 1 else 'are'} held flat where {'it' if len(held) == 1 else 'they'} logged nothing"
    return sentence + "."
