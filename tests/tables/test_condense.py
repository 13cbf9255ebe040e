"""Condensing long runs of steps while reading (memlog/tables/condense.py): what `analyze` holds shrinks,
and nothing that looks at single steps can tell."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import polars as pl
import pytest

from memlog.engine import api
from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import ChunkParser
from memlog.read.source import Piece, ReadStats, to_frame
from memlog.render.outputs.json import render_json
from memlog.tables import condense
from memlog.tables.records import Keep
from memlog.tables.series import _weighted_median
from tests.logwriters import ray
from tests.logwriters import torchtitan as titan

SPECS = list(load_specs().values())
STEPS = 20_000  # the last step; a segment's first 2 * CONDENSE_AFTER steps are kept one by one
RESTART_AT, RESUME_FROM = 16_000, 15_001
NAN_LOSS_STEP, IMPOSSIBLE_STEP, RETRIES_STEP = 19_500, 19_800, 5_000  # the first two after the restart


def _step_line(rank: int, step: int, t: int, loss: float, mem: float) -> str:
    clock = f"2025-10-02 {t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d},{rank * 7:03d}"
    msg = titan.step_line_2025_03(step=step, loss=loss, mem_gib=mem, mem_pct=100 * mem / 79.11, tps=5281, tflops=253.46, mfu=25.63, color=titan.COLOR)
    return titan.log_line(msg, ts=clock, rank=rank)


def _retries(rank: int) -> str:
    return titan.log_line(titan.alloc_retries(3), ts="2025-10-02 13:53:20,000", level="WARNING", rank=rank)


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> str:
    """Two ranks, interleaved, leaking slowly with noise; a run resumed from a checkpoint (steps go
    back), a NaN loss and an impossible memory reading deep inside, an event line between steps."""
    lines = [titan.log_line(titan.capacity("NVIDIA H100", 79.11), ts="2025-10-02 00:00:00,000", rank=0)]
    steps = [*range(1, RESTART_AT + 1), *range(RESUME_FROM, STEPS + 1)]
    for t, step in enumerate(steps):
        resumed = t >= RESTART_AT
        for rank in (0, 1):
            loss = float("nan") if (rank, step, resumed) == (1, NAN_LOSS_STEP, True) else 3.0 + ((step * 31 + rank) % 17) / 100
            mem = 30.0 + step * 0.0005 + ((step * 7919 + rank) % 13) / 100
            if (rank, step, resumed) == (0, IMPOSSIBLE_STEP, True):
                mem *= 100  # no device holds 3 TiB
            lines.append(_step_line(rank, step, 10 * t, loss, mem))
        if step == RETRIES_STEP:
            lines.append(_retries(1))
    path = tmp_path_factory.mktemp("condense") / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _both(path: str, chunk_bytes: int):
    condensed, _ = parse_sources([path], SPECS, chunk_bytes=chunk_bytes, keep=Keep.judged())
    full, _ = parse_sources([path], SPECS, chunk_bytes=chunk_bytes, keep=dataclasses.replace(Keep.judged(), condense=False))
    return condensed, full


def _text(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col(pl.Categorical).cast(pl.String))


@pytest.mark.parametrize("chunk_bytes", [64 << 10, 4 << 20])
def test_condensed_tables_count_place_and_segment_every_step_as_the_full_ones(long_log, chunk_bytes):
    condensed, full = _both(long_log, chunk_bytes)
    assert condensed.records["steps"].max() > 1 and full.records["steps"].max() == 1
    assert full.records.height == 2 * (RESTART_AT + STEPS - RESUME_FROM + 1)
    assert condensed.records.height < 0.6 * full.records.height  # the first 4000 steps of each segment stay alone
    assert condensed.step_count == full.step_count == full.records.height
    assert condensed.formats == full.formats
    # Restart events, the events' last step before them and their workers: identical.
    assert [e.to_json() for e in condensed.events] == [e.to_json() for e in full.events]
    assert any(e.kind == "restart" for e in full.events) and any(e.after_step == RETRIES_STEP for e in full.events)
    # Every segment starts and ends where it did; bins only stand inside a run.
    keys = ["worker", "segment"]
    ends = lambda t: (
        _text(t.records)
        .group_by(keys)
        .agg(pl.col("step").min(), pl.col("step").max().alias("last"), pl.col("line_no").min(), pl.col("line_no").max().alias("end"))
        .sort(keys)
    )
    assert ends(condensed).equals(ends(full))
    # A bin is where its last step was, with that step's line.
    bins = _text(condensed.records).filter(pl.col("steps") > 1)
    assert bins.height and bins.join(_text(full.records), on=["worker", "segment", "step", "line_no"], how="anti").is_empty()


def test_readings_that_cannot_be_true_stay_records_of_their_own(long_log):
    condensed, full = _both(long_log, 4 << 20)
    value_cols = ["worker", "segment", "step", "line_no", "loss", "mem_peak_reserved_gib", "steps"]
    odd = _text(condensed.records).filter(pl.col("loss").is_nan() | (pl.col("mem_peak_reserved_gib") > 1024)).select(value_cols)
    assert odd.sort("line_no")["step"].to_list() == [NAN_LOSS_STEP, IMPOSSIBLE_STEP]
    assert odd["steps"].to_list() == [1, 1]
    expected = _text(full.records).filter(pl.col("loss").is_nan() | (pl.col("mem_peak_reserved_gib") > 1024))
    assert odd.drop("steps").sort("line_no").equals(expected.select(value_cols[:-1]).sort("line_no"))


def test_analyze_judges_the_condensed_run_as_the_full_one(long_log, monkeypatch):
    condensed = api.analyze([long_log])
    full = api.analyze([long_log], condense=False)
    assert condensed.verdict == full.verdict == "leak"
    assert [(f.rule, f.severity, f.series) for f in condensed.findings] == [(f.rule, f.severity, f.series) for f in full.findings]
    assert {"corrupt-readings", "nan-loss", "memory-leak"} <= {f.rule for f in full.findings}
    # Findings about single readings quote the same lines.
    for rule in ("corrupt-readings", "nan-loss"):
        assert [f.message for f in condensed.findings if f.rule == rule] == [f.message for f in full.findings if f.rule == rule]
    assert condensed.coverage == full.coverage


def _rows(lines: list[int], steps: list[int | None], workers: list[str] | None = None, loss: list[float] | None = None) -> pl.DataFrame:
    n = len(lines)
    return pl.DataFrame(
        {
            "line_no": lines,
            "step": steps,
            "worker": workers or ["rank0"] * n,
            "kind": ["train"] * n,
            "format": ["torchtitan"] * n,
            "source": ["run.log"] * n,
            "loss": loss or [1.0 + i for i in range(n)],
            "_seconds": [float(i) for i in range(n)],
        },
        schema_overrides={"step": pl.Int64, "line_no": pl.Int64},
    ).with_columns(pl.col("worker", "kind", "format", "source").cast(pl.Categorical))


def _condensed(rows: pl.DataFrame, events: list[int] = (), open_since: int | None = None, seen: int = 10_000):
    condenser = condense.Condenser()
    condenser.carried = {("rank0", "train"): (0, seen, 0)}  # (last step, steps of its segment so far, segment)
    event_rows = [pl.DataFrame({"line_no": list(events)}, schema={"line_no": pl.Int64})] if events else []
    frames = condenser.add(rows, event_rows, open_since) + condenser.finish(open_since)
    out = pl.concat(frames, how="diagonal_relaxed").sort("line_no", maintain_order=True)  # (step-less records come apart)
    return [out.with_columns(pl.col("steps").fill_null(1)) if "steps" in out.columns else out]  # (as build_records fills it)


def test_a_run_is_binned_inside_and_cut_at_events_step_less_lines_and_a_step_logged_twice():
    lines = list(range(100, 160))
    steps: list[int | None] = [*range(1, 21), None, *range(21, 31), 30, *range(31, 59)]  # a step-less line; step 30 twice
    (out,) = _condensed(_rows(lines, steps), events=[110])
    kept = out.filter(pl.col("steps") == 1)["line_no"].to_list()
    # Each run's first and last step stay alone: lines 100, 109 | event | 110, 119 | step-less 120 | 121, 130 | 131 (30 again), 159.
    assert {100, 109, 110, 119, 120, 121, 130, 131, 159} <= set(kept)
    assert out["steps"].sum() == len(lines)
    assert out["line_no"].is_sorted()
    # Bins never reach over a cut.
    for first, last in ((100, 109), (110, 119), (121, 130), (131, 159)):
        inside = out.filter(pl.col("line_no").is_between(first, last))
        assert inside["steps"].sum() == last - first + 1


def test_lines_a_later_chunk_may_still_touch_stay_alone():
    rows = _rows(list(range(100, 140)), list(range(1, 41)))
    (out,) = _condensed(rows, open_since=130)
    alone = set(out.filter(pl.col("steps") == 1)["line_no"].to_list())
    assert {100} | set(range(129, 140)) <= alone  # the run's first and last steps, and the open lines
    assert out.filter(pl.col("steps") > 1)["steps"].sum() == 129 - 100 - 1  # 101..128


def test_a_worker_short_of_the_threshold_is_kept_step_by_step():
    rows = _rows(list(range(50)), list(range(1, 51)))
    (out,) = _condensed(rows, seen=0)
    assert out.height == 50 and ("steps" not in out.columns or out["steps"].max() == 1)


def test_bins_widen_with_the_steps_seen_whatever_the_batches():
    rows = _rows(list(range(30_000)), list(range(1, 30_001)), loss=[1.0] * 30_000)
    one = _condensed(rows, seen=0)
    condenser = condense.Condenser()
    halves = [f for part in (rows[:12_345], rows[12_345:]) for f in condenser.add(part, [], None)]
    halves += condenser.finish(None)
    widths = pl.concat(one)["steps"]
    assert widths.sum() == 30_000 and widths.head(2 * condense.CONDENSE_AFTER - 1).max() == 1
    expected = 2 * condense.CONDENSE_AFTER + condense.CONDENSE_AFTER * math.log(30_000 / (2 * condense.CONDENSE_AFTER))
    assert abs(len(widths) - expected) < 10
    assert widths.tail(20).max() == round(30_000 / condense.CONDENSE_AFTER)  # ~n / CONDENSE_AFTER wide at the n-th step
    # Cut into batches elsewhere, the bins are the same.
    assert pl.concat(halves).sort("line_no").equals(pl.concat(one).sort("line_no"))


@pytest.mark.parametrize(
    ("chunk_bytes", "batch_rows", "batch_chunks"),
    [(64 << 10, condense.BATCH_ROWS, condense.BATCH_CHUNKS), (256 << 10, 1 << 12, 32), (4 << 20, 1 << 16, 1), (1 << 20, 5_003, 3), (100_000, 777, 2)],
)
def test_the_report_is_the_same_whatever_the_chunks_and_batches(long_log, monkeypatch, chunk_bytes, batch_rows, batch_chunks):
    """Metamorphic: where the reader cuts the file and where the condenser cuts its batches change
    no record and no byte of the report."""

    def read(chunk: int):
        tables, _ = parse_sources([long_log], SPECS, chunk_bytes=chunk, keep=Keep.judged())
        return tables.records, render_json(api.analyze([long_log], chunk_bytes=chunk))

    records, report = read(4 << 20)
    monkeypatch.setattr(condense, "BATCH_ROWS", batch_rows)
    monkeypatch.setattr(condense, "BATCH_CHUNKS", batch_chunks)
    cut_records, cut_report = read(chunk_bytes)
    assert records["steps"].max() > 1 and cut_records.equals(records)
    assert cut_report == report


def test_weighted_median_counts_each_value_its_weight_and_stays_on_a_value():
    frame = pl.DataFrame({"v": [1.0, 2.0, 3.0, 4.0, 5.0, 9.0], "w": [1, 1, 1, 1, 3, 1], "g": [0, 0, 0, 0, 1, 1]})
    got = frame.group_by("g", maintain_order=True).agg(_weighted_median(pl.col("v"), pl.col("w")).alias("m"))
    assert got["m"].to_list() == [2.0, 5.0]  # the lower median, not 2.5; 5 counts three times


def _chunk(text: str, first_line: int) -> pl.DataFrame:
    data = text.encode()
    return to_frame(Piece(data, first_line, ReadStats()))


def test_the_parser_says_from_which_line_a_block_may_still_become_a_record():
    specs = api.select_specs(load_specs(), "easyr1")
    parser = ChunkParser(specs)
    prefix = "(TaskRunner pid=5121) "
    head = [f"{prefix}Step 3", f"{prefix}perf:", f"{prefix}  cpu_memory_used_gb: 212.77"]
    parser.absorb(parser.scan(_chunk("\n".join(["noise"] * 5 + head) + "\n", 1)))
    assert parser.open_since() == 6  # the block's `Step 3` line: its record is not out yet
    tail = [f"{prefix}  max_memory_allocated_gb: 40.1", "(TaskRunner pid=5121) done with step"]
    matches = parser.absorb(parser.scan(_chunk("\n".join(tail * 1) + "\n", 9)))
    assert [int(f["line_no"][0]) for f in matches.records] == [6]
    assert parser.open_since() is None


# Found in review: each of these changed a result before it was fixed. Condensing starts early here
# (CONDENSE_AFTER 50) so that the logs stay small.


@pytest.fixture
def condense_early(monkeypatch):
    monkeypatch.setattr(condense, "CONDENSE_AFTER", 50)


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_lines_of_one_step_merged_count_as_one_step(tmp_path, condense_early):
    # Two ranks a launcher did not label print every step: two lines, one record per step.
    lines = [_step_line(rank, step, step, 3.0, 30.0).split(":", 1)[1] for step in range(1, 1001) for rank in (0, 1)]
    condensed, full = _both(_write(tmp_path, lines), 4 << 20)
    assert condensed.step_count == full.step_count == full.records.height == 1000
    assert condensed.formats == full.formats


def test_an_event_in_a_chunk_without_step_lines_still_cuts_the_runs(tmp_path, condense_early):
    noise = ["[rank0]:  allocator dump: segment 0x7f00deadbeef size 2097152 allocated 1048576 " + "x" * 100] * 400
    retries = _retries(0)
    lines = []
    for step in range(1, 1201):
        lines.append(_step_line(0, step, step, 3.0, 30.0 + step * 0.0005))
        if step == 901:
            lines += [*noise, retries, *noise]  # the event's chunk holds no step line
    condensed, full = _both(_write(tmp_path, lines), 64 << 10)
    assert [e.after_step for e in condensed.events] == [e.after_step for e in full.events] == [901]


def test_a_short_segment_after_a_restart_is_judged_step_by_step(tmp_path, condense_early):
    steps = [*range(1, 1201), *range(1191, 1203)]  # resumed from a checkpoint for 12 more steps
    lines = [_step_line(0, step, t, 3.0, 30.0) for t, step in enumerate(steps)]
    condensed, _ = _both(_write(tmp_path, lines), 4 << 20)
    resumed = condensed.records.filter(pl.col("segment") == 1)
    assert resumed.height == 12 and resumed["steps"].max() == 1


def test_an_impossible_host_reading_is_not_hidden_in_a_bin(tmp_path, condense_early):
    # EasyR1's host memory in its YAML block; the node's total (from Ray's memory monitor) is known
    # only after reading, and one reading deep in the run is far above it.
    prefix = ray.actor_prefix(2911, "Runner")
    lines = []
    for step in range(1, 1201):
        used = 99999.0 if step == 1000 else 200 + (step % 5) * 0.1
        lines += [f"{prefix}Step {step}", f"{prefix}perf:", f"{prefix}  cpu_memory_used_gb: {used:.3f}"]
    condensed, _ = _both(_write(tmp_path, lines), 64 << 10)
    odd = condensed.records.filter(pl.col("host_mem_used_gib") > 1000)
    assert odd["step"].to_list() == [1000] and odd["steps"].to_list() == [1]
    assert condensed.records["steps"].max() > 1  # the rest of the run was condensed


def test_a_resume_that_lost_a_fewsteps_is_a_restart_even_inside_a_batch(tmp_path, condense_early):
    # The resumed segment's first steps cannot be binned yet, but the step that goes back still
    # ends the run: no bin mixes steps of both segments.
    steps = [*range(1, 301), *range(251, 601)]
    lines = [_step_line(0, step, t, 3.0, 30.0 + (t % 7) / 100) for t, step in enumerate(steps)]
    condensed, full = _both(_write(tmp_path, lines), 4 << 20)
    ends = lambda t: (
        t.records.group_by("segment")
        .agg(pl.col("step").min(), pl.col("step").max().alias("last"), pl.col("line_no").min(), pl.col("line_no").max().alias("end"))
        .sort("segment")
    )
    assert ends(condensed).equals(ends(full)) and full.records["segment"].max() == 1
    assert [e.to_json() for e in condensed.events] == [e.to_json() for e in full.events]
    assert condensed.records["steps"].max() > 1


def test_a_step_that_counted_nan_iterations_is_never_binned(tmp_path):
    """Megatron's `number of nan iterations` is the NaN loss its line no longer shows: a bin's median
    would hide it, so its step stays a record of its own and nan-loss names it either way."""
    from tests.logwriters import megatron

    lines = [
        megatron.iteration_line(
            iteration=it,
            train_iters=20000,
            elapsed_ms=812.0,
            lr=3e-4,
            global_batch_size=16,
            consumed_samples=16 * it,
            losses={"lm loss": 3.0 - it * 1e-5},
            loss_scale=65536.0,
            grad_norm=0.5,
            skipped=3 if it == 6100 else 0,
            nan=2 if it == 6100 else 0,
        )
        for it in range(1, 10_001)
    ]
    log = tmp_path / "megatron.log"
    log.write_text("\n".join(lines) + "\n")
    condensed, full = _both(str(log), 1 << 20)
    assert condensed.records["steps"].max() > 1 and condensed.records.height < 0.7 * full.records.height  # binned
    kept = condensed.records.filter(pl.col("nan_iterations") > 0)
    assert kept["step"].to_list() == [6100] and kept["steps"].to_list() == [1]
    messages = [[f.message for f in api.analyze([str(log)], condense=flag).findings if f.rule == "nan-loss"] for flag in (True, False)]
    assert messages[0] == messages[1] and len(messages[0]) == 1
    assert "first at step 6100" in messages[0][0] and "counts 2 iterations with a NaN or infinite loss" in messages[0][0]


# Bounds that do not wait for a long segment (memlog/tables/condense.py: KEEP_SEGMENTS, HELD_RECORDS): a job
# resumed again and again, a restart loop, thousands of ranks. Small bounds keep the logs small.


@pytest.fixture
def small_bounds(monkeypatch):
    monkeypatch.setattr(condense, "KEEP_SEGMENTS", 3)
    monkeypatch.setattr(condense, "CONDENSE_AFTER", 50)
    monkeypatch.setattr(condense, "HELD_RECORDS", 2000)
    monkeypatch.setattr(condense, "MIN_CONDENSE_AFTER", 4)
    monkeypatch.setattr(condense, "BATCH_ROWS", 500)  # many batches: segments left behind in earlier ones too
    monkeypatch.setattr(condense, "COMPACT_SLICE_ROWS", 1000)  # records binned again a few workers at a time


def _resumed(tmp_path: Path, ranks: int, segments: int, every: int, name: str = "train.log") -> str:
    """`ranks` ranks whose job restarts from step 1 every `every` steps, `segments` times in all;
    memory climbs 1 GiB over each segment after a short warm-up."""
    lines = [titan.log_line(titan.capacity("NVIDIA H100", 79.11), ts="2025-10-02 00:00:00,000", rank=r) for r in range(ranks)]
    t = 0
    for _ in range(segments):
        for step in range(1, every + 1):
            t += 1
            for rank in range(ranks):
                mem = 30.0 - 4 * math.exp(-step / 3) + step / every + ((step * 7919 + rank) % 13) / 200
                lines.append(_step_line(rank, step, t, 3.0 + (step % 5) / 100, mem))
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("segments", [6, 40])
def test_a_run_resumed_again_and_again_holds_its_last_segments_and_counts_the_rest(tmp_path, small_bounds, segments):
    # Segments of 60 steps never reach 2 * CONDENSE_AFTER steps: only the segment bound holds them.
    path = _resumed(tmp_path, 2, segments, 60)
    condensed, full = _both(path, 64 << 10)
    assert full.records.height == 2 * 60 * segments
    assert condensed.records.height <= 2 * 60 * (condense.KEEP_SEGMENTS + 1)  # the same however many restarts
    held = condensed.records.group_by("worker").agg(pl.col("segment").unique().sort())
    assert all(s == list(range(segments - 3, segments)) for s in held["segment"].to_list())  # the last 3, numbered as read
    assert condensed.step_count == full.step_count and condensed.formats == full.formats
    cov, cov_full = api.coverage(condensed, []), api.coverage(full, [])
    assert cov["summarised"] == {"segments": 2 * (segments - 3), "workers": 2, "steps": 2 * 60 * (segments - 3), "kept_segments": 3}
    assert "summarised" not in cov_full
    for key in ("records", "event_counts", "steps", "restarts", "workers", "ranks", "formats"):
        assert cov[key] == cov_full[key], key
    # The live segment is held as read: its every step, its restart event.
    live = lambda t: t.records.filter(pl.col("segment") == segments - 1).drop("steps")
    assert live(condensed).equals(live(full))
    last = lambda t: [e.to_json() for e in t.events if e.kind == "restart"][-2:]
    assert last(condensed) == last(full)


def test_a_summarised_run_is_judged_as_the_full_one_and_says_so(tmp_path, small_bounds):
    path = _resumed(tmp_path, 2, 12, 60)
    condensed, full = api.analyze([path]), api.analyze([path], condense=False)
    assert condensed.verdict == full.verdict == "leak"
    assert {f.rule for f in condensed.findings} == {f.rule for f in full.findings}
    from memlog.render.shared import restarts_sentence

    said = restarts_sentence(condensed.coverage)
    assert "Only each worker's last 3 segments are judged: 18 earlier ones (1,080 steps) were summarised" in said
    assert "summarised" not in (restarts_sentence(full.coverage) or "")


def test_a_restart_loop_holds_a_few_records_however_long_it_loops(tmp_path, small_bounds):
    heights = []
    for loops in (200, 2000):
        condensed, full = _both(_resumed(tmp_path, 1, loops, 2, f"loop{loops}.log"), 64 << 10)
        heights.append(condensed.records.height)
        assert condensed.step_count == full.step_count == 2 * loops
        assert api.coverage(condensed, [])["event_counts"] == api.coverage(full, [])["event_counts"] == {"capacity": 1, "restart": loops - 1}
        assert len(condensed.events) == 1 + condense.KEEP_SEGMENTS  # the capacity line and the restarts into held segments
    assert heights[0] == heights[1] == 2 * condense.KEEP_SEGMENTS


@pytest.mark.parametrize("ranks", [20, 120])
def test_many_ranks_share_the_records_held(tmp_path, small_bounds, ranks):
    # 120 steps per rank, below 2 * CONDENSE_AFTER: held one by one unless the ranks share HELD_RECORDS.
    path = _resumed(tmp_path, ranks, 1, 120)
    condensed, full = _both(path, 64 << 10)
    assert full.records.height == 120 * ranks
    per_rank = condensed.records.group_by("worker").len()["len"]
    # 2 * after steps one by one, then bins about n / after wide: ~after * (2 + ln(n / (2 * after))).
    after = max(condense.MIN_CONDENSE_AFTER, min(condense.CONDENSE_AFTER, condense.HELD_RECORDS // (4 * ranks)))
    assert per_rank.max() <= after * (3 + math.log(120 / (2 * after)))
    assert condensed.step_count == full.step_count
    short = lambda t: t.records.filter(pl.col("step") <= 2 * after).drop("steps")
    assert short(condensed).equals(short(full))  # each rank's first steps as read
    judged = [api.analyze([path], condense=flag) for flag in (True, False)]
    assert judged[0].verdict == judged[1].verdict == "leak"
    assert {f.rule for f in judged[0].findings} == {f.rule for f in judged[1].findings}


def test_binning_again_a_few_workers_at_a_time_gives_the_same_bins(tmp_path, small_bounds, monkeypatch):
    path = _resumed(tmp_path, 120, 1, 120)
    sliced, _ = parse_sources([path], SPECS, chunk_bytes=64 << 10, keep=Keep.judged())
    monkeypatch.setattr(condense, "COMPACT_SLICE_ROWS", 1 << 30)
    whole, _ = parse_sources([path], SPECS, chunk_bytes=64 << 10, keep=Keep.judged())
    assert sliced.records["steps"].max() > 1 and sliced.records.equals(whole.records)
