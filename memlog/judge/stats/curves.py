"""Curves a memory series can follow besides a line: approaching a cap (caches filling, a warmup
settling), with or without a steady rise on top. Same conventions as estimators.py."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

from memlog.judge.stats.estimators import MAX_PAIRWISE_POINTS, index_bins, medians_between, ols

__all__ = ["best_saturation", "cap_curve_sse", "late_rate_ratio", "saturation_gain"]


def cap_curve_sse(xs: Sequence[float], ys: Sequence[float], line: bool) -> float | None:
    """Least-squares SSE of y = a + c exp(-(x - x0) / tau) (+ b x when `line`), c < 0 (rising towards
    a cap), tau searched on a log grid and refined by golden section (a coarse tau leaves a misfit
    that the added line would absorb)."""
    span = xs[-1] - xs[0]
    m = len(ys)
    if span <= 0 or m < 5:
        return None
    mx, my = sum(xs) / m, sum(ys) / m
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    sxx = sum(v * v for v in dx)
    sxy = sum(a * b for a, b in zip(dx, dy))
    syy = sum(v * v for v in dy)
    from_first = [-(x - xs[0]) for x in xs]

    # Called ~54 times a series: its sums run as map() over the lists (the same products, added in
    # the same order as generator sums would: the same floats, in half the time).
    def sse(log_tau: float) -> float:
        tau = math.exp(log_tau)
        u = [math.exp(d / tau) for d in from_first]
        mu = sum(u) / m
        du = [v - mu for v in u]
        suu = sum(map(operator.mul, du, du))
        suy = sum(map(operator.mul, du, dy))
        if not line:
            c = suy / suu if suu > 0 else 0.0
            return syy - c * suy if c < 0 else math.inf
        sxu = sum(map(operator.mul, dx, du))
        det = sxx * suu - sxu * sxu
        if not det > 1e-12 * sxx * suu:
            return math.inf
        b, c = (suu * sxy - sxu * suy) / det, (sxx * suy - sxu * sxy) / det
        return syy - b * sxy - c * suy if c < 0 else math.inf

    # 0.1 % .. 300 % of the span: down to a jump between two readings (a warmup step), which the
    # added line must be free to model as sharply as the curve alone.
    grid = [math.log(span * 0.001 * (3000 ** (k / 31))) for k in range(32)]
    values = [sse(g) for g in grid]
    k = min(range(32), key=values.__getitem__)
    if not math.isfinite(values[k]):
        return None
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, 31)]
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = sse(a), sse(b)
    for _ in range(20):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = sse(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = sse(b)
    return max(min(values[k], fa, fb), 0.0)


def best_saturation(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, list[float]] | None:
    """Least squares of y = cap + c * exp(-(x - x0) / tau) over a grid of tau, with c < 0
    (rising towards the cap): (sse, cap, fitted values) of the best tau."""
    span = xs[-1] - xs[0]
    if span <= 0:
        return None
    best = None
    # What does not depend on tau is computed once; each sum adds the same terms in the same order.
    my = sum(ys) / len(ys)
    from_first = [-(x - xs[0]) for x in xs]
    for k in range(24):
        tau = span * 0.01 * (300 ** (k / 23))  # 1 % .. 300 % of the span, log-spaced
        u = [math.exp(d / tau) for d in from_first]
        mu = sum(u) / len(u)
        suu = sum([(ui - mu) ** 2 for ui in u])
        if suu <= 0:
            continue
        c = sum([(ui - mu) * (yi - my) for ui, yi in zip(u, ys)]) / suu
        if c >= 0:
            continue
        cap = my - c * mu
        fitted = [cap + c * ui for ui in u]
        sse = sum([(yi - fi) ** 2 for yi, fi in zip(ys, fitted)])
        if best is None or sse < best[0]:
            best = (sse, cap, fitted)
    return best


def saturation_gain(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, list[float], list[float], list[int]] | None:
    """How much better a curve approaching a cap explains the points than a straight line: (BIC
    gain, cap, fitted values, the points fitted, bin edges) on index-bin medians of long series;
    None when neither can be fitted."""
    n = len(ys)
    # Long tails: fit bin medians (the curve's shape survives, the cost stays bounded).
    bins = min(n, MAX_PAIRWISE_POINTS)
    edges = index_bins(n, bins)
    if bins < n:
        xs, ys = medians_between(xs, edges), medians_between(ys, edges)
    line = ols(xs, ys)
    if line is None:
        return None
    sse_line = sum((y - line[1] - line[0] * x) ** 2 for x, y in zip(xs, ys))
    best = best_saturation(xs, ys)
    if best is None or sse_line <= 0:
        return None
    sse, cap, fitted = best
    m = len(ys)
    return -(m * math.log(max(sse, 1e-300) / sse_line) + math.log(m)), cap, fitted, list(ys), edges


def late_rate_ratio(steps: Sequence[float], values: Sequence[float]) -> float | None:
    """Growth rate over the last third of the points relative to the whole stretch (1 = steady)."""
    if len(values) < 4 or steps[-1] <= steps[0]:
        return None
    whole = (values[-1] - values[0]) / (steps[-1] - steps[0])
    k = len(values) * 2 // 3
    if whole <= 0 or steps[-1] <= steps[k]:
        return None
    return (values[-1] - values[k]) / (steps[-1] - steps[k]) / whole
