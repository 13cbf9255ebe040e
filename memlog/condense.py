"""Condense: a worker's long runs of steps kept as bins while reading, for `analyze`.

A dense log holds hundreds of thousands of steps per rank, and the rules judge at most
MAX_SERIES_POINTS points per series (series._binned): holding every step until the end of the
input made memory follow the file's size. From a worker's 2 * CONDENSE_AFTER-th step of one kind
on, its runs of steps are kept as bins about n / CONDENSE_AFTER steps wide at its n-th step, so
what is held grows with the logarithm of the steps (~2,000 * (2 + ln(n / 4,000)) records per
worker). `memlog series` prints every step and never condenses (tables.Keep).

A bin is a record standing for `steps` steps: its last step's step, line and time, and each
value's (lower) median over its steps. Everything that looks at single steps still sees them:
- only plain steps are binned: a step with a non-finite value, a negative memory reading, a
  device reading above MAX_DEVICE_GIB, a memory reading above its neighbours' or a non-zero count
  of NaN iterations (_plain) stays a record of its own (corrupt-readings and nan-loss report it by
  its line);
- a run ends at every line something later compares with a step: an event (its last step
  before), a record without a step (it takes a neighbour's), a step not above the one before (a
  restart, or another line of the same step, merged later), a change of format; and each run's
  first and last steps stay records of their own, so the neighbours of other batches are exact;
- steps are counted per segment (a restart starts again at 1), so a short segment after a
  restart is judged step by step;
- lines for which a later chunk may still add a record or an event (ChunkParser.open_since),
  and records of an earlier batch's lines completed in this one, are never binned.
What differs from judging every step: a series longer than MAX_SERIES_POINTS is binned again by
series._binned from the bins (weighted by their steps), not from the steps; where most of a
worker's readings around one are above the capacity (a wrong unit throughout), corrupt-readings
counts the bins dropped, not the steps; and where they run above the capacity but within
CAPACITY_SLACK of it, a reading less than CAPACITY_SLACK above them but above the slack can be
binned rather than reported.
"""

from __future__ import annotations

import polars as pl

from memlog.columns import ALL_VALUE_COLUMNS, MEMORY_COLUMNS
from memlog.limits import CAPACITY_SLACK, MAX_SERIES_POINTS, impossible_reading

# Twice this many steps of one worker and kind are kept one by one: every series judged point by
# point (MAX_SERIES_POINTS) and then some is exactly what it was without condensing.
CONDENSE_AFTER = MAX_SERIES_POINTS
# Records are binned a batch at a time: binning each chunk's few records cost more time than the
# binning saved, and holding many chunks' small frames until the end fragmented the allocator's
# pages (sparse 4 GiB: +30 MiB over 1 GiB at 2^20 records a batch; flat at 32 chunks).
BATCH_ROWS = 1 << 16
BATCH_CHUNKS = 32
NEIGHBOURS = 101  # readings around one (its own included) that say what is typical there (_plain)
GROUP = ["worker", "kind"]  # whose steps form a series (the frame holds one source's rows)
LAST_OF_BIN = ("step", "line_no", "_seconds", "ts")  # where a bin is: its last step
# Counts of bad iterations (Megatron's `number of nan iterations`): a non-zero count is a non-finite
# loss the line no longer shows, so its step is never binned (a bin's median would hide it).
COUNTED_BAD = ("nan_iterations",)


class Condenser:
    """A record sink (memlog/records.py RecordSink): one source's records on their way to the
    records table, binned a batch of chunks at a time. Each worker and kind's last step and the
    steps of its current segment are carried from batch to batch."""

    def __init__(self) -> None:
        self.carried: dict[tuple, tuple[int, int]] = {}  # (worker, kind) -> (last step, steps in its segment)
        self.pending: list[pl.DataFrame] = []
        self.pending_rows = 0
        self.event_lines: list[pl.Series] = []
        self.first_line: int | None = None

    def add(self, rows: pl.DataFrame | None, events: list[pl.DataFrame], first_line: int, open_since: int | None) -> list[pl.DataFrame]:
        """`rows`: one chunk's compact records (tables.compact_records) of one source, or None;
        `events`: the event rows the chunk yielded (a chunk without records too);
        `first_line`: the chunk's first line; `open_since`: ChunkParser.open_since() after it.
        Returns the records of a full batch, binned, or nothing yet."""
        if rows is not None:
            self.pending.append(rows)
            self.pending_rows += rows.height
        self.event_lines += [frame["line_no"].cast(pl.Int64) for frame in events]
        self.first_line = first_line if self.first_line is None else self.first_line
        return self.finish(open_since) if self.pending_rows >= BATCH_ROWS or len(self.pending) >= BATCH_CHUNKS else []

    def held(self) -> list[pl.DataFrame]:
        """The records of the batch not yet full, as read (not binned): what a reader that judges
        before the end of its input (memlog/watch.py) adds to the records already returned."""
        return list(self.pending)

    def finish(self, open_since: int | None) -> list[pl.DataFrame]:
        """The held records, binned; `open_since` as in add() (call before the source's last blocks)."""
        pending, event_lines, first_line = self.pending, self.event_lines, self.first_line
        self.pending, self.pending_rows, self.event_lines, self.first_line = [], 0, [], None
        if not pending:
            return []
        # One frame either way (small frames held to the end fragment memory: BATCH_ROWS).
        rows = pl.concat(pending, how="diagonal_relaxed").rechunk()
        if "step" not in rows.columns:  # only lines that take a neighbour's step
            return [rows]
        if not rows["line_no"].is_sorted():
            rows = rows.sort("line_no", maintain_order=True)
        rows = self._numbered(rows)
        if (rows["_n"].max() or 0) < 2 * CONDENSE_AFTER:
            return [rows.drop("_n")]
        events = pl.concat(event_lines) if event_lines else pl.Series([], dtype=pl.Int64)
        return [_condensed(rows, events, first_line or 0, open_since)]

    def _numbered(self, rows: pl.DataFrame) -> pl.DataFrame:
        """`rows` (in line order) with `_n`: each step's number within its worker and kind's
        segment, as tables.build_records will cut them (a step below the one before starts one)."""
        carried = pl.DataFrame(
            [(w, k, last, n) for (w, k), (last, n) in self.carried.items()],
            schema={"worker": rows.schema["worker"], "kind": rows.schema["kind"], "_last": pl.Int64, "_count": pl.Int64},
            orient="row",
        )
        step, has_step = pl.col("step"), pl.col("step").is_not_null()
        rows = rows.join(carried, on=GROUP, how="left", maintain_order="left")
        before = pl.coalesce(step.shift(1).forward_fill().over(GROUP), pl.col("_last"))
        rows = rows.with_columns(_segment=(has_step & (step < before)).fill_null(False).cum_sum().over(GROUP))
        in_segment = has_step.cum_sum().over([*GROUP, "_segment"])
        rows = rows.with_columns(
            _n=pl.when(has_step).then(in_segment + pl.when(pl.col("_segment") == 0).then(pl.col("_count").fill_null(0)).otherwise(0))
        ).drop("_last", "_count", "_segment")
        ends = rows.filter(has_step).group_by(GROUP).agg(step.last(), pl.col("_n").last())
        for worker, kind, last, n in ends.iter_rows():
            self.carried[worker, kind] = (last, n)
        return rows


def _condensed(rows: pl.DataFrame, event_lines: pl.Series, first_line: int, open_since: int | None) -> pl.DataFrame:
    """`rows` (numbered: `_n`) with the interior of each run of plain steps binned. The n-th step of
    a worker and kind's segment falls in bin floor(CONDENSE_AFTER * ln(n / CONDENSE_AFTER)) once
    n >= 2 * CONDENSE_AFTER (before, each step is its own): bins about n / CONDENSE_AFTER steps
    wide, the same wherever batches start."""
    # Runs are made of step lines; the step-less ones only cut them (a DeepSpeed log's million
    # memory lines are not windowed). Every step line takes part, even the first of a segment that
    # cannot be binned yet: it is where a restart cuts the run.
    has_step = pl.col("step").is_not_null()
    stepless = rows.filter(~has_step)
    others = stepless.drop("_n").with_columns(steps=pl.lit(1, dtype=pl.Int64))
    # Lines a later step could be compared with cut every run: events and step-less records.
    barriers = pl.concat([event_lines, stepless["line_no"]]).unique().sort()
    rows = rows.filter(has_step)
    rows = rows.with_columns(
        _plain=_plain(rows, first_line, open_since),
        _epoch=barriers.search_sorted(rows["line_no"], side="right"),
    )
    step, plain, epoch = pl.col("step"), pl.col("_plain"), pl.col("_epoch")
    new_run = (
        ~plain | ~plain.shift(1) | (epoch != epoch.shift(1)) | (step <= step.shift(1)) | (pl.col("format") != pl.col("format").shift(1))
    ).fill_null(True)
    rows = rows.with_columns(_run=new_run.cum_sum().over(GROUP))
    position, length = pl.int_range(pl.len()).over([*GROUP, "_run"]), pl.len().over([*GROUP, "_run"])
    inner = plain & (position > 0) & (position < length - 1)
    bin_of = (CONDENSE_AFTER * (pl.col("_n") / CONDENSE_AFTER).log()).floor().cast(pl.Int64)
    rows = rows.with_columns(_bin=pl.when(inner).then(bin_of))
    helpers = ["_plain", "_epoch", "_n", "_run", "_bin"]
    exact = rows.filter(pl.col("_bin").is_null()).drop(helpers).with_columns(steps=pl.lit(1, dtype=pl.Int64))
    binned = rows.filter(pl.col("_bin").is_not_null())
    columns = [c for c in rows.columns if c not in helpers]
    bins = binned.group_by([*GROUP, "_run", "_bin"], maintain_order=True).agg(
        *(_summary(c) for c in columns if c not in GROUP), steps=pl.len().cast(pl.Int64)
    ).select(*columns, "steps")
    return pl.concat([others, exact, bins], how="diagonal_relaxed").sort("line_no", maintain_order=True)


def _plain(rows: pl.DataFrame, first_line: int, open_since: int | None) -> pl.Series:
    """Steps that may be binned: past their segment's first 2 * CONDENSE_AFTER, settled lines of
    this batch, every value a possible reading, and no memory reading above CAPACITY_SLACK times
    the median of its worker's readings around it. The capacity is known only at the end, and a
    reading above it is above its neighbours too, so corrupt-readings still sees it alone; a leak's
    rise is not above them. (Unless the neighbours are above the capacity themselves, within its
    slack: module docstring.)"""
    line = pl.col("line_no")
    checks = [pl.col("_n") >= 2 * CONDENSE_AFTER, line >= first_line]  # past its segment's first steps
    if open_since is not None:
        checks.append(line < open_since)
    for column in (c for c in ALL_VALUE_COLUMNS if c in rows.columns):
        value = pl.col(column)
        impossible = impossible_reading(value, column, None)
        possible = value.is_finite() if impossible is None else value.is_finite() & ~impossible[0]
        if column in MEMORY_COLUMNS:
            around = value.rolling_median(NEIGHBOURS, center=True, min_samples=1).over(GROUP)
            possible = possible & (value <= CAPACITY_SLACK * around)
        elif column in COUNTED_BAD:
            possible = possible & (value == 0)  # a step that counted NaN iterations stays a record of its own
        checks.append(value.is_null() | possible)
    return rows.select(pl.all_horizontal(checks).alias("_plain")).to_series()


def _summary(column: str) -> pl.Expr:
    """A column of a bin: where it is (its last step), the median of each value, the labels."""
    if column in LAST_OF_BIN:
        return pl.col(column).last()
    if column in ALL_VALUE_COLUMNS:
        # A reading the log holds, not the mean of two (stairs stay on their levels; series._binned).
        return pl.col(column).quantile(0.5, interpolation="lower")
    if column == "repeated":
        return pl.col(column).max()
    return pl.col(column).first()
