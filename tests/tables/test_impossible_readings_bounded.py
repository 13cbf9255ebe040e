"""Discarded (impossible) readings are evidence, not an archive (issue 40): a series lists its first
MAX_EVENTS_PER_KIND and counts every one by reason, and corrupt-readings reports the count of all.
A log whose every reading is impossible no longer holds a Python object per reading."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memlog.base.limits import MAX_EVENTS_PER_KIND
from memlog.cli import app
from memlog.engine.plan import ReadingPlan
from memlog.engine.reader import read_sources
from memlog.tables.condense import CONDENSE_AFTER
from memlog.tables.records import Keep
from memlog.tables.series import build_series
from tests.synthetic import titan_log
from tests.tables.test_series_binning import _records

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


def _impossible_run(tmp_path, n, every=None):
    """A one-rank torchtitan log of `n` steps whose every reading is 5,000 GiB (`every`: except
    each `every`-th, a flat 30 GiB), read as analyze reads it."""
    memory = [30.0 if every and i % every == 0 else 5000.0 for i in range(n)]
    log = titan_log(tmp_path / "impossible.log", {0: memory}, list(range(1, n + 1)))
    tables, _ = read_sources(ReadingPlan.of(keep=Keep.judged()), [str(log)])
    return memory, tables


def test_a_log_of_impossible_readings_is_held_condensed_and_counted_whole(tmp_path):
    # Every reading impossible: held like a plain run (~2 * CONDENSE_AFTER records and a log of
    # bins), not one record per step, yet every reading is counted by reason.
    n = 12 * CONDENSE_AFTER
    memory, tables = _impossible_run(tmp_path, n)
    assert tables.records.height < 3 * CONDENSE_AFTER + 2 * CONDENSE_AFTER * 2
    (series,) = build_series(tables.records, "mem_peak_reserved_gib")  # torchtitan's `memory:`
    assert series.corrupt_counts == {"above capacity": n}
    assert len(series.corrupt) == MAX_EVENTS_PER_KIND
    assert series.values == []


def test_impossible_readings_are_binned_only_with_their_like(tmp_path):
    # A possible reading among impossible ones is never binned with them: every possible one is
    # still a point of the series, and the impossible ones are counted whole.
    n, every = 12 * CONDENSE_AFTER, 997
    memory, tables = _impossible_run(tmp_path, n, every)
    (series,) = build_series(tables.records, "mem_peak_reserved_gib")  # torchtitan's `memory:`
    possible = sum(1 for v in memory if v < 1000)
    assert series.values == [30.0] * possible
    assert series.corrupt_counts == {"above capacity": n - possible}
