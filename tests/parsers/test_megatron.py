"""Megatron-LM / Megatron-DeepSpeed / GPT-NeoX (parsers/megatron.yaml): parsing the Megatron sample logs
gives exactly the generator's ground truth (one record per line read, events on their lines), the
memory reports belong to the ranks that print them, the verdicts are a Megatron maintainer's, and the
line writers read back (every other line shape of every era is a spec sample, checked by test_specs)."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from memlog.engine.api import analyze
from memlog.parse.chunks import parse_line
from tests.logwriters import megatron as mg
from tests.parsers.sample_truth import SPECS, events_match, parse, records_match, write
from tests.samplegen import build_all
from tests.samplegen.megatron import DP0_RANKS

SAMPLES = [s for s in build_all() if s.path.startswith("megatron/")]
EVENT_FIELDS = {"oom": ("tried", "capacity", "free"), "process_exit": ("return_code",), "version": ("framework", "version")}


@pytest.fixture(scope="module", params=SAMPLES, ids=[s.path for s in SAMPLES])
def parsed(request, tmp_path_factory):
    sample = request.param
    tables, path = parse(sample, tmp_path_factory.mktemp("s"))
    return sample, tables, path


def test_every_record_with_exact_values(parsed):
    sample, tables, _ = parsed
    got, expected = records_match(sample, tables)
    assert got == expected


def test_events_on_their_lines(parsed):
    sample, tables, _ = parsed
    got, expected = events_match(sample, tables, EVENT_FIELDS)
    assert got == expected


def _sample(name: str):
    return next(s for s in SAMPLES if s.path == f"megatron/{name}.log")


def test_pp_run_memory_from_the_data_parallel_rank_0_ranks_losses_from_the_last_rank(tmp_path):
    sample = _sample("core_v016_tp2_pp2_healthy")
    tables, _ = parse(sample, tmp_path)
    memory = tables.records.filter(tables.records["mem_allocated_gib"].is_not_null())
    assert sorted(memory["worker"].unique().cast(str).to_list()) == [f"rank{r}" for r in DP0_RANKS]
    per_rank = memory.filter(memory["worker"] == "rank0")
    # Iterations 1 and 10 (report_memory_flag), every 50 (--log-memory-interval), and around 3 saves;
    # a report printing the very values of the one before it at that iteration is a repeat.
    assert sample.text.count("[Rank 0] (") == 14
    assert per_rank["step"].unique(maintain_order=True).to_list() == [1, 10, 50, 100, 150, 200, 250, 300]
    assert per_rank.filter(per_rank["step"] == 100)["mem_reserved_gib"].to_list()[-1] == 57.5  # after the first save
    assert per_rank["device_mem_used_gib"].null_count() == 0
    losses = tables.records.filter(tables.records["loss"].is_not_null())
    assert set(losses["worker"].cast(str)) == {"main"}
    assert losses.filter(losses["kind"] == "train")["step"].to_list() == [1, *range(10, 301, 10)]
    assert losses.filter(losses["kind"] == "validate")["step"].to_list() == [100, 200, 300, 300]


def test_mds_run_reads_megatron_and_deepspeed_lines_of_one_stdout(tmp_path):
    sample = _sample("mds_zero2_leak_oom")
    tables, _ = parse(sample, tmp_path)
    assert set(tables.formats) == {"megatron", "deepspeed"}
    main = tables.records.filter(tables.records["worker"] == "main")
    at = {step: main.filter(main["step"] == step) for step in (0, 10)}
    # see_memory_usage (Before/After Building Model, ZeRO init) joins DeepSpeed's `step=0` line.
    assert at[0]["mem_allocated_gib"].drop_nulls().to_list() == [0.0, 2.46, 2.46, 7.37, 7.37]
    assert at[10]["loss"].drop_nulls().len() == 1 and at[10]["mem_allocated_gib"].drop_nulls().len() == 1
    assert tables.records.filter(tables.records["worker"] == "rank0")["step"].to_list() == [10]


def test_nan_run_keeps_the_iteration_lines_whose_loss_vanished(tmp_path):
    sample = _sample("core_v011_bf16_nan")
    tables, _ = parse(sample, tmp_path)
    lines = tables.records.filter((tables.records["worker"] == "main") & (tables.records["step"] >= 470))
    assert lines.height == 24 and lines["loss"].null_count() == 24
    assert all(math.isnan(g) for g in lines["grad_norm"].to_list())


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.path for s in SAMPLES])
def test_verdict_is_a_maintainers(sample, tmp_path):
    """Flat allocated memory at every report is healthy; ThroughputTimer's allocated memory climbing
    0.53 GiB per 10 iterations into an OOM is a leak; a bf16 run whose loss turned NaN has diverged
    (a training problem), and one memory report per rank decides nothing about memory."""
    report = analyze([str(write(sample, tmp_path))])
    rules = {f.rule for f in report.findings}
    if "leak" in sample.path:
        assert report.verdict == "leak" and {"memory-leak", "oom"} <= rules
    elif "nan" in sample.path:
        nan = next(f for f in report.findings if f.rule == "nan-loss")
        assert nan.evidence["observed"]["first_step"] == 470 and nan.evidence["observed"]["loss_vanished_steps"] == 24
        assert "diverged" in nan.message and report.verdict == "inconclusive"
    else:
        assert report.verdict == "stable" and "nan-loss" not in rules


def test_writers_read_back():
    """Each writer's line parses to the values it was given, as the framework rounds them."""
    line = mg.iteration_line(
        iteration=20,
        train_iters=100,
        elapsed_ms=812.44,
        lr=1.5e-4,
        global_batch_size=16,
        consumed_samples=320,
        losses={"lm loss": 2.5, "load_balancing_loss": 1.1},
        loss_scale=1.0,
        skipped=1,
        nan=1,
        grad_norm=float("nan"),
        throughput=301.26,
        time=datetime(2026, 1, 1, 8, 0, 0, 5),
    )
    rec = parse_line(SPECS, line)[0][0]
    assert (rec["step"], rec["loss"], rec["lr"], rec["tflops"], rec["skipped_iterations"], rec["nan_iterations"]) == (20, 2.5, 1.5e-4, 301.3, 1, 1)
    assert math.isnan(rec["grad_norm"]) and rec["ts"] == "2026-01-01 08:00:00.000005"
    gone = mg.iteration_line(
        iteration=30,
        train_iters=100,
        elapsed_ms=800.0,
        lr=1.5e-4,
        global_batch_size=16,
        consumed_samples=480,
        losses={"lm loss": float("nan")},
        loss_scale=1.0,
        skipped=0,
        nan=0,
    )
    assert "lm loss" not in gone and parse_line(SPECS, gone)[0][0]["loss"] is None
    neox = mg.neox_iteration_line(
        iteration=50,
        train_iters=1000,
        samples_per_sec=301.2,
        elapsed_ms=425.1,
        lr=6e-5,
        flops_per_gpu=87.3e12,
        losses={"lm_loss": float("nan")},
        loss_scale=None,
        skipped=0,
        nan=0,
        mfu=27.98,
        hfu=35.31,
    )
    rec = parse_line(SPECS, neox)[0][0]
    assert math.isnan(rec["loss"]) and (rec["tflops"], rec["mfu_pct"]) == (87.3, 27.98)
    mds = mg.mds_iteration_line(
        iteration=10,
        train_iters=1000,
        consumed_samples=1280,
        consumed_tokens=5242880,
        elapsed_ms=6201.1,
        lr=3e-6,
        global_batch_size=128,
        losses={"lm loss": 10.8123},
        loss_scale=None,
        grad_norm=5.623,
        num_zeros=0.0,
        seq_len=4096,
        skipped=0,
        nan=0,
        samples_per_sec=20.641,
        tgs=2641.9,
        tflops=121.07,
    )
    rec = parse_line(SPECS, mds)[0][0]
    assert (rec["loss"], rec["grad_norm"], rec["tps"], rec["tflops"]) == (10.8123, 5.623, 2641.9, 121.07)
    for two_decimals in (True, False):
        memory = mg.report_memory(
            "(after 10 iterations)",
            allocated=mg.mib(3 << 30),
            max_allocated=mg.mib(5 << 30),
            reserved=mg.mib(6 << 30),
            max_reserved=mg.mib(6 << 30),
            device_used=mg.mib(7 << 30),
            rank=3,
            two_decimals=two_decimals,
        )
        rec = parse_line(SPECS, memory)[0][0]
        assert (rec["rank"], rec["step"], rec["mem_allocated_gib"], rec["mem_max_reserved_gib"], rec["device_mem_used_gib"]) == (3, 10, 3.0, 6.0, 7.0)
    for line in (
        *mg.theoretical_memory(61234.57, 21876.25),
        mg.print_datetime("after training is done", datetime(2026, 1, 1), micro=True),
        *mg.timers_minmax({"forward-backward": (1.0, 2.0)}, logger=True),
        mg.argument("train_iters", 300),
        mg.saving_checkpoint(datetime(2026, 1, 1), 100, "/ckpt"),
        mg.saved_checkpoint(datetime(2026, 1, 1), 100, "/ckpt", (1, 2), (1, 2)),
        mg.parameters_on_rank(0, 1, 123),
        *mg.parameter_counts(6.98, 1.05, 2.29, 1.75),
    ):
        assert parse_line(SPECS, line) == ([], []), line
    validation = mg.validation_lines(100, {"lm loss": 2.75})
    assert [r["loss"] for r in parse_line(SPECS, "\n".join(validation))[0]] == [2.75]
