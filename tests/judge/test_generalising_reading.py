"""Issue 34, the reading half: what a log's lines mean before any series is judged.

- the live set and the pool on Apple MPS (torchtune prints current allocated and the Metal driver's
  pool under its CUDA peak keys);
- torchrun `--log-dir` attempts read as segments of one run;
- a log that numbers readings, not steps, says so in its step-range fields.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memlog.engine.api import analyze


def fired(report) -> dict[str, object]:
    return {f.rule: f for f in report.findings}


# -- live vs pool on Apple MPS -------------------------------------------------------------------


def _mps_log(path: Path, active: list[float], pool: list[float], grad_norm: bool = False) -> Path:
    """torchtune's DiskLogger on MPS: get_memory_stats gives `peak_memory_active` (current allocated)
    and `peak_memory_alloc` (driver allocated), no `peak_memory_reserved`."""
    lines = [
        f"Step {i} | loss:{1.9 - 0.01 * i} lr:0.0003 tokens_per_second_per_gpu:{247.3 + i % 5} "
        f"peak_memory_active:{a} peak_memory_alloc:{p} " + (f"grad_norm:{0.4 + 0.01 * (i % 7)} " if grad_norm else "")
        for i, (a, p) in enumerate(zip(active, pool), 1)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("grad_norm", [False, True])
def test_mps_live_set_flat_and_metal_pool_growing_is_fragmentation_not_a_leak(tmp_path, grad_norm):
    """The issue's run: `peak_memory_active` flat at 47.32 GiB, the pool growing, 6 points: was LEAK."""
    active = [47.3201, 47.3189, 47.3214, 47.3195, 47.3208, 47.3199]
    pool = [51.5, 52.25, 53.0, 54.5, 55.75, 57.0]
    report = analyze([str(_mps_log(tmp_path / "log_1746089112.txt", active, pool, grad_norm))])
    found = fired(report)
    assert "memory-leak" not in found and report.verdict == "fragmentation", [f.message for f in report.findings]
    assert found["fragmentation"].evidence["observed"]["allocated_level_gib"] == pytest.approx(47.32, abs=0.01)
    assert found["stable-memory"].message.startswith("Allocated memory is stable"), found["stable-memory"].message


def test_mps_leak_is_judged_on_the_live_set(tmp_path):
    """Live tensors growing: a leak, measured on `peak_memory_active` (allocated), not on the pool."""
    rng = random.Random(5)
    active = [40.0 + 0.05 * i + rng.gauss(0, 0.004) for i in range(40)]
    pool = [a + 6.0 + 0.25 * (i // 8) for i, a in enumerate(active)]
    leak = fired(analyze([str(_mps_log(tmp_path / "log_1.txt", active, pool))]))["memory-leak"]
    assert [s["metric"] for s in leak.evidence["series"]] == ["mem_allocated_gib"]
    assert leak.evidence["observed"]["slope_gib_per_step"] == pytest.approx(0.05, rel=0.1)


def test_a_users_mps_counters_read_by_a_guess_tell_live_from_pool(tmp_path):
    """A training script printing torch.mps's own counters (no spec knows the line): the generic
    reader takes `current_allocated_memory` as the live set and `driver_allocated_memory` (the Metal
    driver's pool, cache included) as the pool, so a flat live set under a growing pool is not a leak."""
    lines = [
        f"epoch 0 step {i} loss {2.1 - 0.002 * i:.4f} mps current_allocated_memory {9.31 + 0.002 * (i % 3):.3f} GB "
        f"driver_allocated_memory {12.0 + 0.08 * i:.3f} GB"
        for i in range(1, 81)
    ]
    log = tmp_path / "train_mps.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)])
    found = fired(report)
    assert "memory-leak" not in found and report.verdict == "fragmentation", [f.message for f in report.findings]


def test_torchtune_cuda_lines_keep_their_window_peaks(tmp_path):
    """CUDA prints all three keys: alloc and reserved stay the window peaks, no live/pool columns."""
    from memlog.parse.catalog import load_specs
    from memlog.parse.chunks import parse_line

    line = "Step 25 | loss:1.07 lr:2e-05 tokens_per_second_per_gpu:2864.1 peak_memory_active:21.3 peak_memory_alloc:21.2 peak_memory_reserved:24.5 "
    (record,), _ = parse_line(load_specs().values(), line)
    assert (record["mem_peak_allocated_gib"], record["mem_peak_reserved_gib"]) == (21.2, 24.5)
    assert record.get("mem_allocated_gib") is None and record.get("mem_reserved_gib") is None


# -- torchrun --log-dir attempts -----------------------------------------------------------------


def _torchrun_log_dir(root: Path, attempts: list[tuple[int, int]], ranks: int = 2) -> Path:
    """`--log-dir` as torchrun writes it: `<log_dir>/<rdzv_id>_<random>/attempt_<n>/<local_rank>/` with the
    worker's unprefixed stdout.log and stderr.log. Each attempt resumes from the last checkpoint
    (its first step), leaks and dies of OOM; the agent then restarts the worker group."""
    from tests.logwriters import torchtitan as titan
    from tests.logwriters.pytorch import H100_GIB

    rng = random.Random(7)
    run = root / "none_k2x9w1qa"
    for n, (first, last) in enumerate(attempts):
        for rank in range(ranks):
            folder = run / f"attempt_{n}" / str(rank)
            folder.mkdir(parents=True)
            out = [titan.log_line(titan.capacity("NVIDIA H100 80GB HBM3"), ts=f"2025-06-01 {8 + n:02d}:00:01,412")]
            for step in range(first, last + 1, 10):
                value = 40.0 + 0.012 * (step - first) + rng.gauss(0, 0.05)
                msg = titan.step_line_2025_03(step=step, loss=3.0, mem_gib=value, mem_pct=100 * value / H100_GIB, tps=7421, tflops=341.26, mfu=34.5)
                minute = (step - first) // 25
                out.append(titan.log_line(msg, ts=f"2025-06-01 {8 + n:02d}:{minute:02d}:{step % 60:02d},118"))
            (folder / "stdout.log").write_text("\n".join(out) + "\n")
            (folder / "stderr.log").write_text(
                "Traceback (most recent call last):\n"
                '  File "/opt/torchtitan/torchtitan/train.py", line 512, in train_step\n'
                "    loss.backward()\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of "
                "which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.04 GiB memory in use. Of the allocated "
                "memory 75.12 GiB is allocated by PyTorch, and 1.71 GiB is reserved by PyTorch but unallocated.\n"
            )
    return run


def test_torchrun_attempt_folders_are_segments_of_one_run(tmp_path):
    """A leak in every attempt is found; it is measured and projected on the last attempt, and the
    projection never lands before the last logged step (was "capacity at step ~3251" at step 3291)."""
    run = _torchrun_log_dir(tmp_path, [(1, 1200), (1001, 2200), (2001, 3300)])
    report = analyze([str(run)])
    found = fired(report)
    assert report.verdict == "leak" and "oom" in found
    leak = found["memory-leak"]
    observed = leak.evidence["observed"]
    assert (observed["from_step"], observed["to_step"]) == (2001, 3291)
    assert all(s["series"].endswith("(attempt 2)") for s in leak.evidence["series"]) and leak.evidence["ranks"] == [0, 1]  # rank and attempt
    assert "also in 2 earlier segments" in leak.message
    assert leak.evidence["projected_capacity_step"] > observed["to_step"]
    assert leak.evidence["projected_capacity_at"] > "2025-06-01 10:"  # after the last attempt's last line, not the first's
    assert report.coverage["restarts"] == [1001, 2001]  # where attempts 1 and 2 resumed


def test_attempt_order_is_numeric_and_not_by_name(tmp_path):
    """attempt_10 comes after attempt_9: the last segment is the last attempt."""
    from memlog.tables.series import SeriesKey

    keys = [SeriesKey(f"/logs/run_ab12/attempt_{n}/0/stdout.log", "rank0", 0) for n in (10, 9, 2)]
    assert len({k.run for k in keys}) == 1
    assert max(keys, key=lambda k: k.place).source.endswith("attempt_10/0/stdout.log")
    assert SeriesKey("/logs/a.log", "rank0", 1).place == (0, 1) and SeriesKey("/logs/a.log", "rank0", 1).run == ("/logs/a.log", "rank0")


# -- step ranges in the unit of the axis ---------------------------------------------------------


def _untagged(path: Path, allocated: list[float], reserved: list[float]) -> Path:
    """A user's own print, `loss=… allocated: … MB, reserved: … MB`, with no step number: readings."""
    lines = [f"loss={10.6 - 0.01 * i:.2f} allocated: {a:.1f} MB, reserved: {r:.1f} MB" for i, (a, r) in enumerate(zip(allocated, reserved))]
    path.write_text("Starting training\n" + "\n".join(lines) + "\n")
    return path


def test_a_leak_on_numbered_readings_names_its_range_in_readings(tmp_path):
    values = [31900.0 + 30.0 * i for i in range(50)]
    report = analyze([str(_untagged(tmp_path / "train.log", values, [v + 20000.0 for v in values]))])
    leak = fired(report)["memory-leak"]
    observed = leak.evidence["observed"]
    assert (observed["from_reading"], observed["to_reading"]) == (1, 50)
    assert not [k for k in observed if k.endswith("_step")]
    assert all("from_reading" in s and "to_reading" in s and "from_step" not in s and "onset_step" not in s for s in leak.evidence["series"])
    assert "from reading 1 to 50" in leak.message and "step" not in leak.message.replace("per-step", ""), leak.message


def test_fragmentation_on_numbered_readings_names_its_range_in_readings(tmp_path):
    rng = random.Random(1)
    allocated = [31900.0 + rng.gauss(0, 2.0) for _ in range(50)]
    reserved = [40000.0 + 200.0 * i for i in range(50)]
    found = fired(analyze([str(_untagged(tmp_path / "train.log", allocated, reserved))]))
    fragmentation = found["fragmentation"]
    assert {"from_reading", "to_reading"} <= set(fragmentation.evidence["observed"]) and "from_step" not in fragmentation.evidence["observed"]
    assert "reserved_slope_ci_gib_per_reading" in fragmentation.evidence["confidence"]
    assert "from reading 1 to 50" in fragmentation.message


def test_a_log_with_step_numbers_keeps_from_step(tmp_path):
    lines = [f"step {s} loss={3.0 - 0.001 * s:.3f} allocated: {20000.0 + 3.0 * s:.1f} MB" for s in range(10, 510, 10)]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    observed = fired(analyze([str(tmp_path / "train.log")]))["memory-leak"].evidence["observed"]
    assert (observed["from_step"], observed["to_step"]) == (10, 500) and "from_reading" not in observed


@pytest.mark.parametrize(("output", "axis"), [("text", "Device memory per worker vs reading"), ("markdown", 'x-axis "reading"'), ("html", "vs reading")])
def test_charts_of_numbered_readings_count_readings(tmp_path, output, axis):
    from typer.testing import CliRunner

    from memlog.cli import app

    values = [31900.0 + 30.0 * i for i in range(50)]
    path = _untagged(tmp_path / "train.log", values, [v + 20000.0 for v in values])
    result = CliRunner().invoke(app, ["analyze", str(path), "-o", output, "--fail-on", "never"])
    assert result.exit_code == 0 and axis in result.stdout
    assert "vs step" not in result.stdout and 'x-axis "step"' not in result.stdout
