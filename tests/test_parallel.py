"""Chunks are decoded and scanned on several threads: results must not depend on how many."""

from __future__ import annotations

import threading
import time

import pytest

from memlog.api import parse_sources
from memlog.catalog import load_specs
from memlog.logwriters import torchtitan as titan
from memlog.parallel import ordered_map
from tests.samples import sample_logs

SAMPLES = [str(p) for p in sample_logs()]


def test_results_come_in_input_order_whatever_finishes_first():
    # Early items sleep longest, so they finish last.
    def slow_for_small(i: int) -> tuple[int, str]:
        time.sleep((20 - i) / 1000)
        return i, threading.current_thread().name

    results = list(ordered_map(slow_for_small, range(20), workers=3))
    assert [i for i, _ in results] == list(range(20))
    assert len({name for _, name in results}) > 1  # really ran on several threads


def test_an_error_surfaces_where_its_result_is_due():
    def fail_on_five(i: int) -> int:
        if i == 5:
            raise ValueError("five")
        return i

    seen = []
    with pytest.raises(ValueError, match="five"):
        for value in ordered_map(fail_on_five, range(10), workers=2):
            seen.append(value)
    assert seen == [0, 1, 2, 3, 4]


def test_one_worker_runs_on_the_calling_thread():
    names = list(ordered_map(lambda _: threading.current_thread().name, range(3), workers=1))
    assert names == [threading.current_thread().name] * 3


def _parse(monkeypatch, threads: str, chunk_bytes: int, inputs=SAMPLES):
    monkeypatch.setenv("MEMLOG_THREADS", threads)
    tables, sources = parse_sources(inputs, list(load_specs().values()), chunk_bytes=chunk_bytes)
    return tables, [s.stats for s in sources]


def test_every_sample_parses_the_same_on_one_thread_and_on_four_in_small_chunks(monkeypatch):
    # 4 KiB chunks: hundreds of chunks over all samples at once, so multi-line blocks and events
    # with continuation lines cross chunk boundaries while other chunks are still being scanned.
    one, one_stats = _parse(monkeypatch, "1", 4096)
    four, four_stats = _parse(monkeypatch, "4", 4096)
    whole, whole_stats = _parse(monkeypatch, "4", 8 << 20)
    assert one.records.height > 1000
    for other in (four, whole):
        assert one.records.equals(other.records, null_equal=True)
        assert [e.to_json() for e in one.events] == [e.to_json() for e in other.events]
        assert one.events_dropped == other.events_dropped
    assert one_stats == four_stats == whole_stats


def test_read_stats_keep_the_first_damaged_line_in_file_order(tmp_path, monkeypatch):
    log = tmp_path / "damaged.log"
    good = [titan.log_line(titan.step_line_2025_03(step=i, loss=2.0, mem_gib=3.18, mem_pct=1.7, tps=1000, tflops=47.9, mfu=4.84),
                           ts="2025-06-01 08:00:00,000", rank=0) for i in range(1, 400)]
    body = "".join(line + "\n" for line in good).encode()
    # Bad bytes and NULs early and late: the report must name the early line whichever chunk ends first.
    log.write_bytes(b"\xff\n" + body + b"\0\0\n" + body + b"\xfe\0\n")
    _, (stats,) = _parse(monkeypatch, "4", 2048, [str(log)])
    assert (stats.first_replaced_line, stats.first_nul_line) == (1, 401)
    assert (stats.replaced_bytes, stats.nul_bytes) == (2, 3)
    assert stats.lines == 2 + 2 * 399 + 1
