"""Parse: run every loaded format spec over a chunk of lines.

Per chunk: a pre-filter over the raw text for every pattern's literal (so lines that no pattern
could match cost almost nothing; the literals of the formats' record lines first, those of rare
event lines such as crashes only in the lines left), unwrap the survivors, then extract each
pattern's matches. Returns the matched rows; the caller accumulates them across chunks and sources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from memlog.base.columns import ALL_VALUE_COLUMNS, MEMORY_COLUMNS
from memlog.base.events import EVENT_KINDS, ends_a_run_unless_news
from memlog.parse.formats import FormatSpec, LinePattern, all_logger_prefixes
from memlog.parse.multiline import WORKER_KEYS, BlockFeeder, Continuation, Continuations
from memlog.parse.regexes import group_names
from memlog.parse.unwrap import Unwrapper
from memlog.parse.wrappers import MARKED_FIELDS, WRAPPER_FIELDS, WrapperSpec, builtin_wrappers, by_priority, markers
from memlog.tables.records import detached


@dataclass
class Matches:
    """The rows one chunk yielded: record rows (one per matched step line) and event rows."""

    records: list[pl.DataFrame]
    events: list[pl.DataFrame]

    def __post_init__(self) -> None:
        # Callers hold event rows to the end of the input (analyze) or of the run (watch): copied out
        # of the chunk's text, which they would otherwise keep alive (records.detached).
        self.events = [detached(frame) for frame in self.events]


@dataclass
class Scan:
    """What one chunk yields on its own, before the state carried between chunks is applied."""

    lines: pl.DataFrame  # the chunk, with `_row`
    candidates: pl.DataFrame  # lines holding some pattern's literal, still wrapped
    unwrapped: pl.DataFrame | None
    records: list[pl.DataFrame]
    # Event rows in pattern order; a (rows, continuation) pair stands for events whose continuation
    # lines may run into the next chunk, completed in `absorb`.
    events: list[pl.DataFrame | tuple[pl.DataFrame, Continuation]]
    observed: list[tuple]  # (spec, pattern, hits) for `observe`
    markers: pl.DataFrame | None = None  # (line_no, actor) of lines naming who wrote the lines after them
    # By format, the rows its block parser may read near this chunk's start lines, unwrapped and
    # prepared (BlockFeeder.near, .prepare) here, where chunks are scanned in parallel, rather than
    # in `absorb`, where they go one at a time.
    near_starts: dict[str, pl.DataFrame] | None = None
    starts: dict[str, pl.Series] | None = None  # each block parser's start lines (`_row`), by format


# Lines to unwrap (candidates and the rows near block starts) above which chunks are not scanned
# together: a dense log's 4 MiB chunk holds ~20,000.
MAX_ROWS_TOGETHER = 25_000


class ChunkParser:
    """`scan` touches no state, so chunks can be scanned on several threads; `absorb` must then see
    the scans in file order (multi-line blocks and continuation lines run across chunks)."""

    def __init__(
        self,
        specs: Iterable[FormatSpec],
        observe: Callable[[pl.DataFrame, list[tuple]], None] | None = None,
        wrappers: Iterable[WrapperSpec] | None = None,
        values: Iterable[str] | None = None,
    ):
        """`observe(unwrapped, [(spec, pattern, hits), ...])` is called once per chunk with every
        pattern's matched rows (`memlog formats check` counts them and looks for near misses).
        `wrappers`: the launcher and logger wrappers to strip (default: the built-in ones)."""
        self.specs = list(specs)
        self.observe = observe
        # The value columns the caller keeps (records.Keep.values): fields yielding only others are
        # not extracted. Everything when observed (`formats check` counts every field).
        self.values = frozenset(values) if values is not None and observe is None else None
        wrappers = by_priority(builtin_wrappers().values()) if wrappers is None else list(wrappers)
        self.unwrap = Unwrapper(all_logger_prefixes(self.specs), wrappers)
        marker_literals, self.marker = markers(wrappers)
        self.marked_fields = set(group_names(self.marker)) if self.marker else set()
        self.literals = sorted({lit for spec in self.specs for lit in spec.literals} | set(marker_literals))
        self.prefilter = Prefilter.of(self.specs, marker_literals)
        # Which rows each block parser may read, and its `prepare`, for `scan` (no state of theirs is used).
        self.block_probes = [(spec, BlockFeeder(spec.block_parser, spec.name)) for spec in self.specs if spec.block_parser]
        self.start_source()

    def start_source(self) -> None:
        """Multi-line state (open blocks, unfinished continuations) belongs to one source."""
        self.blocks = [(spec, BlockFeeder(spec.block_parser, spec.name)) for spec in self.specs if spec.block_parser]
        self.continuations = Continuations()
        self.named_by_marker: dict[str, object] | None = None  # who the source's last marker line named (MARKED_FIELDS)

    def finish_source(self) -> Matches:
        """The end of a source: blocks still open and events still reading continuation lines."""
        records = [frame for _, feeder in self.blocks if (frame := feeder.finish()) is not None]
        events = _event_frame(self.continuations.finish())
        self.start_source()
        return Matches(records, events)

    def open_since(self) -> int | None:
        """The first line of this source for which a later chunk may still yield a record or an
        event (a block or a continuation still open), or None: everything before it is settled."""
        open_lines = [feeder.open_since() for _, feeder in self.blocks] + [self.continuations.open_since()]
        return min((line for line in open_lines if line is not None), default=None)

    def __call__(self, lines: pl.DataFrame) -> Matches:
        return self.absorb(self.scan(lines))

    def reads_alone(self, texts: Sequence[str]) -> list[bool]:
        """Which of `texts` some record pattern reads as a line on its own (read/hardwrap.py asks:
        a line a format reads is no piece of a longer line cut by a terminal)."""
        lines = (
            pl.DataFrame({"text": list(texts)}, schema={"text": pl.String}).with_row_index("line_no", offset=1).with_columns(pl.col("line_no").cast(pl.Int64))
        )
        read = {n for frame in self.scan(lines).records for n in frame["line_no"].to_list()}
        return [n in read for n in range(1, len(texts) + 1)]

    def scan(self, lines: pl.DataFrame) -> Scan:
        return self.scan_together([lines])[0]

    def scan_together(self, chunks: list[pl.DataFrame]) -> list[Scan]:
        """The scans of consecutive chunks of one source, each the one `scan` gives it, with the
        unwrapping and extraction run once over all their lines that need it: a sparse log's chunk
        holds a few hundred such lines, and its cost is then mostly polars' cost per call."""
        scans: list[Scan] = []
        # Per chunk with candidates: its index, the rows to unwrap, and whether rows near block starts
        # are among them (then `_candidate` marks the candidates).
        wanted: list[tuple[int, pl.DataFrame, bool]] = []
        for lines in chunks:
            lines = self.unwrap.with_line_prefixes(lines).with_row_index("_row")  # multi-line parsing finds the rows after a match by it
            flagged = self._flagged(lines)
            candidates = flagged.filter("_candidate").drop("_candidate")
            if candidates.is_empty():
                scans.append(Scan(lines, candidates, None, [], [], []))
                continue
            starts = {spec.name: self._starts(probe, candidates) for spec, probe in self.block_probes}
            # The first rows too, which a block open at the end of the chunk before may run into: a
            # chunk with blocks of its own likely follows one (without, absorb unwraps them itself).
            near = [probe.near(starts[spec.name]) for spec, probe in self.block_probes if len(starts[spec.name])]
            if not near:
                rows = candidates
            else:  # each line unwrapped once, whether a pattern or a block parser reads it (unwrap is per line)
                rows = flagged.filter(pl.any_horizontal(*near, pl.col("_candidate")))
            scans.append(Scan(lines, candidates, None, [], [], [], starts=starts))
            wanted.append((len(scans) - 1, rows, bool(near)))
        # Chunks with many such lines (a dense log turning up among sparse chunks) in batches no
        # larger than one dense chunk's, so that scanning together never costs more memory.
        batch: list[tuple[int, pl.DataFrame, bool]] = []
        for item in wanted:
            if batch and sum(rows.height for _, rows, _ in batch) + item[1].height > MAX_ROWS_TOGETHER:
                self._extract(scans, batch)
                batch = []
            batch.append(item)
        if batch:
            self._extract(scans, batch)
        return scans

    def _flagged(self, lines: pl.DataFrame) -> pl.DataFrame:
        """`lines` with `_candidate` true on those holding some pattern's literal, and `_rare` on
        those a later search of the pre-filter found one in (Prefilter)."""
        if not self.literals:
            return lines.with_columns(_candidate=pl.lit(False), _rare=pl.lit(False))
        return lines.with_columns(_rare=self.prefilter.rest()).with_columns(_candidate=self.prefilter.first() | pl.col("_rare"))

    def _extract(self, scans: list[Scan], wanted: list[tuple[int, pl.DataFrame, bool]]) -> None:
        """Unwrap the rows `wanted` of the scans they name, and extract every pattern's matches."""
        chunk_of = [i for i, _, _ in wanted]
        near = {i for i, _, has_near in wanted if has_near}
        together = len(wanted) > 1
        # Where some chunk brings rows near block starts, every chunk's rows carry `_candidate`.
        parts = [r.with_columns(_candidate=pl.lit(True)) if near and i not in near else r for i, r, _ in wanted]
        rows = pl.concat([r.with_columns(_chunk=pl.lit(i, dtype=pl.UInt32)) for i, r in zip(chunk_of, parts)]) if together else parts[0]
        unwrapped = self.unwrap(rows)  # the columns unwrap adds come after `_candidate` and `_chunk`
        # Aho-Corasick passes say which literals the chunks hold; a pattern whose literal is absent is
        # skipped instead of scanning the chunks for it. The rare lines' literals are looked for only
        # in the lines the pre-filter found one in.
        present = self.prefilter.present(unwrapped, self.literals)
        unwrapped = unwrapped.drop("_rare")
        for i, part in _by_chunk(unwrapped, chunk_of, together).items():
            scan = scans[i]
            if i in near:
                assert scan.starts is not None  # every chunk in `near` has its starts (scan_together)
                near_rows = part.drop("_candidate")
                scan.near_starts = {spec.name: probe.prepare(near_rows) for spec, probe in self.block_probes if len(scan.starts[spec.name])}
            scan.unwrapped = part.filter("_candidate").drop("_candidate") if near else part
        if near:
            unwrapped = unwrapped.filter("_candidate").drop("_candidate")
        if self.marker is not None:
            named = pl.col("text").str.extract_groups(self.marker)
            marked = unwrapped.select(
                *(["_chunk"] if together else []),
                "line_no",
                *(
                    named.struct.field(f).cast(WRAPPER_FIELDS[f]).alias(f) if f in self.marked_fields else pl.lit(None, WRAPPER_FIELDS[f]).alias(f)
                    for f in MARKED_FIELDS
                ),
            ).filter(pl.any_horizontal(pl.col(f).is_not_null() for f in MARKED_FIELDS))
            for i, part in _by_chunk(marked, chunk_of, together).items():
                scans[i].markers = part if part.height else None
        for spec in self.specs:
            for pattern in spec.records:
                found = pattern.extract(unwrapped, self.values) if pattern.literal in present else None
                for i, hits in _by_chunk(found, chunk_of, together, scans).items():
                    scan = scans[i]
                    scan.observed.append((spec, pattern, hits))
                    if not hits.is_empty():
                        if (unread := _memory_unread(hits, spec, pattern)) is not None:
                            scan.events.append(unread)
                        scan.records.append(
                            hits.drop("text", "_row").with_columns(
                                format=pl.lit(spec.name),
                                kind=pl.lit(pattern.kind),
                                pattern=pl.lit(f"{spec.name}/{pattern.name}"),
                                inherited=_inherits(hits, pattern),
                                ordinal_step=pl.lit(pattern.ordinal_step),
                                interleaved=pl.lit(pattern.interleaved, dtype=pl.Int64),
                                **({"refresh": pl.lit(True)} if pattern.refreshes else {}),
                            )
                        )
            for pattern in spec.events:
                found = pattern.extract(unwrapped) if pattern.literal in present else None
                if found is not None and pattern.after_deeper and found.height:
                    found = self._under_deeper(found, {i: scans[i].lines["text"] for i in chunk_of}, together)
                for i, hits in _by_chunk(found, chunk_of, together, scans).items():
                    scan = scans[i]
                    scan.observed.append((spec, pattern, hits))
                    if hits.is_empty():
                        continue
                    if pattern.continuation is None:
                        level = _logged_at(hits, scan.lines["text"]) if ends_a_run_unless_news(pattern.event) else pl.lit(None, dtype=pl.String)
                        scan.events.append(_event_rows(hits, spec, pattern).with_columns(logged_at=level))
                    else:
                        scan.events.append((_event_rows(hits, spec, pattern).with_columns(hits["_row"], hits["indent"]), pattern.continuation))

    def _under_deeper(self, hits: pl.DataFrame, raws: dict[int, pl.Series], together: bool) -> pl.DataFrame:
        """The hits whose line right above, printed by the same worker, sits deeper than they do: a
        traceback's last frame or code line above its exception, whether or not its header was kept
        (LinePattern.after_deeper). The lines above are unwrapped in one call for the chunks scanned
        together. A chunk's first line has none above it here (a header above it has its own pattern)."""
        hits = hits.with_row_index("_k")
        parts = hits.partition_by("_chunk", as_dict=True) if together else {(next(iter(raws)),): hits}
        above = pl.concat(
            part.select(pl.col("_k").cast(pl.Int64).alias("line_no"), text=raws[key[0]].gather((part["_row"].cast(pl.Int64) - 1).clip(lower_bound=0)))
            for key, part in parts.items()
        )
        above = self.unwrap(above).unique("line_no", keep="first", maintain_order=True)  # (a glued line: its first part)
        labels = list(WORKER_KEYS)
        joined = hits.select(pl.col("_k").cast(pl.Int64), "_row", "indent", *labels).join(
            above.select(pl.col("line_no").alias("_k"), "indent", *labels), on="_k", how="left", suffix="_above", maintain_order="left"
        )
        same = pl.all_horizontal(pl.col(c).eq_missing(pl.col(f"{c}_above")) for c in labels)
        keep = joined.select((pl.col("_row") > 0) & same & (pl.col("indent_above") > pl.col("indent"))).to_series().fill_null(False)
        # A process's last word is its last exception: of a worker's in one chunk, only the last counts.
        last = [*(["_chunk"] if together else []), *labels]
        return hits.filter(keep).unique(last, keep="last", maintain_order=True).drop("_k")

    def absorb(self, scan: Scan) -> Matches:
        """A scanned chunk's matches, with the multi-line records and events it completes."""
        carried = self._multiline(scan)
        if scan.unwrapped is None:
            return carried
        events = []
        for item in scan.events:
            if isinstance(item, pl.DataFrame):
                events.append(item)
            else:
                events += _event_frame(self.continuations.add(*item, scan.lines, self.unwrap, scan.records))
        if self.observe is not None:
            self.observe(scan.unwrapped, scan.observed)
        records, events = _off_crash_lines(scan.records + carried.records, events + carried.events), events + carried.events
        if scan.markers is not None or self.named_by_marker is not None:
            records, events = self._named(records, scan.markers), self._named(events, scan.markers)
        return Matches(records, events)

    def _named(self, frames: list[pl.DataFrame], marked: pl.DataFrame | None) -> list[pl.DataFrame]:
        """Lines of a worker's own log file take who its last marker line named (Ray's
        `:actor_name:` names the actor; a profiler's `[Profiled memory for rank 1]:` the rank); a
        line's own prefix wins. The last one named carries to the next chunk."""
        before = self.named_by_marker or {}
        schema: dict[str, type[pl.DataType]] = {"line_no": pl.Int64, **{f: WRAPPER_FIELDS[f] for f in MARKED_FIELDS}}
        names = pl.DataFrame([{"line_no": 0, **{f: before.get(f) for f in MARKED_FIELDS}}], schema=schema)
        if marked is not None:
            names = pl.concat([names, marked.select(pl.col("line_no").cast(pl.Int64), *MARKED_FIELDS)])
        named = []
        for frame in frames:
            frame = frame.with_columns(pl.lit(None, dtype=WRAPPER_FIELDS[f]).alias(f) for f in MARKED_FIELDS if f not in frame.columns)
            found = frame.select("line_no").with_row_index("_i").sort("line_no").join_asof(names, on="line_no").sort("_i")
            named.append(frame.with_columns(pl.col(f).fill_null(found[f]) for f in MARKED_FIELDS))
        self.named_by_marker = names.row(-1, named=True)
        return named

    @staticmethod
    def _starts(feeder: BlockFeeder, candidates: pl.DataFrame) -> pl.Series:
        return candidates.filter(pl.col("text").str.contains_any(list(feeder.start_literals)))["_row"]

    def _multiline(self, scan: Scan) -> Matches:
        """Block parsers' records from the rows near their start lines (unwrapped by `scan`), and the
        events of earlier chunks whose continuation lines this chunk completes (memlog/parse/multiline.py)."""
        records = []
        for spec, feeder in self.blocks:
            starts = (scan.starts or {}).get(spec.name)
            if starts is None:  # a chunk with no candidate line was not looked at for starts
                starts = self._starts(feeder, scan.candidates)
            frame = feeder.feed(scan.lines, starts, self.unwrap, (scan.near_starts or {}).get(spec.name))
            if frame is not None:
                records.append(frame)
        return Matches(records, _event_frame(self.continuations.resume(scan.lines, self.unwrap)))


# Event kinds whose lines are a crash's or an allocator's words: a size they print (`Tried to
# allocate 2.00 GiB`, `failed to allocate 517.50MiB`) is evidence for the event, never a reading.
CRASH_KINDS = [name for name, kind in EVENT_KINDS.items() if kind.fatal or kind.memory]


def _off_crash_lines(records: list[pl.DataFrame], events: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """The record rows not read from a line that an out-of-memory or crash event read."""
    per_frame = [frame.filter(pl.col("kind").is_in(CRASH_KINDS))["line_no"] for frame in events if frame.height]
    lines = pl.concat(per_frame) if per_frame else None
    if lines is None or lines.is_empty():
        return records
    return [frame.filter(~pl.col("line_no").is_in(lines.implode())) for frame in records]


# A regex engine searches for a few dozen literals at once with SIMD, but slows down past about
# fifty (a sparse chunk's lines: 55 literals 2.0 ms, 77: 8.7 ms, two searches of 40 and 37: 4.3 ms).
LITERALS_PER_SEARCH = 50


@dataclass(frozen=True)
class Prefilter:
    """Which lines a chunk's patterns may match, by their literals, searched in alternations of at
    most LITERALS_PER_SEARCH: first those of the formats whose patterns read records (the lines a
    log is mostly made of), then the rest (events: crashes, OOM messages, rare lines). A literal
    that holds another literal is not searched for: every line holding it holds the other.
    `_rare` marks the lines a later search found something in, where the literals of the first
    need not be looked for in `present`, nor the others elsewhere."""

    searched: tuple[tuple[str, ...], ...]  # the literals of each search, the first one's first

    @staticmethod
    def of(specs: list[FormatSpec], marker_literals: Iterable[str]) -> Prefilter:
        frequent = {lit for spec in specs if spec.records or spec.block_parser for lit in spec.literals} | set(marker_literals)
        everything = frequent | {lit for spec in specs for lit in spec.literals}
        kept = [lit for lit in everything if not any(other != lit and other in lit for other in everything)]
        # The record lines' literals first, then the others by spec, the specs with fewest literals first.
        order = {lit: (0, "", lit) for lit in frequent}
        for spec in sorted(specs, key=lambda s: (len(s.literals), s.name)):
            for lit in sorted(spec.literals):
                order.setdefault(lit, (1, f"{len(spec.literals):05d}{spec.name}", lit))
        ranked = sorted(kept, key=lambda lit: order.get(lit) or (1, "~", lit))
        return Prefilter(tuple(tuple(ranked[i : i + LITERALS_PER_SEARCH]) for i in range(0, len(ranked), LITERALS_PER_SEARCH)))

    @staticmethod
    def _alternation(literals: tuple[str, ...]) -> pl.Expr:
        return pl.col("text").str.contains("|".join(pl.escape_regex(lit) for lit in literals))

    def first(self) -> pl.Expr:
        return self._alternation(self.searched[0]) if self.searched else pl.lit(False)

    def rest(self) -> pl.Expr:
        return pl.any_horizontal(self._alternation(group) for group in self.searched[1:]) if len(self.searched) > 1 else pl.lit(False)

    def present(self, unwrapped: pl.DataFrame, literals: list[str]) -> set[str]:
        """Which of the patterns' `literals` the (unwrapped) candidate lines hold: those a later
        search found (`_rare`) only where it found something."""
        first = set(self.searched[0]) if self.searched else set()
        common = [lit for lit in literals if any(f in lit for f in first)]
        rare = [lit for lit in literals if lit not in common]

        def found(frame: pl.DataFrame, wanted: list[str]) -> set[str]:
            if not wanted or frame.is_empty():
                return set()
            return set(frame.select(pl.col("text").str.extract_many(wanted, overlapping=True).explode().unique()).to_series().drop_nulls().to_list())

        return found(unwrapped, common) | found(unwrapped.filter("_rare"), rare)


def _by_chunk(frame: pl.DataFrame | None, chunks: list[int], together: bool, scans: list[Scan] | None = None) -> dict[int, pl.DataFrame]:
    """Rows of chunks scanned together, by chunk (`_chunk` dropped), every chunk in `chunks`
    included: a chunk without rows gets none (`frame`'s columns), and where `frame` is None (a
    pattern whose literal no chunk holds) each chunk gets its unwrapped lines' empty frame."""
    if frame is None:
        return {i: scans[i].unwrapped.clear() for i in chunks}  # type: ignore[index,union-attr]  # extraction passes its scans, all unwrapped
    if not together:
        return {chunks[0]: frame}
    parts = frame.partition_by("_chunk", as_dict=True, include_key=False, maintain_order=True)
    empty = frame.clear().drop("_chunk")
    return {i: parts.get((i,), empty) for i in chunks}


def _inherits(hits: pl.DataFrame, pattern: LinePattern) -> pl.Expr:
    """Whether a matched line takes its step from another line: an inherit_step pattern's lines
    do, unless the line printed a step of its own (an optional step group)."""
    if pattern.inherit_step and "step" in hits.columns:
        return pl.col("step").is_null()
    return pl.lit(pattern.inherit_step)


# Where an event row came from: its line and who printed it (the unwrapped line's labels).
EVENT_LINE = ("line_no", "text", "node", "actor", "pid", "ip", "rank", "ts")


def _event_rows(hits: pl.DataFrame, spec: FormatSpec, pattern: LinePattern) -> pl.DataFrame:
    """Events keep their own fields as one JSON string column, so events of any shape concatenate."""
    fields = list(dict.fromkeys(pattern.groups + tuple(g for names in pattern.field_groups for g in names)))
    constants = [pl.lit(value).alias(key) for key, value in pattern.detail if key not in fields]
    detail = (
        pl.struct([*(pl.col(f).cast(pl.String) for f in fields), *constants]).struct.json_encode() if fields or constants else pl.lit(None, dtype=pl.String)
    )
    return hits.select(
        *EVENT_LINE,
        detail.alias("detail"),
        format=pl.lit(spec.name),
        kind=pl.lit(pattern.event),
    )


# The level a logger printed a line at, in its prefix or as the line's first word (`WARNING:`):
# a name, or glog's letter before its date (`I1104 10:21:33.102931`).
_LEVEL = r"(?:^|[\s\[|(])(DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)(?:[\s\]|:)]|$)|^([IWEF])\d{4} \d\d:\d\d:\d\d"
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


def _logged_at(hits: pl.DataFrame, raw: pl.Series) -> pl.Series:
    """Per hit, the level its line was logged at (base/events.py: fatal words a logger printed as
    news), read in what stood before the unwrapped text on the raw line and the start of the text."""
    line = raw.gather(hits["_row"])
    head = line.str.head(line.str.len_chars() - hits["text"].str.len_chars() + 24)
    found = head.str.extract_groups(_LEVEL)
    named, letter = found.struct.field("1"), found.struct.field("2").replace_strict(_GLOG_LEVELS, default=None, return_dtype=pl.String)
    return named.fill_null(letter).alias("logged_at")


# A memory field as people print it: a memory word, then a number and whatever unit follows it.
_MEMORY_FIELD = (
    r"(?i)(?:\b|_)(?:mem(?:ory)?|alloc(?:ated)?|reserved|rss)(?:\b|_)[^0-9\n]{0,24}?[0-9][0-9.,]*(?:[eE][-+]?[0-9]+)?"
    r"[ \t]*[^\s,;|]{0,16}"
)
UNREAD_SAMPLES_PER_CHUNK = 3


def _memory_unread(hits: pl.DataFrame, spec: FormatSpec, pattern: LinePattern) -> pl.DataFrame | None:
    """Step lines that print memory their pattern did not read (a unit or layout it does not know),
    as `memory_unread` events: a run with steps and no memory reading can then say why. Only the
    first few such lines per chunk are looked at, so a log without memory costs nothing."""
    read = [c for c in hits.columns if c in MEMORY_COLUMNS]
    values = [c for c in hits.columns if c in ALL_VALUE_COLUMNS and c not in MEMORY_COLUMNS]
    if not values:
        return None  # a pattern that reads no value (a bare `{"step": N`) claims nothing to explain
    unread = hits.filter(pl.any_horizontal(pl.col(values).is_not_null()))
    unread = unread.filter(pl.all_horizontal(pl.col(read).is_null())) if read else unread
    unread = unread.head(UNREAD_SAMPLES_PER_CHUNK).with_columns(fragment=pl.col("text").str.extract(_MEMORY_FIELD, 0)).drop_nulls("fragment")
    if unread.is_empty():
        return None
    return unread.select(
        *EVENT_LINE,
        pl.struct("fragment", pattern=pl.lit(f"{spec.name}/{pattern.name}")).struct.json_encode().alias("detail"),
        format=pl.lit(spec.name),
        kind=pl.lit("memory_unread"),
    )


EVENT_COLUMNS = {
    "line_no": pl.Int64,
    "text": pl.String,
    "node": pl.String,
    "actor": pl.String,
    "pid": pl.Int64,
    "ip": pl.String,
    "rank": pl.Int64,
    "ts": pl.String,
    "detail": pl.String,
    "format": pl.String,
    "kind": pl.String,
}


def _event_frame(rows: list[dict]) -> list[pl.DataFrame]:
    """Events completed in Python (continuations) as a frame shaped like _event_rows' output."""
    return [pl.DataFrame([{k: r[k] for k in EVENT_COLUMNS} for r in rows], schema=EVENT_COLUMNS)] if rows else []


def parse_line(specs: Iterable[FormatSpec], line: str) -> tuple[list[dict], list[dict]]:
    """Records and events that one raw line yields: for spec samples, tests and `formats check`.
    A sample of a multi-line format (a block, an event with continuation lines) holds `\n`s."""
    import json

    specs = list(specs)
    parser = ChunkParser(specs)
    texts = [piece for physical in line.split("\n") for piece in physical.split("\r")]  # as reading.py does
    first = parser(pl.DataFrame({"line_no": list(range(1, len(texts) + 1)), "text": texts}))
    last = parser.finish_source()
    matches = Matches(first.records + last.records, first.events + last.events)
    records = [row for frame in matches.records for row in frame.iter_rows(named=True)]
    events = []
    for frame in matches.events:
        for row in frame.iter_rows(named=True):
            events.append({**(json.loads(row["detail"]) if row["detail"] else {}), "kind": row["kind"], "rank": row["rank"]})
    return records, events


def entry_sample_mismatches(spec: FormatSpec, context: Iterable[FormatSpec] = (), only: str | None = None) -> list[str]:
    """Check the samples a pattern carries itself (`sample:`, the crash vocabulary's entries): each
    must yield an event of the pattern's kind (a record, for a record pattern). `only`: one pattern."""
    problems = []
    specs = [spec, *context]
    for pattern in spec.patterns:
        if only is not None and pattern.name != only:
            continue
        for line in pattern.samples:
            records, events = parse_line(specs, line)
            if not (any(e["kind"] == pattern.event for e in events) if pattern.event else records):
                problems.append(f"{spec.name}/{pattern.name}: its sample yields no {pattern.event or 'record'}: {line[:80]!r}")
    return problems


def sample_mismatches(spec: FormatSpec, context: Iterable[FormatSpec] = ()) -> list[str]:
    """Check a spec's embedded samples: each `record:`/`event:` must come out with those values, and
    a sample marked `nothing: true` (a look-alike line) must yield neither."""
    problems = []
    specs = [spec, *context]
    for i, sample in enumerate(spec.samples):
        line = sample.get("line", "")
        records, events = parse_line(specs, line)
        if sample.get("nothing") and (records or events):
            problems.append(f"{spec.name} sample {i + 1}: expected nothing from {line[:80]!r}, got {len(records)} records and {len(events)} events")
        for key, found in (("record", records), ("event", events)):
            expected = sample.get(key)
            if expected is None:
                continue
            if not found:
                problems.append(f"{spec.name} sample {i + 1}: no {key} from {line[:80]!r}")
                continue
            row = found[0]
            for field_, want in expected.items():
                got = row.get(field_)
                if isinstance(want, float) and isinstance(got, (int, float)) and got is not None:
                    # `.nan` in a sample means the line printed a NaN (a NaN loss is read, not dropped).
                    ok = abs(got - want) <= 1e-9 * max(1.0, abs(want)) or (want != want and got != got)
                else:
                    ok = got == want or (want is not None and str(got) == str(want))
                if not ok:
                    problems.append(f"{spec.name} sample {i + 1}: {field_} = {got!r}, expected {want!r}")
    return problems
