"""A step's several lines as the rules judge them (records.step_rows): its floor and its peak."""

from __future__ import annotations

import dataclasses
import json
import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memlog.base.limits import MAX_SERIES_POINTS
from memlog.cli import app
from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs
from memlog.tables import records
from memlog.tables.condense import Condenser
from memlog.tables.records import Keep, build_records, compact_records
from tests.logwriters import deepspeed as ds

NAN = float("nan")
SPECS = list(load_specs().values())


def _chunk(rows: list[tuple]) -> pl.DataFrame:
    """Compact rows of one worker: (line, step, loss, allocated, reserved), None where not printed."""
    frame = pl.DataFrame(
        rows,
        schema={"line_no": pl.Int64, "step": pl.Int64, "loss": pl.Float64, "mem_allocated_gib": pl.Float64, "mem_reserved_gib": pl.Float64},
        orient="row",
    ).with_columns(
        rank=pl.lit(0, dtype=pl.Int64),
        format=pl.lit("deepspeed"),
        kind=pl.lit("train"),
        pattern=pl.when(pl.col("step").is_null()).then(pl.lit("deepspeed/memory")).otherwise(pl.lit("deepspeed/step")),
        inherited=pl.col("step").is_null(),  # memory lines take their step from the step line before them
    )
    return compact_records("run.log", [frame], Keep.judged())


# An initialisation reading, then two steps whose memory is printed before and after each phase
# (the step line first, as DeepSpeed's `step=N` comes before the readings that inherit its step).
LINES = [
    (1, None, None, 2.0, 3.0),  # before the first step: initialisation
    (2, 1, 1.9, None, None),
    (3, None, None, 5.0, 10.0),
    (4, None, None, 9.0, 10.0),
    (5, None, None, 6.0, 10.5),
    (6, 2, 1.8, None, None),
    (7, None, None, 5.1, 10.5),
    (8, None, None, NAN, 10.5),  # a reading that cannot be true stays a row of its own
    (9, None, None, 9.1, 10.5),
]


def test_a_steps_several_readings_are_its_floor_and_its_peak():
    records = build_records([_chunk(LINES)], per_step=True)
    rows = records.select("step", "line_no", "loss", "mem_allocated_gib", "mem_reserved_gib", "readings", "steps").rows()
    assert rows[0] == (1, 1, None, 2.0, 3.0, 1, 1)  # initialisation: as printed
    assert rows[1] == (1, 2, 1.9, None, None, 1, 0)  # a line without memory: as printed
    # Step 1's memory lines: its floor (each column's lowest) where allocated was lowest, its peak
    # (each column's highest) where allocated was highest, in line order.
    assert rows[2] == (1, 3, None, 5.0, 10.0, 0, 0)
    assert rows[3] == (1, 4, None, 9.0, 10.5, 3, 0)
    assert rows[4] == (2, 6, 1.8, None, None, 1, 1)
    assert rows[5] == (2, 7, None, 5.1, 10.5, 0, 0)
    assert rows[6][:2] == (2, 8) and math.isnan(rows[6][3])
    assert rows[7] == (2, 9, None, 9.1, 10.5, 2, 0)
    assert len(rows) == 8
    # One row per line when the caller reads lines (`memlog series --readings`, formats check).
    assert build_records([_chunk(LINES)]).height == len(LINES)


def test_a_step_of_one_reading_is_one_row_and_counts_one():
    records = build_records([_chunk([(1, 1, 2.0, 4.0, 5.0), (2, 2, 1.9, 4.0, 5.0)])], per_step=True)
    assert records.height == 2 and "readings" not in records.columns  # (a row a line: nothing to say)


def test_the_report_says_how_a_steps_readings_were_judged():
    result = CliRunner().invoke(app, ["analyze", "sample_logs/deepspeed/memory_breakdown_fragmentation.log", "-o", "json", "--fail-on", "never"])
    merged = json.loads(result.stdout)["coverage"]["readings_per_step"]
    assert merged["steps"] >= 70 and merged["most_in_a_step"] >= 8 and "floor and peak" in merged["judged_by"]
    text = CliRunner().invoke(app, ["analyze", "sample_logs/deepspeed/memory_breakdown_fragmentation.log", "--fail-on", "never", "--no-chart"]).stdout
    assert "judged by its floor and its peak" in " ".join(text.split())


def _phased_log(path, steps: int, leak_per_step: float) -> None:
    """DeepSpeed's memory breakdown: six see_memory_usage readings a step, activations on top of a
    floor that leaks by `leak_per_step` GiB, and the progress line of each step."""
    activations = (0.0, 9.4, 9.4, 1.1, 1.1, 0.0)
    where = "utils.py:782:see_memory_usage"
    lines = []
    for step in range(1, steps + 1):
        ts = f"2024-07-10 14:{(step // 60) % 60:02d}:{step % 60:02d},000"
        floor = 14.2 + leak_per_step * step + 0.01 * ((step * 7919) % 13) / 13
        for extra in activations:
            ma = round(floor + extra, 2)
            lines.append(ds.log_line(ds.see_memory_usage(ma=ma, max_ma=round(floor + 9.4, 2), ca=24.0, max_ca=24), ts=ts, where=where))
        lines.append(ds.log_line(ds.progress(step=step, skipped=0, lr=[1e-5, 1e-5], mom=[(0.9, 0.95), (0.9, 0.95)]), ts=ts, where="logging.py:96:log_dist"))
    path.write_text("\n".join(lines) + "\n")


def test_a_long_run_keeps_each_steps_floor_and_peak_apart_when_binned(tmp_path):
    # More steps than a series holds points (MAX_SERIES_POINTS): the floors and the peaks are binned
    # each on their own, so the cycle of every step is still judged as two envelopes, and the leak
    # underneath is found on both, not lost in bins that mix floors and peaks.
    log = tmp_path / "ds.log"
    _phased_log(log, steps=MAX_SERIES_POINTS + 400, leak_per_step=0.002)
    report = json.loads(CliRunner().invoke(app, ["analyze", str(log), "-o", "json", "--fail-on", "never"]).stdout)
    assert report["verdict"] == "leak"
    leak = next(f for f in report["findings"] if f["rule"] == "memory-leak")
    assert {s["series"] for s in leak["evidence"]["series"]} == {"main [floor]", "main [peak]"}
    assert report["coverage"]["readings_per_step"]["most_in_a_step"] == 6  # the memory lines of a step


MERGED_SAMPLES = [
    "sample_logs/deepspeed/memory_breakdown_fragmentation.log",
    "sample_logs/deepspeed/healthy_hf5_bare_memory.log",
    "sample_logs/deepspeed/fr4_orz_offload_leak.log",
    "sample_logs/generic/maxtext_memstats_per_step_leak.log",
    "sample_logs/verl/ray_driver_mixed.log",
    "sample_logs/threads/easyr1_260_vllm_sleep_wake_host_leak.log",
]


@pytest.mark.parametrize("chunk_bytes", [4096, 8 << 20])
def test_memory_lines_merged_while_reading_give_the_rows_merged_at_the_end(chunk_bytes):
    # analyze merges each worker's memory lines between two of its step lines as it reads
    # (condense.Condenser._stepless), chunk by chunk; the records are those of merging them all
    # at the end (no condenser), wherever the chunks end.
    streamed, _ = parse_sources(MERGED_SAMPLES, SPECS, chunk_bytes=chunk_bytes, keep=Keep.judged())
    at_end, _ = parse_sources(MERGED_SAMPLES, SPECS, chunk_bytes=chunk_bytes, keep=dataclasses.replace(Keep.judged(), condense=False))
    assert streamed.records["readings"].max() > 2
    text = pl.col(pl.Categorical).cast(pl.String)
    assert streamed.records.with_columns(text).equals(at_end.records.with_columns(text), null_equal=True)


def test_the_condenser_holds_a_steps_memory_lines_as_its_floor_and_peak():
    lines = [(1, 1, 2.0, None, None)] + [(1 + i, None, None, 5.0 + (i % 3), 10.0) for i in range(1, 40)] + [(40, 2, 1.9, None, None)]
    condenser = Condenser(per_step=True)
    condenser.add(_chunk(lines[:20]), [], None)
    condenser.add(_chunk(lines[20:]), [], None)
    held = condenser.finish(None)
    assert sum(f.height for f in held) <= 2 + 2 * 2  # two step lines, a floor and a peak per batch at most
    whole = build_records([_chunk(lines)], per_step=True)
    assert build_records(held, per_step=True).drop("_seconds").equals(whole.drop("_seconds"), null_equal=True)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.one_of(st.none(), st.floats(0, 80)), st.one_of(st.none(), st.floats(0, 80))),
        min_size=1,
        max_size=120,
    ),
    rows_per_merge=st.integers(1, 40),
)
def test_a_step_merge_in_slices_gives_the_rows_of_one_merge(lines, rows_per_merge):
    # step_rows merges long tables slice by slice (its copies then are one slice's); a slice never
    # cuts a step, so the rows, their values and their order are those of one merge. Workers
    # interleave line by line and each advances its own step, so a step's lines are far apart.
    steps = dict.fromkeys(range(4), 1)
    rows = []
    for line_no, (worker, next_step, allocated, reserved) in enumerate(lines, start=1):
        steps[worker] += next_step
        rows.append((line_no, f"rank{worker}", steps[worker], allocated, reserved))
    frame = pl.DataFrame(
        rows,
        schema={"line_no": pl.Int64, "worker": pl.String, "step": pl.Int64, "mem_allocated_gib": pl.Float64, "mem_reserved_gib": pl.Float64},
        orient="row",
    ).with_columns(source=pl.lit("run.log"), kind=pl.lit("train"), segment=pl.lit(0, dtype=pl.Int64))
    whole = records.step_rows(frame)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(records, "ROWS_PER_MERGE", rows_per_merge)
        sliced = records.step_rows(frame)
    assert sliced.equals(whole, null_equal=True)
