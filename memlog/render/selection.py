"""Which series a chart draws, shared by every renderer (text chart, sparklines, Mermaid, HTML):
the series that findings name first (the leaking ranks, the worker that ran out of memory), then,
when not every other series fits, a representative few of the rest (lowest, median and highest by
mean level), and a count of what is left out with the command that draws it. When findings name
more series than fit, one calm series still gets a line (from another node than theirs when there
is one): the contrast is what shows a reader that the leak is theirs, not the job's.

With 64 ranks a chart of the first eight shows one node's flat ranks and hides the two that leak;
choosing here, once, means the chart, the sparklines and the Mermaid block tell the same story.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memlog.report.report import Report, SeriesView

MAX_LINES = 8  # more lines than this is a scribble
REPRESENTATIVES = 3  # of the series no finding names: lowest, median, highest
REPRESENTATIVE_NAMES = {1: ["median"], 2: ["lowest", "highest"], 3: ["lowest", "median", "highest"]}
CONTRAST = "calm"  # the one series no finding names, drawn beside many that findings name
UNNAMED = ("lowest", "median", "highest", CONTRAST)  # the whys of series no finding names


@dataclass
class Pick:
    view: SeriesView
    why: str  # "" or what singles it out: the rule that names it, "lowest", "median", "highest"

    @property
    def named(self) -> bool:
        """Chosen because a finding names it (not as a representative)."""
        return bool(self.why) and self.why not in UNNAMED


@dataclass
class Selection:
    picks: list[Pick]
    total: int  # series there were to draw
    noun: str  # "rank" when every series has one, else "worker"

    @property
    def hidden(self) -> int:
        return self.total - len(self.picks)

    @property
    def views(self) -> list[SeriesView]:
        return [p.view for p in self.picks]

    def hidden_note(self) -> str:
        """What is left out and how to see it, one sentence without markup; "" when nothing is."""
        if not self.hidden:
            return ""
        plural = "s" if self.hidden != 1 else ""
        return f"{self.hidden} more {self.noun}{plural} not drawn ({SHOW_COMMAND} draws one)"


# How a reader draws any one series, whatever its kind (`memlog plot` selects by label, rank, node, actor).
SHOW_COMMAND = "memlog plot LOG --worker LABEL"


def noun_of(views: list[SeriesView]) -> str:
    return "rank" if views and all(v.rank is not None for v in views) else "worker"


def named_by_findings(report: Report, views: list[SeriesView], subject: str) -> dict[str, str]:
    """label -> the rule of the most severe error or warning finding about this subject (or about
    the run, as an out-of-memory crash is) that names the series (a finding about worker `W` names
    its `W [floor]` and `W [peak]` series too)."""
    from memlog.render.shared import by_severity

    named: dict[str, str] = {}
    for finding in by_severity(report):
        if finding.severity not in ("error", "warning") or finding.subject not in (subject, "run"):
            continue
        for name in finding.series:
            for view in views:
                if view.label == name or view.label.startswith(name + " ["):
                    named.setdefault(view.label, finding.rule)
    return named


def select(report: Report, views: list[SeriesView], subject: str, limit: int = MAX_LINES) -> Selection:
    """At most `limit` of `views`: the named ones first (spread over their levels when too many),
    then every other one if all fit, else the lowest, median and highest of the rest."""
    return Selection(choose(views, named_by_findings(report, views, subject), limit), len(views), noun_of(views))


def choose(views: list[SeriesView], named: dict[str, str], limit: int = MAX_LINES) -> list[Pick]:
    flagged = [v for v in views if v.label in named]
    rest = [v for v in views if v.label not in named]
    if len(flagged) > limit - (1 if rest else 0):
        if not rest:
            return [Pick(v, named[v.label]) for v in spread(flagged, limit)]
        return [Pick(v, named[v.label]) for v in spread(flagged, limit - 1)] + [Pick(contrast(rest, flagged), CONTRAST)]
    picked = [Pick(v, named[v.label]) for v in flagged]
    room = limit - len(picked)
    if len(rest) <= room:
        return picked + [Pick(v, "") for v in rest]
    # A series with one reading would be a flat line across the chart: prefer those with more.
    reps = spread([v for v in rest if len(v.values) > 1] or rest, min(room, REPRESENTATIVES))
    names = REPRESENTATIVE_NAMES.get(len(reps), [""] * len(reps))
    return picked + [Pick(v, why) for v, why in zip(reps, names)]


def contrast(rest: list[SeriesView], flagged: list[SeriesView]) -> SeriesView:
    """The calm series drawn beside the flagged ones: the median of those on another node (or
    source) than theirs when there are any, else of all the calm ones; with more than one reading."""
    places = {(v.machine, v.source) for v in flagged}
    elsewhere = [v for v in rest if (v.machine, v.source) not in places]
    pool = [v for v in (elsewhere or rest) if len(v.values) > 1] or elsewhere or rest
    return spread(pool, 1)[0]


def spread(views: list[SeriesView], k: int) -> list[SeriesView]:
    """k series spread evenly over the levels (mean value), lowest to highest."""
    if k <= 0:
        return []
    ordered = sorted(views, key=level)
    if k == 1:
        return [ordered[(len(ordered) - 1) // 2]]
    picks = sorted({round(i * (len(ordered) - 1) / (k - 1)) for i in range(k)})
    return [ordered[i] for i in picks]


def level(view: SeriesView) -> float:
    finite = [x for x in view.values if math.isfinite(x)]
    return sum(finite) / len(finite) if finite else 0.0
