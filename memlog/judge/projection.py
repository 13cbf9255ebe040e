"""Where a series' fitted growth reaches capacity: the step, and the wall time when the log has
timestamps (memory-leak's projection, read from the shape of memlog/judge/trend.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memlog.judge import stats
from memlog.judge.trend import Shape
from memlog.tables.series import Series


@dataclass(frozen=True)
class Projection:
    capacity_gib: float
    step: float  # projected step at which the series reaches capacity
    from_step: float  # last logged step the projection starts from
    seconds: float | None  # wall time from the last logged step to capacity, when timestamps exist
    at: str | None  # projected wall-clock time (ISO, the log's own clock), when timestamps exist

    @property
    def steps_left(self) -> float:
        return self.step - self.from_step


def project(series: Series, shape: Shape, capacity_gib: float | None) -> Projection | None:
    """Where the tail's fitted growth reaches capacity: step, and wall time when the log has timestamps.

    Starts from the highest of the fitted value and the last reading (for a sawtooth, the top of
    the last cycle: the peaks reach capacity first)."""
    if not capacity_gib or not shape.fit or shape.fit.slope <= 0:
        return None
    last_step = shape.tail_x[-1]
    fitted_now = shape.fit.intercept + shape.fit.slope * last_step
    if shape.sawtooth:
        last_cycle = shape.tail_values[-max(2, round(shape.sawtooth.period / max(shape.interval or 1, 1))) :]
        fitted_now += max(last_cycle) - min(last_cycle)
    step = stats.project_crossing(last_step, max(fitted_now, shape.tail_values[-1]), shape.fit.slope, capacity_gib)
    if step is None:
        return None
    seconds = at = None
    rate = seconds_per_step(series)
    if rate is not None:
        seconds = (step - last_step) * rate
        last_time = series.times[-1] if series.times else None
        if last_time is not None and math.isfinite(seconds) and seconds < 1e10:
            moment = datetime.fromtimestamp(last_time, tz=timezone.utc) + timedelta(seconds=seconds)
            at = moment.strftime("%Y-%m-%d %H:%M")
    return Projection(capacity_gib, step + series.x_origin, last_step + series.x_origin, seconds, at)


def seconds_per_step(series: Series) -> float | None:
    """Wall time per optimizer step over the series, from its timestamps (None without them)."""
    pairs = [(s, t) for s, t in zip(series.x, series.times or []) if t is not None]
    if len(pairs) < 2 or pairs[-1][0] <= pairs[0][0] or pairs[-1][1] <= pairs[0][1]:
        return None
    return (pairs[-1][1] - pairs[0][1]) / (pairs[-1][0] - pairs[0][0])
