"""Series: one metric of one worker over one restart segment, ordered by step.

Rules judge series, never raw rows: a series never mixes ranks, pipeline stages or restarts, so
nothing is ever averaged across them. Non-finite and impossible values are dropped here, counted,
and reported as corrupt readings rather than fed to the statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

from memlog.columns import MEMORY_COLUMNS, MemoryColumn


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
    corrupt: list[tuple[int, float]] = field(default_factory=list)  # (line_no, value) dropped

    @property
    def memory(self) -> MemoryColumn | None:
        return MEMORY_COLUMNS.get(self.column)

    def __len__(self) -> int:
        return len(self.steps)


def build_series(records: pl.DataFrame, column: str, capacity_gib: float | None = None, kind: str = "train") -> list[Series]:
    """Series of `column` per (source, worker, segment) for records of `kind`."""
    if records.is_empty() or column not in records.columns:
        return []
    rows = records.filter((pl.col("kind") == kind) & pl.col(column).is_not_null())
    out: list[Series] = []
    for (source, worker, segment), group in rows.group_by(["source", "worker", "segment"], maintain_order=True):
        group = group.sort("step")
        series = Series(SeriesKey(source, worker, segment), column, group["rank"][0], [], [], [])
        for step, value, line_no in zip(group["step"], group[column], group["line_no"]):
            if _impossible(column, value, capacity_gib):
                series.corrupt.append((line_no, value))
                continue
            series.steps.append(step)
            series.values.append(value)
            series.line_nos.append(line_no)
        out.append(series)
    return out


def _impossible(column: str, value: float, capacity_gib: float | None) -> bool:
    if not math.isfinite(value):
        return column in MEMORY_COLUMNS  # a NaN loss is a finding of its own, a NaN memory reading is not
    if column in MEMORY_COLUMNS:
        # Memory can't be negative, nor exceed the device (5% slack for rounding and units).
        limit = capacity_gib * 1.05 if capacity_gib and not MEMORY_COLUMNS[column].is_host else None
        return value < 0 or (limit is not None and value > limit)
    return False
