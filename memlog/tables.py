"""Tables: the parsed matches of all sources as one `records` frame and a list of events.

`records` has one row per (source, worker, kind, segment, step) with the canonical columns of
memlog/columns.py, ordered by source and then by line: each worker's (segment, step) ascend, and
whoever needs rows grouped by worker groups them (a sort would copy millions of rows). A worker is
the process that printed the line: a torchrun rank, a Ray actor (name, pid, ip), or the file
itself. A step counter that goes back (resume from checkpoint, or a restarted job appending to the
same file) starts a new segment, so series are never joined across a restart. For `analyze`, a
row may also stand for a bin of `_steps` consecutive steps (memlog/condense.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from memlog.columns import ALL_VALUE_COLUMNS, JUDGED_COLUMNS
from memlog.events import Event, typed_detail

RANK_IN_FILENAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d+)", re.IGNORECASE)
EVENT_TEXT_CHARS = 300  # an event keeps the start of its line as evidence; OOM lines are long
MAX_EVENTS_PER_KIND = 1000  # evidence, not an archive: beyond this, events are only counted
# Text columns with a few distinct values repeated on every record: categorical while building.
LABEL_COLUMNS = ("source", "worker", "kind", "format", "node", "actor", "ip")
# Who printed a line beyond its rank: the node (a launcher's host label), Ray's actor name, pid and
# node IP, absent from most logs.
OPTIONAL_LABELS = {"node": pl.Categorical, "actor": pl.Categorical, "pid": pl.Int64, "ip": pl.Categorical}


@dataclass
class Tables:
    records: pl.DataFrame
    events: list[Event]
    events_dropped: dict[str, int]

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    @property
    def step_count(self) -> int:
        """Steps read: records, counting a condensed one as the steps it stands for."""
        return int(self.records.select(steps_read(self.records)).item())

    @property
    def formats(self) -> dict[str, int]:
        """Steps read per format."""
        if self.records.is_empty():
            return {}
        counts = self.records.group_by("format").agg(steps_read(self.records).alias("len")).sort("format")
        return dict(zip(counts["format"].to_list(), counts["len"].to_list()))


@dataclass(frozen=True)
class Keep:
    """What a caller reads of each record. `memlog series` prints every column and the logger's own
    timestamps; `analyze` reads only the columns it judges and the timestamps as seconds, so the
    millions of records of a dense log stay small (see compact_records)."""

    values: tuple[str, ...] = ALL_VALUE_COLUMNS
    ts_text: bool = True
    condense: bool = False  # long runs of steps kept as bins (memlog/condense.py)

    @classmethod
    def judged(cls, *extra: str | None) -> Keep:
        """What `analyze` keeps: the judged columns, plus `extra` ones (a charted metric), with long
        runs of steps condensed."""
        return cls(tuple(dict.fromkeys([*JUDGED_COLUMNS, *(c for c in extra if c)])), ts_text=False, condense=True)


def steps_read(records: pl.DataFrame) -> pl.Expr:
    """How many steps rows stand for (in a select or per group): their count, or the sum of their
    `_steps` once records were condensed (memlog/condense.py)."""
    return pl.col("_steps").sum() if "_steps" in records.columns else pl.len()


def worker_expr(columns: list[str]) -> pl.Expr:
    """A readable name for the process that printed a line, unique per process: its node (when a
    launcher names one) and its rank, else its Ray actor (name, pid, node IP), else its pid."""
    col = {c: pl.col(c) if c in columns else pl.lit(None, dtype=pl.String) for c in ("node", "actor", "ip")}
    pid = pl.col("pid").cast(pl.String) if "pid" in columns else pl.lit(None, dtype=pl.String)
    actor = col["actor"] + pl.when(pid.is_not_null()).then(pl.lit(" pid=") + pid).otherwise(pl.lit(""))
    actor = actor + pl.when(col["ip"].is_not_null()).then(pl.lit(", ip=") + col["ip"]).otherwise(pl.lit(""))
    who = (
        pl.when(pl.col("rank").is_not_null())
        .then(pl.lit("rank") + pl.col("rank").cast(pl.String))
        .when(col["actor"].is_not_null())
        .then(actor)
        .when(pid.is_not_null())
        .then(pl.lit("pid=") + pid)
        .otherwise(pl.lit("main"))
    )
    return pl.when(col["node"].is_not_null()).then(col["node"] + pl.lit("/") + who).otherwise(who).alias("worker")


def group_key(frame: pl.DataFrame, columns: list[str]) -> pl.Expr:
    """One key for grouping `frame`'s rows by `columns`: packed_key, else a struct of them."""
    packed = packed_key(frame, columns)
    return pl.struct(columns) if packed is None else packed


def packed_key(frame: pl.DataFrame, columns: list[str]) -> pl.Expr | None:
    """An integer packing the codes of `columns` (categorical or non-negative integers), or None
    when they do not fit in 64 bits. polars row-encodes a key of several columns, which for a window
    over 4.6 M rows cost ~300 MiB at once; one integer key costs ~35 MiB. The expression is valid
    for any frame whose codes all occur in `frame` (the widths are `frame`'s)."""

    def codable(column: pl.Series) -> bool:
        return not column.null_count() and (column.dtype == pl.Categorical or (column.dtype.is_integer() and (column.min() or 0) >= 0))

    if not all(codable(frame[c]) for c in columns):
        return None
    codes = [pl.col(c).to_physical().cast(pl.UInt64) for c in columns]
    widths = [int(v or 0).bit_length() for v in frame.select(code.max() for code in codes).row(0)]
    if sum(widths) > 64:
        return None
    key = codes[0]
    for code, width in zip(codes[1:], widths[1:]):
        key = key * (1 << width) + code
    return key


def with_seconds(records: pl.DataFrame) -> pl.DataFrame:
    """`records` with a `_seconds` column: every timestamp parsed once, for all series built from it
    (`analyze` parses them chunk by chunk while reading: tables.compact_records)."""
    if "_seconds" in records.columns:
        return records
    return records.with_columns(_seconds=_seconds(records))


def _seconds(rows: pl.DataFrame) -> pl.Series:
    """Logger timestamps (`2025-03-04 17:22:10,931`, ISO `T`, `.` or `,` fractions) as seconds."""
    if "ts" not in rows.columns or rows["ts"].dtype != pl.String:
        return pl.Series([None] * rows.height, dtype=pl.Float64)
    parsed = (
        pl.col("ts").str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
    )
    return rows.select((parsed.dt.epoch("ms") / 1000).alias("s"))["s"]


def _rank_from_filename(source: str) -> int | None:
    match = RANK_IN_FILENAME.search(source.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def source_frame(source: str, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Concatenate one source's matches and name their workers."""
    frame = pl.concat(frames, how="diagonal_relaxed").with_columns(source=pl.lit(source))
    file_rank = _rank_from_filename(source)
    if file_rank is not None:
        frame = frame.with_columns(pl.col("rank").fill_null(file_rank))
    return frame.with_columns(worker_expr(frame.columns))


def compact_records(source: str, frames: list[pl.DataFrame], keep: Keep) -> pl.DataFrame:
    """One chunk's record rows as they are kept until the end of the input: workers named, labels
    categorical, only the value columns the caller reads, timestamps as seconds unless it prints
    them. Done per chunk, so the rows never exist in their wide, string-labelled form all at once."""
    frame = source_frame(source, frames)
    # A column no row of the chunk fills costs as much as a full one: left out (concatenation
    # fills it with nulls again only where another chunk has it).
    empty = [c for c in (*ALL_VALUE_COLUMNS, *OPTIONAL_LABELS, "repeated") if c in frame.columns and frame[c].null_count() == frame.height]
    frame = frame.select(pl.exclude(empty, *(c for c in ALL_VALUE_COLUMNS if c not in keep.values)))
    if not keep.ts_text:
        frame = with_seconds(frame).drop("ts", strict=False)
    labels = [c for c in LABEL_COLUMNS if c in frame.columns and frame[c].dtype == pl.String]
    return frame.with_columns(pl.col(labels).cast(pl.Categorical))


def build_records(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Order, segment at restarts, and merge lines that describe the same step. Each frame holds
    one source's rows (source_frame, compact_records); `frames` is emptied (_in_line_order)."""
    if not frames:
        return pl.DataFrame()
    # Labels are categorical (compact_records made them so; frames built otherwise are cast); the
    # value columns the log lacks join as nulls only at the end (constant columns, not carried
    # through the merge).
    frame = _in_line_order(frames)
    labels = [c for c in LABEL_COLUMNS if c in frame.columns]
    frame = frame.with_columns(pl.col(labels).cast(pl.Categorical))
    if "step" not in frame.columns:
        frame = frame.with_columns(step=pl.lit(None, dtype=pl.Int64))
    if frame["step"].null_count():
        frame = _fill_steps(frame)
    keys = ["source", "worker", "kind"]
    worker_kind = group_key(frame, keys)
    frame = frame.with_columns(
        segment=(pl.col("step") < pl.col("step").shift(1)).fill_null(False).cum_sum().over(worker_kind).cast(pl.Int64)
    )
    value_cols = [c for c in ALL_VALUE_COLUMNS if c in frame.columns]
    frame = frame.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in OPTIONAL_LABELS.items() if c not in frame.columns)
    firsts = [c for c in ("rank", "node", "actor", "pid", "ip", "format") if c in frame.columns]
    timed = "ts" if "ts" in frame.columns else "_seconds"  # the logger's text, or as seconds (Keep)
    repeated = pl.col("repeated") if "repeated" in frame.columns else pl.lit(None, dtype=pl.Int64)
    # Condensed records (memlog/condense.py) say how many steps they stand for; others stand for one.
    steps = [pl.col("_steps").fill_null(1)] if "_steps" in frame.columns else []
    # In line order a worker's (segment, step) never decreases, so lines of the same step are
    # neighbours: only then is there anything to merge (a dense log has one line per step, and
    # grouping millions of single rows cost a copy of the table).
    if frame.select((pl.col("step") == pl.col("step").shift(1)).over(worker_kind).any()).item():
        frame = frame.group_by(group_key(frame, [*keys, "segment", "step"]).alias("_step"), maintain_order=True).agg(
            *(pl.col(c).first() for c in [*keys, "segment", "step"]),
            pl.col("line_no").first(),
            pl.col(timed).drop_nulls().first(),
            *(pl.col(c).first() for c in firsts),
            # Several lines can describe one step (a step line and a memory line; or the same line
            # from ranks a launcher did not label): keep each value's last reading.
            *(pl.col(c).drop_nulls().last() for c in value_cols),
            repeated=repeated.max(),
            *(s.max() for s in steps),  # a step's other lines are never binned: they stand for one
        )
    else:
        frame = frame.select(*keys, "segment", "step", "line_no", timed, *firsts, *value_cols, repeated.alias("repeated"), *steps)
    absent = [pl.lit(None, dtype=pl.Float64).alias(c) for c in ALL_VALUE_COLUMNS if c not in value_cols]
    return frame.with_columns(absent).select(
        *keys, "segment", "step", "line_no", timed, *firsts, *ALL_VALUE_COLUMNS, "repeated", *(["_steps"] if steps else [])
    )


def _in_line_order(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The rows of all sources as sort("source", "line_no") orders them, in one contiguous frame
    (polars would otherwise copy the many chunks at every later step), without sorting a source whose
    rows already are in line order (any log without multi-line blocks). Empties `frames`, so that
    the chunks are freed once the copy is made."""
    by_source: dict[str, list[pl.DataFrame]] = {}
    for frame in frames:
        by_source.setdefault(frame["source"][0], []).append(frame)
    frames.clear()
    ordered = []
    for source in sorted(by_source):
        frame = pl.concat(by_source[source], how="diagonal_relaxed")
        ordered.append(frame if frame["line_no"].is_sorted() else frame.sort("line_no", maintain_order=True))
    return pl.concat(ordered, how="diagonal_relaxed").rechunk()


def _fill_steps(frame: pl.DataFrame) -> pl.DataFrame:
    """Give every line a step, and drop the lines that cannot have one."""
    worker = group_key(frame, ["source", "worker"])
    if "ordinal_step" in frame.columns:
        # A worker that prints no step at all numbers its ordinal lines 1, 2, 3... in file order
        # (HF Trainer's loss dicts when DeepSpeed's step lines are silent); its other lines then
        # inherit from those.
        ordinal = pl.col("ordinal_step").fill_null(False)
        stepless = pl.col("step").is_null().all().over(worker)
        frame = frame.with_columns(
            step=pl.when(stepless & ordinal).then(ordinal.cast(pl.Int64).cum_sum().over(worker)).otherwise(pl.col("step"))
        )
    # Lines without a step of their own belong to the step the worker logged last (or, before
    # its first step line, to the first one).
    # A worker that never logs a step itself (a Ray WorkerDict, whose steps the driver-side
    # TaskRunner prints) takes the step the source logged last, from any worker.
    own = pl.col("step").forward_fill().backward_fill().over(worker)
    shared = pl.col("step").forward_fill().backward_fill().over("source")
    frame = frame.with_columns(pl.coalesce(own, shared).alias("step"))
    return frame.filter(pl.col("step").is_not_null())


def build_events(frames: list[pl.DataFrame], records: pl.DataFrame) -> tuple[list[Event], dict[str, int]]:
    if not frames:
        return [], {}
    frame = pl.concat(frames, how="diagonal_relaxed").sort("source", "line_no")
    frame = frame.with_columns(_after_step=_last_steps_before(frame, records))
    by_pid = _workers_by_pid(records, frame)
    events: list[Event] = []
    dropped: dict[str, int] = {}
    kept: dict[str, int] = {}
    for row in frame.iter_rows(named=True):
        kind = row["kind"]
        if kept.get(kind, 0) >= MAX_EVENTS_PER_KIND:
            dropped[kind] = dropped.get(kind, 0) + 1
            continue
        kept[kind] = kept.get(kind, 0) + 1
        detail = typed_detail(kind, json.loads(row["detail"]) if row["detail"] else {})
        worker = _concerned_worker(row, detail, by_pid)
        events.append(
            Event(
                kind=kind,
                source=row["source"],
                line_no=row["line_no"],
                worker=worker,
                rank=row["rank"],
                format=row["format"],
                text=row["text"][:EVENT_TEXT_CHARS],
                ts=row["ts"],
                detail={k: v for k, v in detail.items() if v is not None},
                # The step context is the printer's (the raylet, the driver: any worker of the source).
                after_step=row["_after_step"],
            )
        )
    return events, dropped


def _workers_by_pid(records: pl.DataFrame, events: pl.DataFrame) -> dict[tuple[str, int], str]:
    """(source, pid) -> the worker label its Ray-prefixed lines carry. A pid under several labels (the
    same pid on two nodes) takes the records' first label in sorted order, else the events' first
    in line order."""
    table: dict[tuple[str, int], str] = {}
    for frame, order in ((records, ["source", "pid", "worker"]), (events, [])):
        if frame.is_empty() or "pid" not in frame.columns:
            continue
        rows = frame.lazy().filter(pl.col("pid").is_not_null()).select("source", "pid", "worker").unique(maintain_order=True)
        for source, pid, worker in (rows.sort(order) if order else rows).collect().iter_rows():
            table.setdefault((source, pid), worker)
    return table


def _concerned_worker(row: dict[str, Any], detail: dict[str, Any], by_pid: dict[tuple[str, int], str]) -> str:
    """An event about another process belongs to that process: Ray's memory-monitor message and its
    worker-death notice name the killed worker's pid (`worker_pid`), while their lines come from the
    raylet or the driver's traceback. Named as that worker's own lines name it, else as Ray would."""
    pid = detail.get("worker_pid")
    if not isinstance(pid, int):
        return row["worker"]
    if (row["source"], pid) in by_pid:
        return by_pid[(row["source"], pid)]
    name = str(detail.get("worker_name") or "")  # `1HsG1ZWorkerDict_0:0:WorkerDict.__init__` -> WorkerDict
    name = name.rsplit(":", 1)[-1].split(".")[0]
    return f"{name} pid={pid}" if name else f"pid={pid}"


def _last_steps_before(events: pl.DataFrame, records: pl.DataFrame) -> pl.Series:
    """Per event row, the training step its worker logged last before the event's line; for a
    worker that logs no training steps, the latest such step of any worker of the source. An as-of
    join: the records are never turned into Python lists."""
    none = pl.Series("after_step", [None] * events.height, dtype=pl.Int64)
    if records.is_empty():
        return none
    workers = records.lazy().filter(pl.col("kind") == "train").select("source", "worker").unique().collect()
    wanted = events.select(pl.col("source", "worker").cast(pl.Categorical), "line_no").with_row_index("_event")
    own = wanted.join(workers, on=["source", "worker"], how="semi")
    # Each step-less printer's event asks every worker of its source.
    shared = wanted.join(workers, on=["source", "worker"], how="anti").drop("worker").join(workers, on="source")
    asked = pl.concat([own, shared.select(own.columns)]).sort("line_no").with_columns(kind=pl.lit("train", dtype=pl.Categorical))
    if asked.is_empty():
        return none
    # Joined by kind rather than filtered to training records, on one packed key when the codes fit
    # (every code of `asked` is one of the records', by the joins above): no copy of the millions of
    # records. They are in line order per source, so sorted within each group: all the as-of join
    # needs. (polars cannot join as-of by a struct, hence the columns themselves otherwise.)
    keys = ["source", "worker", "kind"]
    packed = packed_key(records, keys)
    if packed is not None:
        asked, steps, keys = asked.with_columns(packed.alias("_group")), records.select(packed.alias("_group"), "line_no", "step"), ["_group"]
    else:
        steps = records.select(*keys, "line_no", "step")
    found = asked.join_asof(steps, on="line_no", by=keys, allow_exact_matches=False, check_sortedness=False)
    latest = found.group_by("_event").agg(pl.col("step").max())
    return wanted.join(latest, on="_event", how="left").sort("_event")["step"].alias("after_step")
