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


def test_torchtune_cuda_lines_keep_their_window_peaks(tmp_path):
    """CUDA prints all three keys: alloc and reserved stay the window peaks, no live/pool columns."""
    from memlog.parse.catalog import load_specs
    from memlog.parse.chunks import parse_line

    line = "Step 25 | loss:1.07 lr:2e-05 tokens_per_second_per_gpu:2864.1 peak_memory_active:21.3 peak_memory_alloc:21.2 peak_memory_reserved:24.5 "
    (record,), _ = parse_line(load_specs().values(), line)
    assert (record["mem_peak_allocated_gib"], record["mem_peak_reserved_gib"]) == (21.2, 24.5)
    assert record.get("mem_allocated_gib") is None and record.get("mem_reserved_gib") is None
