"""Discarded (impossible) readings are evidence, not an archive (issue 40): a series lists its first
MAX_EVENTS_PER_KIND and counts every one by reason, and corrupt-readings reports the count of all.
A log whose every reading is impossible no longer holds a Python object per reading."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memlog.base.limits import MAX_EVENTS_PER_KIND
from memlog.cli import app
from memlog.tables.series import build_series
from tests.synthetic import titan_log
from tests.test_series_binning import _records

runner = CliRunner()


def test_a_series_lists_the_first_impossible_readings_and_counts_them_all():
    n = 3 * MAX_EVENTS_PER_KIND
    values = [5000.0] * n + [-1.0] * 10 + [30.0] * 50
    (series,) = build_series(_records(values), "mem_allocated_gib")
    assert len(series.corrupt) == MAX_EVENTS_PER_KIND
    assert [c.step for c in series.corrupt] == list(range(1, MAX_EVENTS_PER_KIND + 1))  # the first ones
    assert series.corrupt_counts == {"above capacity": n, "negative": 10}
    assert series.values == [30.0] * 50


def test_corrupt_readings_counts_every_reading_it_did_not_list(tmp_path):
    n = 2 * MAX_EVENTS_PER_KIND + 7
    memory = [5000.0] * n + [30.0 + 0.01 * (i % 3) for i in range(40)]
    log = titan_log(tmp_path / "impossible.log", {0: memory}, list(range(1, n + 41)))
    result = runner.invoke(app, ["analyze", str(log), "-o", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.stderr
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "corrupt-readings"]
    assert finding["message"].startswith(f"{n} impossible memory readings on rank 0 were excluded")
    assert f"; and {n - 5} more." in finding["message"]
    assert finding["evidence"]["observed"]["readings"] == n
