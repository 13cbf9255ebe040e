"""Hostile and broken input, the tables and judging stages: readings that are NaN, infinite,
negative or absurd, losses that are never finite, counts no float holds, steps that go back or
repeat: each judged as what it is, never as a leak. Shared helpers: tests/hostile.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.hostile import CAPACITY_GIB, FLAT_GIB, analyze, baseline, corrupt_values_spec, flat_lines, report_of, rule_ids, write
from tests.synthetic import torchtitan_lines


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_nan_inf_overflow_negative_and_absurd_readings_are_not_a_leak(tmp_path, where):
    corrupt = ["nan", "inf", "1e309", "-4.5", "99999.0", "-inf", "NaN"]
    values = [f"{v:.2f}" for v in FLAT_GIB * 2]
    at = 8 if where == "middle" else len(values) - len(corrupt)
    values[at : at + len(corrupt)] = corrupt
    lines = [f"train_step={i + 1} mem={v} loss={2.0 - 0.01 * i:.4f}" for i, v in enumerate(values)]
    path = write(tmp_path / "corrupt.log", lines)
    result = analyze(path, "--formats-dir", corrupt_values_spec(tmp_path), "--capacity", "80", "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    report = report_of(result)
    assert report["coverage"]["records"] == len(lines)  # parsed, then judged corrupt, not dropped unseen
    assert report["verdict"] != "leak"
    assert all(f["rule"] != "memory-leak" for f in report["findings"])
    if "corrupt-readings" in rule_ids():
        assert any(f["rule"] == "corrupt-readings" for f in report["findings"]), report["findings"]


def test_torchtitan_nan_loss_and_memory_above_capacity_are_not_a_leak(tmp_path):
    lines = flat_lines(memory=FLAT_GIB * 2)
    for i in range(-3, 0):  # the last three steps: the place a leak would show
        lines[i] = re.sub(r"memory: +[\d.]+GiB\([\d.]+%\)", f"memory: {900.0 * -i:.2f}GiB(999.00%)", lines[i])
        lines[i] = re.sub(r"loss: +[\d.]+", "loss: nan" if i % 2 else "loss: inf", lines[i])
    path = write(tmp_path / "absurd.log", lines)
    result = analyze(path, "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    report = report_of(result)
    assert report["coverage"]["records"] == len(lines) - 1  # every step line (the first line is the capacity)
    assert report["verdict"] != "leak"
    if "corrupt-readings" in rule_ids():
        assert any(f["rule"] == "corrupt-readings" for f in report["findings"]), report["findings"]


def test_steps_going_backwards_start_a_new_segment(tmp_path, flat_log):
    """A resume from checkpoint appends to the same file: the step counter goes back."""
    code, clean = baseline(flat_log)
    first = flat_lines()
    resumed = torchtitan_lines({0: FLAT_GIB}, steps=list(range(6, 18)), capacity=CAPACITY_GIB)
    path = write(tmp_path / "resumed.log", first + resumed)
    result = analyze(path, "-o", "json")
    assert result.exit_code == code and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] == clean["verdict"] != "leak"
    assert report["coverage"]["event_counts"]["restart"] == 1
    assert report["coverage"]["records"] == 2 * clean["coverage"]["records"]


def test_duplicated_steps_count_once(tmp_path, flat_log):
    """`tee -a` twice into one file, or a launcher echoing a worker: every line twice."""
    code, clean = baseline(flat_log)
    path = write(tmp_path / "twice.log", [line for line in flat_lines() for _ in range(2)])
    result = analyze(path, "-o", "json")
    assert result.exit_code == code and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] == clean["verdict"]
    assert report["coverage"]["records"] == clean["coverage"]["records"]
    assert "restart" not in report["coverage"]["event_counts"]


@pytest.mark.parametrize("loss", ["-inf", "inf", "nan"])
def test_a_loss_that_is_never_finite(tmp_path, loss):
    """Found by scripts/fuzz.py: a constant -inf loss crashed the pipeline-parallel sentinel check."""
    lines = [re.sub(r"loss: +[\d.]+", f"loss: {loss}", line) for line in flat_lines()]
    path = write(tmp_path / "inf_loss.log", lines)
    result = analyze(path, "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    report = report_of(result)
    assert report["verdict"] not in ("leak", "pp-sentinel-loss")
    assert report["coverage"]["records"] == len(lines) - 1


def test_a_count_no_float_holds_counts_nothing(tmp_path):
    """fuzz seed 2029, input 20298: `number of nan iterations:` followed by 400 nines (inf as a
    float) made nan-loss convert infinity to an integer (internal error). A count that is not a
    whole number a float holds exactly (inf, 1e300, -1) is a corrupt line: it counts nothing."""
    source = (Path(__file__).resolve().parents[2] / "sample_logs/megatron/core_v011_bf16_nan.log").read_text().splitlines()
    at = [i for i, line in enumerate(source) if "number of nan iterations:   0" in line]
    for bad in ("9" * 400, "1e300", "inf", "nan"):
        lines = list(source)
        lines[at[0]] = lines[at[0]].replace("number of nan iterations:   0", f"number of nan iterations: {bad}")
        lines[at[1]] = lines[at[1]].replace("number of skipped iterations:   0", f"number of skipped iterations: {bad}")
        log = write(tmp_path / "run.log", lines)
        result = analyze(log, "-o", "json", "--fail-on", "never")
        assert result.exit_code == 0 and result.stderr == "", (bad, result.stderr)
        assert json.loads(result.stdout)["verdict"]
