"""When a leaking series reaches capacity, by whose clock (watch.early_warning): a live log's
countdown runs on the watcher's clock; an old log replayed (a paste piped into `watch -`) is
given its own clock's time, the one its leak finding names, and no countdown."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memlog.engine.api import analyze
from memlog.watch import watch
from tests.synthetic import titan_log

STEPS = list(range(1, 301))
# The log's clock: 2025-06-01 08:00:00 plus one second a step (tests.synthetic.titan_log), read as UTC.
LAST_LOGGED = datetime(2025, 6, 1, 8, 0, 0, tzinfo=timezone.utc).timestamp() + len(STEPS)


@pytest.fixture(scope="module")
def leak_report(tmp_path_factory):
    memory = {0: [20.0 + (0.0 if s < 10 else 0.05 * (s - 9)) for s in STEPS]}
    report = analyze([str(titan_log(tmp_path_factory.mktemp("log") / "train.log", memory, STEPS))])
    finding = next(f for f in report.findings if f.evidence.get("projected_capacity_at"))
    return report, finding


def _warning(report, written: float, now: float, monkeypatch) -> dict:
    monkeypatch.setattr(watch.time, "time", lambda: now)  # a fake clock: nothing waits
    report.extra["watch"] = {"last_written": written}
    try:
        (warning,) = watch.early_warning(report)
    finally:
        report.extra.pop("watch")
    return warning


def test_an_old_log_replayed_is_given_its_own_clocks_time_and_no_countdown(leak_report, monkeypatch):
    report, finding = leak_report
    piped_now = LAST_LOGGED + 500 * 86400  # pasted into `watch -` 500 days after it was written
    warning = _warning(report, written=piped_now, now=piped_now + 1, monkeypatch=monkeypatch)
    assert warning["capacity_clock"] == "log" and warning["capacity_in_seconds"] is None
    assert warning["capacity_at"] == finding.evidence["projected_capacity_at"]  # what the finding says


@pytest.mark.parametrize("zone_hours", [0, 9, -7, 14])
def test_a_live_log_counts_down_on_the_watchers_clock_in_any_time_zone(leak_report, monkeypatch, zone_hours):
    report, finding = leak_report
    written = LAST_LOGGED + zone_hours * 3600  # naive timestamps in the zone the trainer runs in
    warning = _warning(report, written=written, now=written + 10, monkeypatch=monkeypatch)
    seconds = finding.evidence["projected_capacity_seconds"]
    assert warning["capacity_clock"] == "watch"
    assert warning["capacity_in_seconds"] == round(seconds - 10)
