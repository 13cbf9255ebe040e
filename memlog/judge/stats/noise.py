"""Noise and projection for memory-vs-step series: how much a series wanders on its own (the
spread a trend must stand out of, its autocorrelation) and where a fitted line meets a capacity.
Same conventions as estimators.py: plain sequences of finite floats, total, robust."""

from __future__ import annotations

import math
from collections.abc import Sequence

from memlog.judge.stats.estimators import (
    _MAD_TO_SIGMA,
    _SQRT2,
    SlopeFit,
    TrendTest,
    _bin_medians,
    _check_same_length,
    _diffs,
    _exponent,
    _mad,
    _scaled,
    _step_noise,
    _unscale,
)

__all__ = ["robust_sigma", "residual_sigma", "mad_sigma", "autocorrelation", "adjusted_p_increasing", "effective_points", "growth_z", "project_crossing"]


def robust_sigma(y: Sequence[float]) -> float:
    """Noise scale of ``y``: 1.4826 * MAD(first differences) / sqrt(2).

    Why differences: a leak's trend and a warmup step would inflate a plain
    standard deviation; first differences remove the trend (the MAD is taken
    about their median, so a constant slope cancels) and the MAD ignores the
    few large steps. Dividing by sqrt(2) converts the noise of a difference of
    two independent readings back to the noise of one reading. 0.0 for n < 3
    (and for data whose steps are mostly identical).
    """
    if len(y) < 3:
        return 0.0
    e = _exponent(y)
    return _unscale(_step_noise(_diffs(_scaled(y, e))) / _SQRT2, e)


def project_crossing(x_last: float, y_last: float, slope: float, limit: float) -> float | None:
    """x at which the line through (x_last, y_last) with ``slope`` reaches ``limit``.

    Used for "at +X GiB/step you hit 80 GiB at step ~N". Returns ``x_last``
    when ``y_last >= limit`` already (the limit is reached now), ``None`` when
    the line never reaches it (slope <= 0), when an input is not finite, or
    when the crossing is beyond the float range.
    """
    values = (x_last, y_last, slope, limit)
    if not all(math.isfinite(v) for v in values):
        return None
    if y_last >= limit:
        return float(x_last)
    if slope <= 0.0:
        return None
    crossing = x_last + (limit - y_last) / slope
    return crossing if math.isfinite(crossing) else None


def residual_sigma(x: Sequence[float], y: Sequence[float], fit: SlopeFit) -> float:
    """Robust spread of `y` around the fitted line (1.4826 * MAD of the residuals): the noise a
    trend has to stand out of. Unlike robust_sigma it also counts slow wander (a random walk, an
    autocorrelated monitor), which first differences hide."""
    _check_same_length(x, y)
    if len(y) < 3:
        return 0.0
    return mad_sigma([yi - (fit.intercept + fit.slope * xi) for xi, yi in zip(x, y)])


def mad_sigma(residuals: Sequence[float]) -> float:
    """1.4826 * the median absolute deviation: a normal sigma that spikes do not move."""
    return _MAD_TO_SIGMA * _mad(residuals) if residuals else 0.0


def autocorrelation(x: Sequence[float], y: Sequence[float], fit: SlopeFit | None = None) -> float:
    """Lag-1 autocorrelation of the residuals around `fit` (of `y` itself without one), in [-1, 1].

    Why: Mann-Kendall assumes independent points. Memory readings drift (allocator caches, host
    memory of other processes), so neighbours agree and a chance wander looks like a trend; the
    variance of S grows by about (1 + r) / (1 - r) (Hamed & Rao 1998, lag 1), which callers use to
    shrink the effective number of points. 0.0 when undefined (n < 4, no variance)."""
    n = _check_same_length(x, y)
    if n < 4:
        return 0.0
    ys = _bin_medians(list(y))
    xs = _bin_medians(list(x))
    r = [yi - (fit.intercept + fit.slope * xi) for xi, yi in zip(xs, ys)] if fit else list(ys)
    mean = math.fsum(r) / len(r)
    d = [v - mean for v in r]
    var = math.fsum(v * v for v in d)
    if not var > 0.0 or not math.isfinite(var):
        return 0.0
    return max(-1.0, min(1.0, math.fsum(a * b for a, b in zip(d, d[1:])) / var))


def adjusted_p_increasing(trend: TrendTest, rho: float) -> float:
    """Mann-Kendall's one-sided p with its variance inflated for lag-1 autocorrelation `rho` (only
    positive autocorrelation is corrected: it is what makes a wander look like a trend)."""
    if rho <= 0.0 or trend.z == 0.0:
        return trend.p_increasing
    inflation = (1.0 + rho) / max(1.0 - rho, 1e-6)
    return 0.5 * math.erfc(trend.z / math.sqrt(inflation) / _SQRT2)


def effective_points(n: int, rho: float) -> float:
    """How many independent readings `n` readings with lag-1 autocorrelation `rho` are worth:
    n (1 - rho) / (1 + rho), the same inflation adjusted_p_increasing applies (negative rho counts as 0)."""
    rho = min(max(rho, 0.0), 0.99)
    return n * (1.0 - rho) / (1.0 + rho)


def growth_z(effect: float, n_effective: float) -> float:
    """A fitted growth of `effect` noise SDs over n readings, in standard errors of that growth.

    Why: the growth a least-squares line fits to pure noise over n evenly spread readings has a
    standard deviation of sigma * sqrt(12 / n) (the slope's error times the span). So the same
    effect means more the more readings carry it: 2 sigmas over 200 readings stand 8 standard errors
    out of the noise, 5 sigmas over 7 readings under 4."""
    if n_effective <= 0:
        return 0.0
    return effect * math.sqrt(n_effective / 12.0)
