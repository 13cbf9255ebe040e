"""Statistics for memory-vs-step series: estimators (slopes, trend tests), noise and projections, and
pattern detectors (knee, onset, sawtooth, stairs). Light on dependencies (the standard library,
and polars for the pairwise work of long series), robust, and total: degenerate data gives None or
a sensible value, never an exception. See each module's docstring."""

from memlog.judge.stats.curves import best_saturation, cap_curve_sse, late_rate_ratio, saturation_gain
from memlog.judge.stats.estimators import (
    MAX_PAIRWISE_POINTS,
    SlopeFit,
    TrendTest,
    _bin_medians,
    _pairwise_slopes,
    _sorted_between,
    index_bins,
    mann_kendall,
    median,
    medians_between,
    ols,
    ols_slope_interval,
    student_t_quantile,
    theil_sen,
)
from memlog.judge.stats.levels import print_ticks, step_change, step_index
from memlog.judge.stats.noise import (
    adjusted_p_increasing,
    autocorrelation,
    effective_points,
    growth_z,
    mad_sigma,
    project_crossing,
    residual_sigma,
    robust_sigma,
)
from memlog.judge.stats.patterns import Jump, Knee, Onset, Period, Stairs, find_jump, find_knee, find_onset, find_sawtooth, find_stairs

__all__ = [
    "MAX_PAIRWISE_POINTS", "SlopeFit", "TrendTest", "Jump", "Knee", "Onset", "Period", "Stairs",
    "best_saturation", "cap_curve_sse", "late_rate_ratio", "saturation_gain", "theil_sen", "mann_kendall", "adjusted_p_increasing", "effective_points", "growth_z", "autocorrelation", "ols", "ols_slope_interval",
    "student_t_quantile", "robust_sigma", "residual_sigma", "mad_sigma", "median", "medians_between", "index_bins", "project_crossing",
    "find_jump", "find_knee", "find_onset", "find_sawtooth", "find_stairs", "print_ticks", "step_change", "step_index",
    "_bin_medians", "_pairwise_slopes", "_sorted_between",  # tests reach into these
]  # fmt: skip
