"""Series: one metric of one worker over one restart segment, ordered by step.

Rules judge series, never raw rows: a series never mixes ranks, pipeline stages or restarts, so
nothing is ever averaged across them. Non-finite and impossible values are dropped here, kept with
the reason, and reported as corrupt readings (rule corrupt-readings) rather than fed to the
statistics. Each kept point carries its timestamp when the log has one (wall-time projections).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import polars as pl

from memlog.columns import MEMORY_COLUMNS, MemoryColumn
from memlog.tables import group_key, with_seconds

# No single accelerator holds more than this; a device reading above it is impossible even when
# the log does not reveal the capacity (mmdetection #6283's `memory: 1136404462`).
MAX_DEVICE_GIB = 1024.0
# Slack above a known capacity before a reading counts as impossible (rounding, GB vs GiB).
CAPACITY_SLACK = 1.05
# A series longer than this is binned before it reaches Python: consecutive steps become one point
# (see _binned). A dense 1 GiB log holds ~570k steps per rank; the statistics downsample to
# stats.MAX_PAIRWISE_POINTS for pairwise work anyway, and turning every step into Python objects
# was two thirds of the wall time. 2000 points keeps knees, stairs and sawtooth cycles of a few
# thousand steps visible; every shorter series (all sample logs) is judged point by point.
MAX_SERIES_POINTS = 2000


class Corrupt(NamedTuple):
    """A reading dropped from a series because it cannot be true."""

    line_no: int
    value: float
    step: int
    reason: str  # "not a number", "negative", "above capacity"


@dataclass(frozen=True)
class SeriesKey:
    source: str
    worker: str
    segment: int

    def label(self, many_sources: bool) -> str:
        name = f"{self.source}:{self.worker}" if many_sources else self.worker
        return f"{name} (segment {self.segment + 1})" if self.segment else name


@dataclass
class Series:
    key: SeriesKey
    column: str
    rank: int | None
    steps: list[int]
    values: list[float]
    line_nos: list[int]
    corrupt: list[Corrupt] = field(default_factory=list)  # readings dropped as impossible
    times: list[float | None] = field(default_factory=list)  # seconds (the log's clock), per kept point

    @property
    def memory(self) -> MemoryColumn | None:
        return MEMORY_COLUMNS.get(self.column)

    def __len__(self) -> int:
        return len(self.steps)


def build_series(records: pl.DataFrame, column: str, capacity_gib: float | None = None, kind: str = "train") -> list[Series]:
    """Series of `column` per (source, worker, segment) for records of `kind`.

    `capacity_gib` is the capacity of what the column measures (device or host memory); readings
    above it, negative readings and non-finite memory readings are dropped into `corrupt`.
    Series longer than MAX_SERIES_POINTS are binned in polars (see _binned) before they reach Python.
    `records` may carry a `_seconds` column (timestamps already parsed, see with_seconds), and must
    be in the records table's order (tables.build_records): each group's steps ascend row by row."""
    if records.is_empty() or column not in records.columns:
        return []
    keys = ["source", "worker", "segment"]
    records = with_seconds(records)
    # Only the columns a series needs are filtered (not a copy of the whole table per series).
    steps = pl.col("_steps") if "_steps" in records.columns else pl.lit(1, dtype=pl.Int64).alias("_steps")  # condense.py
    rows = records.select(*keys, "kind", "rank", "step", "line_no", "_seconds", steps, pl.col(column).alias("_value"))
    rows = _only(rows, (pl.col("kind") == kind) & pl.col("_value").is_not_null()).drop("kind")
    if rows.is_empty():
        return []
    rows = rows.with_columns(_series=group_key(rows, keys))  # one cheap key for the groups below
    # Each group with the rank of its earliest step.
    groups = rows.group_by("_series").agg(pl.col(keys).first(), pl.col("rank").sort_by("step").first()).drop("_series").sort(keys)
    corrupt: dict[tuple, list[Corrupt]] = {}
    impossible = impossible_reading(pl.col("_value"), column, capacity_gib)
    if impossible is not None:
        is_impossible, why = impossible
        bad = rows.filter(is_impossible).with_columns(_why=why).sort([*keys, "step"])
        for source, worker, segment, line_no, value, step, reason in bad.select(*keys, "line_no", "_value", "step", "_why").iter_rows():
            corrupt.setdefault((source, worker, segment), []).append(Corrupt(line_no, value, step, reason))
        rows = _only(rows, ~is_impossible)
    kept = _binned(rows, keys)
    points: dict[tuple, tuple[int, int]] = {}  # group -> (offset, length) in `kept`
    bounds = kept.group_by(keys, maintain_order=True).agg(pl.len().alias("n"))
    offset = 0
    for source, worker, segment, n in bounds.iter_rows():
        points[(source, worker, segment)] = (offset, n)
        offset += n
    steps, values, line_nos, times = (kept[c].to_list() for c in ("step", "_value", "line_no", "_seconds"))
    out: list[Series] = []
    for source, worker, segment, rank in groups.iter_rows():
        start, n = points.get((source, worker, segment), (0, 0))
        end = start + n
        out.append(
            Series(
                SeriesKey(source, worker, segment), column, rank, steps[start:end], values[start:end], line_nos[start:end],
                corrupt=corrupt.get((source, worker, segment), []), times=times[start:end],
            )
        )
    return out


def _only(rows: pl.DataFrame, condition: pl.Expr) -> pl.DataFrame:
    """`rows.filter(condition)`, without a copy of millions of rows when all pass (a dense log's do)."""
    passes = rows.select(condition.alias("passes")).to_series()
    return rows if passes.all() else rows.filter(passes)


def _binned(kept: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Kept points sorted by group and step; a group longer than MAX_SERIES_POINTS binned down to it.

    A bin's point is the median of its values (the first non-finite value if the bin has one, so a
    NaN loss stays visible), at the bin's last step, with that step's line and time. The first and
    last points of a series are bins of their own: where a series starts and ends stays exact.
    The records are in line order, so each group's steps already ascend: only the points that come
    out are sorted, not the millions of rows of a dense log. `_series` is the group's key.
    A record condensed while reading (memlog/condense.py) counts as the `_steps` steps it stands
    for: bins hold equal numbers of steps, not of records."""
    if (kept.group_by("_series").agg(pl.col("_steps").sum())["_steps"].max() or 0) <= MAX_SERIES_POINTS:
        return kept.sort([*keys, "step"])
    steps = pl.col("_steps")
    kept = kept.with_columns(_i=(steps.cum_sum() - steps).over("_series"), _n=steps.sum().over("_series"))
    inner = MAX_SERIES_POINTS - 2
    last = pl.col("_n") - 1
    bin_of = (
        pl.when((pl.col("_n") <= MAX_SERIES_POINTS) | (pl.col("_i") == 0)).then(pl.col("_i"))
        .when(pl.col("_i") == last).then(MAX_SERIES_POINTS - 1)
        .otherwise(1 + (pl.col("_i") - 1) * inner // (pl.col("_n") - 2))
    )
    value = pl.col("_value")
    median = _weighted_median(value, steps) if kept["_steps"].max() > 1 else value.median()
    return (
        kept.with_columns(_bin=bin_of)
        .group_by("_series", "_bin", maintain_order=True)
        .agg(
            pl.col(keys).first(), pl.col("step").last(), pl.col("line_no").last(), pl.col("_seconds").last(),
            pl.when(value.is_finite().all()).then(median).otherwise(value.filter(~value.is_finite()).first()).alias("_value"),
        )
        .sort([*keys, "step"])
    )


def _weighted_median(value: pl.Expr, weight: pl.Expr) -> pl.Expr:
    """The (lower) median of values that each count `weight` times: a condensed record's median
    stands for its steps. A stair step inside the bin then stays on one of its levels, as the
    median of the steps themselves does, rather than halfway (records of equal weight split a bin
    exactly in half at every step)."""
    cumulative = weight.sort_by(value).cum_sum() * 2
    return value.sort().filter(cumulative >= weight.sum()).first()


def impossible_reading(value: pl.Expr, column: str, capacity_gib: float | None) -> tuple[pl.Expr, pl.Expr] | None:
    """Whether a reading of `column` cannot be true, and why (a reason or null); None for a column
    whose every reading is possible. A NaN loss is a finding of its own (nan-loss), a NaN memory
    reading is not a reading at all."""
    if column not in MEMORY_COLUMNS:
        return None
    is_host = MEMORY_COLUMNS[column].is_host
    limit = capacity_gib * CAPACITY_SLACK if capacity_gib else (None if is_host else MAX_DEVICE_GIB)
    reasons = [(value.is_nan() | value.is_infinite(), "not a number"), (value < 0, "negative")]
    if limit is not None:
        reasons.append((value > limit, "above capacity"))
    why = pl.when(reasons[0][0]).then(pl.lit(reasons[0][1]))
    for condition, reason in reasons[1:]:
        why = why.when(condition).then(pl.lit(reason))
    return pl.any_horizontal(condition for condition, _ in reasons), why.otherwise(pl.lit(None, dtype=pl.String))
