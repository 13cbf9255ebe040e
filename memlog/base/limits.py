"""The bounds memlog applies, in one place: what a memory reading can physically be, and how much
of a run is held or judged point by point. Each is a named number with the reason for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from memlog.base.columns import MEMORY_COLUMNS

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

# No single accelerator holds more than this; a device reading above it is impossible even when the
# log does not reveal the capacity (mmdetection #6283's `memory: 1136404462`).
MAX_DEVICE_GIB = 1024.0
# No single node holds more host memory than this (the largest servers hold a few tens of TiB).
MAX_HOST_GIB = 64 * 1024.0
# Slack above a known capacity before a reading counts as impossible (rounding, GB vs GiB).
CAPACITY_SLACK = 1.05
# A series longer than this is binned before it reaches Python (series._binned): a dense 1 GiB log
# holds ~570k steps per rank, and the statistics downsample for pairwise work anyway. 2000 points
# keeps knees, stairs and sawtooth cycles of a few thousand steps visible; every shorter series
# (all sample logs) is judged point by point.
MAX_SERIES_POINTS = 2000
# Evidence, not an archive: beyond this many events of one kind, events are only counted.
MAX_EVENTS_PER_KIND = 1000
# Restart steps a report lists (the first ones); more are said as "at least N times".
MAX_RESTARTS_LISTED = 100
# An event keeps the start of its line as evidence; OOM lines are long.
EVENT_TEXT_CHARS = 300


def impossible_reading(value: pl.Expr, column: str, capacity_gib: float | pl.Expr | None) -> tuple[pl.Expr, pl.Expr] | None:
    """Whether a reading of `column` cannot be true, and why (a reason or null); None for a column
    whose every reading is possible. A NaN loss is a finding of its own (nan-loss), a NaN memory
    reading is not a reading at all. `capacity_gib` is the capacity the reading is judged against
    (a number, or an expression per row: null where none applies); without one, the physical bound
    of the device or the node applies, so an absurd number (1e20 GiB) never reaches the statistics."""
    if column not in MEMORY_COLUMNS:
        return None
    physical = MAX_HOST_GIB if MEMORY_COLUMNS[column].is_host else MAX_DEVICE_GIB
    # A capacity never lifts the physical bound (a percentage of an absurd reading gives an absurd one).
    if isinstance(capacity_gib, pl.Expr):
        limit = pl.min_horizontal(pl.coalesce(capacity_gib * CAPACITY_SLACK, pl.lit(physical)), pl.lit(physical))
    else:
        limit = pl.lit(min(capacity_gib * CAPACITY_SLACK, physical) if capacity_gib else physical)
    reasons = [(value.is_nan() | value.is_infinite(), "not a number"), (value < 0, "negative"), (value > limit, "above capacity")]
    why: Then | ChainedThen = pl.when(reasons[0][0]).then(pl.lit(reasons[0][1]))
    for condition, reason in reasons[1:]:
        why = why.when(condition).then(pl.lit(reason))
    return pl.any_horizontal(condition for condition, _ in reasons), why.otherwise(pl.lit(None, dtype=pl.String))
