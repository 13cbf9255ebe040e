"""build_series bins long series in polars (MAX_SERIES_POINTS) and leaves short ones untouched."""

from __future__ import annotations

import math

import polars as pl

from memlog.series import MAX_SERIES_POINTS, build_series


def _records(values: list[float], worker: str = "rank0") -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame({
        "source": ["x.log"] * n, "worker": [worker] * n, "segment": [0] * n, "rank": [0] * n,
        "kind": ["train"] * n, "step": list(range(1, n + 1)), "line_no": [10 + i for i in range(n)],
        "ts": [None] * n, "mem_allocated_gib": values, "loss": values,
    }, schema_overrides={"ts": pl.String})


def test_short_series_is_every_point():
    values = [1.0 + i / 100 for i in range(MAX_SERIES_POINTS)]
    (series,) = build_series(_records(values), "mem_allocated_gib")
    assert series.values == values
    assert series.steps == list(range(1, MAX_SERIES_POINTS + 1))


def test_long_series_is_binned_with_exact_ends_and_median_bins():
    n = 10 * MAX_SERIES_POINTS
    values = [i / 1000 for i in range(n)]
    values[5] = -1.0  # corrupt: dropped before binning, still reported
    (series,) = build_series(_records(values), "mem_allocated_gib")
    assert len(series) == MAX_SERIES_POINTS
    assert (series.steps[0], series.values[0], series.line_nos[0]) == (1, 0.0, 10)
    assert (series.steps[-1], series.values[-1], series.line_nos[-1]) == (n, values[-1], 10 + n - 1)
    assert series.steps == sorted(series.steps)
    assert [c.step for c in series.corrupt] == [6]
    # An inner bin's point is the median of its steps' values, at its last step.
    i = len(series) // 2
    step = series.steps[i]
    previous = series.steps[i - 1]
    inside = values[previous:step]
    assert series.values[i] == sorted(inside)[len(inside) // 2] or math.isclose(series.values[i], (sorted(inside)[len(inside) // 2 - 1] + sorted(inside)[len(inside) // 2]) / 2)


def test_a_nan_loss_survives_binning():
    n = 10 * MAX_SERIES_POINTS
    values = [2.0] * n
    values[n // 2] = float("nan")
    (series,) = build_series(_records(values), "loss")
    assert len(series) == MAX_SERIES_POINTS
    assert sum(1 for v in series.values if math.isnan(v)) == 1
