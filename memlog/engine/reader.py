"""The source reader: one source read incrementally, its pieces in and its records and events out.

Every command reads through it (memlog/engine/plan.py says with what). `analyze`, `series`,
`compare`, `scan` and `formats check` read each input once, whole (read_sources: the chunks of all
sources scanned on every core, absorbed in file order); `watch` feeds a SourceReader the pieces it
reads from a growing file, poll after poll. Either way a source's lines meet the same parser, the
same condensing and the same generic reader:

- each chunk is scanned (ChunkParser.scan: stateless, on any thread), then absorbed in file order
  (multi-line blocks and continuations run across chunks);
- its records go to the source's sink: condensed as they come (memlog/tables/condense.py) when the
  plan keeps them condensed, else kept as read;
- while no format spec reads a value in the source, the generic reader (memlog/parse/generic)
  reads it too, and steps aside for good the first time a spec does (what it read is dropped).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import groupby

import polars as pl

from memlog.base.errors import InputError, NoRecordsError
from memlog.base.events import EVENT_KINDS, Event, build_events
from memlog.base.limits import MAX_EVENTS_PER_KIND
from memlog.base.parallel import ordered_map
from memlog.engine.plan import ReadingPlan
from memlog.parse.chunks import ChunkParser, Matches, Scan
from memlog.parse.generic import Guessed, SourceGuesser
from memlog.parse.stores import is_event_file, is_mlflow_input, mlflow_runs, read_event_file, read_mlflow_run
from memlog.read.inputs import expand, is_url
from memlog.read.source import Piece, Source, read_pieces, to_frame
from memlog.tables.condense import Condenser, Summarised
from memlog.tables.records import KeepEvery, RecordSink, build_records, compact_records, read_values, source_frame
from memlog.tables.segments import run_starts, training
from memlog.tables.streams import repeated_sources
from memlog.tables.tables import Tables

# A log whose chunks hold few candidate lines (a step line per ~50) is scanned this many chunks at a
# time (ChunkParser.scan_together): its per-chunk cost is then mostly polars' cost per call.
# Sparse 1 GiB: 1 chunk 6.1 s and 186 MiB, 2 chunks 5.0 s and 212 MiB, 3: 4.6 s, 234 MiB; 4: 4.1 s, 265 MiB.
SPARSE_CANDIDATES = 0.05  # candidate lines per line, below which a log counts as sparse
SPARSE_TOGETHER = 4
KEPT_FRAMES = 16  # a reader's kept record frames are joined into one past this many (watch: one per poll)


# Ray's own logs in a session's logs/ folder (the raylet, the GCS, the dashboard, the monitors, the
# C++ core workers): their numbers are Ray's (the node's used memory fraction, object store sizes),
# never a training step's, so the generic reader must not guess steps from them; their events (the
# memory monitor killing a worker) are read as from any log.
RAY_SYSTEM_LOG = re.compile(
    r"(?:^|/)(?:raylet|gcs_server|monitor|log_monitor|dashboard[^/]*|runtime_env[^/]*|python-core-(?:driver|worker)-[^/]*|io_worker-[^/]*)\.(?:out|err|log)(?:\.\d+)?$"
)


class SourceReader:
    """One source's reading state: its parser's place in it (shared with the sources read before
    it, one at a time), its sink, its generic reader, and what it has yielded so far."""

    def __init__(self, plan: ReadingPlan, source: Source, parser: ChunkParser | None = None, batch_rows: int = 0) -> None:
        """`batch_rows`: records gathered from small pieces (watch's polls) before the sink takes them,
        so that its batches stay as large as a whole read's."""
        self.plan, self.source, self.batch_rows = plan, source, batch_rows
        self.parser = parser or plan.parser()
        self.batch: list[pl.DataFrame] = []  # records not yet handed to the sink (batch_rows)
        self.batch_events: list[pl.DataFrame] = []
        self.sink: RecordSink = Condenser(plan.keep.per_step) if plan.keep.condense else KeepEvery()
        self.kept: list[pl.DataFrame] = []  # record frames the sink returned
        self.events: list[pl.DataFrame] = []  # event rows, as the parser gave them
        # What the guess reads is condensed as it comes, like a spec's records, and dropped if a spec
        # claims the source after all.
        # A Ray system log gives events only (RAY_SYSTEM_LOG): no records, and nothing to guess.
        self.events_only = RAY_SYSTEM_LOG.search(source.spec) is not None
        self.guesser: SourceGuesser | None = (
            SourceGuesser(source.name, list(plan.specs), list(plan.wrappers)) if plan.generic and not self.events_only else None
        )
        self.guessed_sink: RecordSink = Condenser(plan.keep.per_step) if plan.keep.condense else KeepEvery()
        self.guessed_records: list[pl.DataFrame] = []
        self.guessed_any = False
        self.guessed: Guessed | None = None
        self.finished = False
        # Formats whose readings leave the source to the guess all the same (FormatSpec.claims_source).
        self.aside = frozenset(spec.name for spec in plan.specs if not spec.claims_source)

    # -- reading --------------------------------------------------------------------------------

    def absorb(self, piece: Piece, scanned: Scan) -> None:
        """One scanned piece, in file order (its stats were counted by the caller)."""
        matches = self.parser.absorb(scanned)  # multi-line state runs across chunks: in file order
        self._take(matches)
        if read_values(self._claiming(matches.records)):
            self.guesser, self.guessed_records = None, []  # a spec reads this source: the guess steps aside
        if self.guesser is not None:
            skip = {n for frame in matches.events for n in frame["line_no"].to_list()}
            if found := self.guesser.feed(scanned.lines.drop("_row"), skip):
                self._guessed(found)

    def read(self, pieces: Iterable[Piece], workers: int | None = 1, progress: Callable[[Source], None] | None = None) -> bool:
        """Scan `pieces` (on `workers` threads; None: all cores) and absorb them in file order;
        True when there was any."""
        got = False
        for piece, scanned in ordered_map(lambda piece: (piece, self.parser.scan(to_frame(piece))), pieces, workers):
            got = True
            self.source.stats.add(piece.stats)
            self.absorb(piece, scanned)
            if progress is not None:
                progress(self.source)
        return got

    def end_of_file(self) -> None:
        """What a file held has all been read (it was replaced or cut, watch reads on from the new
        one's start): the blocks still open end here. The sink and the guess go on; a JSON document
        (trainer_state.json, rewritten whole at each save) is replaced by the new one."""
        self._take(self.parser.finish_source())
        if self.guesser is not None:
            self.guesser.file_replaced()

    def finish(self) -> None:
        """The end of the source: blocks still open, the guess made on what was held. The parser is
        then ready for the next source."""
        self._flush()
        self.kept += self.sink.finish(self.parser.open_since())  # (before the blocks still open are closed)
        last = self.parser.finish_source()
        if last.records:
            self.kept.append(compact_records(self.source.name, last.records, self.plan.keep, self.source.identity))
            if read_values(self._claiming(last.records)):
                self.guesser = None
        self.events += last.events
        if self.guesser is not None:
            self.guesser.claimed({n for frame in last.events for n in frame["line_no"].to_list()})
            found, self.guessed = self.guesser.finish()
            if found:
                self._guessed(found)
            self.kept = self._spec_frames(self.kept) + self.guessed_records + self.guessed_sink.finish(None)
            self.guessed_records = []
            self.guesser = None
        self.finished = True

    def _claiming(self, frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
        """The record frames of formats that claim the source (a frame holds one format's rows)."""
        if not self.aside:
            return frames
        return [f for f in frames if "format" not in f.columns or f.is_empty() or f["format"][0] not in self.aside]

    def _take(self, matches: Matches) -> None:
        rows = compact_records(self.source.name, matches.records, self.plan.keep, self.source.identity) if matches.records else None
        self.events += matches.events
        if self.batch_rows:
            self.batch += [rows] if rows is not None else []
            self.batch_events += matches.events
            if sum(f.height for f in self.batch) >= self.batch_rows:
                self._flush()
            return
        # The sink is also told of a chunk's events when it has no records: they cut condensed runs.
        self.kept += self.sink.add(rows, matches.events, self.parser.open_since())

    def _flush(self) -> None:
        """The gathered records to the sink as one chunk (batch_rows)."""
        if not self.batch and not self.batch_events:
            return
        rows = pl.concat(self.batch, how="diagonal_relaxed") if self.batch else None
        self.kept += self.sink.add(rows, self.batch_events, self.parser.open_since())
        self.batch, self.batch_events = [], []
        if len(self.kept) > KEPT_FRAMES:
            self.kept = [pl.concat(self.kept, how="diagonal_relaxed").rechunk()]

    def _guessed(self, found: list[pl.DataFrame]) -> None:
        frame = compact_records(self.source.name, found, self.plan.keep, self.source.identity)
        self.guessed_records += self.guessed_sink.add(frame, [], None)
        self.guessed_any = True

    # -- what it yielded ------------------------------------------------------------------------

    def records(self) -> pl.DataFrame | None:
        """Every record read so far, one frame (condensed where the sink has binned); none from a
        source that gives events only."""
        if self.events_only:
            return None
        read = [*self.kept, *self.sink.held(), *self.batch]
        pending = self._pending()[0]
        frames = [*(self._spec_frames(read, bool(pending)) if self.guesser is not None else read), *self.guessed_records, *self.guessed_sink.held(), *pending]
        return pl.concat(frames, how="diagonal_relaxed") if frames else None

    def _pending(self) -> tuple[list[pl.DataFrame], Guessed | None]:
        """What the generic reader would read so far where it has not decided yet (watch judges a
        source before its end): a JSON document as it stands, or the lines held read through a guess
        on the sample so far. Neither consumes anything: the decision is the whole read's."""
        if self.guesser is None:
            return [], None
        if self.guesser.structured is not None:
            found, said = self.guesser.structured.finish()
        else:
            found, said = self.guesser.provisional()
        return ([compact_records(self.source.name, found, self.plan.keep, self.source.identity)] if found else []), said

    def _spec_frames(self, frames: list[pl.DataFrame], guessed: bool = False) -> list[pl.DataFrame]:
        """Where the guess read values, a spec's matches that read none stand for nothing it did not
        read (an EasyR1 `step:` key in a JSON line the guess reads whole)."""
        return [f for f in frames if read_values([f])] if self.guessed_any or guessed else frames

    def event_frame(self) -> pl.DataFrame | None:
        return source_frame(self.source.name, self.events, self.source.identity) if self.events else None

    def guess_said(self) -> Guessed | None:
        """What the generic reader says of the source so far (its guess, once made)."""
        if self.guessed is not None or self.guesser is None:
            return self.guessed
        return self.guesser.described() or self._pending()[1]

    def summarised(self) -> list[Summarised]:
        return [s for sink in (self.sink, self.guessed_sink) if isinstance(sink, Condenser) and (s := sink.summarised)]


def scanned_chunks(sources: Sequence[Source], parser: ChunkParser, chunk_bytes: int, *, together: bool = True) -> Iterator[tuple[Source, Piece, Scan]]:
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
            for piece in read_pieces(source, chunk_bytes, parser.reads_alone):
                group.append(piece)
                if len(group) >= (SPARSE_TOGETHER if together and density[0] < SPARSE_CANDIDATES else 1):
                    yield source, group
                    group = []
            if group:
                yield source, group

    for scanned in ordered_map(scan, groups()):
        yield from scanned


class StoreReader:
    """A metrics store's run (a TensorBoard event file, an MLflow run: memlog/parse/stores/), read
    whole: the records a SourceReader yields for a log, from no lines. `read`: how the run is read
    (default: the source is an event file)."""

    def __init__(self, plan: ReadingPlan, source: Source, read: Callable[[], tuple] | None = None) -> None:
        if read is None:
            if is_url(source.spec) or source.spec == "-":
                raise InputError(f"{source.spec}: a TensorBoard event file is read from a local path")
            read = lambda: read_event_file(source.spec, source.name)
        frames, self.guessed, damage, points = read()
        self.source = source
        size = os.path.getsize(source.spec) if os.path.isfile(source.spec) else 0
        source.stats.bytes_read, source.stats.lines, source.stats.damaged = size, points, damage
        self.frame = compact_records(source.name, frames, plan.keep, source.identity) if frames else None

    finished = True  # read whole when made (watch makes another when the file grows)

    def records(self) -> pl.DataFrame | None:
        return self.frame

    def event_frame(self) -> pl.DataFrame | None:
        return None

    def summarised(self) -> list[Summarised]:
        return []

    def guess_said(self) -> Guessed | None:
        return self.guessed

    def finish(self) -> None:
        pass


def read_sources(plan: ReadingPlan, inputs: Sequence[str], progress: Callable[[Source], None] | None = None) -> tuple[Tables, list[Source]]:
    """Every input read whole through `plan`: the tables, and the sources they came from.
    `progress(source)` is called after each chunk (a few MB), so it costs nothing per line."""
    runs = [run for spec in inputs if is_mlflow_input(spec) for run in mlflow_runs(spec)]
    sources = expand([spec for spec in inputs if not is_mlflow_input(spec)])
    stores = {id(s): StoreReader(plan, s) for s in sources if is_event_file(s.spec)}
    for run in runs:
        source = Source(run.name)
        stores[id(source)] = StoreReader(plan, source, functools.partial(read_mlflow_run, run))
        sources.append(source)
    parser = plan.parser()
    readers: list[SourceReader | StoreReader] = []
    logs = [s for s in sources if id(s) not in stores]
    for _, chunks in groupby(scanned_chunks(logs, parser, plan.chunk_bytes, together=plan.observe is None), key=lambda chunk: id(chunk[0])):
        chunks = iter(chunks)
        first = next(chunks)
        reader = SourceReader(plan, first[0], parser)
        for source, piece, scanned in itertools.chain([first], chunks):
            source.stats.add(piece.stats)
            reader.absorb(piece, scanned)
            if progress is not None:
                progress(source)
        reader.finish()
        readers.append(reader)
    return tables_of([*readers, *stores.values()], per_step=plan.keep.per_step), sources


def tables_of(readers: Iterable[SourceReader | StoreReader], *, per_step: bool = False) -> Tables:
    """The tables of the sources read: their records, as one table (records.build_records, which
    frees the frames as it copies them), and their events. `per_step`: one record per step
    (records.step_rows)."""
    record_frames, event_frames, guessed, summarised = [], [], [], []
    for reader in readers:
        frame = reader.records()
        if frame is not None:
            record_frames.append(frame)
        if (events := reader.event_frame()) is not None:
            event_frames.append(events)
        if reader.guessed is not None:
            guessed.append(reader.guessed)
        summarised += reader.summarised()
    return tables_from(record_frames, event_frames, guessed, summarised, per_step=per_step)


def tables_from(
    record_frames: list[pl.DataFrame],
    event_frames: list[pl.DataFrame],
    guessed: list | None = None,
    summarised: Sequence[Summarised] = (),
    *,
    per_step: bool = False,
) -> Tables:
    """The tables of record frames (each one source's compact records, emptied as they are copied
    out: records.build_records) and event frames. `summarised`: what the condensers summarised;
    `per_step`: one record per step, as the rules judge them (records.step_rows)."""
    event_frames, starts = run_starts(event_frames)
    records = build_records(record_frames, per_step=per_step, run_starts=starts)
    # A console beside the per-rank files it tees is read once, from those (tables/streams.py).
    repeated = repeated_sources(records)
    if repeated:
        records = records.filter(~pl.col("source").cast(pl.String).is_in(list(repeated)))
    events, dropped = build_events(event_frames, records)
    restarts, more = _restart_events(records)
    more += sum(s.restarts for s in summarised)
    if more:
        dropped["restart"] = dropped.get("restart", 0) + more
    return Tables(records, events + restarts, dropped, guessed or [], list(summarised), repeated)


def _restart_events(records: pl.DataFrame) -> tuple[list[Event], int]:
    """A new segment (a step counter going back, or a run started again: tables/segments.py) is an
    event of its own; beyond MAX_EVENTS_PER_KIND (a restart loop) they are only counted, as other
    events are. Returns the events and how many more there were."""
    if records.is_empty():
        return [], 0
    group = ["source", "worker", "kind"]
    segments = (
        training(records)
        .group_by(*group, "segment")
        .agg(pl.col("line_no").min(), pl.col("step").min(), pl.col("step").max().alias("_last"), pl.col("rank").first(), pl.col("format").first())
        .sort(*group, "segment")
    )
    starts = segments.with_columns(_before=pl.col("_last").shift(1).over(group)).filter(pl.col("segment") > 0)

    def said(step: int, before: int | None) -> str:
        if before is not None and step > before:  # a run started again whose steps go on
            return f"a new run starts at step {step}, after step {before}"
        return f"step counter restarts at {step}"

    events = [
        Event("restart", r["source"], r["line_no"], r["worker"], r["rank"], r["format"], said(r["step"], r["_before"]))
        for r in starts.sort("source", "line_no").head(MAX_EVENTS_PER_KIND).iter_rows(named=True)
    ]
    return events, starts.height - len(events)


def judgeable(tables: Tables) -> bool:
    """Whether the tables hold anything to judge: a record, a fatal event (a paste of a crash alone),
    or a guess that read values it could not turn into series (reported with why)."""
    return not tables.records.is_empty() or any(EVENT_KINDS[e.kind].fatal for e in tables.events) or any(g.weak for g in tables.guessed)


def nothing_found(sources: list[Source], plan: ReadingPlan) -> NoRecordsError:
    """Why no record came out, in one line naming the input: damage, emptiness, binary, or no match."""
    damaged = [f"{s.name}: {s.stats.damaged}" for s in sources if s.stats.damaged]
    if damaged:
        return NoRecordsError("; ".join(damaged) + "; no training-step records before the damage")
    names = ", ".join(s.name for s in sources)
    read = sum(s.stats.bytes_read for s in sources)
    if read == 0:
        return NoRecordsError(f"no training-step records found in {names}: {'it is' if len(sources) == 1 else 'they are'} empty")
    if sum(s.stats.nul_bytes for s in sources) == read:
        return NoRecordsError(f"no training-step records found in {names}: all {read:,} bytes are NUL (a zeroed or preallocated file, not a log)")
    garbage = sum(s.stats.replaced_bytes + s.stats.nul_bytes for s in sources)
    if garbage * 10 > read:
        return NoRecordsError(f"no training-step records found in {names}: not a text log ({100 * garbage // read}% of the bytes are undecodable or NUL)")
    tried = ", ".join(s.name for s in plan.specs if s.records) or "only event formats: " + ", ".join(s.name for s in plan.specs)
    lines = sum(s.stats.lines for s in sources)
    return NoRecordsError(f"no training-step records found in {names}: none of {lines:,} lines matches a known format (tried: {tried})")
