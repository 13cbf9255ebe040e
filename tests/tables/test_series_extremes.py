"""A condensed series keeps its extremes (issue 40): a single reading far from its neighbours stays a
point of its own when a long series is binned (series._binned), so a 70.5 GiB reading at step 40,000
of a flat 30 GiB run of 60,000 steps is named in the report, as it is in a short run. Noise makes no
extra points, and the points stay bounded."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.tables.series import MAX_EXTREMES, MAX_SERIES_POINTS, build_series
from tests.synthetic import titan_log
from tests.tables.test_series_binning import _records

runner = CliRunner()


@pytest.mark.parametrize("offset", range(12))  # wherever in its bin the spike falls
def test_a_one_reading_spike_survives_binning_at_its_own_step(offset):
    n = 10 * MAX_SERIES_POINTS
    values = [30.0 + 0.01 * (i % 3) for i in range(n)]
    at = n // 2 + offset
    values[at] = 70.5
    (series,) = build_series(_records(values), "mem_allocated_gib")
    assert (at + 1, 70.5) in zip(series.steps, series.values)
    assert len(series.steps) == len(set(series.steps)) and series.steps == sorted(series.steps)  # one point a step
    assert len(series) <= MAX_SERIES_POINTS + 1
    assert series.line_nos[series.steps.index(at + 1)] == 10 + at


@pytest.mark.parametrize("seed", range(5))
def test_noise_and_a_ramp_make_no_extra_points(seed):
    rng = random.Random(seed)
    n = 10 * MAX_SERIES_POINTS
    for values in ([30.0 + rng.gauss(0, 0.2) for _ in range(n)], [20.0 + i / 1000 + rng.gauss(0, 0.05) for i in range(n)]):
        (series,) = build_series(_records(values), "mem_allocated_gib")
        assert len(series) == MAX_SERIES_POINTS


def test_many_spikes_keep_at_most_max_extremes_the_farthest_first():
    n = 10 * MAX_SERIES_POINTS
    values = [30.0] * n
    spikes = {i: 40.0 + i / n for i in range(100, n - 100, n // (3 * MAX_EXTREMES))}
    for i, v in spikes.items():
        values[i] = v
    (series,) = build_series(_records(values), "mem_allocated_gib")
    assert len(series) <= MAX_SERIES_POINTS + MAX_EXTREMES
    kept = [v for v in series.values if v > 35]
    assert len(kept) >= MAX_EXTREMES and max(spikes.values()) in kept


@pytest.mark.parametrize("steps, at", [(5_000, 3_000), (60_000, 40_000)])
def test_a_spike_in_a_long_flat_run_is_named_in_the_report(tmp_path, steps, at):
    memory = [30.0 + 0.01 * (i % 3) for i in range(steps)]
    memory[at - 1] = 70.5
    log = titan_log(tmp_path / "spike.log", {0: memory}, list(range(1, steps + 1)))
    result = runner.invoke(app, ["analyze", str(log), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    messages = " ".join(f["message"] for f in json.loads(result.stdout)["findings"])
    assert f"70.50 GiB at step {at}" in messages
