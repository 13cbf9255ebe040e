"""Terminal charts (plotext): memory per rank against step with the knee, the fitted tail and the
capacity line the rules used, and a loss panel that marks pipeline-parallel sentinel ranks.

Everything drawn comes from the Report (`report.series`, the findings, the capacity); the only
work done here is presentation: thinning long series to the width of the screen and choosing tick
positions. plotext is imported inside `render_chart`, so a run that draws no chart never loads it.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import textwrap
from collections.abc import Callable

from memlog.base.columns import ALL_VALUE_COLUMNS
from memlog.base.errors import MemlogError
from memlog.base.phrases import workers_phrase
from memlog.render.safety import ascii_text, safe
from memlog.render.selection import MAX_LINES, Selection, select
from memlog.render.shared import CAPACITY_IN_VIEW, axis_word, buckets, panel_capacity
from memlog.report.report import Report, SeriesView

WIDTH = 100
MEMORY_HEIGHT = 20
LOSS_HEIGHT = 12
MAX_SERIES = MAX_LINES  # the legend says what was left out
# Without colour, ranks are told apart by their marker; with colour, by colour (braille dots are finer).
MARKERS = ("•", "+", "o", "#", "*", "%", "=", "@")
ASCII_MARKERS = ("*", "o", "#", "%", "@", "&", "$", "~")  # not + - | = : (the frame and lines)
COLOURS = (33, 208, 35, 163, 37, 178, 160, 244)  # 256-colour codes readable on dark and light terminals
ANNOTATION_COLOUR = 196
SENTINEL_MARKER = "x"
FIT_MARKER = "·"
PANEL_TITLES = {
    "device": "Device memory",
    "host": "Host memory",
    "loss": "Loss",
    "metric": "",
}
_BACKGROUND = re.compile(r"\x1b\[48;5;\d+m")  # plotext paints line backgrounds white: keep the terminal's

# `memlog plot --metric`: a subject's panels; any other value column is charted as a panel of its own.
PLOT_SUBJECTS = {"memory": ("device", "host"), "device": ("device",), "host": ("host",), "loss": ("loss",)}


def plot_panels(metric: str | None) -> tuple[tuple[str, ...], str | None]:
    """The panels `memlog plot --metric METRIC` draws, and the value column it charts (None: the
    subjects' own series). An unknown metric is an error naming the known ones."""
    if metric is not None and metric not in PLOT_SUBJECTS:
        if metric not in ALL_VALUE_COLUMNS:
            raise MemlogError(f"unknown metric {metric!r} (use one of: {', '.join(dict.fromkeys([*PLOT_SUBJECTS, *ALL_VALUE_COLUMNS]))})")
        return ("metric",), metric
    return PLOT_SUBJECTS.get(metric or "", ("device", "host", "loss")), None


def plot_filter(report: Report, subjects: tuple[str, ...], metric: str | None, inputs: list[str], **chosen) -> Callable[[SeriesView], bool] | None:
    """Which of the panels' series `memlog plot` draws: those matching --rank/--node/--actor/--worker
    (`chosen`; None: all). Nothing to draw, or nothing matching, is an error saying what there is."""
    shown = [v for v in report.series if v.subject in subjects]
    if not shown:
        raise MemlogError(f"no {metric or 'memory or loss'} values in {', '.join(inputs)}")
    chosen = {k: v for k, v in chosen.items() if v is not None}
    if not chosen:
        return None

    def only(view: SeriesView) -> bool:
        return view.matches(**chosen)

    if not any(only(v) for v in shown):
        asked = " and ".join(f"{k} {v}" for k, v in chosen.items())
        labels = list(dict.fromkeys(v.label for v in shown))
        listed = ", ".join(labels[:12]) + (f" and {len(labels) - 12} more" if len(labels) > 12 else "")
        raise MemlogError(f"no {asked} in the {metric or 'charted'} series (workers: {listed})")
    return only


def render_chart(
    report: Report,
    *,
    width: int = WIDTH,
    colour: bool = False,
    ascii_only: bool = False,
    subjects: tuple[str, ...] = ("device", "host", "loss"),
    only: Callable[[SeriesView], bool] | None = None,
) -> str:
    """The panels for `subjects` that have series, stacked; "" when there is nothing to draw.
    `only`: draw just the series it accepts (`memlog plot --rank/--node/--actor/--worker`)."""
    import plotext as plt

    plt.terminal.limit(False, False)  # size by our width, not by the terminal (or its absence)
    sentinel = report.marked("placeholder")
    panels = []
    # plotext prints notes of its own while building (coloured, to stdout/stderr, whatever NO_COLOR
    # says): a chart only returns text.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for subject in subjects:
            views = [v for v in report.series if v.subject == subject and (only is None or only(v))]
            if not views:
                continue
            marked = sentinel if subject == "loss" else set()
            selection = select(report, [v for v in views if v.label not in marked], subject, MAX_SERIES)
            placeholders = [v for v in views if v.label in marked][:MAX_SERIES]
            try:
                panels.append(_panel(plt, subject, selection, placeholders, panel_capacity(views), width, colour, ascii_only))
            except (OverflowError, ValueError, ZeroDivisionError):
                # Finite but astronomical values or steps (found by scripts/fuzz.py): plotext's
                # tick arithmetic fails (NaN, a zero-width axis). The rest of the report stands.
                panels.append(f"({subject} chart not drawn: its values or steps are beyond what the chart can scale)")
    return "\n\n".join(panels)


def _panel(plt, subject, selection: Selection, sentinel_views: list[SeriesView], capacity, width, colour, ascii_only) -> str:
    markers = ASCII_MARKERS if ascii_only else MARKERS
    drawn = selection.views + sentinel_views
    fig = plt.figure
    fig.clear()
    fig.theme("colorless")
    height = LOSS_HEIGHT if subject == "loss" else MEMORY_HEIGHT
    fig.plot_size(width, height)
    legend: list[tuple[str, int | None, str]] = []  # (marker, colour, text)

    def marker(symbol: str, colour_code: int):
        return plt.marker(symbol, pixel=colour_code) if colour else symbol

    points = {id(view): _finite_points(view, width) for view in drawn}
    fits = [v.fit for v in drawn if v.fit is not None and v.fit.to_step > v.fit.from_step]
    for fit in fits:  # first, so the data is drawn over them
        xs = [fit.from_step, fit.to_step]
        fig.draw(fig.segment(xs, [fit.at(x) for x in xs], marker=marker("." if ascii_only else FIT_MARKER, 244)))

    for i, pick in enumerate(selection.picks):
        steps, values = points[id(pick.view)]
        if not steps:
            continue
        code = COLOURS[i % len(COLOURS)]
        symbol = "braille" if colour else markers[i % len(markers)]
        fig.draw(fig.signal(steps, values, marker=marker(symbol, code)).lines())
        why = f" ({pick.why})" if pick.why else ""
        legend.append(("⠶" if colour and not ascii_only else markers[i % len(markers)], code, safe(pick.view.label) + why))
    for view in sentinel_views:
        steps, values = points[id(view)]
        fig.draw(fig.signal(steps, values, marker=marker(SENTINEL_MARKER, 244)))
    if sentinel_views:
        value = sentinel_views[0].values[0] if sentinel_views[0].values else -1
        legend.append(
            (SENTINEL_MARKER, 244, f"{safe(workers_phrase([v.label for v in sentinel_views]))}: {value:g} placeholder (pipeline parallel, not a loss)")
        )

    if fits:
        legend.append(("." if ascii_only else FIT_MARKER, 244, "tail fit"))
    knees = sorted({v.knee_step for v in drawn if v.knee_step is not None})[:3]
    for knee in knees:
        fig.line(knee, "v", style="dotted", pixel=ANNOTATION_COLOUR if colour else None)
    if knees:
        legend.append(("┊", ANNOTATION_COLOUR, f"warmup knee at step {', '.join(map(str, knees))}"))
    highest = max((max(values) for _, values in points.values() if values), default=0)
    if capacity and highest >= CAPACITY_IN_VIEW * capacity:
        fig.line(capacity, "h", style="heavy", pixel=ANNOTATION_COLOUR if colour else None)
        legend.append(("━", ANNOTATION_COLOUR, f"capacity {capacity:g} GiB"))
    elif capacity:
        legend.append(("↑", None, f"capacity {capacity:g} GiB, far above the chart"))

    all_steps = [s for steps, _ in points.values() for s in steps[:1] + steps[-1:]]
    if all_steps:
        ticks = _nice_ticks(math.floor(min(all_steps)), math.ceil(max(all_steps)))
        fig.ruler("x").ticks(ticks, [f"{t:,}" for t in ticks])
    chart = fig.build().string(colorless=not colour)
    chart = _BACKGROUND.sub("", chart)
    if selection.hidden:
        legend.append((" ", None, selection.hidden_note()))
    lines = [_title(subject, drawn, width, colour), chart.rstrip("\n"), *_legend(legend, width, colour)]
    text = "\n".join(line.rstrip() for line in "\n".join(lines).splitlines())
    return ascii_text(text) if ascii_only else text


def _title(subject: str, views: list[SeriesView], width: int, colour: bool) -> str:
    metric = views[0].metric
    unit = "GiB" if metric.endswith("_gib") else ""
    what = PANEL_TITLES[subject] or metric
    per = "per rank" if any(v.rank is not None for v in views) else "per worker"
    title = f"{what} {per} vs {axis_word(views)} ({metric}{', ' + unit if unit else ''})"
    title = textwrap.fill(title, width, break_on_hyphens=False, subsequent_indent="  ")
    return f"\x1b[1m{title}\x1b[0m" if colour else title


def _legend(entries: list[tuple[str, int | None, str]], width: int, colour: bool) -> list[str]:
    lines, current = [], ""
    for symbol, code, text in entries:
        painted = f"\x1b[38;5;{code}m{symbol}\x1b[0m" if colour and code is not None else symbol
        if len(text) > width - 4 - len(symbol):
            # A long entry gets lines of its own (at most two; a label longer than that is cut).
            chunks = textwrap.wrap(text, width - 4 - len(symbol), break_on_hyphens=False) or [""]
            if len(chunks) > 2:
                chunks = [chunks[0], chunks[1][: width - 5 - len(symbol)] + "…"]
            if current:
                lines.append(current)
            lines += [f"  {painted} {chunks[0]}", *(f"  {' ' * len(symbol)} {chunk}" for chunk in chunks[1:])]
            current = ""
            continue
        item = f"{symbol} {text}"
        if current and len(_plain(current)) + 3 + len(item) > width:
            lines.append(current)
            current = ""
        current = f"{current}   {painted} {text}" if current else f"  {painted} {text}"
    return [*lines, current] if current else lines


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _finite_points(view: SeriesView, width: int) -> tuple[list[int], list[float]]:
    """At most about 4 x width points, keeping each bucket's lowest and highest (peaks stay visible)."""
    points: set[tuple[int, float]] = set()
    for row in buckets(view.steps, view.values, 2 * width).iter_rows(named=True):
        points.add((row["low_step"], row["low"]))
        points.add((row["high_step"], row["high"]))
    ordered = sorted(points)
    return [s for s, _ in ordered], [v for _, v in ordered]


def _nice_ticks(low: int, high: int, count: int = 7) -> list[int]:
    """Whole-step ticks at 1/2/5 x 10^k spacing, about `count` of them, ends included."""
    if high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    spacing = next((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), 10 * magnitude)
    spacing = max(1, int(spacing))
    ticks = list(range(math.ceil(low / spacing) * spacing, high + 1, spacing))
    if not ticks or ticks[0] - low > spacing / 3:
        ticks.insert(0, low)
    elif ticks[0] != low:
        ticks[0] = low
    if high - ticks[-1] > spacing / 3:
        ticks.append(high)
    elif ticks[-1] != high:
        ticks[-1] = high
    return ticks
