"""Chunks are decoded and scanned on several threads: results must not depend on how many."""

from __future__ import annotations

import threading
import time

import polars as pl
import pytest

from memlog.base.parallel import ordered_map
from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import ChunkParser
from memlog.read.source import Source, read_pieces, to_frame
from tests.logwriters import torchtitan as titan
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


def test_rows_unwrapped_for_block_parsers_in_the_scan_are_those_they_would_unwrap(tmp_path, monkeypatch):
    """Rows near a block's start line are unwrapped and prepared (the parser's `prepare`) while the
    chunk is scanned (ChunkParser.scan, on the pool) and read in order from there by the block
    parser: the records must be those of the parser unwrapping every row of its window itself, with
    blocks crossing chunks (rows a block carries into the next chunk are unwrapped then) and a line
    another rank glued into (two rows of one line)."""
    glued = tmp_path / "easyr1_glued.log"
    block = [
        "(Runner pid=7) Step {step}",
        "(Runner pid=7) actor:",
        "(Runner pid=7)   pg_loss: -0.01",
        "(Runner pid=7) perf:",
        "(Runner pid=7)   max_memory_allocated_gb: {mem}",
        "(Runner pid=7)   max_memory_reserved_gb: {mem}",
        "(Runner pid=7)   cpu_memory_used_gb: 12.5",
    ]
    lines = []
    for step in range(1, 40):
        # The glued line inside the block, where its two rows must not read as a gap in the block.
        glued_line = f"[rank1]: noise {step} [rank0]:[titan] 2025-09-12 02:14:55,118 - root - INFO - step: {step}  loss:  3.2  memory: 9.1GiB(9.9%)"
        lines += [line.format(step=step, mem=30 + step / 10) for line in block[:4]] + [glued_line]
        lines += [line.format(step=step, mem=30 + step / 10) for line in block[4:]]
    glued.write_text("\n".join(lines) + "\n")
    inputs = [*SAMPLES, str(glued)]
    reused = [_parse(monkeypatch, "4", size, inputs)[0] for size in (4096, 8 << 20)]
    original = ChunkParser.__init__

    def unwrapping_in_order(self, *args, **kwargs):  # no block rows unwrapped in the scan
        original(self, *args, **kwargs)
        self.block_probes = []

    monkeypatch.setattr(ChunkParser, "__init__", unwrapping_in_order)
    unwrapped_again = [_parse(monkeypatch, "4", size, inputs)[0] for size in (4096, 8 << 20)]
    read = reused[0].records.filter(pl.col("source") == str(glued))
    assert read.height > 39 and read["mem_max_allocated_gib"].drop_nulls().len() >= 39  # blocks, whole, and glued step lines read
    for mine, theirs in zip(reused, unwrapped_again):
        assert mine.records.equals(theirs.records, null_equal=True)
        assert [e.to_json() for e in mine.events] == [e.to_json() for e in theirs.events]


def _same_frames(mine: list, theirs: list) -> bool:
    """A scan's frames (events with continuation lines are (frame, continuation) pairs) equal, NaN
    (a loss the log printed as nan) equal to NaN."""

    def frame(item):
        return item[0] if isinstance(item, tuple) else item

    return len(mine) == len(theirs) and all(
        frame(a).equals(frame(b), null_equal=True) and (a[1] if isinstance(a, tuple) else None) == (b[1] if isinstance(b, tuple) else None)
        for a, b in zip(mine, theirs)
    )


@pytest.mark.parametrize("max_rows", [25_000, 40])
def test_chunks_scanned_together_scan_as_each_alone(monkeypatch, max_rows):
    """A sparse source's chunks are scanned several at a time (ChunkParser.scan_together): each
    scan must be the one its chunk gets alone, for every sample log in small chunks (blocks,
    markers, events with continuation lines, glued lines); with a small row bound too, where the
    chunks are unwrapped in several batches."""
    monkeypatch.setattr("memlog.parse.chunks.MAX_ROWS_TOGETHER", max_rows)
    parser = ChunkParser(load_specs().values())
    compared = 0
    for sample in SAMPLES:
        chunks = [to_frame(piece) for piece in read_pieces(Source(sample), 4096)]
        for first in range(0, len(chunks), 3):
            group = chunks[first : first + 3]
            for alone, together in zip([parser.scan(chunk) for chunk in group], parser.scan_together(group)):
                assert alone.lines.equals(together.lines) and alone.candidates.equals(together.candidates)
                for name in ("unwrapped", "markers"):
                    mine, theirs = getattr(alone, name), getattr(together, name)
                    assert (mine is None and theirs is None) or mine.equals(theirs, null_equal=True), (sample, name)
                mine, theirs = alone.near_starts or {}, together.near_starts or {}
                assert mine.keys() == theirs.keys() and all(mine[k].equals(theirs[k], null_equal=True) for k in mine), sample
                assert _same_frames(alone.records, together.records), sample
                assert _same_frames(alone.events, together.events), sample
                assert {k: v.to_list() for k, v in (alone.starts or {}).items()} == {k: v.to_list() for k, v in (together.starts or {}).items()}
                assert [(s.name, p.name, h.height) for s, p, h in alone.observed] == [(s.name, p.name, h.height) for s, p, h in together.observed]
                compared += bool(alone.records)
    assert compared > 100


def test_read_stats_keep_the_first_damaged_line_in_file_order(tmp_path, monkeypatch):
    log = tmp_path / "damaged.log"
    good = [
        titan.log_line(
            titan.step_line_2025_03(step=i, loss=2.0, mem_gib=3.18, mem_pct=1.7, tps=1000, tflops=47.9, mfu=4.84), ts="2025-06-01 08:00:00,000", rank=0
        )
        for i in range(1, 400)
    ]
    body = "".join(line + "\n" for line in good).encode()
    # Bad bytes and NULs early and late: the report must name the early line whichever chunk ends first.
    log.write_bytes(b"\xff\n" + body + b"\0\0\n" + body + b"\xfe\0\n")
    _, (stats,) = _parse(monkeypatch, "4", 2048, [str(log)])
    assert (stats.first_replaced_line, stats.first_nul_line) == (1, 401)
    assert (stats.replaced_bytes, stats.nul_bytes) == (2, 3)
    assert stats.lines == 2 + 2 * 399 + 1
