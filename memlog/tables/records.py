"""Records: the parsed step lines of all sources, one row per reading of a worker at a step.

A worker is the process that printed a line: its node and rank, a Ray actor (name, pid, ip), or
the file itself. Its lines become records in four moves (build_records):

1. every line gets a step: its own, or the worker's nearest earlier one (memory lines printed
   between step lines), or the source's (a Ray WorkerDict whose steps the driver prints); a worker
   that never prints one numbers its readings 1, 2, 3... (`ordinal`: a reading index, said as such);
2. a step counter that goes back (a resume, a restarted job appending to the file), or a worker
   saying it starts training after steps of its own, starts a new `segment`, so a series never
   joins two runs (memlog/tables/segments.py);
3. the same step line printed twice with different values is two processes the log does not tell
   apart (two nodes' `[rank2]:`, or ranks with no prefix at all): when most steps are printed that
   way, the worker is split into copies `#1`, `#2`... numbered by their reading (lowest first), and
   `collided` says so: copies whose readings lie apart are followed from step to step, so one
   rising through another's level keeps its number; copies whose readings mingle are numbered by
   size at each step (_copies);
4. every line is a reading: the k-th line of one kind (one pattern) within a step is its reading k,
   so a memory line printed several times between two step lines counts every time.

Rows stay in (source, line) order, one per line read; `steps` says how many steps a row stands for
(1 for a step's first line, 0 for its other lines, more for a bin of a long run: memlog/tables/condense.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from memlog.base.columns import ALL_VALUE_COLUMNS, JUDGED_COLUMNS, MEMORY_COLUMNS
from memlog.base.keys import group_key
from memlog.tables.segments import with_segments

# Text columns with a few distinct values repeated on every record: categorical while building.
LABEL_COLUMNS = ("source", "worker", "kind", "format", "pattern", "node", "actor", "ip", "device")
# Who printed a line beyond its rank: the node (a launcher's host label), Ray's actor name, pid and
# node IP, and the device a line reads when a process prints one line per device; absent from most logs.
OPTIONAL_LABELS = {"node": pl.Categorical, "actor": pl.Categorical, "pid": pl.Int64, "ip": pl.Categorical, "device": pl.Categorical}
# A worker whose step lines come twice (or more) with different values at this share of its steps
# is several processes under one name (step 3 of build_records).
COLLIDED_SHARE = 0.5
# A collided worker's copies are told apart when their closest readings at a step are this many typical
# moves apart (records._copies); a copy's next reading is its last one plus the median of its last
# TRACKED_RISES rises.
COPIES_APART = 4.0
TRACKED_RISES = 5


@dataclass(frozen=True)
class Keep:
    """What a caller reads of each record. `memlog series` prints every column and the logger's own
    timestamps; `analyze` reads only the columns it judges and the timestamps as seconds, so the
    millions of records of a dense log stay small (see compact_records)."""

    values: tuple[str, ...] = ALL_VALUE_COLUMNS
    ts_text: bool = True
    condense: bool = False  # long runs of steps kept as bins (memlog/tables/condense.py)
    per_step: bool = False  # a step's several lines kept as one row, its peak (step_rows)

    @classmethod
    def judged(cls, *extra: str | None, condense: bool = True) -> Keep:
        """What `analyze` keeps: the judged columns, plus `extra` ones (a charted metric), with long
        runs of steps condensed unless `condense` is false, and each step one row (step_rows)."""
        return cls(tuple(dict.fromkeys([*JUDGED_COLUMNS, *(c for c in extra if c)])), ts_text=False, condense=condense, per_step=True)


class RecordSink(Protocol):
    """Where one source's compact records go while it is read (memlog/engine/reader.py). `add` takes a
    chunk's record rows (or None) with the event rows it yielded and the first line a later chunk may
    still complete (ChunkParser.open_since); it returns the frames ready to keep. `finish`
    returns the rest at the end of the source; `held` what it holds before (a reader judging before its
    input ends, watch)."""

    def add(self, rows: pl.DataFrame | None, events: list[pl.DataFrame], open_since: int | None) -> list[pl.DataFrame]: ...

    def finish(self, open_since: int | None) -> list[pl.DataFrame]: ...

    def held(self) -> list[pl.DataFrame]: ...


class KeepEvery:
    """The sink that keeps every record as read (`memlog series`, `formats check`, tests)."""

    def add(self, rows: pl.DataFrame | None, events: list[pl.DataFrame], open_since: int | None) -> list[pl.DataFrame]:
        return [rows] if rows is not None else []

    def finish(self, open_since: int | None) -> list[pl.DataFrame]:
        return []

    def held(self) -> list[pl.DataFrame]:
        return []  # (every record was handed back by add)


def steps_read(records: pl.DataFrame) -> pl.Expr:
    """How many steps rows stand for (in a select or per group)."""
    return pl.col("steps").sum() if "steps" in records.columns else pl.len()


def worker_expr(columns: list[str]) -> pl.Expr:
    """A readable name for the process that printed a line, unique per process: its node (when a
    launcher names one) and its rank, else its Ray actor (name, pid, node IP), else its pid; then
    the device the line reads, when the process prints a line per device (`TPU_0`, `rank0/cuda:1`)."""
    col = {c: pl.col(c).cast(pl.String) if c in columns else pl.lit(None, dtype=pl.String) for c in ("node", "actor", "ip", "device")}
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
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    who = (
        pl.when(col["device"].is_null())
        .then(who.fill_null(pl.lit("main")))
        .when(who.is_null())
        .then(col["device"])
        .otherwise(who + pl.lit("/") + col["device"])
    )
    return pl.when(col["node"].is_not_null()).then(col["node"] + pl.lit("/") + who).otherwise(who).alias("worker")


def device_hosts(records: pl.DataFrame) -> set[tuple[str, str]]:
    """The (source, worker) pairs that are the processes driving device workers (`main` beside
    `TPU_0`..`TPU_3`, `rank0` beside `rank0/cuda:0`): the lines they print without a device (the
    loss) are theirs, but they are not workers beside their devices."""
    if "device" not in records.columns or records.is_empty():
        return set()
    devices = records.filter(pl.col("device").is_not_null()).select("source", "worker", "device").unique()
    hosts = set()
    for source, worker, device in devices.iter_rows():
        process = str(worker)[: -len(str(device))].rstrip("/") if str(worker).endswith(str(device)) else None
        if process is not None:
            hosts.add((str(source), process or "main"))
    return hosts


def with_seconds(records: pl.DataFrame) -> pl.DataFrame:
    """`records` with a `_seconds` column: every timestamp parsed once, for all series built from it
    (`analyze` parses them chunk by chunk while reading: compact_records)."""
    if "_seconds" in records.columns:
        return records
    return records.with_columns(_seconds=_seconds(records))


def _seconds(rows: pl.DataFrame) -> pl.Series:
    """Logger timestamps (`2025-03-04 17:22:10,931`, ISO `T`, `.` or `,` fractions) as seconds."""
    if "ts" not in rows.columns or rows["ts"].dtype != pl.String:
        return pl.Series([None] * rows.height, dtype=pl.Float64)
    # Python's logging prints milliseconds after a comma: that one shape read by a fixed format
    # (a quarter of the cost of the general one: 40 against 164 ms for 600,000), and the general
    # format run only where some timestamp has another shape. Where both read one, they agree.
    ts = pl.col("ts")
    parsed = rows.select(ts.str.to_datetime("%Y-%m-%d %H:%M:%S,%3f", strict=False))["ts"]
    if parsed.null_count() > rows["ts"].null_count():  # (a timestamp not read is a null, as one not printed)
        general = ts.str.replace(",", ".", literal=True).str.replace("T", " ", literal=True).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
        parsed = rows.select(pl.coalesce(pl.lit(parsed), general))["ts"]
    return (parsed.dt.epoch("ms") / 1000).alias("s")


def source_frame(source: str, frames: list[pl.DataFrame], identity: dict[str, object] | None = None) -> pl.DataFrame:
    """Concatenate one source's matches and name their workers. `identity`: what the source's path
    says of who printed it (memlog/read/inputs.py: a rank, a node, a pid), for lines that do not say."""
    frame = pl.concat(frames, how="diagonal_relaxed").with_columns(source=pl.lit(source))
    for column, value in (identity or {}).items():
        if value is None:
            continue
        if column not in frame.columns:
            frame = frame.with_columns(pl.lit(value).alias(column))
        else:
            frame = frame.with_columns(pl.col(column).fill_null(pl.lit(value).cast(frame.schema[column])))
    return frame.with_columns(worker_expr(frame.columns))


def compact_records(source: str, frames: list[pl.DataFrame], keep: Keep, identity: dict[str, object] | None = None) -> pl.DataFrame:
    """One chunk's record rows as they are kept until the end of the input: workers named, labels
    categorical, only the value columns the caller reads, timestamps as seconds unless it prints
    them. Done per chunk, so the rows never exist in their wide, string-labelled form all at once."""
    frame = source_frame(source, frames, identity)
    # A column no row of the chunk fills costs as much as a full one: left out (concatenation
    # fills it with nulls again only where another chunk has it).
    empty = [c for c in (*ALL_VALUE_COLUMNS, *OPTIONAL_LABELS, "repeated") if c in frame.columns and frame[c].null_count() == frame.height]
    frame = frame.select(pl.exclude(empty, *(c for c in ALL_VALUE_COLUMNS if c not in keep.values), "stream", "_task"))
    if not keep.ts_text:
        frame = with_seconds(frame).drop("ts", strict=False)
    labels = [c for c in LABEL_COLUMNS if c in frame.columns and frame[c].dtype == pl.String]
    return frame.with_columns(pl.col(labels).cast(pl.Categorical))


def detached(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its text columns copied out of the chunk they were read from, for rows held
    until the end of the input (every event row: parse.Matches). polars' strings are views into
    shared buffers: a few event rows filtered out of a chunk kept the chunk's whole text (~4 MiB)
    alive, one chunk per source of 64 per-rank files and one per chunk of a log warning all along.
    Concatenating an empty string copies (a no-op slice or a single-input concat would not)."""
    text = [c for c, t in frame.schema.items() if t == pl.String]
    return frame.with_columns(pl.concat_str(pl.col(c), pl.lit("")).alias(c) for c in text) if text else frame


def build_records(frames: list[pl.DataFrame], per_step: bool = False, run_starts: pl.DataFrame | None = None) -> pl.DataFrame:
    """Steps, segments, copies and readings (module docstring), then one row per reading, or, with
    `per_step` (what `analyze` judges: Keep.per_step), one row per step (step_rows). Each frame
    holds one source's rows (compact_records or a sink's); `frames` is emptied (_in_line_order).
    `run_starts`: where workers said they started training (memlog/tables/segments.py)."""
    if not frames:
        return pl.DataFrame()
    frame = _in_line_order(frames)
    labels = [c for c in LABEL_COLUMNS if c in frame.columns]
    frame = frame.with_columns(pl.col(labels).cast(pl.Categorical))
    for column, default in (("step", pl.lit(None, dtype=pl.Int64)), ("pattern", pl.lit("", dtype=pl.Categorical)), ("steps", pl.lit(1, dtype=pl.Int64))):
        if column not in frame.columns:
            frame = frame.with_columns(default.alias(column))
    frame = frame.with_columns(pl.col("steps").fill_null(1))
    frame = with_segments(_fill_steps(frame), run_starts)
    frame = _split_collided(frame)
    several = None
    if per_step:
        merged = step_rows(frame)
        several = None if merged is not frame else False  # no step of two lines: none of one pattern either
        frame = merged
    return _readings(frame.drop("_early", strict=False), several)


def _in_line_order(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The rows of all sources as sort("source", "line_no") orders them, in one contiguous frame
    (polars would otherwise copy the many chunks at every later step), without sorting a source whose
    rows already are in line order (any log without multi-line blocks). Empties `frames`, so that
    the chunks are freed as the copy is made."""
    by_source = _by_source(frames)
    ordered = []
    for source in sorted(by_source):
        ordered += _source_in_line_order(by_source.pop(source))
    return _rebuilt(ordered, pl.Series.rechunk)


def _by_source(frames: list[pl.DataFrame]) -> dict[str, list[pl.DataFrame]]:
    """The frames grouped by source, in their order; empties `frames`. The helpers here hold frames
    only in lists they hand on or empty: a frame left in a loop variable would outlive its copy."""
    by_source: dict[str, list[pl.DataFrame]] = {}
    for frame in frames:
        by_source.setdefault(frame["source"][0], []).append(frame)
    frames.clear()
    return by_source


def _source_in_line_order(parts: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """One source's frames as they are when their rows already are in line order, else sorted into one."""
    line_no = pl.concat([part["line_no"] for part in parts])
    if line_no.is_sorted():
        return parts
    order = line_no.to_frame().select(pl.arg_sort_by("line_no", maintain_order=True)).to_series()
    return [_rebuilt(parts, lambda column: column.gather(order))]


def _rebuilt(parts: list[pl.DataFrame], copy: Callable[[pl.Series], pl.Series]) -> pl.DataFrame:
    """`pl.concat(parts)` with `copy` (a sort's gather, a rechunk) applied to every column, one column
    at a time, each column's chunks freed once copied: the peak holds one column twice instead of the
    whole table (DeepSpeed 256 MiB, 180 MiB of rows in 22 chunks, with freed pages returned at once:
    peak 480 -> 304 MiB). Not `frame.drop(column)` in turn: where columns are chunked differently
    (diagonal concatenation fills missing ones in one chunk), the first drop copies every other column
    into one chunk. Empties `parts`, the only other holder of the rows."""
    columns = pl.concat(parts, how="diagonal_relaxed").get_columns()
    parts.clear()
    for i in range(len(columns)):  # no loop variable: it would keep the column it names alive
        columns[i] = copy(columns[i])
    return pl.DataFrame(columns)


def _fill_steps(frame: pl.DataFrame) -> pl.DataFrame:
    """Give every line a step (module docstring, move 1); `ordinal` marks workers whose steps count
    their readings or log lines rather than training steps."""
    worker = group_key(frame, ["source", "worker"])
    ordinal_pattern = pl.col("ordinal_step").fill_null(False) if "ordinal_step" in frame.columns else pl.lit(False)
    stepless = pl.col("step").is_null().all().over(worker)
    # A worker that prints no step at all numbers its ordinal lines 1, 2, 3... in file order (HF
    # Trainer's loss dicts when DeepSpeed's step lines are silent); its other lines then inherit.
    nth_ordinal = ordinal_pattern.cast(pl.Int64).cum_sum().over(worker)
    interleaved = "interleaved" in frame.columns and frame["interleaved"].is_not_null().any()
    turns = pl.col("interleaved").fill_null(1) if interleaved else pl.lit(1)
    frame = frame.with_columns(
        _ordinal=stepless & ordinal_pattern.any().over(worker),
        _turns=stepless & ordinal_pattern & (turns > 1),
        step=pl.when(stepless & ordinal_pattern).then(nth_ordinal).otherwise(pl.col("step")),
    )
    if interleaved:
        # Untagged writers taking turns (LinePattern.interleaved): the k-th ordinal line is writer
        # k mod N's reading k // N; the writers are named like collided copies (`main#2`).
        taking_turns = pl.col("_turns")
        frame = frame.with_columns(
            worker=pl.when(taking_turns)
            .then(pl.col("worker").cast(pl.String) + pl.lit("#") + ((pl.col("step") - 1) % turns + 1).cast(pl.String))
            .otherwise(pl.col("worker").cast(pl.String))
            .cast(pl.Categorical),
            step=pl.when(taking_turns).then((pl.col("step") - 1) // turns + 1).otherwise(pl.col("step")),
        )
        worker = group_key(frame, ["source", "worker"])
    # Lines without a step of their own belong to the step the worker logged last (or, before its
    # first step line, to the first one). A worker that never logs a step itself (a Ray WorkerDict,
    # whose steps the driver-side TaskRunner prints) takes the step the source logged last.
    own = pl.col("step").forward_fill().backward_fill().over(worker)
    shared = pl.col("step").forward_fill().backward_fill().over("source")
    # Lines printed before their worker's first step (or, for a worker that never logs one, the
    # source's): initialisation, not readings of that step (step_rows leaves them as they are).
    logs_steps = pl.col("step").is_not_null().any().over(worker)
    early = pl.col("step").forward_fill().over(worker).is_null() & (logs_steps | pl.col("step").forward_fill().over("source").is_null())
    frame = frame.with_columns(pl.coalesce(own, shared).alias("step"), _early=early)
    if "device" in frame.columns:
        # A device read only before its source's first step (a job script's nvidia-smi at start) is
        # the machine before the run, not a worker of it.
        before_run = pl.col("device").is_not_null() & pl.col("_early").all().over(worker) & pl.col("step").is_not_null().any().over("source")
        frame = frame.filter(~before_run)
    # Nothing in the source has a step: each worker's readings are numbered, a pattern's k-th line
    # being reading k (a see_memory_usage block's lines form one reading).
    nth = pl.int_range(1, pl.len() + 1).over(group_key(frame, ["source", "worker", "pattern"]))
    return frame.with_columns(
        ordinal=pl.col("_ordinal") | pl.col("step").is_null(),
        step=pl.col("step").fill_null(nth.cast(pl.Int64)),
    ).drop("_ordinal", "_turns", "ordinal_step", "interleaved", strict=False)


def _sort_value(frame: pl.DataFrame) -> pl.Expr:
    """What numbers and follows the copies of a collided worker (_copies): its first memory reading,
    else the loss."""
    present = [c for c in (*MEMORY_COLUMNS, "loss") if c in frame.columns]
    return pl.coalesce(*present, pl.lit(float("-inf"))).fill_nan(float("-inf"))


def _split_collided(frame: pl.DataFrame) -> pl.DataFrame:
    """Move 3 of the module docstring. A step line printed again with the same values is a repeat
    (two log handlers, a restarted tail) and is dropped."""
    step_lines = ~pl.col("inherited").fill_null(False) if "inherited" in frame.columns else pl.lit(True)
    at_step = ["source", "worker", "kind", "segment", "step", "pattern"]
    if "refresh" in frame.columns:  # a progress bar redrawn at one step is one line, its last (LinePattern.refreshes)
        redrawn = pl.col("refresh").fill_null(False) & ~group_key(frame, at_step).is_last_distinct()
        frame = frame.filter(~redrawn).drop("refresh")
    # A line that is not the first of its step and pattern (a window over as many groups as rows costs
    # twenty times this test, and most logs print each step once).
    if not frame.select((step_lines & ~group_key(frame, at_step).is_first_distinct()).any()).item():
        return frame.with_columns(collided=pl.lit(False)).drop("inherited", strict=False)  # no step line printed twice
    values = [c for c in ALL_VALUE_COLUMNS if c in frame.columns]
    if values:
        again = pl.int_range(pl.len()).over(pl.struct(*at_step, *values)) > 0
        frame = frame.filter(~(step_lines & again))
    occurrence = pl.int_range(pl.len()).over(group_key(frame, at_step))
    frame = frame.with_columns(_again=step_lines & (occurrence > 0))
    worker = group_key(frame, ["source", "worker", "kind"])
    steps_again = pl.struct("segment", "step").filter(pl.col("_again")).n_unique().over(worker)
    steps_all = pl.struct("segment", "step").filter(step_lines).n_unique().over(worker)
    collided = step_lines & (steps_again > 0) & (steps_again >= COLLIDED_SHARE * steps_all)
    frame = frame.with_columns(collided=collided).drop("_again")
    if not frame["collided"].any():
        return frame.drop("inherited", strict=False)
    frame = _copies(frame, at_step)
    return frame.with_columns(
        worker=pl.when("collided")
        .then(pl.col("worker").cast(pl.String) + pl.lit("#") + pl.col("_copy").cast(pl.String))
        .otherwise(pl.col("worker").cast(pl.String))
        .cast(pl.Categorical),
    ).drop("inherited", "_copy", strict=False)


def _copies(frame: pl.DataFrame, at_step: list[str]) -> pl.DataFrame:
    """`frame` with `_copy`, the copy each collided row is. A worker's copies whose readings lie apart
    (at a typical step, further apart than a step moves them: two nodes' ranks of different stages,
    or one leaking past another) are followed from step to step (_tracked_copies); copies whose
    readings mingle (eight ranks of one data-parallel group) are numbered by size at each step, as no
    reading says which is which. Following copies that every step finds in the order of their sizes
    numbers them by size too: that is taken as it is, in polars (Python follows ~450,000 rows a
    second)."""
    series = [k for k in at_step if k != "step"]
    frame = frame.with_row_index("_i").with_columns(_value=_sort_value(frame))
    value = pl.col("_value")
    frame = frame.with_columns(_copy=pl.when("collided").then(value.rank("ordinal").over(group_key(frame, at_step)).cast(pl.Int64)))
    # A copy's next reading as _predicted has it: its last plus the median of its last rises.
    predicted = (value + value.diff().rolling_median(TRACKED_RISES, min_samples=1).fill_null(0.0)).shift(1)
    rows = (
        frame.filter("collided").select("_i", *series, "step", "_copy", "_value").with_columns(_predicted=predicted.over([*series, "_copy"], order_by="step"))
    )
    all_there = pl.len().over([*series, "step"]) == pl.col("_copy").max().over(series)
    by_size_too = pl.col("_predicted").diff().over([*series, "step"], order_by="_copy").fill_null(0.0) >= 0
    rows = rows.with_columns(_in_order=(all_there & value.is_finite() & by_size_too).all().over(series), _all_there=all_there)
    # Apart or mingling, judged on the steps that have every copy (a lone reading's size says nothing).
    full = rows.filter("_all_there").with_columns(
        _closest=value.diff().over([*series, "step"], order_by="_copy").min().over([*series, "step"]),
        _moved=value.diff().over([*series, "_copy"], order_by="step").abs(),
    )
    apart = full.group_by(series).agg(_apart=pl.col("_closest").median() > COPIES_APART * pl.col("_moved").median().fill_null(0.0))
    rows = rows.join(apart, on=series, how="left", nulls_equal=True).with_columns(_followed=pl.col("_apart").fill_null(False) & ~pl.col("_in_order"))
    followed = rows.filter("_followed").select("_i", *series, "step", "_value")
    if followed.height:
        tracked = pl.DataFrame({"_i": followed["_i"], "_tracked": pl.Series(_tracked_copies(followed), dtype=pl.Int64)})
        frame = frame.join(tracked, on="_i", how="left", maintain_order="left").with_columns(pl.coalesce("_tracked", "_copy").alias("_copy"))
    return frame.drop("_i", "_value", "_tracked", strict=False)


def _tracked_copies(rows: pl.DataFrame) -> list[int]:
    """The copy (1, 2, ...) each row of a collided worker is, rows in line order: numbered by their
    reading at the worker's first step, then followed from step to step (_assigned). Ordering them by
    size at every step instead swapped two copies where one's rising readings crossed the other's
    flat ones (two nodes' unlabelled `[rank0]:`, one leaking): a warmup was invented on one and the
    leak's onset moved on the other."""
    copies = [0] * rows.height
    keys = [c for c in rows.columns if c not in ("_i", "step", "_value")]
    position = {i: n for n, i in enumerate(rows["_i"].to_list())}
    for _, group in rows.group_by(keys, maintain_order=True):
        history: list[list[float]] = []  # per copy, its readings so far
        for _, at_step in itertools.groupby(group.select("_i", "step", "_value").iter_rows(), key=lambda row: row[1]):
            readings = sorted(((value, i) for i, _, value in at_step), key=lambda reading: reading[0])  # ties: line order
            for (value, i), c in zip(readings, _assigned([value for value, _ in readings], history)):
                if c == len(history):
                    history.append([])
                history[c].append(value)
                copies[position[i]] = c + 1
    return copies


def _assigned(values: list[float], history: list[list[float]]) -> list[int]:
    """The copies a step's readings (ascending) go to: as many as there are copies, in the order of
    the copies' predicted readings; otherwise each to the free copy predicted nearest it, and a
    reading left over to a new copy (all of them at the first step, numbered in ascending order)."""
    predicted = {c: _predicted(readings) for c, readings in enumerate(history)}
    if len(values) == len(history):
        return sorted(predicted, key=lambda c: (predicted[c], c))
    out: list[int | None] = [None] * len(values)
    free = set(predicted)
    for _, j, c in sorted((_distance(v, predicted[c]), j, c) for j, v in enumerate(values) for c in predicted):
        if out[j] is None and c in free:
            out[j] = c
            free.discard(c)
    new = iter(range(len(history), len(history) + len(values)))
    return [c if c is not None else next(new) for c in out]


def _predicted(readings: list[float]) -> float:
    last = readings[-1]
    rises = sorted(b - a for a, b in zip(readings[-TRACKED_RISES - 1 :], readings[-TRACKED_RISES:]) if math.isfinite(b - a))
    if not rises or not math.isfinite(last):
        return last
    middle = len(rises) // 2  # the median as polars' rolling_median takes it (_copies)
    return last + (rises[middle] if len(rises) % 2 else (rises[middle - 1] + rises[middle]) / 2)


def _distance(value: float, predicted: float) -> float:
    """|value - predicted|, where a non-finite reading (no memory printed: -inf) is near only another."""
    if math.isfinite(value) and math.isfinite(predicted):
        return abs(value - predicted)
    return 0.0 if value == predicted else math.inf


# What a step's rows keep of its several lines (step_rows): where each was read is the line of
# its lowest or highest memory reading; a value that is not memory, its last reading.
WHERE_READ = ("line_no", "ts", "_seconds")
KEYS_OF_STEP = ("source", "worker", "kind", "segment", "step")


def step_rows(frame: pl.DataFrame, of_step: tuple[str, ...] = KEYS_OF_STEP) -> pl.DataFrame:
    """A step's memory lines of `frame` (rows in line order, grouped by `of_step`) as at most two
    rows: its floor and its peak. A worker that prints memory several times a step (DeepSpeed's
    see_memory_usage before and after forward, backward and step; vLLM waking and sleeping; a
    memory line per device) is judged by what the step held at its lowest and reached at its
    highest: the floor row holds each memory column's lowest reading in the step, the peak row its
    highest (a window peak's too) and the last reading of any other value those lines print, each
    at the line and time of its first memory column's lowest or highest reading. A step whose
    memory readings do not differ is one row. `readings` says how many lines the step's rows stand
    for (on its peak row; 0 on its floor row; null, or no such column: one line). Lines without
    memory stay as printed (a step line and its loss: events find the step they follow by its
    line, events._steps_beside), and so do
    the lines a rule reads one by one: a memory reading that cannot be true (not a number,
    negative: corrupt-readings counts them), a non-finite loss or other value (nan-loss), and the
    lines printed before the first step (initialisation: records._fill_steps gives them that step,
    and a warmup starts there). Rows stay in line order per worker. Rows already merged (counted by
    `readings`) merge again as their lines would: lowest of the lowest, highest of the highest."""
    keys = [k for k in of_step if k in frame.columns]
    if frame.is_empty() or not frame.select(group_key(frame, keys).is_duplicated().any()).item():
        return frame  # (no `readings`: one line a row)
    # In slices no step's lines straddle, so that the merge's copies are of one slice at a time (Ray
    # 256 MiB: 615,422 rows, peak RSS 637 -> 452 MiB): rows and their order are the same either way.
    return pl.concat([_merged_steps(frame.slice(start, end - start), keys) for start, end in _slices(frame, keys)])


# Rows of `frame` whose steps step_rows merges at once: bounds the merge's copies, not its result.
ROWS_PER_MERGE = 65_536


def _slices(frame: pl.DataFrame, keys: list[str]) -> list[tuple[int, int]]:
    """(start, end) row ranges covering `frame`, each about ROWS_PER_MERGE long, none cutting a
    group of `keys`: a cut after row i is allowed where no group holding a row up to i has a later one."""
    if frame.height <= ROWS_PER_MERGE:
        return [(0, frame.height)]
    pos = frame.with_columns(_pos=pl.int_range(pl.len(), dtype=pl.Int64))
    cuts = pos.select(pl.col("_pos").max().over(group_key(frame, keys)).cum_max() == pl.col("_pos")).to_series().arg_true() + 1
    bounds, start = [], 0
    while start < frame.height:
        end = cuts[min(cuts.search_sorted(start + ROWS_PER_MERGE), cuts.len() - 1)]
        bounds.append((start, end))
        start = end
    return bounds


def _merged_steps(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """step_rows of rows holding whole steps, merged whether or not some step has several lines."""
    count = pl.col("readings").fill_null(1) if "readings" in frame.columns else pl.lit(1, dtype=pl.Int64)
    memory = [c for c in MEMORY_COLUMNS if c in frame.columns]
    others = [c for c in ALL_VALUE_COLUMNS if c in frame.columns and c not in MEMORY_COLUMNS]
    odd = [~pl.col(c).is_finite() | (pl.col(c) < 0) for c in memory] + [~pl.col(c).is_finite() for c in others]
    if "_early" in frame.columns:  # lines before the first step (records._fill_steps)
        odd.append(pl.col("_early"))
    # A line without memory (a step line's loss, a progress line) stays as printed: its step's other
    # values per line, and events find the step they follow by its line (events._steps_beside).
    odd.append(pl.all_horizontal(pl.col(c).is_null() for c in memory) if memory else pl.lit(True))
    alone = pl.any_horizontal(pl.coalesce(o, pl.lit(False)) for o in odd) if odd else pl.lit(False)
    frame = frame.with_columns(_alone=alone, _pos=pl.int_range(pl.len())).with_columns(_first=pl.col("_pos").min().over(group_key(frame, keys)))
    merged = frame.filter(~pl.col("_alone"))
    # Where the floor and the peak were read: the lowest and highest reading of the first memory
    # column the step's lines print (the same column whether its lines are merged at once or in parts).
    low, high = pl.lit(0, dtype=pl.UInt32), pl.lit(0, dtype=pl.UInt32)
    for c in reversed(memory):
        printed = pl.col(c).is_not_null().any()
        low, high = pl.when(printed).then(pl.col(c).arg_min()).otherwise(low), pl.when(printed).then(pl.col(c).arg_max()).otherwise(high)
    labels = [
        c for c in merged.columns if c not in keys and c not in memory and c not in others and c not in ("_alone", "_pos", "_first", "readings", "_early")
    ]
    peak = [pl.col(c).get(high) if c in WHERE_READ else pl.col(c).max() if c == "repeated" else pl.col(c).first() for c in labels]
    floor = [pl.col(c).get(low).alias(f"_low_{c}") for c in labels if c in WHERE_READ]
    groups = merged.group_by(keys, maintain_order=True).agg(
        *peak,
        *floor,
        *(pl.col(c).max() for c in memory),
        *(pl.col(c).min().alias(f"_low_{c}") for c in memory),
        *(pl.col(c).drop_nulls().last() for c in others),
        pl.col("_first").first(),
        pl.col("_pos").get(high).alias("_at"),
        pl.col("_pos").get(low).alias("_low_at"),
        (pl.col("readings").fill_null(1).sum() if "readings" in merged.columns else pl.len()).cast(pl.Int64).alias("readings"),
    )
    lows = [f"_low_{c}" for c in memory]
    differs = pl.any_horizontal((pl.col(f"_low_{c}") != pl.col(c)).fill_null(False) for c in memory) if memory else pl.lit(False)
    floors = groups.filter(differs).with_columns(
        *(pl.col(f"_low_{c}").alias(c) for c in (*memory, *(w for w in WHERE_READ if w in labels))),
        *(pl.lit(None, dtype=groups.schema[c]).alias(c) for c in others),
        pl.col("_low_at").alias("_at"),
        readings=pl.lit(0, dtype=pl.Int64),
    )
    helpers = ["_low_at", *lows, *(f"_low_{w}" for w in WHERE_READ if w in labels)]
    rest = frame.filter(pl.col("_alone")).with_columns(_at=pl.col("_pos"), readings=count.cast(pl.Int64))
    columns = [c for c in frame.columns if c not in ("_alone", "_pos", "_first", "readings", "_early")]
    parts = [groups.drop(helpers), floors.drop(helpers), rest.drop("_alone", "_pos")]
    out = pl.concat([p.select(*columns, "_first", "_at", "readings") for p in parts if p.height])
    # Each step where its first line was, its rows in their lines' order: each worker's rows stay in
    # line order (events._steps_beside), its steps ascending.
    return out.sort("_first", "_at", maintain_order=True).drop("_first", "_at")


def _readings(frame: pl.DataFrame, several: bool | None = None) -> pl.DataFrame:
    """Move 4 of the module docstring: number each line's reading within its step; the first line
    of a step stands for the step (`steps`), the others are further readings of it. `several`:
    whether a step holds several lines of one pattern, when the caller knows."""
    keys = ["source", "worker", "kind", "segment", "step"]
    by_pattern = group_key(frame, [*keys, "pattern"])
    # Numbered within step and pattern only where a step holds several lines of one pattern: a window
    # over as many groups as rows costs far more than the test.
    if several is None:
        several = frame.select(by_pattern.is_duplicated().any()).item()
    frame = frame.with_columns(
        reading=pl.int_range(pl.len()).over(by_pattern).cast(pl.Int64) if several else pl.lit(0, dtype=pl.Int64),
        steps=pl.when(group_key(frame, keys).is_first_distinct()).then(pl.col("steps")).otherwise(0),
    )
    frame = frame.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in OPTIONAL_LABELS.items() if c not in frame.columns)
    firsts = [c for c in ("rank", "node", "actor", "pid", "ip", "device", "format") if c in frame.columns]
    timed = "ts" if "ts" in frame.columns else "_seconds"  # the logger's text, or as seconds (Keep)
    value_cols = [c for c in ALL_VALUE_COLUMNS if c in frame.columns]
    absent = [pl.lit(None, dtype=pl.Float64).alias(c) for c in ALL_VALUE_COLUMNS if c not in value_cols]
    repeated = pl.col("repeated") if "repeated" in frame.columns else pl.lit(None, dtype=pl.Int64)
    merged = ["readings"] if "readings" in frame.columns else []  # lines a step's row stands for (step_rows)
    return frame.with_columns(*absent, repeated=repeated).select(
        *keys, "reading", "line_no", timed, *firsts, *ALL_VALUE_COLUMNS, "repeated", "steps", "ordinal", "collided", *merged
    )


def read_values(frames: list[pl.DataFrame]) -> bool:
    """Whether a spec read a value from the chunk: a pattern that matched without reading any
    (EasyR1's `{"step": N` on a JSON line of other keys) does not claim the source."""
    return any(
        frame.select(pl.any_horizontal(pl.col(c).is_not_null() for c in frame.columns if c in ALL_VALUE_COLUMNS)).to_series().any()
        for frame in frames
        if any(c in ALL_VALUE_COLUMNS for c in frame.columns)
    )
