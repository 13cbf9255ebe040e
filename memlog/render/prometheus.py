"""Prometheus metrics of a judgement: what `memlog watch --metrics-port` serves while it watches and
`memlog scan --prometheus-textfile` writes once (node_exporter's textfile collector), through the
`prometheus_client` library (the `memlog[prometheus]` extra).

Per worker and memory series: the last reading (`memlog_memory_bytes`), its growth per step over
the judged tail (`memlog_memory_growth_bytes_per_step`), the capacity it is judged against, the last
step seen; per leaking series: the step at which its trend reaches the capacity and the seconds to
it; per run: the verdict (an info-style gauge: its labels say the verdict) and the findings by rule
and severity. Labels: `run`, `node`, `rank`, `worker`, `scope` (device or host) and `metric` (the
column, e.g. mem_peak_reserved_gib). Names follow Prometheus' conventions (base units in the name).
Unlike `predict_linear` over a raw gauge, these come from memlog's judgement: warmup and sawtooths
are not growth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from memlog.report.report import Report

GIB = 1 << 30


def _text(value: object) -> str:
    return "" if value is None else str(value)


SERIES = ["run", "node", "rank", "worker", "scope", "metric"]  # a memory series' labels
LEAKING = ["run", "rank", "worker", "metric"]  # a leaking series' labels
# Every family memlog exports: (help, labels). A scan's rows fill what a row keeps, its labels
# empty where a row holds no worker.
FAMILIES: dict[str, tuple[str, list[str]]] = {
    "memlog_memory_bytes": ("Last memory reading of the series.", SERIES),
    "memlog_memory_growth_bytes_per_step": ("Growth per step of the series over its judged tail (after any warmup).", SERIES),
    "memlog_memory_capacity_bytes": ("Capacity the series is judged against.", SERIES),
    "memlog_last_step": ("Last training step read of the series.", SERIES),
    "memlog_projected_oom_step": ("Step at which a leaking series' trend reaches its capacity.", LEAKING),
    "memlog_projected_oom_seconds": ("Seconds until a leaking series' trend reaches its capacity.", LEAKING),
    "memlog_verdict_info": ("The run's verdict in force (always 1; the verdict is the label).", ["run", "verdict", "headline"]),
    "memlog_findings": ("Findings of the judgement, by rule and severity.", ["run", "rule", "severity"]),
}


def _families() -> dict:
    from prometheus_client.core import GaugeMetricFamily

    return {name: GaugeMetricFamily(name, help_text, labels=labels) for name, (help_text, labels) in FAMILIES.items()}


def _add_findings(family, run: str, findings: Iterable[tuple[str, str]]) -> None:
    """Findings counted by (rule, severity)."""
    counts: dict[tuple[str, str], int] = {}
    for key in findings:
        counts[key] = counts.get(key, 0) + 1
    for (rule, severity), n in sorted(counts.items()):
        family.add_metric([run, rule, severity], float(n))


class ReportCollector:
    """A prometheus_client collector of the latest judgement of each run: `reports()` gives
    (run, report, seconds to OOM per series label) at each scrape, so the endpoint always serves
    the judgement in force (watch replaces it as steps arrive)."""

    def __init__(self, reports: Callable[[], Iterable[tuple[str, Report, dict[str, float]]]]) -> None:
        self.reports = reports

    def describe(self) -> list:
        return []  # (no fixed set: the families depend on the runs; the registry then asks collect)

    def collect(self) -> Iterator:
        f = _families()
        for run, report, seconds_to_oom in self.reports():
            for view in report.series:
                if view.subject not in ("device", "host") or not view.values:
                    continue
                labels = [run, _text(view.machine), _text(view.rank), _text(view.label), view.subject, view.metric]
                f["memlog_memory_bytes"].add_metric(labels, float(view.values[-1]) * GIB)
                f["memlog_last_step"].add_metric(labels, float(view.steps[-1]))
                if view.fit is not None:
                    f["memlog_memory_growth_bytes_per_step"].add_metric(labels, float(view.fit.slope) * GIB)
                if view.capacity_gib is not None:
                    f["memlog_memory_capacity_bytes"].add_metric(labels, float(view.capacity_gib) * GIB)
            for projection in _projections(report):
                labels = [run, _text(projection["rank"]), _text(projection["series"]), _text(projection["metric"])]
                f["memlog_projected_oom_step"].add_metric(labels, float(projection["capacity_step"]))
                seconds = seconds_to_oom.get(_text(projection["series"]), projection["capacity_seconds"])
                if seconds is not None:
                    f["memlog_projected_oom_seconds"].add_metric(labels, float(seconds))
            f["memlog_verdict_info"].add_metric([run, report.verdict, report.headline.headline], 1.0)
            _add_findings(f["memlog_findings"], run, ((x.rule, x.severity) for x in report.findings))
        yield from f.values()


def _projections(report: Report) -> list[dict]:
    from memlog.watch.judging import capacity_projections

    return capacity_projections(report)


def registry_of(reports: Callable[[], Iterable[tuple[str, Report, dict[str, float]]]]):
    """A registry holding only memlog's collector (no process or platform metrics of memlog itself)."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReportCollector(reports))
    return registry


def exposition(reports: Iterable[tuple[str, Report, dict[str, float]]]) -> str:
    """The text exposition format of these judgements (a textfile for node_exporter)."""
    from prometheus_client import generate_latest

    held = list(reports)
    return generate_latest(registry_of(lambda: held)).decode()


class FleetCollector:
    """The same families for a fleet scan's rows (memlog/scan/run.py row_of): one run per row, its
    fastest growth and nearest projected OOM, without the per-worker labels a row does not keep
    (they are empty, so one dashboard reads both)."""

    def __init__(self, rows: list[tuple[str, dict]]) -> None:
        self.rows = rows

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator:
        f = _families()
        for run, row in self.rows:
            headline = (row.get("worst") or {}).get("message") or row.get("error") or ""
            f["memlog_verdict_info"].add_metric([run, row.get("verdict") or "error", headline], 1.0)
            if row.get("growth_gib_per_1k_steps") is not None:
                f["memlog_memory_growth_bytes_per_step"].add_metric([run, "", "", "", "", ""], row["growth_gib_per_1k_steps"] / 1000 * GIB)
            if row.get("steps"):
                f["memlog_last_step"].add_metric([run, "", "", "", "", ""], float(row["steps"][1]))
            if projected := row.get("projected_oom"):
                f["memlog_projected_oom_step"].add_metric([run, "", "", ""], float(projected["step"]))
                if projected.get("seconds") is not None:
                    f["memlog_projected_oom_seconds"].add_metric([run, "", "", ""], float(projected["seconds"]))
            _add_findings(f["memlog_findings"], run, ((x["rule"], x["severity"]) for x in row.get("findings") or []))
        yield from f.values()


def fleet_exposition(rows: list[tuple[str, dict]]) -> str:
    """A fleet scan's rows as the text exposition format (node_exporter's textfile collector)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(rows))
    return generate_latest(registry).decode()
