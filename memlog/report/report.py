"""The Report: everything memlog concluded about a run. JSON is its contract; the text, markdown
and GitHub renderers only format it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memlog import __version__
from memlog.judge.rulekit import SEVERITY_RANK, Finding, Rule, Verdict

# 2: verdicts declared by the rules (fragmentation, oom, periodic-retention added).
SCHEMA_VERSION = 2


def ordered(findings: list[Finding]) -> list[Finding]:
    """Findings as reports list them: most severe first, then by the rank of the verdict they imply,
    then in the order the rules ran."""
    return sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], -(f.verdict.rank if f.verdict else -1)))


@dataclass(frozen=True)
class TailFit:
    """The straight line the rules fitted to a series' tail (after any warmup knee)."""

    slope: float  # value units per step
    intercept: float
    from_step: float
    to_step: float

    def at(self, step: float) -> float:
        return self.intercept + self.slope * step


@dataclass
class SeriesView:
    """One series as the charts draw it: its points, and the knee and tail fit the rules judged.

    Held by the Report for the renderers; not part of the JSON contract (`memlog series` prints
    the points). The lists are the engine's own, not copies."""

    subject: str  # device | host | loss | metric
    label: str
    rank: int | None
    metric: str
    steps: list[float]  # where each point sits, in steps (series.Series.x)
    values: list[float]
    knee_step: int | None = None
    fit: TailFit | None = None
    capacity_gib: float | None = None  # the capacity it runs into, when it has one (context.capacity_of)
    worker: str = ""  # who printed it (node/rank, actor, pid), without its source or segment
    source: str = ""
    segment: int = 0  # 0 before the first restart, 1 after it, ...
    machine: str | None = None  # the node its lines name (IP or host name), when they name one
    unit: str = "step"  # what its x counts: "reading" when the log numbers its readings, not its steps

    def matches(self, *, rank: int | None = None, node: str | None = None, actor: str | None = None, worker: str | None = None) -> bool:
        """Whether this is the series `memlog plot` was asked for (every given selector must hold).
        `worker` is the label as reports print it, the worker's name, or a glob of either."""
        import fnmatch

        who = self.worker.split("/", 1)[1] if "/" in self.worker else self.worker
        worker_node = self.worker.split("/", 1)[0] if "/" in self.worker else None
        return (
            (rank is None or self.rank == rank)
            and (node is None or _same_node(node, worker_node, self.machine))
            and (actor is None or who == actor or who.startswith(actor + " "))
            and (worker is None or any(fnmatch.fnmatchcase(name, worker) for name in (self.label, self.worker)))
        )


def _same_node(asked: str, worker_node: str | None, machine: str | None) -> bool:
    """`--node` names a node as the log shows it: its label (`node1`, `task1`), its host name or
    IP, or its number alone (`1` for `task1` or `node01`)."""
    if asked in (worker_node, machine):
        return True
    number = re.search(r"(\d+)$", worker_node or "")
    return asked.isdigit() and number is not None and int(number.group(1)) == int(asked)


@dataclass
class Report:
    headline: Verdict
    findings: list[Finding]
    skipped: list[dict[str, str]]
    coverage: dict[str, Any]
    thresholds: dict[str, dict[str, float | int]]
    command: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # For the renderers, not serialised: what the charts draw, the rules that ran (help texts for
    # SARIF/JUnit), the events parsed (their text stands in for log lines that cannot be re-read,
    # e.g. from stdin), and the evidence lines read back from the files (see memlog.engine.excerpt).
    series: list[SeriesView] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    log_lines: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.headline.name

    def marked(self, mark: str) -> set[str]:
        """Labels of the series that findings mark so (e.g. "placeholder" losses), for the charts."""
        return {label for f in self.findings if f.marks == mark for label in f.series}

    def worst_severity(self) -> str | None:
        return max((f.severity for f in self.findings), key=SEVERITY_RANK.__getitem__, default=None)

    def fails(self, fail_on: str) -> bool:
        if fail_on == "never":
            return False
        return any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on] for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "memlog_version": __version__,
            "verdict": self.verdict,
            "findings": [finding_json(f) for f in self.findings],
            "skipped": self.skipped,
            "coverage": self.coverage,
            "thresholds": self.thresholds,
        }


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as every JSON document carries it (analyze's report, compare's)."""
    return {
        "rule": f.rule,
        "severity": f.severity,
        "subject": f.subject,
        "message": f.message,
        "evidence": f.evidence,
        "hints": f.hints,
        "lines": [{"source": s, "line": n} for s, n in f.lines],
    }


def source_damage(source: dict[str, Any]) -> str | None:
    """What reading one source (an entry of coverage["sources"]) had to skip or repair, in one
    line: counts and the first line affected. None for an intact source."""

    def first(key: str) -> str:
        return f" (first: line {source[key]:,})" if source.get(key) else ""

    problems = []
    if source.get("truncated_lines"):
        problems.append(f"{source['truncated_lines']:,} over-long line(s) cut{first('first_truncated_line')}")
    if source.get("replaced_bytes"):
        problems.append(f"{source['replaced_bytes']:,} undecodable byte(s) replaced{first('first_replaced_line')}")
    if source.get("nul_bytes"):
        problems.append(f"{source['nul_bytes']:,} NUL byte(s) removed{first('first_nul_line')}")
    if source.get("damaged"):
        problems.append(_stopped(source))
    return "; ".join(problems) if problems else None


def _stopped(source: dict[str, Any]) -> str:
    """Where the damage that stopped reading begins: after the last complete line, and whether
    the next line was cut short by it; a gzip checksum failure cannot be placed, and says so."""
    line, damaged = source.get("first_damaged_line"), source["damaged"]
    if line is None:
        return f"{damaged}: read to the end (line {source['lines']:,}) but the checksum fails, so some of the text is corrupt and where cannot be told"
    if line == 1 and not source["lines"]:
        return f"nothing could be read: {damaged}"
    cut = f" (line {line:,} is cut short)" if source["lines"] >= line else ""
    return f"reading stopped after line {line - 1:,}, the last complete line{cut}: {damaged}"


def series_views(ctx, metric: str | None = None) -> list[SeriesView]:
    """What the charts draw: the judged device series, the host series and the loss per worker,
    each with the knee and tail fit of the shared shape (memlog.judge.trend), plus `metric` when asked."""
    from memlog.base.columns import MEMORY_COLUMNS
    from memlog.judge.context import series_order
    from memlog.judge.shapes import shape_of

    def view(subject: str, s) -> SeriesView:
        knee = fit = None
        if s.column in MEMORY_COLUMNS and len(s) >= 2:
            shape = shape_of(s)
            knee = shape.knee_step if shape.has_warmup else None
            if shape.fit is not None:
                fit = TailFit(shape.fit.slope, shape.fit.intercept, shape.tail_x[0], shape.tail_x[-1])
        capacity = ctx.capacity_of(s)[0] if s.column in MEMORY_COLUMNS else None
        return SeriesView(
            subject, ctx.label(s), s.rank, s.column, s.x, s.values, knee, fit, capacity, s.key.worker, s.key.source, s.key.segment, s.machine, s.unit
        )

    views = [view("device", s) for s in ctx.device_series]
    views += [view("host", s) for s in ctx.host_series]
    views += [view("loss", s) for s in ctx.loss_series]
    if metric:
        views += [view("metric", s) for s in sorted(ctx.series(metric), key=series_order) if len(s)]
    return views
