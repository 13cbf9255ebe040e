"""build_series bins long series in polars (MAX_SERIES_POINTS) and leaves short ones untouched."""

from __future__ import annotations

import math

import polars as pl

from memlog.tables.series import MAX_SERIES_POINTS, build_series


def _records(values: list[float], worker: str = "rank0") -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame(
        {
            "source": ["x.log"] * n,
            "worker": [worker] * n,
            "segment": [0] * n,
            "rank": [0] * n,
            "kind": ["train"] * n,
            "step": list(range(1, n + 1)),
            "line_no": [10 + i for i in range(n)],
            "ts": [None] * n,
            "mem_allocated_gib": values,
            "loss": values,
        },
        schema_overrides={"ts": pl.String},
    )


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
    assert series.values[i] == sorted(inside)[len(inside) // 2] or math.isclose(
        series.values[i], (sorted(inside)[len(inside) // 2 - 1] + sorted(inside)[len(inside) // 2]) / 2
    )


def test_a_nan_loss_survives_binning():
    n = 10 * MAX_SERIES_POINTS
    values = [2.0] * n
    values[n // 2] = float("nan")
    (series,) = build_series(_records(values), "loss")
    assert len(series) == MAX_SERIES_POINTS
    assert sum(1 for v in series.values if math.isnan(v)) == 1


def test_several_readings_at_a_step_found_without_the_window_as_with_it():
    """series._several_at_a_step reads repeated steps off each series' ascending steps; on rows whose
    steps do not ascend it asks the window over (series, step). Both ways say the same."""
    import random

    from memlog.tables.series import _several_at_a_step

    rng = random.Random(7)
    readings_at = pl.len().over("_series", "step")
    for _ in range(200):
        n = rng.randint(1, 30)
        series = [rng.randint(0, 3) for _ in range(n)]
        steps: dict[int, int] = {}
        rows = []
        for s in series:
            if rng.random() < 0.1:
                step = rng.randint(0, 20)  # out of order now and then
            else:
                step = steps.get(s, 0) + (0 if rng.random() < 0.1 else rng.randint(1, 3))
                steps[s] = step
            rows.append((s, step))
        frame = pl.DataFrame(rows, schema={"_series": pl.UInt64, "step": pl.Int64}, orient="row")
        assert _several_at_a_step(frame, readings_at) == frame.select((readings_at > 1).any()).item(), rows


def test_readings_placed_by_runs_of_rows_as_by_windows():
    """series._positioned reads a step's readings off runs of rows where each series' rows are
    consecutive with ascending steps (_step_runs), else by windows over (series, step): on random
    rows, consecutive or not, ascending or not, with steps past 2**53, both place every reading alike."""
    import random

    from memlog.tables.series import _positioned_by_runs, _positioned_by_windows, _step_runs

    rng = random.Random(11)
    by_runs = 0
    for _ in range(300):
        rows = []
        for series in rng.sample(range(6), rng.randint(1, 4)):
            step = rng.choice([0, 2**60])
            for _ in range(rng.randint(1, 12)):
                step += rng.choice([0, 0, 1, 1, 3, 10]) if rng.random() > 0.05 else -2  # now and then a step back
                rows.append((series, step))
        if rng.random() < 0.2:
            rng.shuffle(rows)  # series interleaved
        frame = pl.DataFrame(rows, schema={"_series": pl.UInt64, "step": pl.Int64}, orient="row")
        origin = pl.when(pl.col("step").abs().max().over("_series") > 2**53).then(pl.col("step").min().over("_series")).otherwise(0)
        frame = frame.with_columns(_origin=origin)
        runs = _step_runs(frame)
        if runs is None:
            continue
        by_runs += 1
        assert _positioned_by_runs(frame, runs).equals(_positioned_by_windows(frame)), rows
    assert by_runs > 100
