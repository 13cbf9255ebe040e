"""Series: one metric of one worker over one restart segment, ordered by step.

Rules judge series, never raw rows: a series never mixes ranks, pipeline stages or restarts, so
nothing is ever averaged across them. Non-finite and impossible values are dropped here, kept with
the reason, and reported as corrupt readings (rule corrupt-readings) rather than fed to the
statistics. Each kept point carries its timestamp when the log has one (wall-time projections).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import polars as pl

from memlog.columns import MEMORY_COLUMNS, MemoryColumn

# No single accelerator holds more than this; a device reading above it is impossible even when
# the log does not reveal the capacity (mmdetection #6283's `memory: 1136404462`).
MAX_DEVICE_GIB = 1024.0
# Slack above a known capacity before a reading counts as impossible (rounding, GB vs GiB).
CAPACITY_SLACK = 1.05


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
    above it, negative readings and non-finite memory readings are dropped into `corrupt`."""
    if records.is_empty() or column not in records.columns:
        return []
    rows = records.filter((pl.col("kind") == kind) & pl.col(column).is_not_null())
    if rows.is_empty():
        return []
    rows = rows.with_columns(_seconds=_seconds(rows), _why=_impossible(column, capacity_gib))
    out: list[Series] = []
    for (source, worker, segment), group in rows.group_by(["source", "worker", "segment"], maintain_order=True):
        group = group.sort("step")
        series = Series(SeriesKey(source, worker, segment), column, group["rank"][0], [], [], [])
        for step, value, line_no, seconds, why in zip(group["step"], group[column], group["line_no"], group["_seconds"], group["_why"]):
            if why is not None:
                series.corrupt.append(Corrupt(line_no, value, step, why))
                continue
            series.steps.append(step)
            series.values.append(value)
            series.line_nos.append(line_no)
            series.times.append(seconds)
        out.append(series)
    return out


def _seconds(rows: pl.DataFrame) -> pl.Series:
    """Logger timestamps (`2025-03-04 17:22:10,931`, ISO `T`, `.` or `,` fractions) as seconds."""
    if "ts" not in rows.columns or rows["ts"].dtype != pl.String:
        return pl.Series([None] * rows.height, dtype=pl.Float64)
    parsed = (
        pl.col("ts").str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
    )
    return rows.select((parsed.dt.epoch("ms") / 1000).alias("s"))["s"]


def _impossible(column: str, capacity_gib: float | None) -> pl.Expr:
    """Why a reading cannot be true, or null. A NaN loss is a finding of its own (nan-loss), a NaN
    memory reading is not a reading at all."""
    value = pl.col(column)
    if column not in MEMORY_COLUMNS:
        return pl.lit(None, dtype=pl.String)
    is_host = MEMORY_COLUMNS[column].is_host
    limit = capacity_gib * CAPACITY_SLACK if capacity_gib else (None if is_host else MAX_DEVICE_GIB)
    why = pl.when(value.is_nan() | value.is_infinite()).then(pl.lit("not a number")).when(value < 0).then(pl.lit("negative"))
    if limit is not None:
        why = why.when(value > limit).then(pl.lit("above capacity"))
    return why.otherwise(pl.lit(None, dtype=pl.String))
