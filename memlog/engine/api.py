"""analyze(): the whole flow, from input paths to a Report.

read -> unwrap -> parse (per chunk) -> tables -> series -> rules -> Report
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import polars as pl

from memlog.base.columns import ALL_VALUE_COLUMNS
from memlog.base.config import Config
from memlog.base.errors import MemlogError
from memlog.base.limits import MAX_RESTARTS_LISTED
from memlog.engine.excerpt import attach_log_lines
from memlog.engine.plan import ReadingOptions, ReadingPlan, select_specs
from memlog.engine.reader import judgeable, nothing_found, read_sources
from memlog.judge.context import Context
from memlog.judge.rulekit import Finding, Skip, headline, load_rules
from memlog.judge.shapes import shapes_of, warm_for_shapes
from memlog.parse.catalog import load_wrappers
from memlog.parse.formats import FormatSpec
from memlog.parse.generic import Guessed
from memlog.read.inputs import torchrun_attempt
from memlog.read.source import CHUNK_BYTES, Source
from memlog.report.report import Report, ordered, series_views
from memlog.tables.capacity import find_capacities
from memlog.tables.condense import Summarised
from memlog.tables.records import Keep, device_hosts
from memlog.tables.segments import training
from memlog.tables.series import worker_names
from memlog.tables.tables import Tables

__all__ = ["ReadingOptions", "ReadingPlan", "analyze", "judge", "parse_sources", "parsed_records", "select_specs"]


def parse_sources(
    inputs: Sequence[str],
    specs: list[FormatSpec],
    progress: Callable[[Source], None] | None = None,
    *,
    observe=None,
    chunk_bytes: int = CHUNK_BYTES,
    keep: Keep = Keep(),
    wrapper_dirs: Sequence[Path] = (),
    generic: bool = True,
) -> tuple[Tables, list[Source]]:
    """`inputs` read with these `specs` (and the wrappers of `wrapper_dirs` besides the built-in
    ones): the tables and the sources (engine.reader.read_sources, through a plan of them)."""
    plan = ReadingPlan(tuple(specs), tuple(load_wrappers(tuple(wrapper_dirs))), keep, generic, observe=observe, chunk_bytes=chunk_bytes)
    return read_sources(plan, inputs, progress)


def parsed_records(inputs: Sequence[str], options: ReadingOptions = ReadingOptions(), *, readings: bool = False) -> pl.DataFrame:
    """The step records as read (`memlog series`): one row per (source, worker, kind, segment,
    step), every field of that step merged (a value printed several times in the step: its last
    reading, the state the step ends in; `readings`: how many lines were read for it), or, with
    `readings`, one row per line read. The columns some row has a value in (rank and step always),
    ordered by source, worker and kind, categorical columns as plain strings."""
    plan = ReadingPlan.of(options)
    tables, sources = read_sources(plan, inputs)
    if tables.records.is_empty():
        raise nothing_found(sources, plan)
    records = tables.records if readings else merged_steps(tables.records)
    records = records.select([c for c in records.columns if records[c].null_count() < records.height or c in ("rank", "step")])
    return records.sort("source", "worker", "kind", maintain_order=True).with_columns(pl.col(pl.Categorical).cast(pl.String))


def merged_steps(records: pl.DataFrame) -> pl.DataFrame:
    """One row per step of a worker (records table order kept): where it was first read (line,
    time, who), each value's last reading in the step, and how many lines were read for it."""
    step = ["source", "worker", "kind", "segment", "step"]
    first = [c for c in records.columns if c not in step and c not in ALL_VALUE_COLUMNS and c not in ("reading", "steps")]
    values = [c for c in records.columns if c in ALL_VALUE_COLUMNS]
    return records.group_by(step, maintain_order=True).agg(
        *(pl.col(c).first() for c in first),
        *(pl.col(c).drop_nulls().last() for c in values),
        pl.col("steps").max().alias("steps") if "steps" in records.columns else pl.len().alias("steps"),
        readings=pl.len(),
    )


def workers_of(records: pl.DataFrame) -> list[str]:
    """Every worker once, named as the series name it (tables.series.worker_names): four per-rank
    files that do not name their rank are four workers, not one `main`; a process printing a line
    per device is its devices (records.device_hosts)."""
    hosts = device_hosts(records)
    return sorted(name for pair, name in worker_names(records).items() if pair not in hosts)


def restart_steps(records: pl.DataFrame, summarised: Sequence[Summarised] = ()) -> list[int]:
    """The steps the run resumed at, once each however many workers restarted there (at most
    MAX_RESTARTS_LISTED, the first ones): what reports say as "the run restarted twice (steps ...)".
    `summarised`: what the condensers summarised (their segments' restarts count too)."""
    found = {s for summary in summarised for s in summary.restart_steps}
    if records.height and "segment" in records.columns:
        starts = training(records).filter(pl.col("segment") > 0).group_by("source", "worker", "kind", "segment").agg(pl.col("step").min())
        found |= set(starts["step"].unique().to_list())
    later = list(_later_attempts(records))
    if later:  # their files start where the run resumed
        first_segment = pl.col("segment") == 0 if "segment" in records.columns else pl.lit(True)
        starts = records.filter(pl.col("source").cast(pl.String).is_in(later) & first_segment)
        found |= set(starts.group_by("source", "worker", "kind").agg(pl.col("step").min())["step"].drop_nulls().to_list())
    return sorted(int(s) for s in found)[:MAX_RESTARTS_LISTED]


def _later_attempts(records: pl.DataFrame) -> dict[str, int]:
    """The sources that are files of a later torchrun attempt (a restart of the worker group writes
    a new attempt folder), with their attempt numbers."""
    if not records.height or "source" not in records.columns:
        return {}
    attempts = {str(source): torchrun_attempt(str(source)) for source in records["source"].unique().to_list()}
    return {source: attempt[1] for source, attempt in attempts.items() if attempt and attempt[1] > 0}


def restart_count(records: pl.DataFrame) -> int:
    """How many times the run restarted: the restarts of its most restarted worker (its last
    segment's number: segments summarised while reading keep their numbers), and each later torchrun
    attempt. Workers that restarted together count once; a job restarted five times from one
    checkpoint step, five."""
    count = 0
    if records.height and "segment" in records.columns:
        count = int(training(records).select(pl.col("segment").max()).item() or 0)
    return count + len(set(_later_attempts(records).values()))


def _steps_span(records: pl.DataFrame, summarised: Sequence[Summarised]) -> list[int] | None:
    """The first and last steps read, the summarised segments' included."""
    ends = [s for summary in summarised for s in (summary.first_step, summary.last_step) if s is not None]
    if records.height:
        ends += [int(step) for step in records.select(pl.col("step").min().alias("first"), pl.col("step").max().alias("last")).row(0)]
    return [min(ends), max(ends)] if ends else None


def _say_guessed(ctx: Context, findings_of: list[Finding], guessed: list[Guessed]) -> None:
    """Every finding built on a series the generic reader guessed says so in its evidence: the
    mapping it guessed for that source."""
    by_source = {g.source: g.mapping for g in guessed if g.mapping}
    if not by_source:
        return
    labels: dict[str, str] = {}
    for s in [*ctx.device_series, *ctx.host_series, *ctx.loss_series]:
        if s.key.source in by_source:
            labels[ctx.label(s)] = s.key.source
    only_guessed = set(ctx.tables.records["source"].unique().to_list()) <= set(by_source) if ctx.tables.records.height else False
    for finding in findings_of:
        sources = {labels[label] for label in finding.series if label in labels}
        sources |= {source for source, _ in finding.lines if source in by_source}
        if not sources and only_guessed and finding.subject != "run":
            sources = set(by_source)
        if sources:
            finding.evidence["guessed"] = "; ".join(f"{s}: {by_source[s]}" if len(by_source) > 1 else by_source[s] for s in sorted(sources))


def coverage(tables: Tables, sources: list[Source]) -> dict:
    records = tables.records
    return (
        {
            "lines_read": sum(s.stats.lines for s in sources),
            "bytes_read": sum(s.stats.bytes_read for s in sources),
            "records": tables.step_count,
            "events": len(tables.events),
            "event_counts": {
                k: sum(1 for e in tables.events if e.kind == k) + tables.events_dropped.get(k, 0)
                for k in sorted({e.kind for e in tables.events} | set(tables.events_dropped))
            },
            "formats": tables.formats,
            "sources": [
                {
                    "name": s.name,
                    "lines": s.stats.lines,
                    "gzip": s.stats.gzip,
                    "truncated_lines": s.stats.truncated_lines,
                    "first_truncated_line": s.stats.first_truncated_line,
                    "replaced_bytes": s.stats.replaced_bytes,
                    "first_replaced_line": s.stats.first_replaced_line,
                    "nul_bytes": s.stats.nul_bytes,
                    "first_nul_line": s.stats.first_nul_line,
                    "damaged": s.stats.damaged,
                    "first_damaged_line": s.stats.first_damaged_line,
                }
                for s in sources
            ],
            "ranks": sorted(r for r in records["rank"].unique().to_list() if r is not None) if records.height else [],
            "workers": workers_of(records),
            "steps": _steps_span(records, tables.summarised),
            "restarts": restart_steps(records, tables.summarised),
        }
        | ({"restart_count": count} if (count := restart_count(records)) else {})
        | _merged_note(records)
        | _summarised_note(tables.summarised)
        | ({"repeated": tables.repeated} if tables.repeated else {})
    )


def _merged_note(records: pl.DataFrame) -> dict:
    """What the coverage says of steps whose several lines were merged into their floor and peak
    (records.step_rows), nothing when no step printed memory more than once."""
    if "readings" not in records.columns:
        return {}
    several = records.filter(pl.col("readings") > 1)
    if several.is_empty():
        return {}
    return {
        "readings_per_step": {
            "steps": several.height,
            "lines": int(several["readings"].sum()),
            "most_in_a_step": int(cast(int, several["readings"].max())),
            "judged_by": "each step's floor and peak: every memory column's lowest and highest reading in the step",
        }
    }


def _summarised_note(summarised: Sequence[Summarised]) -> dict:
    """What the coverage says of restart segments summarised while reading (memlog/tables/condense.py),
    nothing when none were."""
    if not summarised:
        return {}
    from memlog.tables.condense import KEEP_SEGMENTS

    return {
        "summarised": {
            "segments": sum(s.segments for s in summarised),
            "workers": sum(s.workers for s in summarised),
            "steps": sum(n for s in summarised for n in s.steps.values()),
            "kept_segments": KEEP_SEGMENTS,
        }
    }


def analyze(
    inputs: Sequence[str],
    *,
    options: ReadingOptions | None = None,
    format: str | Sequence[str] | None = None,
    config: Config | None = None,
    capacity_gib: float | None = None,
    formats_dirs: Sequence[Path] = (),
    plugins_dirs: Sequence[Path] = (),
    progress: Callable[[Source], None] | None = None,
    chart_metric: str | None = None,
    condense: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    command: str | None = None,
    log_lines: bool = False,
    processes: bool = False,
) -> Report:
    """The report on `inputs`, complete: `command` is the command line it answers (for the reports
    that show it), `log_lines` reads the evidence lines back from the logs for the reports that
    quote them (memlog/engine/excerpt.py). `options`: the reading options as a command took them (else built
    from `format`, `formats_dirs`, `plugins_dirs`); `config`: loaded already (else options.config's).
    `chart_metric`: also carry that column's series for the charts (`memlog plot --metric`).
    `plugins_dirs`: format folders whose Python block parsers may run (trusted; catalog.load_specs).
    `condense`: keep long runs of steps as bins while reading (memlog/tables/condense.py); off, every
    step is held (tests compare both). `chunk_bytes`: how much is read at a time (the report does not
    depend on it). `processes`: many series may be shaped on worker processes (shapes.shapes_of; the
    commands' choice: a worker process imports the caller's main module, as multiprocessing does,
    so a script calling this must guard its main code with `if __name__ == "__main__":`)."""
    if options is None:
        forced = (format,) if isinstance(format, str) else tuple(format or ())
        options = ReadingOptions(forced, tuple(formats_dirs), tuple(plugins_dirs))
    config = config if config is not None else options.loaded_config()
    plan = ReadingPlan.of(options, config=config, keep=Keep.judged(chart_metric, condense=condense), chunk_bytes=chunk_bytes)
    tables, sources = read_sources(plan, inputs, progress)
    # Undecodable input is not a log whose values were unread: its "keys" are noise.
    garbled = {s.name for s in sources if (s.stats.replaced_bytes + s.stats.nul_bytes) * 10 > max(s.stats.bytes_read, 1)}
    tables.guessed = [g for g in tables.guessed if not (g.weak and g.source in garbled)]
    # A paste of a crash alone (an OOM traceback, a Ray kill) is judged from its events; a log whose
    # memory values the generic reader could not turn into series is reported with why.
    if not judgeable(tables):
        raise nothing_found(sources, plan)
    report = judge(tables, sources, config=config, capacity_gib=capacity_gib, chart_metric=chart_metric, command=command, processes=processes)
    if log_lines:
        attach_log_lines(report, own_lines=plan.parser().reads_alone)
    return report


def judge(
    tables: Tables,
    sources: list[Source],
    *,
    config: Config | None = None,
    capacity_gib: float | None = None,
    chart_metric: str | None = None,
    command: str | None = None,
    processes: bool = False,
) -> Report:
    """Run every rule over the tables read from `sources`: the Report (`command`: the command line
    it answers; `processes`: many series may be shaped on worker processes, shapes.shapes_of)."""
    config = config or Config()
    if processes:  # the pool's server starts while the series are built
        warm_for_shapes(tables.records.height)
    ctx = Context(tables, find_capacities(tables.records, tables.events, capacity_gib or config.capacity_gib))
    # Every memory rule asks for the judged series' shapes: computed up front, on worker processes
    # when they are many (shapes.shapes_of; `processes`: analyze's, not the guard's inside a run).
    shapes_of([*ctx.device_series, *ctx.host_series], processes=processes)
    rules = load_rules()
    unknown = set(config.rules) - {r.id for r in rules}
    if unknown:
        raise MemlogError(f"config names unknown rules: {sorted(unknown)}")
    thresholds, skipped = {}, []
    for rule in rules:
        values = rule.resolve(config.rules.get(rule.id, {}))
        thresholds[rule.id] = ctx.thresholds[rule.id] = values
        try:
            found: list[Finding] = rule.check(ctx, values)
        except Skip as reason:
            skipped.append({"rule": rule.id, "reason": str(reason)})
            continue
        ctx.findings.extend(found)
    cov = coverage(tables, sources)
    if tables.guessed:
        cov["guessed"] = [g.to_json() for g in tables.guessed]
        _say_guessed(ctx, findings_of=ctx.findings, guessed=tables.guessed)
    (device_gib, device_from), (host_gib, host_from) = ctx.capacity.summary(host=False), ctx.capacity.summary(host=True)
    cov["capacity"] = {"device_gib": device_gib, "device_from": device_from, "host_gib": host_gib, "host_from": host_from}
    findings = ordered(ctx.findings)
    return Report(
        headline(findings), findings, skipped, cov, thresholds, command=command, series=series_views(ctx, chart_metric), rules=rules, events=tables.events
    )
