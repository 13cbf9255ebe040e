"""The shape of one memory series: warmup knee, then the tail's level, slope, trend and pattern.

Every memory rule reads the same `Shape`, so a leak, a plateau, a periodic retention and a stable
run are judged from one split of the series into warmup and tail and one reading of the tail's
pattern; the rules only differ in the gates they apply. The user-needs lessons behind this:

- fit the trend after a warm-up window, never from step 1, because the first steps always
  allocate (optimizer state, caches, allocator warm-up); a warmup ends where the rise has
  demonstrably stopped, so a line that merely wobbles is never cut into "warmup + plateau";
- a sawtooth (memory held until a flush, then released) is judged by its floors: floors that
  rise are a leak underneath, floors that return to the same level are periodic retention;
- stairs (host memory under offload, per-save ratchets) are a leak read as "+X every N steps";
- a running maximum only goes up: a few new peaks that stop are a settled high-water mark, and
  only a climb that goes on through the end of the log is growth.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from memlog.judge import stats

# A split counts as warmup when the tail's slope, at the upper end of its 95 % confidence
# interval, is at most this fraction of the warmup's rate: the rise has demonstrably slowed down.
WARMUP_SLOPE_RATIO = 0.2
# ...and the warmup rise stands out from the tail's noise by this many noise sigmas.
WARMUP_RISE_SIGMAS = 4.0
MIN_TAIL_POINTS = 3
# A warmup comes first: the tail after it holds at least this share of the points, so the last
# flat run of a staircase (or of a growth that paused) is never taken for a plateau.
MIN_TAIL_SHARE = 1 / 3
# A warmup may bend more than once (a jump, then caches filling towards their cap): split again
# while the tail still trends upward (Mann-Kendall p below TAIL_TREND_P), at most this often.
MAX_WARMUP_SPLITS = 3
TAIL_TREND_P = 0.05
# A still-rising tail is the end of a saturating warmup when a curve approaching a cap beats a
# straight line by this much BIC (10: very strong evidence) and the data come within noise (or
# this percentage of the cap) of the cap.
SATURATION_BIC = 10.0
SATURATION_NEAR_PCT = 0.25
# A series that rises from its first point towards a cap it has not reached is still a warmup when
# the curve beats a line by SATURATION_BIC and its rate fell to at most this share of the first.
SATURATION_SLOWDOWN = 0.25
# A running maximum has settled when the flat run after its last new peak covers at least this
# share of the logged points (and MIN_TAIL_POINTS): its new peaks stopped, whatever their size.
SETTLED_SHARE = 0.5
# Stairs whose readings move by at most this many ticks of the print's resolution from one line to
# the next are its rounding (stats.print_ticks): a rounded line moves one tick at a time, two with noise.
PRINT_TICKS = 2.0
# Patterns are looked for in series of at least this many points (a sawtooth also needs 3 cycles).
MIN_PATTERN_POINTS = 6
# Growth that starts after a flat stretch is judged from its onset when a flat-then-rising hinge
# explains the tail better than one line by this much BIC (10: very strong evidence), with at least
# ONSET_MIN_BEFORE points before it and MIN_TAIL_POINTS after, and the stretch before it moved by at
# most ONSET_FLAT_SHARE of the growth after it.
ONSET_BIC = 10.0
ONSET_MIN_BEFORE = 8
ONSET_FLAT_SHARE = 0.25
# The trend test is corrected for autocorrelated noise on tails of at least this many points: on
# fewer, a lag-1 autocorrelation is not estimable (a clean 7-point line gives any value).
AUTOCORRELATION_MIN_POINTS = 20
# ...and only while the growth is within this many noise sigmas: a trend far above its noise is no
# wander (and the residuals of a clean line, rounding left over, autocorrelate for nothing).
AUTOCORRELATION_MAX_EFFECT = 20.0


@dataclass(frozen=True)
class Shape:
    """The tail is what the trend is judged on: the points after any warmup, or, when growth starts
    after a flat stretch, the points from its onset (then `onset` is set and the stretch before it
    is neither warmup nor tail)."""

    n: int
    tail_start: int  # index of the first tail point
    first_value: float
    rise: float  # warmup rise, tail start minus first value (0 when no warmup)
    tail_steps: tuple[int, ...]  # the steps of the tail's points, for messages
    tail_values: tuple[float, ...]
    level: float  # median of the tail
    noise: float  # robust sigma of the point-to-point noise in the tail (of the floors for a sawtooth)
    fit: stats.SlopeFit | None  # Theil-Sen per step: over the tail, or over the cycle floors of a sawtooth
    trend: stats.TrendTest | None  # Mann-Kendall over the same points as `fit`
    pattern: str = "line"  # how the tail reads: "line" (incl. flat), "stairs", "sawtooth"
    stairs: stats.Stairs | None = None
    sawtooth: stats.Period | None = None
    running_max: bool = False
    late_rate_ratio: float | None = None  # running max: growth rate over the last third / whole tail
    tail_x: tuple[float, ...] = ()  # where the statistics place the tail's points, in steps (series.Series.x)
    warmup_end: int = 0  # index where the warmup ends (0: none)
    warmup_step: int | None = None  # its step, when an onset comes after it
    onset: int | None = None  # index where growth starts after a flat stretch, when it does
    # Robust spread around the fitted model: the tail's line, or after an onset the flat stretch before
    # it and the line after it; and the lag-1 autocorrelation of those residuals.
    residual_noise: float = 0.0
    autocorrelation: float = 0.0
    # After a warmup: how much better (BIC) the tail bends towards a cap than it follows a line.
    saturation_gain: float | None = None
    # A one-off jump the tail starts at (stats.find_jump), when growth goes on after it: its size.
    jump: float | None = None
    # The whole series is a curve approaching a cap, and no steady rise is needed on top of it: a
    # warmup still settling, whatever its tail's slope (_saturates_whole, _approaching_cap).
    saturating: bool = False
    # Memory fell, then held (a first step's buffers released, an allocator trimmed): the move from
    # the first point to the level the tail starts at, negative; 0.0 when there is no such fall.
    fall: float = 0.0
    # One step up the tail starts at, after a flat stretch (from the warmup's end), memory holding
    # after it: its size (GiB); 0.0 when there is none. Not warmup and not growth.
    step_change: float = 0.0

    @property
    def has_warmup(self) -> bool:
        return self.warmup_end > 0

    @property
    def onset_step(self) -> int | None:
        return self.tail_steps[0] if self.onset is not None else None

    @property
    def fall_step(self) -> int | None:  # where a fall before the tail ends, when memory fell then held
        return self.tail_steps[0] if self.fall < 0 else None

    @property
    def step_change_step(self) -> int | None:
        return self.tail_steps[0] if self.step_change > 0 else None

    @property
    def jump_step(self) -> int | None:
        return self.tail_steps[0] if self.jump is not None else None

    @property
    def effect(self) -> float:
        """Fitted growth over the tail in units of its noise around the line: how far it stands out."""
        if self.residual_noise <= 0:
            return math.inf if self.growth > 0 else 0.0
        return self.growth / self.residual_noise

    @property
    def n_effective(self) -> float:
        """The readings the verdict rests on, as independent ones (their autocorrelation discounted)."""
        return stats.effective_points(self.points_used, self.autocorrelation)

    def effect_needed(self, most: float, least: float, z: float) -> float:
        """The effect (growth in noise SDs) that stands `z` standard errors out of this many readings'
        noise, between `least` and `most`: few readings need `most`, many need less (stats.growth_z)."""
        n = self.n_effective
        by_points = z * math.sqrt(12.0 / n) if n > 0 else math.inf
        return min(most, max(least, by_points))

    @property
    def p_increasing(self) -> float | None:
        """Mann-Kendall's one-sided p, corrected for the autocorrelation of the tail's residuals
        (stairs and sawtooth floors are judged by their pattern, not corrected)."""
        if self.trend is None:
            return None
        if self.stairs or self.sawtooth or self.effect > AUTOCORRELATION_MAX_EFFECT:
            return self.trend.p_increasing
        return stats.adjusted_p_increasing(self.trend, self.autocorrelation)

    @property
    def knee_step(self) -> int:
        """Where the warmup ends (the first tail point when there is no onset)."""
        return self.tail_steps[0] if self.warmup_step is None else self.warmup_step

    @property
    def span(self) -> float:
        return self.tail_x[-1] - self.tail_x[0] if self.tail_x else 0

    @property
    def basis(self) -> str:
        """What the slope and trend were computed on, for evidence."""
        return "cycle floors" if self.sawtooth else "tail points"

    @property
    def points_used(self) -> int:
        return len(self.sawtooth.floors) if self.sawtooth else len(self.tail_values)

    @property
    def growth(self) -> float:
        """Fitted growth over the tail (GiB)."""
        return self.fit.slope * self.span if self.fit else 0.0

    @property
    def overall_change(self) -> float:
        """Warmup rise plus fitted tail growth: how far the series moves from its first point."""
        return self.rise + self.growth

    @functools.cached_property  # the rules read it several times per series
    def r_squared(self) -> float | None:
        """How straight the tail is (1.0 = a perfect line), from an ordinary least-squares fit."""
        line = stats.ols(self.tail_x, self.tail_values)
        if line is None or len(self.tail_values) < 3:
            return None
        slope, intercept = line
        mean = sum(self.tail_values) / len(self.tail_values)
        total = sum((v - mean) ** 2 for v in self.tail_values)
        if total == 0:
            return None
        residual = sum((v - (intercept + slope * x)) ** 2 for x, v in zip(self.tail_x, self.tail_values))
        return 1 - residual / total

    def is_flat(self, max_growth_gib: float, max_growth_pct: float) -> bool:
        """Fitted tail growth within the tolerance: GiB or percent of level, whichever is larger."""
        return abs(self.growth) <= self.tolerance(max_growth_gib, max_growth_pct)

    def tolerance(self, max_growth_gib: float, max_growth_pct: float) -> float:
        return max(max_growth_gib, self.level * max_growth_pct / 100)

    @property
    def spread(self) -> float:
        return max(self.tail_values) - min(self.tail_values) if self.tail_values else 0.0

    @property
    def interval(self) -> float | None:
        """Median distance between logged steps in the tail."""
        gaps = sorted(b - a for a, b in zip(self.tail_x, self.tail_x[1:]) if b > a)
        return gaps[len(gaps) // 2] if gaps else None

    def stair_period_steps(self) -> float | None:
        """Median number of steps between the jumps of a staircase."""
        if not self.stairs or len(self.stairs.jumps) < 2:
            return None
        at = [self.tail_x[i] for i in self.stairs.jumps]
        return stats.median([b - a for a, b in zip(at, at[1:])])


# --------------------------------------------------------------------------------------------
# warmup
# --------------------------------------------------------------------------------------------


class _Tails:
    """The Theil-Sen fit and Mann-Kendall test of each tail (the points from index `start` on) of
    one series, each computed once: the warmup search and the final shape ask about the same
    tails several times, and both methods cost O(n^2) pairs."""

    def __init__(self, steps: tuple[float, ...], values: tuple[float, ...], labels: tuple[int, ...] | None = None) -> None:
        """`steps`: the points' positions (Series.x); `labels`: their steps for messages."""
        self.steps, self.values = steps, values
        self.labels = labels if labels is not None else tuple(int(s) for s in steps)
        self._fits: dict[int, stats.SlopeFit | None] = {}
        self._trends: dict[int, stats.TrendTest | None] = {}
        self._saturations: dict[int, tuple | None] = {}

    def saturation(self, start: int) -> tuple[float, float, list[float], list[float], list[int]] | None:
        """_saturation of the tail from `start` (the warmup search and the shape ask for the same one)."""
        if start not in self._saturations:
            self._saturations[start] = stats.saturation_gain(self.steps[start:], self.values[start:])
        return self._saturations[start]

    def fit(self, start: int) -> stats.SlopeFit | None:
        if start not in self._fits:
            self._fits[start] = stats.theil_sen(self.steps[start:], self.values[start:])
        return self._fits[start]

    def trend(self, start: int) -> stats.TrendTest | None:
        if start not in self._trends:
            self._trends[start] = stats.mann_kendall(self.values[start:])
        return self._trends[start]


def _knee(tails: _Tails, start: int) -> int:
    """Index, counted from `start`, where a warmup ends in the stretch from `start` on, or 0: a steep
    rise, then a tail whose slope is bounded well below the rise's rate."""
    steps, values = tails.steps[start:], tails.values[start:]
    min_right = max(MIN_TAIL_POINTS, math.ceil(MIN_TAIL_SHARE * len(values)))
    knee = stats.find_knee(steps, values, min_left=1, min_right=min_right)
    if knee is None or knee.index <= 0:
        return 0
    i = knee.index
    rise = _tail_start_level(tails, start + i) - values[0]
    noise = stats.robust_sigma(values[i:])
    left_rate = rise / max(steps[i] - steps[0], 1)
    if rise <= 0 or left_rate <= 0 or rise <= WARMUP_RISE_SIGMAS * noise:
        return 0
    upper = _slope_upper_bound(tails, start + i)
    if upper is None or upper > WARMUP_SLOPE_RATIO * left_rate:
        return 0  # the tail may still rise at a comparable rate: no warmup, one trend
    return i


def _slope_upper_bound(tails: _Tails, start: int) -> float | None:
    """Upper end of the 95 % interval of a tail's slope: Sen's interval (robust to allocator
    spikes) once it is bounded (5+ points), the t interval of least squares for 3-4 points."""
    if len(tails.values) - start >= 5:
        fit = tails.fit(start)
        return fit.high if fit is not None and math.isfinite(fit.high) else None
    bounds = stats.ols_slope_interval(tails.steps[start:], tails.values[start:])
    return bounds[2] if bounds else None


def _tail_start_level(tails: _Tails, start: int) -> float:
    """Level at the start of a tail, from its robust (Theil-Sen) line: allocator spikes right
    after a flat stretch are not mistaken for the end of a warmup."""
    fit = tails.fit(start)
    if fit is None:
        return stats.median(tails.values[start:])
    return fit.intercept + fit.slope * tails.steps[start]


def _warmup_end(tails: _Tails) -> tuple[int, int | None]:
    """Where the warmup ends (the tail's first index), and, when its last rise was one step up after a
    flat stretch and memory then held (stats.step_change), where that flat stretch began (else None)."""
    start = 0
    for _ in range(MAX_WARMUP_SPLITS):
        more = _knee(tails, start)
        if not more:
            break
        # A hinge's knee may land a few points off a step: the step is looked for around it.
        at = stats.step_index(tails.values, start, start + more, max(MIN_TAIL_POINTS, more // 4), ONSET_MIN_BEFORE, MIN_TAIL_POINTS)
        if at is not None:
            # The stretch before the step may hold a warmup of its own (a rise in the first points, then flat).
            flat_from = start + _knee(_Tails(tails.steps[start:at], tails.values[start:at]), 0)
            if stats.step_change(tails.steps, tails.values, flat_from, at, min_before=ONSET_MIN_BEFORE, flat_share=ONSET_FLAT_SHARE, sigmas=WARMUP_RISE_SIGMAS):
                return at, flat_from
        start += more
        if not _still_rising(tails, start):
            return start, None
    if not _still_rising(tails, start):
        return start, None
    # Still rising after the knees: caches filling towards a cap since the first step (judged on the
    # whole series, where the curve shows), or since the last knee.
    return max(_saturated(tails, start), _saturated(tails, 0) if start else 0), None


def _still_rising(tails: _Tails, start: int) -> bool:
    trend = tails.trend(start)
    return trend is not None and trend.p_increasing <= TAIL_TREND_P


def _saturated(tails: _Tails, start: int) -> int:
    """A tail that still rises may be the end of a saturating warmup (caches filling towards a
    cap). When a curve approaching a cap, y = cap - c * exp(-step / tau), explains the tail much
    better than a straight line (BIC, SATURATION_BIC) and the data reach that cap within noise,
    the warmup runs to where they do. A steady leak is a line (or a cap far above the data)."""
    n = len(tails.values) - start
    if n < 2 * MIN_TAIL_POINTS + 2:
        return start
    found = tails.saturation(start)
    if found is None or found[0] < SATURATION_BIC:
        return start
    _, cap, fitted, ys, edges = found
    near = max(2 * stats.robust_sigma(ys), SATURATION_NEAR_PCT / 100 * abs(cap))
    reached = next((i for i, f in enumerate(fitted) if cap - f <= near), None)
    if reached is None or reached == 0:
        return start
    reached = edges[reached]  # back to an index of the tail
    if n - reached < max(MIN_TAIL_POINTS, math.ceil(n / 4)):
        return start
    return start + reached


def _saturates_whole(tails: _Tails, knee: int) -> bool:
    """For a series with a warmup (up to `knee`) whose tail still rises: is the whole series one curve
    approaching a cap (cap - c e^(-x/tau)), which explains it better (BIC) than the warmup line and a
    second line after the knee, and to which a steady rise (+ b x) adds no strong evidence?
    Why: the tail after a knee can be the last stretch of an exponential approach (its remaining rise
    is small and looks straight on its own), which only the whole curve shows; a leak after a warmup
    needs the added line, and a jump then a line (no curve at all) fits the knee model better."""
    found = tails.saturation(0)
    if found is None or found[0] < SATURATION_BIC:
        return False
    _, _, _, ys, edges = found
    m = len(ys)
    xs = tails.steps if m == len(tails.values) else stats.medians_between(tails.steps, edges)
    split = next((k for k in range(m) if edges[k] >= knee), m)
    curve, both = stats.cap_curve_sse(xs, ys, line=False), stats.cap_curve_sse(xs, ys, line=True)
    if curve is None or both is None or split < 2 or m - split < 2:
        return False
    knee_sse = 0.0
    for lo, hi in ((0, split), (split, m)):
        line = stats.ols(xs[lo:hi], ys[lo:hi])
        if line is None:
            return False
        knee_sse += sum((y - line[1] - line[0] * x) ** 2 for x, y in zip(xs[lo:hi], ys[lo:hi]))
    floor = 1e-12 * max(1.0, max(abs(y) for y in ys)) ** 2
    curve, both, knee_sse = max(curve, floor), max(both, floor), max(knee_sse, floor)
    # BIC with 3 parameters for the curve (cap, amplitude, tau), 4 with the line, 5 for the knee
    # model (two lines and where they meet).
    line_gain = m * math.log(curve / both) - math.log(m)
    curve_over_knee = m * math.log(knee_sse / curve) + 2 * math.log(m)
    return line_gain < SATURATION_BIC and curve_over_knee > 0


def _approaching_cap(tails: _Tails) -> bool:
    """Whether a series that rises from its first point approaches a cap: it has plainly bent (SATURATION_BIC, and its rate fell to SATURATION_SLOWDOWN of the
    first) without reaching the cap yet: caches filling, a warmup still settling."""
    if len(tails.values) < 2 * MIN_TAIL_POINTS + 2 or not _still_rising(tails, 0):
        return False
    found = tails.saturation(0)
    if found is None or found[0] < SATURATION_BIC:
        return False
    _, cap, fitted, _, _ = found
    # On cap - c e^(-x / tau), the rate at the end over the rate at the start is e^(-span / tau).
    return cap - fitted[0] > 0 and (cap - fitted[-1]) / (cap - fitted[0]) <= SATURATION_SLOWDOWN


def _onset(tails: _Tails, start: int) -> int | None:
    """Index where growth starts after a flat stretch of the tail from `start` on (stats.find_onset),
    when it is clear: a strong hinge, a flat stretch before it."""
    xs, ys = tails.steps[start:], tails.values[start:]
    if len(ys) < ONSET_MIN_BEFORE + MIN_TAIL_POINTS + 1:
        return None
    found = stats.find_onset(xs, ys, min_before=ONSET_MIN_BEFORE, min_after=MIN_TAIL_POINTS)
    if found is None or found.bic_gain < ONSET_BIC:
        return None
    at = start + found.index
    before, after = stats.theil_sen(tails.steps[start:at], tails.values[start:at]), tails.fit(at)
    if before is None or after is None or after.slope <= 0:
        return None
    moved_before = abs(before.slope) * (tails.steps[at - 1] - tails.steps[start])
    if moved_before > ONSET_FLAT_SHARE * after.slope * (tails.steps[-1] - tails.steps[at]):
        return None
    return at


def _jump(tails: _Tails, start: int) -> stats.Jump | None:
    """A one-off jump in the tail from `start` on, after which memory goes on rising (a jump followed
    by a flat level is no growth: the shape is left as it was)."""
    xs, ys = tails.steps[start:], tails.values[start:]
    if len(ys) < MIN_PATTERN_POINTS + 2:
        return None
    found = stats.find_jump(xs, ys, min_after=MIN_PATTERN_POINTS)
    if found is None:
        return None
    at = start + found.index
    if not _still_rising(tails, at):
        return None
    return stats.Jump(at, found.size)


def _settled_running_max(values: list[float]) -> int:
    """Index of the last new peak of a running maximum when the peaks stopped, else 0."""
    last_rise = max((i for i in range(1, len(values)) if values[i] > values[i - 1]), default=0)
    flat = len(values) - last_rise
    if last_rise and flat >= max(MIN_TAIL_POINTS, SETTLED_SHARE * len(values)):
        return last_rise
    return 0


# --------------------------------------------------------------------------------------------
# the shape
# --------------------------------------------------------------------------------------------


def _shape(steps: tuple[float, ...], values: tuple[float, ...], running_max: bool, labels: tuple[int, ...] | None = None) -> Shape:
    tails = _Tails(steps, values, labels)
    sawtooth = None
    if not running_max and len(steps) >= MIN_PATTERN_POINTS:
        sawtooth = stats.find_sawtooth(steps, values)
        if sawtooth and (sawtooth.floor_slope is None or len(sawtooth.floors) < 3):
            sawtooth = None
    if sawtooth:
        return _sawtooth_shape(tails, sawtooth)

    warmup, flat_from = 0, None
    if len(steps) >= MIN_TAIL_POINTS + 1:
        warmup = _settled_running_max(list(values)) if running_max else 0
        if not warmup:
            warmup, flat_from = _warmup_end(tails)
    jump = _jump(tails, warmup) if not running_max else None
    onset = _onset(tails, warmup if jump is None else jump.index)
    fall = _fall_end(steps, values, labels) if not (warmup or running_max) and jump is None and onset is None else 0
    start = onset if onset is not None else jump.index if jump is not None else warmup or fall
    stairs = None
    if not running_max and len(steps) - start >= MIN_PATTERN_POINTS:
        stairs = stats.find_stairs(steps[start:], values[start:])
        if stairs and stats.print_ticks(values[start:], PRINT_TICKS):
            stairs = None
    if stairs and onset is not None and stairs.jumps[0] > 1:
        # A hinge fitted to stairs falls inside the flat run before their first jump: the growth starts
        # there, so the onset is that run's last point (where a hinge's onset is too: the level held).
        moved = stairs.jumps[0] - 1
        onset = start = start + moved
        stairs = stats.Stairs(tuple(j - moved for j in stairs.jumps), stairs.mean_jump, stairs.flat_sd)
    bend, saturating = None, False
    if warmup and onset is None and not stairs and not running_max and len(steps) - start >= MIN_PATTERN_POINTS:
        found = tails.saturation(start)
        bend = found[0] if found else None
        if _still_rising(tails, start):
            saturating = _saturates_whole(tails, warmup)
    elif not (warmup or stairs or running_max) and onset is None and jump is None:
        saturating = _approaching_cap(tails)
    step_change, rise = 0.0, {}
    if flat_from is not None and start == warmup:
        # One step up after a flat stretch: the warmup (if any) ended where that stretch began, at its level.
        held = stats.median(values[flat_from:warmup])
        step_change, rise = _tail_start_level(tails, warmup) - held, {"rise": held - values[0] if flat_from else 0.0}
        warmup = flat_from
    return _split_shape(
        tails,
        start,
        warmup_end=warmup,
        onset=onset,
        warmup_step=tails.labels[warmup] if (onset is not None or jump is not None or step_change) and warmup else None,
        step_change=step_change,
        **rise,
        jump=jump.size if jump is not None and onset is None else None,
        saturation_gain=bend,
        saturating=saturating,
        pattern="stairs" if stairs else "line",
        stairs=stairs,
        running_max=running_max,
        late_rate_ratio=stats.late_rate_ratio(steps[start:], values[start:]) if running_max else None,
        fall=_tail_start_level(tails, fall) - values[0] if fall and start == fall else 0.0,
    )


def _fall_end(steps: tuple[float, ...], values: tuple[float, ...], labels: tuple[int, ...] | None) -> int:
    """Index where a fall from the first points ends and memory holds (a warmup upside down, judged
    by the same knee on the mirrored series: the fall stands out of the tail's noise and the tail's
    slope is bounded well below the fall's rate), else 0. The tail after it is what memory does."""
    if len(steps) < MIN_TAIL_POINTS + 1:
        return 0
    return _knee(_Tails(steps, tuple(-v for v in values), labels), 0)


def _sawtooth_shape(tails: _Tails, period: stats.Period) -> Shape:
    """A sawtooth is judged by its floors (one per cycle). The stretch before the first drop is
    warmup when it starts clearly below the floors, else the first cycle (its floor counts)."""
    steps, values = tails.steps, tails.values
    noise = stats.robust_sigma(period.floors)
    line = period.floor_slope
    expected = line.intercept + line.slope * steps[0] if line else min(period.floors)
    warm = values[0] < expected - max(WARMUP_RISE_SIGMAS * noise, 0.02 * abs(expected))
    bounds = [*period.drops, len(values)]
    if not warm and period.drops[0] >= 2:
        bounds = [0, *bounds]
    at = [min(range(a, b), key=values.__getitem__) for a, b in zip(bounds, bounds[1:])]
    floors = tuple(values[i] for i in at)
    floor_fit = stats.theil_sen([steps[i] for i in at], floors)
    period = stats.Period(period.period, period.drops, floors, floor_fit)
    start = period.drops[0] if warm else 0
    return _split_shape(
        tails,
        start,
        warmup_end=start,
        noise=noise,
        fit=floor_fit,
        trend=stats.mann_kendall(floors),
        pattern="sawtooth",
        sawtooth=period,
        residual_noise=noise,
    )


def _residuals(tails: _Tails, flat_from: int, line_from: int, fit: stats.SlopeFit) -> list[float]:
    """The values from `flat_from` on minus the model: their median before `line_from`, `fit` after."""
    xs, ys = tails.steps, tails.values
    flat = stats.median(ys[flat_from:line_from]) if line_from > flat_from else 0.0
    return [ys[i] - flat for i in range(flat_from, line_from)] + [ys[i] - (fit.intercept + fit.slope * xs[i]) for i in range(line_from, len(ys))]


def _split_shape(tails: _Tails, start: int, **judged) -> Shape:
    """The fields every shape shares, from the warmup/tail split at `start`. How the tail is judged
    (noise, fit, trend) defaults to the tail's own points; a sawtooth passes its floors' instead."""
    xs, values = tails.steps, tails.values
    tail_s, tail_v = tails.labels[start:], values[start:]
    if "noise" not in judged:
        judged["noise"] = stats.robust_sigma(tail_v)
    if "fit" not in judged:
        judged["fit"] = tails.fit(start)
    if "trend" not in judged:
        judged["trend"] = tails.trend(start)
    if "residual_noise" not in judged:
        fit = judged["fit"]
        # Around the model the verdict rests on: the tail's line, or, after an onset, the flat stretch
        # and the line together (a short tail's residuals hide a wander that the stretch shows).
        at = judged.get("warmup_end", 0) if judged.get("onset") is not None else start
        residuals = _residuals(tails, at, start, fit) if fit else []
        judged["residual_noise"] = stats.mad_sigma(residuals) if len(residuals) >= 3 else 0.0
        judged["autocorrelation"] = stats.autocorrelation(xs[at:], residuals) if len(residuals) >= AUTOCORRELATION_MIN_POINTS else 0.0
    warmup = judged.get("warmup_end", 0)
    if "rise" not in judged:  # with a jump, the whole move to the level the tail starts from (warmup and jump)
        judged["rise"] = (
            _tail_start_level(tails, start if judged.get("jump") is not None else warmup) - values[0] if warmup or judged.get("jump") is not None else 0.0
        )
    return Shape(
        n=len(xs),
        tail_start=start,
        first_value=values[0],
        tail_steps=tail_s,
        tail_values=tail_v,
        tail_x=xs[start:],
        level=stats.median(tail_v),
        **judged,
    )
