"""The shape of one memory series: warmup knee, then the tail's level, slope and trend.

Every memory rule reads the same `Shape`, so a leak, a plateau and a stable run are judged from
one split of the series into warmup and tail; the rules only differ in the gates they apply.
The user-needs lesson behind this: fit the trend after a warm-up window, never from step 1,
because the first steps always allocate (optimizer state, caches, allocator warm-up).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from memlog import stats
from memlog.series import Series

# A split counts as warmup when the tail grows at most this fraction of the warmup's rate.
WARMUP_SLOPE_RATIO = 0.2
# ...and the warmup rise stands out from the noise by this many noise sigmas.
WARMUP_RISE_SIGMAS = 4.0
MIN_TAIL_POINTS = 3


@dataclass(frozen=True)
class Shape:
    n: int
    tail_start: int  # index of the first tail point (0 when there is no warmup)
    first_value: float
    rise: float  # warmup rise, tail start minus first value (0 when no warmup)
    tail_steps: tuple[int, ...]
    tail_values: tuple[float, ...]
    level: float  # median of the tail
    noise: float  # robust sigma of the point-to-point noise in the tail
    fit: stats.SlopeFit | None  # Theil-Sen over the tail, per step
    trend: stats.TrendTest | None  # Mann-Kendall over the tail

    @property
    def has_warmup(self) -> bool:
        return self.tail_start > 0

    @property
    def knee_step(self) -> int:
        return self.tail_steps[0]

    @property
    def span(self) -> int:
        return self.tail_steps[-1] - self.tail_steps[0] if self.tail_steps else 0

    @property
    def growth(self) -> float:
        """Fitted growth over the tail (GiB)."""
        return self.fit.slope * self.span if self.fit else 0.0

    @property
    def r_squared(self) -> float | None:
        """How straight the tail is (1.0 = a perfect line), from an ordinary least-squares fit."""
        line = stats.ols(self.tail_steps, self.tail_values)
        if line is None or len(self.tail_values) < 3:
            return None
        slope, intercept = line
        mean = sum(self.tail_values) / len(self.tail_values)
        total = sum((v - mean) ** 2 for v in self.tail_values)
        if total == 0:
            return None
        residual = sum((v - (intercept + slope * x)) ** 2 for x, v in zip(self.tail_steps, self.tail_values))
        return 1 - residual / total

    def is_flat(self, max_growth_gib: float, max_growth_pct: float) -> bool:
        """Fitted tail growth within the tolerance: GiB or percent of level, whichever is larger."""
        return abs(self.growth) <= max(max_growth_gib, self.level * max_growth_pct / 100)

    @property
    def spread(self) -> float:
        return max(self.tail_values) - min(self.tail_values) if self.tail_values else 0.0


def _warmup_end(steps: list[int], values: list[float]) -> int:
    knee = stats.find_knee(steps, values, min_left=1, min_right=MIN_TAIL_POINTS)
    if knee is None or knee.index <= 0:
        return 0
    rise = values[knee.index] - values[0]
    noise = stats.robust_sigma(values[knee.index :])
    left_rate = rise / max(steps[knee.index] - steps[0], 1)
    if rise <= 0 or left_rate <= 0 or rise <= WARMUP_RISE_SIGMAS * noise:
        return 0
    if knee.right_slope > WARMUP_SLOPE_RATIO * left_rate:
        return 0  # it keeps rising at a comparable rate: no warmup, one trend
    return knee.index


@functools.lru_cache(maxsize=1024)
def _shape(steps: tuple[int, ...], values: tuple[float, ...]) -> Shape:
    start = _warmup_end(list(steps), list(values)) if len(steps) >= MIN_TAIL_POINTS + 1 else 0
    tail_s, tail_v = steps[start:], values[start:]
    return Shape(
        n=len(steps),
        tail_start=start,
        first_value=values[0],
        rise=values[start] - values[0] if start else 0.0,
        tail_steps=tail_s,
        tail_values=tail_v,
        level=stats.median(tail_v),
        noise=stats.robust_sigma(tail_v),
        fit=stats.theil_sen(tail_s, tail_v),
        trend=stats.mann_kendall(tail_v),
    )


def shape_of(series: Series) -> Shape:
    return _shape(tuple(series.steps), tuple(series.values))
