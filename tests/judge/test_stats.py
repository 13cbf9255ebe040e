"""Tests for memlog.judge.stats: known answers, degenerate input, and hypothesis properties."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlog.judge import stats
from memlog.judge.stats import (
    MAX_PAIRWISE_POINTS,
    find_knee,
    find_sawtooth,
    find_stairs,
    mann_kendall,
    median,
    ols,
    project_crossing,
    robust_sigma,
    theil_sen,
)

# --------------------------------------------------------------------------
# median / ols / robust_sigma
# --------------------------------------------------------------------------


def test_median_basic_and_empty():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0
    assert math.isnan(median([]))


def test_median_does_not_overflow():
    assert median([1e308, 1e308, 1.7e308, 1.7e308]) == pytest.approx(1.35e308)


def _same_float(a: float, b: float) -> bool:
    """Bit for bit: NaN is NaN, and -0.0 is not +0.0."""
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 1e308, -1e308, math.inf, -math.inf, math.nan, 3, 7]), min_size=1, max_size=60),
    st.integers(min_value=1, max_value=60),
)
def test_medians_between_are_the_medians_of_the_bins(values, bins):
    """The binning every long series goes through gives, bin for bin, the very floats `median` does
    (ties of -0.0 and +0.0, NaN, infinities, ints, bins of one or two values)."""
    bins = min(bins, len(values))
    edges = stats.index_bins(len(values), bins)
    assert edges[0] == 0 and edges[-1] == len(values) and all(b > a for a, b in zip(edges, edges[1:]))
    got = stats.medians_between(values, edges)
    want = [median(values[lo:hi]) for lo, hi in zip(edges, edges[1:])]
    assert len(got) == len(want) and all(type(g) is float and _same_float(g, w) for g, w in zip(got, want))


def test_ols_exact_and_degenerate():
    assert ols([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx((2.0, 1.0))
    assert ols([], []) is None
    assert ols([1.0], [2.0]) is None
    assert ols([5, 5, 5], [1, 2, 3]) is None  # vertical: slope undefined


def test_ols_length_mismatch_is_a_programming_error():
    with pytest.raises(ValueError):
        ols([1, 2, 3], [1, 2])


def test_robust_sigma():
    assert robust_sigma([]) == 0.0
    assert robust_sigma([1.0, 2.0]) == 0.0
    assert robust_sigma([5.0] * 10) == 0.0
    rng = random.Random(7)
    noise = [rng.gauss(0.0, 1.0) for _ in range(5000)]
    assert robust_sigma([30.0 + e for e in noise]) == pytest.approx(1.0, rel=0.1)
    # A steady trend does not inflate the noise estimate (why: first differences).
    assert robust_sigma([0.5 * i + e for i, e in enumerate(noise)]) == pytest.approx(1.0, rel=0.1)
    # A single large warmup step is ignored.
    assert robust_sigma([0.0] + [40.0 + e for e in noise[:200]]) == pytest.approx(1.0, rel=0.25)


# --------------------------------------------------------------------------
# Theil-Sen
# --------------------------------------------------------------------------


def test_theil_sen_exact_line():
    x = list(range(20))
    fit = theil_sen(x, [3.0 * v + 2.0 for v in x])
    assert fit is not None
    assert fit.slope == 3.0
    assert fit.intercept == 2.0
    assert fit.low == fit.high == 3.0  # every pairwise slope agrees
    assert fit.n == 20


def test_theil_sen_exact_line_fractional_steps():
    x = [10.0 * i for i in range(12)]  # log_freq = 10
    fit = theil_sen(x, [0.25 * v - 7.0 for v in x])
    assert fit is not None
    assert (fit.slope, fit.low, fit.high) == (0.25, 0.25, 0.25)
    assert fit.intercept == pytest.approx(-7.0)


def test_theil_sen_robust_to_outliers():
    rng = random.Random(11)
    x = list(range(50))
    y = [2.0 * v + 5.0 + rng.gauss(0.0, 0.1) for v in x]
    for i in rng.sample(range(50), 10):  # 20 % spikes (allocator blips, saves)
        y[i] += rng.choice([60.0, 100.0, -80.0])
    fit = theil_sen(x, y)
    assert fit is not None
    assert fit.slope == pytest.approx(2.0, abs=0.05)
    assert fit.low <= 2.0 <= fit.high
    assert fit.intercept == pytest.approx(5.0, abs=1.0)


def test_theil_sen_ci_coverage_is_nominal():
    """Sen's interval must actually cover the true slope ~95 % of the time."""
    rng = random.Random(1234)
    x = list(range(25))
    trials = 300
    covered = 0
    for _ in range(trials):
        y = [0.3 * v + rng.gauss(0.0, 1.0) for v in x]
        fit = theil_sen(x, y)
        assert fit is not None
        covered += fit.low <= 0.3 <= fit.high
    assert 0.90 <= covered / trials <= 0.99


def test_theil_sen_ci_narrows_with_confidence():
    rng = random.Random(5)
    x = list(range(40))
    y = [0.1 * v + rng.gauss(0.0, 1.0) for v in x]
    wide = theil_sen(x, y, confidence=0.99)
    narrow = theil_sen(x, y, confidence=0.80)
    assert wide is not None and narrow is not None
    assert wide.low <= narrow.low <= narrow.slope <= narrow.high <= wide.high
    with pytest.raises(ValueError):
        theil_sen(x, y, confidence=1.0)


def test_theil_sen_degenerate():
    assert theil_sen([], []) is None
    assert theil_sen([1.0], [1.0]) is None
    assert theil_sen([3.0, 3.0, 3.0], [1.0, 2.0, 3.0]) is None  # all x equal
    fit = theil_sen([0.0, 1.0], [1.0, 3.0])
    assert fit is not None and fit.slope == 2.0
    # Two or three points cannot bound a slope at 95 %: the interval is unbounded,
    # so "low > 0 => leak" cannot fire on the two-point case of field report 5.
    assert fit.low == -math.inf and fit.high == math.inf
    flat = theil_sen(list(range(10)), [34.0] * 10)
    assert flat is not None and (flat.slope, flat.low, flat.high) == (0.0, 0.0, 0.0)


def test_theil_sen_tied_x_pairs_are_skipped():
    fit = theil_sen([0, 0, 1, 1, 2, 2, 3, 3], [0, 0.1, 1, 1.1, 2, 2.1, 3, 3.1])
    assert fit is not None
    assert fit.slope == pytest.approx(1.0, abs=0.11)


def test_theil_sen_downsamples_long_series():
    n = 100_000
    x = list(range(n))
    fit = theil_sen(x, [0.5 * v + 3.0 for v in x])
    assert fit is not None
    assert fit.n == MAX_PAIRWISE_POINTS
    assert fit.slope == pytest.approx(0.5, rel=1e-12)
    assert fit.low == pytest.approx(0.5, rel=1e-12)
    assert fit.high == pytest.approx(0.5, rel=1e-12)


def test_theil_sen_huge_magnitudes_do_not_overflow():
    x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    y = [-1.5e308, -0.9e308, -0.3e308, 0.3e308, 0.9e308, 1.5e308]
    fit = theil_sen(x, y)
    assert fit is not None
    assert fit.slope == pytest.approx(0.6e308)


def _quantised_series(rng: random.Random, n: int) -> tuple[list[float], list[float]]:
    """Steps with repeats and readings with many ties, sometimes -0.0 or out-of-order steps: the
    cases where a vectorised path could pick other pairs or order equal slopes differently."""
    x = sorted(float(rng.randrange(n)) for _ in range(n))
    if rng.random() < 0.2:
        rng.shuffle(x)
    y = [round(rng.gauss(30.0, 1.0) + 0.01 * i, rng.choice([0, 1, 3])) for i in range(n)]
    if rng.random() < 0.2:
        y = [rng.choice([0.0, -0.0, 1.0, -1.0]) for _ in range(n)]
    return x, y


def test_theil_sen_fast_path_matches_python_loop_bit_for_bit(monkeypatch):
    """Long series take polars for the pairwise slopes and sort only the ranks read: the fit must
    not change in the last bit (reports print these numbers)."""
    rng = random.Random(11)
    for _ in range(40):
        x, y = _quantised_series(rng, rng.choice([2, 5, 40, 150, 400, 450]))
        monkeypatch.setattr(stats.estimators, "_POLARS_MIN_POINTS", 10**9)
        loop = theil_sen(x, y)
        monkeypatch.setattr(stats.estimators, "_POLARS_MIN_POINTS", 2)
        assert repr(theil_sen(x, y)) == repr(loop)


def test_sorted_slopes_window_matches_the_definition(monkeypatch):
    monkeypatch.setattr(stats.estimators, "_POLARS_MIN_POINTS", 2)
    rng = random.Random(12)
    for n in (30, 250, 400):
        x, y = _quantised_series(rng, n)
        x.sort()
        y = [abs(v) for v in y]  # no -0.0: the polars path
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if x[j] != x[i]]
        reference = sorted((y[j] - y[i]) / (x[j] - x[i]) for i, j in pairs)
        first, last = len(reference) // 3, len(reference) // 2
        window = stats._sorted_between(stats._pairwise_slopes(x, y), first, last)
        assert len(window) == len(reference)
        assert [window[k] for k in range(first, last + 1)] == reference[first : last + 1]


# --------------------------------------------------------------------------
# Mann-Kendall
# --------------------------------------------------------------------------


def test_mann_kendall_monotone():
    t = mann_kendall([float(v) for v in range(30)])
    assert t is not None
    assert t.s == 30 * 29 // 2
    assert t.tau == 1.0
    assert t.p_increasing < 1e-3
    assert t.p_two_sided < 1e-3


def test_mann_kendall_known_value():
    t = mann_kendall([1, 2, 3, 4, 5])
    assert t is not None
    assert t.s == 10
    # Var S = 5*4*15/18; z = (S - 1) / sqrt(Var S)
    assert t.z == pytest.approx(9 / math.sqrt(300 / 18))
    assert t.p_increasing == pytest.approx(0.01374, abs=1e-4)


def test_mann_kendall_ties():
    t = mann_kendall([1, 1, 2, 2, 3])
    assert t is not None
    assert t.s == 8
    var = (5 * 4 * 15 - 2 * (2 * 1 * 9)) / 18  # two tie groups of size 2
    assert t.z == pytest.approx(7 / math.sqrt(var))


def test_mann_kendall_constant_and_reversed():
    flat = mann_kendall([34.0] * 12)
    assert flat is not None
    assert flat.s == 0 and flat.z == 0.0 and flat.tau == 0.0
    assert flat.p_two_sided == 1.0
    assert flat.p_increasing == 0.5
    down = mann_kendall([float(v) for v in range(30, 0, -1)])
    assert down is not None
    assert down.p_increasing > 0.999
    assert down.tau == -1.0


def test_mann_kendall_degenerate():
    assert mann_kendall([]) is None
    assert mann_kendall([1.0, 2.0]) is None
    t = mann_kendall([1.0, 2.0, 3.0])
    assert t is not None and t.n == 3


def test_mann_kendall_noise_is_not_a_trend():
    rng = random.Random(3)
    t = mann_kendall([34.0 + rng.gauss(0.0, 0.05) for _ in range(200)])
    assert t is not None
    assert t.p_two_sided > 0.01


def test_mann_kendall_downsamples_long_series():
    rng = random.Random(9)
    t = mann_kendall([1e-4 * i + rng.gauss(0.0, 1.0) for i in range(100_000)])
    assert t is not None
    assert t.n == MAX_PAIRWISE_POINTS
    assert t.p_increasing < 1e-3


def test_mann_kendall_s_matches_the_pairwise_definition():
    rng = random.Random(13)
    for _ in range(60):
        _, y = _quantised_series(rng, rng.randint(3, 120))
        if rng.random() < 0.2:
            y[rng.randrange(len(y))] = math.nan  # compares false both ways: adds nothing to S
        t = mann_kendall(y)
        assert t is not None
        assert t.s == sum((b > a) - (b < a) for i, a in enumerate(y) for b in y[i + 1 :])


# --------------------------------------------------------------------------
# knee
# --------------------------------------------------------------------------


def test_knee_one_step_warmup_then_flat():
    y = [20.0, 34.0, 34.1, 33.9, 34.0, 34.05]
    k = find_knee(list(range(6)), y)
    assert k is not None
    assert k.index == 1
    assert k.x == 1.0
    assert k.right_slope == pytest.approx(0.0, abs=0.02)
    assert k.left_slope == pytest.approx(14.0, abs=0.1)  # the warmup rise per step
    assert k.improvement > 0.99
    assert k.sse_two <= k.sse_one


def test_knee_ramp_then_flat():
    rng = random.Random(2)
    y = [10.0, 18.0, 26.0, 34.0, 42.0] + [50.0 + rng.gauss(0.0, 0.3) for _ in range(20)]
    k = find_knee(list(range(25)), y)
    assert k is not None
    assert abs(k.index - 5) <= 1
    assert k.left_slope == pytest.approx(8.0, abs=0.5)
    assert k.right_slope == pytest.approx(0.0, abs=0.1)
    assert k.improvement > 0.99


def test_knee_with_log_freq_steps():
    steps = [1, 10, 20, 30, 40, 50, 60]
    y = [12.0, 40.0, 40.02, 39.98, 40.01, 40.0, 39.99]
    k = find_knee(steps, y)
    assert k is not None
    assert k.index == 1 and k.x == 10
    assert k.left_slope == pytest.approx(28.0 / 9.0, rel=0.01)


def test_knee_straight_line_improvement_small():
    x = list(range(40))
    exact = find_knee(x, [0.5 * v + 1.0 for v in x])
    assert exact is not None
    assert exact.improvement == 0.0
    rng = random.Random(4)
    noisy = find_knee(x, [0.5 * v + rng.gauss(0.0, 1.0) for v in x])
    assert noisy is not None
    assert noisy.improvement < 0.2


def test_knee_degenerate():
    assert find_knee([], []) is None
    assert find_knee([0, 1, 2], [1, 2, 3]) is None  # n < min_left + min_right
    k = find_knee([0, 1, 2, 3], [5.0, 5.0, 5.0, 5.0])
    assert k is not None
    assert k.sse_one == 0.0 and k.improvement == 0.0


def test_knee_long_series_is_linear_time():
    n = 100_000
    y = [10.0] + [40.0 + 1e-3 * (i % 7) for i in range(n - 1)]
    k = find_knee(list(range(n)), y)
    assert k is not None and k.index == 1


# --------------------------------------------------------------------------
# sawtooth
# --------------------------------------------------------------------------


def _saw(n: int, period: int, amp: float, floor_rise: float, noise: float, seed: int = 0):
    rng = random.Random(seed)
    x = list(range(n))
    y = [30.0 + amp * (i % period) / (period - 1) + floor_rise * (i // period) + rng.gauss(0.0, noise) for i in x]
    return x, y


def test_sawtooth_flat_floor_is_periodic_retention():
    x, y = _saw(120, 10, 2.0, 0.0, 0.01)
    p = find_sawtooth(x, y)
    assert p is not None
    assert p.period == 10.0
    assert p.drops == tuple(range(10, 120, 10))
    assert len(p.floors) == len(p.drops)
    assert p.floor_slope is not None
    assert p.floor_slope.low <= 0.0 <= p.floor_slope.high


def test_sawtooth_rising_floor_is_a_leak():
    x, y = _saw(120, 10, 2.0, 0.05, 0.01)
    p = find_sawtooth(x, y)
    assert p is not None
    assert p.period == 10.0
    assert p.floor_slope is not None
    assert p.floor_slope.low > 0.0
    assert p.floor_slope.slope == pytest.approx(0.005, rel=0.1)  # 0.05 per 10 steps


def test_sawtooth_noise_free_and_x_units():
    x = [10.0 * i for i in range(60)]
    y = [30.0 + 0.5 * (i % 6) for i in range(60)]
    p = find_sawtooth(x, y)
    assert p is not None
    assert p.period == 60.0
    assert set(p.floors) == {30.0}


def test_sawtooth_rejects_noise_and_irregular_and_falling():
    for seed in range(10):
        rng = random.Random(seed)
        assert find_sawtooth(list(range(200)), [30.0 + rng.gauss(0.0, 1.0) for _ in range(200)]) is None
    # drops at irregular spacing
    y, level = [], 30.0
    for length in (3, 15, 4, 20, 2, 12):
        y += [level + 0.3 * j for j in range(length)]
    assert find_sawtooth(list(range(len(y))), y) is None
    # falling staircase: drops without rises
    y = [50.0 - 5.0 * (i // 10) for i in range(60)]
    assert find_sawtooth(list(range(60)), y) is None
    # too few cycles
    x, y = _saw(25, 10, 2.0, 0.0, 0.0)
    assert find_sawtooth(x, y) is None


# --------------------------------------------------------------------------
# stairs
# --------------------------------------------------------------------------


def _stairs(levels: int, run: int, jump: float, noise: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [10.0 + jump * (i // run) + rng.gauss(0.0, noise) for i in range(levels * run)]


def test_stairs_four_jumps_noise_free():
    y = _stairs(5, 6, 8.0, 0.0)
    s = find_stairs(list(range(len(y))), y)
    assert s is not None
    assert s.jumps == (6, 12, 18, 24)
    assert s.mean_jump == 8.0
    assert s.flat_sd == 0.0


def test_stairs_four_jumps_noisy():
    y = _stairs(5, 8, 8.0, 0.05, seed=1)
    s = find_stairs(list(range(len(y))), y)
    assert s is not None
    assert s.jumps == (8, 16, 24, 32)
    assert s.mean_jump == pytest.approx(8.0, abs=0.1)
    assert s.flat_sd == pytest.approx(0.05, rel=0.5)


def test_stairs_step_spread_over_two_samples_is_one_jump():
    y = [10.0] * 5 + [14.0] + [18.0] * 5 + [22.0] + [26.0] * 5
    s = find_stairs(list(range(len(y))), y)
    assert s is not None
    assert s.jumps == (6, 12)
    assert s.mean_jump == 8.0


def test_stairs_rejects_ramp_noise_and_spikes():
    rng = random.Random(8)
    x = list(range(80))
    assert find_stairs(x, [0.5 * i + rng.gauss(0.0, 0.1) for i in x]) is None
    assert find_stairs(x, [30.0 + rng.gauss(0.0, 0.1) for _ in x]) is None
    assert find_stairs(x, [round(30.0 + rng.gauss(0.0, 0.004), 2) for _ in x]) is None
    spikes = [30.0] * 80
    for i in (10, 30, 50, 70):
        spikes[i] = 45.0  # up and straight back down: not a climb
    assert find_stairs(x, spikes) is None
    assert find_stairs(x[:3], [1.0, 9.0, 9.0]) is None  # one jump < min_jumps


# --------------------------------------------------------------------------
# project_crossing
# --------------------------------------------------------------------------


def test_project_crossing_arithmetic():
    assert project_crossing(100.0, 40.0, 2.0, 80.0) == 120.0
    assert project_crossing(7.0, 60.0, 10.0, 80.0) == 9.0
    assert project_crossing(1000.0, 70.0, 0.004, 80.0) == pytest.approx(3500.0)


def test_project_crossing_none_and_already_reached():
    assert project_crossing(100.0, 40.0, 0.0, 80.0) is None
    assert project_crossing(100.0, 40.0, -1.0, 80.0) is None
    assert project_crossing(100.0, 80.0, 2.0, 80.0) == 100.0
    assert project_crossing(100.0, 85.0, -1.0, 80.0) == 100.0  # already over the limit
    assert project_crossing(100.0, 40.0, math.nan, 80.0) is None
    assert project_crossing(0.0, -1e308, 1e-308, 1e308) is None  # beyond float range


# --------------------------------------------------------------------------
# hypothesis properties
# --------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
moderate = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def wild_series(draw, min_size: int = 0, max_size: int = 60):
    """Arbitrary finite y with strictly increasing arbitrary finite x."""
    y = draw(st.lists(finite, min_size=min_size, max_size=max_size))
    x = sorted(draw(st.lists(finite, min_size=len(y), max_size=len(y), unique=True)))
    return x, y


@st.composite
def sane_series(draw, min_size: int = 2, max_size: int = 60):
    """Steps with positive gaps (as from a log) and moderate readings."""
    y = draw(st.lists(moderate, min_size=min_size, max_size=max_size))
    gaps = draw(st.lists(st.floats(0.5, 1000.0), min_size=len(y), max_size=len(y)))
    x, acc = [], 0.0
    for g in gaps:
        acc += g
        x.append(acc)
    return x, y


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wild_series())
def test_nothing_raises_on_arbitrary_finite_input(series):
    x, y = series
    fit = theil_sen(x, y)
    if fit is not None:
        assert fit.n == len(y)
    mk = mann_kendall(y)
    if mk is not None:
        assert 0.0 <= mk.p_increasing <= 1.0
        assert 0.0 <= mk.p_two_sided <= 1.0
        assert -1.0 <= mk.tau <= 1.0
    knee = find_knee(x, y)
    if knee is not None:
        assert 1 <= knee.index <= len(y) - 3
        assert 0.0 <= knee.improvement <= 1.0
    ols(x, y)
    sigma = robust_sigma(y)
    assert sigma >= 0.0
    median(y)
    saw = find_sawtooth(x, y)
    if saw is not None:
        assert len(saw.drops) >= 3 and len(saw.floors) == len(saw.drops)
    stairs = find_stairs(x, y)
    if stairs is not None:
        assert len(stairs.jumps) >= 2 and stairs.mean_jump > 0.0
    for a, b, c, d in zip(x, y, y[1:], y[2:]):
        project_crossing(a, b, c, d)


@settings(max_examples=300, deadline=None)
@given(sane_series())
def test_theil_sen_interval_brackets_slope(series):
    x, y = series
    fit = theil_sen(x, y)
    assert fit is not None
    assert fit.low <= fit.slope <= fit.high


def _slope_tol(x, y, extra: float = 0.0) -> float:
    """Bound on the slope change caused by rounding y: ~eps * scale / min gap."""
    min_gap = min(b - a for a, b in zip(x, x[1:]))
    scale = max(abs(v) for v in y) + abs(extra) + 1.0
    return 1e-9 * scale / min_gap


@settings(max_examples=300, deadline=None)
@given(sane_series(), moderate)
def test_theil_sen_slope_invariant_to_offset(series, c):
    x, y = series
    a = theil_sen(x, y)
    b = theil_sen(x, [v + c for v in y])
    assert a is not None and b is not None
    assert b.slope == pytest.approx(a.slope, abs=_slope_tol(x, y, c))


@settings(max_examples=300, deadline=None)
@given(sane_series(), st.floats(min_value=-1e3, max_value=1e3, allow_nan=False))
def test_theil_sen_slope_scales_with_y(series, k):
    x, y = series
    a = theil_sen(x, y)
    b = theil_sen(x, [k * v for v in y])
    assert a is not None and b is not None
    assert b.slope == pytest.approx(k * a.slope, abs=_slope_tol(x, y) * (abs(k) + 1.0))


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, max_size=60))
def test_mann_kendall_p_values_in_unit_interval(y):
    t = mann_kendall(y)
    if len(y) < 3:
        assert t is None
        return
    assert t is not None
    assert 0.0 <= t.p_increasing <= 1.0
    assert 0.0 <= t.p_two_sided <= 1.0
    assert t.p_two_sided == pytest.approx(2 * min(t.p_increasing, 1 - t.p_increasing), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(sane_series(min_size=4))
def test_knee_sse_two_never_exceeds_sse_one(series):
    x, y = series
    k = find_knee(x, y)
    assert k is not None
    assert k.sse_two <= k.sse_one * (1 + 1e-9) + 1e-9
    assert 0.0 <= k.improvement <= 1.0


def test_pairwise_functions_bounded_on_100k_points():
    """Downsampling keeps O(n^2) work bounded; this must finish in a couple of seconds."""
    rng = random.Random(0)
    n = 100_000
    x = list(range(n))
    y = [40.0 + 1e-5 * i + rng.gauss(0.0, 0.1) for i in x]
    assert theil_sen(x, y) is not None
    assert mann_kendall(y) is not None
    assert find_knee(x, y) is not None
    assert stats.find_sawtooth(x, y) is None
    assert stats.find_stairs(x, y) is None
