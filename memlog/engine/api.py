"""analyze(): the whole flow, from input paths to a Report.

read -> unwrap -> parse (per chunk) -> tables -> series -> rules -> Report
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
import itertools
from itertools import groupby
from pathlib import Path

import polars as pl

from memlog.parse.catalog import load_specs, load_wrappers
from memlog.tables.condense import Condenser, Summarised
from memlog.base.config import Config
from memlog.tables.capacity import find_capacities
from memlog.judge.context import Context
from memlog.base.errors import MemlogError, NoRecordsError
from memlog.base.events import EVENT_KINDS, Event, build_events
from memlog.parse.formats import FormatSpec
from memlog.base.limits import MAX_EVENTS_PER_KIND, MAX_RESTARTS_LISTED
from memlog.parse.generic import Guessed, SourceGuesser
from memlog.read.inputs import expand
from memlog.base.parallel import ordered_map
from memlog.parse.chunks import ChunkParser, Scan
from memlog.read.source import CHUNK_BYTES, Piece, Source, read_pieces, to_frame
from memlog.tables.records import Keep, KeepEvery, RecordSink, build_records, compact_records, read_values, source_frame
from memlog.report.report import Report, ordered, series_views
from memlog.judge.rulekit import Finding, Skip, headline, load_rules
from memlog.tables.tables import Tables
from memlog.judge.trend import shape_of


def select_specs(specs: dict[str, FormatSpec], forced: str | Sequence[str] | None) -> list[FormatSpec]:
    """All specs, or only the forced ones (names, or one string of comma-separated names) plus the
    event-only specs (OOM errors and crashes are framework-independent)."""
    if not forced:
        return list(specs.values())
    names = [n.strip() for part in ([forced] if isinstance(forced, str) else forced) for n in part.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise MemlogError(f"unknown format{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (known: {', '.join(sorted(specs))})")
    return [s for s in specs.values() if s.name in names or not s.records]


# A log whose chunks hold few candidate lines (a step line per ~50) is scanned this many chunks at a
# time (ChunkParser.scan_together): its per-chunk cost is then mostly polars' cost per call.
# Sparse 1 GiB: 1 chunk 6.1 s and 186 MiB, 2 chunks 5.0 s and 212 MiB, 3: 4.6 s, 234 MiB; 4: 4.1 s, 265 MiB.
SPARSE_CANDIDATES = 0.05  # candidate lines per line, below which a log counts as sparse
SPARSE_TOGETHER = 4


def scanned_chunks(sources: Sequence[Source], parser: ChunkParser, chunk_bytes: int = CHUNK_BYTES, *,
                   together: bool = True) -> Iterator[tuple[Source, Piece, Scan]]:
    """Every chunk of every source, decoded and scanned on all cores, in input order. One stream over
    all sources keeps both cores busy across many small per-rank files. `together`: chunks of a
    sparse source may be scanned several at a time (the scans are the same)."""
    density = [1.0]  # candidate lines per line of the chunks scanned last

    def scan(item: tuple[Source, list[Piece]]) -> list[tuple[Source, Piece, Scan]]:
        source, pieces = item
        scans = parser.scan_together([to_frame(piece) for piece in pieces])
        density[0] = sum(s.candidates.height for s in scans) / max(1, sum(s.lines.height for s in scans))
        return [(source, piece, scan) for piece, scan in zip(pieces, scans)]

    def groups() -> Iterator[tuple[Source, list[Piece]]]:
        for source in sources:
            group: list[Piece] = []
            for piece in read_pieces(source, chunk_bytes):
                group.append(piece)
                if len(group) >= (SPARSE_TOGETHER if together and density[0] < SPARSE_CANDIDATES else 1):
                    yield source, group
                    group = []
            if group:
                yield source, group

    for scanned in ordered_map(scan, groups()):
        yield from scanned


def parse_sources(
    inputs: Sequence[str], specs: list[FormatSpec], progress: Callable[[Source], None] | None = None, *, observe=None,
    chunk_bytes: int = CHUNK_BYTES, keep: Keep = Keep(), wrapper_dirs: Sequence[Path] = (), generic: bool = True,
) -> tuple[Tables, list[Source]]:
    """`progress(source)` is called after each chunk (a few MB), so it costs nothing per line.
    `observe` sees every pattern's matches per chunk (ChunkParser; `memlog formats check`).
    `keep`: what of each record the caller reads (records.Keep): everything unless it says.
    `wrapper_dirs`: user format folders, whose `wrappers/` add to the built-in wrappers.
    `generic`: sources no spec claims a line of are read by a guess (memlog/parse/generic)."""
    wrappers = load_wrappers(tuple(wrapper_dirs))
    parser = ChunkParser(specs, observe, wrappers, keep.values)
    sources = expand(list(inputs))
    record_frames, event_frames, guessed, summarised = [], [], [], []
    for _, chunks in groupby(scanned_chunks(sources, parser, chunk_bytes, together=observe is None), key=lambda chunk: id(chunk[0])):
        chunks = iter(chunks)
        first = next(chunks)
        guesser = SourceGuesser(first[0].name, specs, wrappers) if generic else None
        found = _read_source(itertools.chain([first], chunks), parser, keep, progress, record_frames, event_frames, guesser, summarised)
        if found is not None:
            guessed.append(found)
    return tables_of(record_frames, event_frames, guessed, summarised), sources


def _read_source(
    chunks: Iterable[tuple[Source, Piece, Scan]], parser: ChunkParser, keep: Keep, progress,
    record_frames: list[pl.DataFrame], event_frames: list[pl.DataFrame], guesser: SourceGuesser | None = None,
    summarised: list[Summarised] | None = None,
) -> Guessed | None:
    """One source's scanned chunks absorbed in file order; its record rows (compact) and its events
    are added to the lists, which then hold the only reference to them (build_records frees them).
    What its condenser summarised (restart segments no longer held) goes to `summarised`.
    While no spec claims a line of the source, `guesser` reads it too; returns what it guessed."""
    records, events = [], []
    sink: RecordSink = Condenser() if keep.condense else KeepEvery()
    # What the guess reads is condensed as it comes, like a spec's records, and dropped if a spec
    # claims the source after all.
    guessed_sink: RecordSink = Condenser() if keep.condense else KeepEvery()
    guessed_records: list[pl.DataFrame] = []
    guessed_any = False
    for source, piece, scanned in chunks:
        source.stats.add(piece.stats)
        matches = parser.absorb(scanned)  # multi-line state runs across chunks: in file order
        rows = compact_records(source.name, matches.records, keep, source.identity) if matches.records else None
        # The sink is also told of a chunk's events when it has no records: they cut condensed runs.
        records += sink.add(rows, matches.events, piece.first_line_no, parser.open_since())
        events += matches.events
        if read_values(matches.records):
            guesser, guessed_records = None, []  # a spec reads this source: the guess steps aside
        if guesser is not None:
            skip = {n for frame in matches.events for n in frame["line_no"].to_list()}
            if found := guesser.feed(scanned.lines.drop("_row"), skip):
                frame = compact_records(source.name, found, keep, source.identity)
                guessed_records += guessed_sink.add(frame, [], int(frame["line_no"].min()), None)
                guessed_any = True
        if progress is not None:
            progress(source)
    records += sink.finish(parser.open_since())
    if summarised is not None and isinstance(sink, Condenser) and sink.summarised:
        summarised.append(sink.summarised)
    last = parser.finish_source()  # blocks still open at the end of the file
    if last.records:
        records.append(compact_records(source.name, last.records, keep, source.identity))
        guesser = None if read_values(last.records) else guesser
    events += last.events
    guessed = None
    if guesser is not None:
        found, guessed = guesser.finish()
        if found:
            frame = compact_records(source.name, found, keep, source.identity)
            guessed_records += guessed_sink.add(frame, [], int(frame["line_no"].min()), None)
            guessed_any = True
        records += guessed_records + guessed_sink.finish(None)
        if summarised is not None and isinstance(guessed_sink, Condenser) and guessed_sink.summarised:
            summarised.append(guessed_sink.summarised)
        if guessed_any:  # a spec's matches that read no value stand for nothing the guess did not read
            records = [frame for frame in records if frame["format"].cast(pl.String).eq("generic").any() or read_values([frame])]
    if records:
        record_frames.append(pl.concat(records, how="diagonal_relaxed"))
    if events:
        event_frames.append(source_frame(source.name, events, source.identity))
    return guessed


def _restart_events(records: pl.DataFrame) -> tuple[list[Event], int]:
    """A step counter going back (resume from checkpoint) is an event of its own; beyond
    MAX_EVENTS_PER_KIND (a restart loop) they are only counted, as other events are. Returns the
    events and how many more there were."""
    if records.is_empty():
        return [], 0
    starts = records.filter(pl.col("segment") > 0).group_by("source", "worker", "kind", "segment").agg(
        pl.col("line_no").min(), pl.col("step").min(), pl.col("rank").first(), pl.col("format").first()
    )
    events = [
        Event("restart", r["source"], r["line_no"], r["worker"], r["rank"], r["format"], f"step counter restarts at {r['step']}")
        for r in starts.sort("source", "line_no").head(MAX_EVENTS_PER_KIND).iter_rows(named=True)
    ]
    return events, starts.height - len(events)


def nothing_found(sources: list[Source], specs: list[FormatSpec]) -> str:
    """Why no record came out, in one line naming the input: damage, emptiness, binary, or no match."""
    damaged = [f"{s.name}: {s.stats.damaged}" for s in sources if s.stats.damaged]
    if damaged:
        return "; ".join(damaged) + "; no training-step records before the damage"
    names = ", ".join(s.name for s in sources)
    read = sum(s.stats.bytes_read for s in sources)
    if read == 0:
        return f"no training-step records found in {names}: {'it is' if len(sources) == 1 else 'they are'} empty"
    if sum(s.stats.nul_bytes for s in sources) == read:
        return f"no training-step records found in {names}: all {read:,} bytes are NUL (a zeroed or preallocated file, not a log)"
    garbage = sum(s.stats.replaced_bytes + s.stats.nul_bytes for s in sources)
    if garbage * 10 > read:
        return f"no training-step records found in {names}: not a text log ({100 * garbage // read}% of the bytes are undecodable or NUL)"
    tried = ", ".join(s.name for s in specs if s.records) or "only event formats: " + ", ".join(s.name for s in specs)
    lines = sum(s.stats.lines for s in sources)
    return f"no training-step records found in {names}: none of {lines:,} lines matches a known format (tried: {tried})"


def parsed_records(inputs: Sequence[str], specs: list[FormatSpec], *, generic: bool = True) -> pl.DataFrame:
    """The step records as read (`memlog series`), one row per (source, worker, step): the columns
    some row has a value in (rank and step always), ordered by source, worker and kind, categorical
    columns as plain strings."""
    tables, sources = parse_sources(inputs, specs, generic=generic)
    if tables.records.is_empty():
        raise NoRecordsError(nothing_found(sources, specs))
    records = tables.records.select([c for c in tables.records.columns if tables.records[c].null_count() < tables.records.height or c in ("rank", "step")])
    return records.sort("source", "worker", "kind", maintain_order=True).with_columns(pl.col(pl.Categorical).cast(pl.String))


def workers_of(records: pl.DataFrame) -> list[str]:
    """Every worker once, named as the series name it: `source:worker` when several files are read
    (four per-rank files that do not name their rank are four workers, not one `main`)."""
    if not records.height:
        return []
    pairs = records.select("source", "worker").unique()
    if pairs["source"].n_unique() > 1:
        names = pairs.select(pl.col("source") + pl.lit(":") + pl.col("worker"))
        return sorted(names.to_series().to_list())
    return sorted(pairs["worker"].to_list())


def restart_steps(records: pl.DataFrame, summarised: Sequence[Summarised] = ()) -> list[int]:
    """The steps the run resumed at, once each however many workers restarted there (at most
    MAX_RESTARTS_LISTED, the first ones): what reports say as "the run restarted twice (steps ...)".
    `summarised`: what the condensers summarised (their segments' restarts count too)."""
    found = {s for summary in summarised for s in summary.restart_steps}
    if records.height and "segment" in records.columns:
        starts = records.filter(pl.col("segment") > 0).group_by("source", "worker", "kind", "segment").agg(pl.col("step").min())
        found |= set(starts["step"].unique().to_list())
    return sorted(int(s) for s in found)[:MAX_RESTARTS_LISTED]


def _steps_span(records: pl.DataFrame, summarised: Sequence[Summarised]) -> list[int] | None:
    """The first and last steps read, the summarised segments' included."""
    ends = [s for summary in summarised for s in (summary.first_step, summary.last_step) if s is not None]
    if records.height:
        ends += [int(records["step"].min()), int(records["step"].max())]
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
    return {
        "lines_read": sum(s.stats.lines for s in sources),
        "bytes_read": sum(s.stats.bytes_read for s in sources),
        "records": tables.step_count,
        "events": len(tables.events),
        "event_counts": {k: sum(1 for e in tables.events if e.kind == k) + tables.events_dropped.get(k, 0)
                         for k in sorted({e.kind for e in tables.events} | set(tables.events_dropped))},
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
    } | _summarised_note(tables.summarised)


def _summarised_note(summarised: Sequence[Summarised]) -> dict:
    """What the coverage says of restart segments summarised while reading (memlog/tables/condense.py),
    nothing when none were."""
    if not summarised:
        return {}
    from memlog.tables.condense import KEEP_SEGMENTS

    return {"summarised": {
        "segments": sum(s.segments for s in summarised),
        "workers": sum(s.workers for s in summarised),
        "steps": sum(n for s in summarised for n in s.steps.values()),
        "kept_segments": KEEP_SEGMENTS,
    }}


def analyze(
    inputs: Sequence[str],
    *,
    format: str | None = None,
    config: Config | None = None,
    capacity_gib: float | None = None,
    formats_dirs: Sequence[Path] = (),
    plugins_dirs: Sequence[Path] = (),
    progress: Callable[[Source], None] | None = None,
    chart_metric: str | None = None,
    condense: bool = True,
) -> Report:
    """`chart_metric`: also carry that column's series for the charts (`memlog plot --metric`).
    `plugins_dirs`: format folders whose Python block parsers may run (trusted; catalog.load_specs).
    `condense`: keep long runs of steps as bins while reading (memlog/tables/condense.py); off, every step is
    held (tests compare both)."""
    config = config or Config()
    specs = select_specs(load_specs([*config.formats_dirs, *formats_dirs], plugins_dirs), format)
    dirs = [*config.formats_dirs, *formats_dirs, *plugins_dirs]
    # A forced format is the only one read: the generic reader only guesses where nothing was forced.
    tables, sources = parse_sources(inputs, specs, progress, keep=Keep.judged(chart_metric, condense=condense), wrapper_dirs=dirs,
                                    generic=not format)
    # Undecodable input is not a log whose values were unread: its "keys" are noise.
    garbled = {s.name for s in sources if (s.stats.replaced_bytes + s.stats.nul_bytes) * 10 > max(s.stats.bytes_read, 1)}
    tables.guessed = [g for g in tables.guessed if not (g.weak and g.source in garbled)]
    # A paste of a crash alone (an OOM traceback, a Ray kill) is judged from its events; a log whose
    # memory values the generic reader could not turn into series is reported with why.
    if tables.records.is_empty() and not any(EVENT_KINDS[e.kind].fatal for e in tables.events) and not any(g.weak for g in tables.guessed):
        raise NoRecordsError(nothing_found(sources, specs))
    return judge(tables, sources, config=config, capacity_gib=capacity_gib, chart_metric=chart_metric)


def tables_of(record_frames: list[pl.DataFrame], event_frames: list[pl.DataFrame], guessed: list | None = None,
              summarised: Sequence[Summarised] = ()) -> Tables:
    """The tables of the sources read: each frame one source's compact records or events.
    `record_frames` is emptied as the records are copied out of it (build_records), so that the
    frames are freed; a caller that reads on (memlog/watch/watch.py) passes a copy of its list.
    `summarised`: what the condensers summarised (memlog/tables/condense.py), counted in the tables."""
    records = build_records(record_frames)
    events, dropped = build_events(event_frames, records)
    restarts, more = _restart_events(records)
    more += sum(s.restarts for s in summarised)
    if more:
        dropped["restart"] = dropped.get("restart", 0) + more
    return Tables(records, events + restarts, dropped, guessed or [], list(summarised))


def judge(
    tables: Tables, sources: list[Source], *, config: Config | None = None, capacity_gib: float | None = None,
    chart_metric: str | None = None,
) -> Report:
    """Run every rule over the tables read from `sources`: the Report."""
    config = config or Config()
    ctx = Context(tables, find_capacities(tables.records, tables.events, capacity_gib or config.capacity_gib))
    # Every memory rule asks for the judged series' shapes: compute them up front on all cores
    # (their pairwise-slope work runs in polars, outside the GIL).
    for _ in ordered_map(shape_of, [*ctx.device_series, *ctx.host_series]):
        pass
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
    report = Report(headline(findings), findings, skipped, cov, thresholds)
    report.series, report.rules, report.events = series_views(ctx, chart_metric), rules, tables.events
    return report
