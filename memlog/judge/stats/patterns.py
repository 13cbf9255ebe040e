"""Pattern detectors for memory-vs-step series: where a warmup ends (knee), where growth starts
(onset), and the periodic and stepwise shapes memory takes (sawtooth, stairs).

Built on the estimators of memlog/judge/stats/estimators.py, with the same contract: light on
dependencies, robust, total (degenerate data gives None, never an exception) and bounded in cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memlog.judge.stats.estimators import (
    _MAD_TO_SIGMA,
    _REL_EPS,
    SlopeFit,
    _bin_medians,
    _check_same_length,
    _diffs,
    _exponent,
    _scaled,
    _step_noise,
    _unscale,
    median,
    theil_sen,
)


@dataclass(frozen=True)
class Knee:
    """Best two-segment split of a series (warmup segment + tail segment).

    ``index`` is the first point of the right (tail) segment, i.e. where the
    plateau -- or the post-warmup trend -- starts. When the left segment is a
    single point (one warmup step) it has no slope of its own; ``left_slope``
    is then the slope from that point to the start of the right-hand fit, i.e.
    the warmup rise per unit of x.
    """

    index: int  # index of the first point of the right (tail) segment
    x: float
    left_slope: float
    right_slope: float
    sse_one: float  # SSE of one straight-line (OLS) fit
    sse_two: float  # SSE of the chosen two-segment (discontinuous) piecewise-linear fit
    improvement: float  # 1 - sse_two/sse_one (0..1)


@dataclass(frozen=True)
class Period:
    """A sawtooth: memory rises, drops back, repeatedly, at a regular period."""

    period: float  # in x units (steps), median distance between drops
    drops: tuple[int, ...]  # indices where a drop (reset) happens (first point after it)
    floors: tuple[float, ...]  # minimum value of each cycle
    floor_slope: SlopeFit | None  # Theil-Sen slope of floors vs the x of each floor


@dataclass(frozen=True)
class Stairs:
    """Stair-step growth: a few large jumps up separated by flat runs."""

    jumps: tuple[int, ...]  # indices where a jump up happens (first point on the new level)
    mean_jump: float
    flat_sd: float  # noise between jumps (pooled SD of the flat runs about their means)


# --------------------------------------------------------------------------
# knee (warmup -> tail)
# --------------------------------------------------------------------------


def _prefix_fits(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float], list[float], list[float]]:
    """OLS of every prefix in one pass: (sse, slope, mean_x, mean_y), index = length.

    Welford-style co-moment updates rather than raw power sums: raw sums of x^2
    over 100k steps cancel catastrophically when a short segment's SSE is
    formed as a difference of two large prefix sums.
    """
    n = len(ys)
    sse = [0.0] * (n + 1)
    slope = [0.0] * (n + 1)
    mxs = [0.0] * (n + 1)
    mys = [0.0] * (n + 1)
    mx = my = cxx = cyy = cxy = 0.0
    for k in range(1, n + 1):
        xv, yv = xs[k - 1], ys[k - 1]
        dx = xv - mx
        dy = yv - my
        mx += dx / k
        my += dy / k
        cxx += dx * (xv - mx)
        cyy += dy * (yv - my)
        cxy += dx * (yv - my)
        if cxx > 0.0:
            b = cxy / cxx
            e = cyy - b * cxy
        else:  # all x equal so far: best fit is the mean
            b = 0.0
            e = cyy
        sse[k] = e if e > 0.0 else 0.0
        slope[k] = b
        mxs[k] = mx
        mys[k] = my
    return sse, slope, mxs, mys


def find_knee(x: Sequence[float], y: Sequence[float], min_left: int = 1, min_right: int = 3) -> Knee | None:
    """Best split of the series into a left (warmup) and a right (tail) line.

    Why: a warmup plateau is "a rise, then flat"; a leak is "a rise that does
    not stop". Fitting one line per segment locates where the tail starts and
    gives its slope, which is what the verdict (and "where it flattened, at
    what level") needs. Segments are fitted independently (discontinuous
    model), so a one-step jump (optimizer state at step 1 -> 2) is fitted
    exactly; the left segment may be a single point.

    Split choice: an exactly fitted 2-point segment always has SSE 0, so pure
    SSE minimisation would prefer "2 warmup points" over the true "1 warmup
    point" on any noisy plateau. Each segment therefore costs min(points, 2)
    parameters and the split minimising the BIC-equivalent score
    ``sse * n ** (params / n)`` wins (earliest on ties). In practice this only
    matters at the 1-point-left edge.

    Cost O(n) (prefix and suffix fits in two passes), so no downsampling is
    needed and ``index`` refers to the original series. Assumes ``x`` is in
    ascending order. ``None`` when n < min_left + min_right (bounds below 1
    are treated as 1).
    """
    n = _check_same_length(x, y)
    min_left = max(1, int(min_left))
    min_right = max(1, int(min_right))
    if n < 2 or n < min_left + min_right:
        return None
    ex, ey = _exponent(x), _exponent(y)
    xs, ys = _scaled(x, ex), _scaled(y, ey)

    p_sse, p_slope, p_mx, p_my = _prefix_fits(xs, ys)
    s_sse, s_slope, s_mx, s_my = _prefix_fits(xs[::-1], ys[::-1])  # by suffix length

    best_k = -1
    best_score = math.inf
    for k in range(min_left, n - min_right + 1):
        m_right = n - k
        params = min(k, 2) + min(m_right, 2)
        score = (p_sse[k] + s_sse[m_right]) * n ** (params / n)
        if best_k < 0 or score < best_score:
            best_k, best_score = k, score
    if best_k < 0:
        return None
    k = best_k
    m_right = n - k

    sse_one_s = p_sse[n]
    sse_two_s = p_sse[k] + s_sse[m_right]
    right_slope_s = s_slope[m_right]
    if k >= 2 and xs[k - 1] != xs[0]:
        left_slope_s = p_slope[k]
    else:
        # Single warmup point: report the rise from it to the start of the tail fit.
        tail_start = s_my[m_right] + right_slope_s * (xs[k] - s_mx[m_right])
        run = xs[k] - p_mx[k]
        left_slope_s = (tail_start - p_my[k]) / run if run != 0.0 else 0.0

    if sse_one_s > 0.0:
        improvement = min(1.0, max(0.0, 1.0 - sse_two_s / sse_one_s))
    else:
        improvement = 0.0
    k_slope = ey - ex
    return Knee(
        index=k,
        x=float(x[k]),
        left_slope=_unscale(left_slope_s, k_slope),
        right_slope=_unscale(right_slope_s, k_slope),
        sse_one=_unscale(sse_one_s, 2 * ey),
        sse_two=_unscale(min(sse_two_s, sse_one_s), 2 * ey),
        improvement=improvement,
    )


# --------------------------------------------------------------------------
# shapes: sawtooth and stairs
# --------------------------------------------------------------------------


def _cv(values: Sequence[float]) -> float:
    """Coefficient of variation (population SD / mean); inf if mean <= 0."""
    m = math.fsum(values) / len(values)
    if not m > 0.0:
        return math.inf
    var = math.fsum((v - m) * (v - m) for v in values) / len(values)
    return math.sqrt(var) / m


def find_sawtooth(
    x: Sequence[float],
    y: Sequence[float],
    min_cycles: int = 3,
    drop_sigma: float = 4.0,
) -> Period | None:
    """Detect rise-then-drop cycles at a regular period.

    Why: memory kept on the device until the next log step (torchtitan's loss
    list) climbs between flushes and drops back at each flush. The floors tell
    the two readings apart: floors that return to the same level mean periodic
    retention (warn, name the period); floors that rise mean a leak
    underneath. ``floor_slope`` (Theil-Sen over the floors) lets the caller
    decide with a confidence interval.

    A drop is a first difference below ``-drop_sigma * sigma_d`` where sigma_d
    is the robust (MAD) scale of all first differences; the rising steps are
    the majority, so this is the noise of the rising steps and the drops
    cannot inflate it. Candidate drops smaller than a quarter of the largest
    are discarded (noise ticks in quantised data). A sawtooth additionally
    needs: at least ``min_cycles`` drops (never fewer than 2); regular spacing
    in x (coefficient of variation of the spacing <= 0.35); a rise before
    each drop (median rise from a cycle's floor to its pre-drop value >= half
    the median drop), which rejects falling staircases; cycles of at least 3
    readings (median), which rejects allocator spikes; cycles that go on to the end (at most two
    cycles' worth of points after the last drop), which rejects a few wiggles before a long rise;
    and drops that reset
    the level (median of up to 3 points before minus up to 3 after >= half the
    drop, in the median over drops), which rejects the one-sample dips that
    pure noise produces at 4 sigma about 3 times per 100k points.

    ``drops`` holds the first index after each drop; ``floors`` the minimum of
    each cycle starting at a drop (the part before the first drop may be
    warmup and is not used), including the final, possibly partial, cycle.
    """
    n = _check_same_length(x, y)
    need = max(int(min_cycles), 2)
    if n < 2 * need:
        return None
    ex, ey = _exponent(x), _exponent(y)
    xs, ys = _scaled(x, ex), _scaled(y, ey)
    d = _diffs(ys)

    threshold = max(drop_sigma * _step_noise(d), _REL_EPS)
    cand = [i + 1 for i, di in enumerate(d) if di < -threshold]
    if len(cand) < need:
        return None
    biggest = max(-d[j - 1] for j in cand)
    drops = [j for j in cand if -d[j - 1] >= 0.25 * biggest]
    if len(drops) < need:
        return None

    gaps = [xs[b] - xs[a] for a, b in zip(drops, drops[1:])]
    if _cv(gaps) > 0.35:
        return None
    cycle = median([float(b - a) for a, b in zip(drops, drops[1:])])
    if cycle < 3:
        return None  # a climb takes at least two readings: up-and-down spikes are no cycles
    if n - drops[-1] > 2 * cycle:
        return None  # the cycles stopped long before the end: what follows is another shape

    starts = [0] + drops[:-1]
    ends = drops[1:] + [n]
    sizes = [-d[j - 1] for j in drops]
    rises = [ys[j - 1] - min(ys[s:j]) for s, j in zip(starts, drops)]
    if median(rises) < 0.5 * median(sizes):
        return None  # drops without rises: a falling staircase, not a sawtooth
    shifts = []
    for s, j, e, size in zip(starts, drops, ends, sizes):
        w = max(1, min(3, (j - s) // 3, (e - j) // 3))
        shifts.append((median(ys[max(s, j - w) : j]) - median(ys[j : j + w])) / size)
    if median(shifts) < 0.5:
        return None  # one-sample dips in noise, not resets of the level

    floors: list[float] = []
    floor_x: list[float] = []
    bounds = drops + [n]
    for a, b in zip(bounds, bounds[1:]):
        i_min = min(range(a, b), key=ys.__getitem__)
        floors.append(float(y[i_min]))
        floor_x.append(float(x[i_min]))

    return Period(
        period=_unscale(median(gaps), ex),
        drops=tuple(drops),
        floors=tuple(floors),
        floor_slope=theil_sen(floor_x, floors),
    )


def find_stairs(
    x: Sequence[float],
    y: Sequence[float],
    jump_sigma: float = 6.0,
    min_jumps: int = 2,
) -> Stairs | None:
    """Detect stair-step growth: a few large jumps up separated by flat runs.

    Why: host memory under FSDP/ZeRO offload (EasyR1) and per-checkpoint-save
    ratchets climb in steps, not in a line. A line fit calls that a leak too,
    but the report should say "+X GiB per step-up, flat in between" so the
    user looks at offload/saves instead of per-step tensors.

    A jump is a first difference that exceeds the median difference by more
    than ``jump_sigma`` robust (MAD) scales of the differences, is positive,
    and is at least a quarter of the largest such step. Consecutive jump steps
    (a step-up spread over two samples) are merged into one jump; ``jumps``
    holds the first index on the new level. Stairs also require:
    at least ``min_jumps`` jumps; flat runs (drift within a typical run, i.e.
    median non-jump step * median run length, below half the mean jump);
    a net climb (last run's level minus the first's >= half the summed jumps),
    which rejects up-and-back-down spikes and quantisation ticks; and jumps
    that move the level (median of the run after minus the run before >= half
    the jump, in the median over jumps).

    ``x`` is accepted for symmetry with the other shape detectors (only its
    length is checked): jumps are counted per logged sample.
    """
    n = _check_same_length(x, y)
    need = max(int(min_jumps), 1)
    if n < 3:
        return None
    ey = _exponent(y)
    ys = _scaled(y, ey)
    d = _diffs(ys)
    found = _stairs(ys, d, median(d), max(jump_sigma * _step_noise(d), _REL_EPS), need)
    if found is None and len(d) >= 4:
        # Jumps at every second or third sample (EasyR1's host memory) are not a minority of
        # the steps, so they inflate the median and MAD above. Measure the noise on the lower
        # half of the steps instead, about zero (flat runs): for symmetric noise the median |d|
        # of that half is the noise's own 0.674 sigma quantile.
        # A noisy ramp also has many "large" steps, so here the jumps must also stand apart:
        # the smallest at least 3x the largest step between them.
        lower = sorted(d)[: len(d) // 2]
        noise = _MAD_TO_SIGMA * median([abs(v) for v in lower])
        threshold = max(jump_sigma * noise, _REL_EPS)
        jumps = [v for v in d if v > threshold]
        others = [abs(v) for v in d if v <= threshold]
        if jumps and min(jumps) >= 3.0 * max(others, default=0.0):
            found = _stairs(ys, d, 0.0, threshold, need)
    if found is None:
        return None
    at, mean_jump, flat_sd = found
    return Stairs(jumps=at, mean_jump=_unscale(mean_jump, ey), flat_sd=_unscale(flat_sd, ey))


def _stairs(ys: Sequence[float], d: Sequence[float], med: float, threshold: float, need: int) -> tuple[tuple[int, ...], float, float] | None:
    """find_stairs on scaled values, for one noise threshold: (jumps, mean jump, flat SD) or None."""
    n = len(ys)
    is_jump = [di > 0.0 and di - med > threshold for di in d]
    if not any(is_jump):
        return None
    biggest = max(di for di, j in zip(d, is_jump) if j)
    is_jump = [j and di >= 0.25 * biggest for di, j in zip(d, is_jump)]

    # Merge runs of consecutive jump steps: (first diff index, last diff index).
    spans: list[tuple[int, int]] = []
    for i, j in enumerate(is_jump):
        if not j:
            continue
        if spans and spans[-1][1] == i - 1:
            spans[-1] = (spans[-1][0], i)
        else:
            spans.append((i, i))
    if len(spans) < need:
        return None

    sizes = [ys[b + 1] - ys[a] for a, b in spans]
    mean_jump = math.fsum(sizes) / len(sizes)

    # Flat runs: points from the end of one jump to the start of the next.
    run_bounds = [0]
    for a, b in spans:
        run_bounds.extend((a, b + 1))  # run ends at point a; next starts at b+1
    run_bounds.append(n - 1)
    runs = [ys[run_bounds[i] : run_bounds[i + 1] + 1] for i in range(0, len(run_bounds), 2)]

    flat_steps = [di for di, j in zip(d, is_jump) if not j]
    if flat_steps:
        run_len = median([float(len(r)) for r in runs])
        if abs(median(flat_steps)) * run_len > 0.5 * mean_jump:
            return None  # climbs (or falls) between the jumps: a ramp, not stairs
    for r in runs:
        half = len(r) // 2
        if half >= 2 and abs(median(r[-half:]) - median(r[:half])) > 0.5 * mean_jump:
            return None  # one run is a ramp (a saturating warmup cut at its steepest steps)
    if median(runs[-1]) - median(runs[0]) < 0.5 * math.fsum(sizes):
        return None  # the steps do not add up to a climb
    shifts = [(median(b) - median(a)) / size for a, b, size in zip(runs, runs[1:], sizes)]
    if median(shifts) < 0.5:
        return None  # the "jumps" do not move the level of the runs around them

    ss = 0.0
    dof = 0
    for r in runs:
        if len(r) >= 2:
            m = math.fsum(r) / len(r)
            ss += math.fsum((v - m) * (v - m) for v in r)
            dof += len(r) - 1
    flat_sd = math.sqrt(ss / dof) if dof else 0.0
    return tuple(b + 1 for _, b in spans), mean_jump, flat_sd


# --------------------------------------------------------------------------
# onset of growth
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Onset:
    """Where a series that was flat starts to grow: the best continuous hinge `y = a` before
    `index`, `y = a + slope * (x - x[index])` after it, and how much better it explains the data
    than one straight line (Bayesian information criterion, larger is stronger)."""

    index: int
    x: float
    slope: float  # per unit of x after the onset
    bic_gain: float


def find_onset(x: Sequence[float], y: Sequence[float], min_before: int = 5, min_after: int = 5) -> Onset | None:
    """The onset of growth in a series that was flat, or None when one straight line explains it as well.

    Why: a leak that starts after a long healthy stretch (a data shift, an eval, a cache that fills
    from some step on) has a median slope near zero over the whole run; judged from the onset it is a
    clear rise. The hinge is continuous (memory does not jump at the onset; a jump is a knee), fitted
    by least squares for every candidate onset in O(1) each from suffix sums, on index-bin medians
    for long series. The gain is the BIC difference to one line (one extra parameter: the onset).
    None when n < min_before + min_after, when no hinge rises after its onset, or when the gain is
    not positive."""
    n0 = _check_same_length(x, y)
    if n0 < max(min_before + min_after, 4):
        return None
    ex, ey = _exponent(x), _exponent(y)
    xs_all, ys_all = _scaled(x, ex), _scaled(y, ey)
    xs, ys = _bin_medians(xs_all), _bin_medians(ys_all)
    n = len(ys)
    scale = n / n0  # bins per point: the minimum segment lengths in bins
    lo, hi = max(2, round(min_before * scale)), n - max(2, round(min_after * scale))
    if hi <= lo:
        return None
    mean_y = math.fsum(ys) / n
    sst = math.fsum((v - mean_y) ** 2 for v in ys)
    if not sst > 0.0:
        return None
    mean_x = math.fsum(xs) / n
    sxx = math.fsum((v - mean_x) ** 2 for v in xs)
    sxy_all = math.fsum((xi - mean_x) * (yi - mean_y) for xi, yi in zip(xs, ys))
    sse_line = sst - sxy_all * sxy_all / sxx if sxx > 0.0 else sst
    # Suffix sums from index k on: S1 = sum x, S2 = sum x^2, Sy = sum y, Sxy = sum x*y, m = count.
    s1 = [0.0] * (n + 1)
    s2 = [0.0] * (n + 1)
    sy = [0.0] * (n + 1)
    sxy = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        s1[i], s2[i] = s1[i + 1] + xs[i], s2[i + 1] + xs[i] * xs[i]
        sy[i], sxy[i] = sy[i + 1] + ys[i], sxy[i + 1] + xs[i] * ys[i]
    best: tuple[float, int, float] | None = None
    for k in range(lo, hi):
        xk, m = xs[k], n - k
        su = s1[k] - m * xk  # sum of u = x - xk over i >= k (u = 0 before)
        suu = s2[k] - 2 * xk * s1[k] + m * xk * xk
        suy = sxy[k] - xk * sy[k]
        var_u = suu - su * su / n
        if not var_u > 0.0:
            continue
        cov = suy - su * sy[0] / n
        slope = cov / var_u
        if slope <= 0.0:
            continue
        sse = sst - cov * cov / var_u
        if best is None or sse < best[0]:
            best = (sse, k, slope)
    if best is None:
        return None
    sse, k, slope = best
    gain = n * math.log(max(sse_line, 1e-300) / max(sse, 1e-300)) - math.log(n)
    if not gain > 0.0:
        return None
    index = min(n0 - 1, round(k / scale)) if n < n0 else k
    # Back to the point nearest the bin's start.
    if n < n0:
        edges = [b * n0 // n for b in range(n + 1)]
        index = edges[k]
    return Onset(index=index, x=float(x[index]), slope=_unscale(slope, ey - ex), bic_gain=gain)


# --------------------------------------------------------------------------
# one jump
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Jump:
    """A one-off step up: the level moves by `size` between index - 1 and `index` and stays there."""

    index: int  # first point on the new level
    size: float


def find_jump(x: Sequence[float], y: Sequence[float], jump_sigma: float = 8.0, min_before: int = 1, min_after: int = 6) -> Jump | None:
    """The one step up that stands out of a series, or None.

    Why: a one-off jump (a cache allocated at the first eval, a larger batch shape) followed by a
    leak is neither a warmup (the rise before the jump is slow) nor a hinge (memory does not bend, it
    jumps), and a line through both mixes them: the onset lands before the jump and the residuals
    around one line look like wander. The jump is the one first difference above the median by
    `jump_sigma` robust scales of the differences, at least 3 times any other step's distance from
    the median (a spike up and back down has two such steps, stairs have several), and the level
    after it stays up (median of the points after minus before, at least half the jump)."""
    n = _check_same_length(x, y)
    if n < min_before + min_after or n < 4:
        return None
    ey = _exponent(y)
    ys = _scaled(y, ey)
    d = _diffs(ys)
    med = median(d)
    off = [v - med for v in d]
    j = max(range(len(off)), key=off.__getitem__)
    biggest = off[j]
    threshold = jump_sigma * _step_noise(d)
    if not biggest > max(threshold, _REL_EPS):
        return None
    if max((abs(v) for i, v in enumerate(off) if i != j), default=0.0) * 3.0 > biggest:
        return None
    index = j + 1
    if index < min_before or n - index < min_after:
        return None
    k = min(5, index, n - index)
    if median(ys[index : index + k]) - median(ys[index - k : index]) < 0.5 * d[j]:
        return None
    return Jump(index=index, size=_unscale(d[j], ey))
