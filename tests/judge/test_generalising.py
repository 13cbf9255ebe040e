"""Issue 34: judging that generalises, one regression test per case the issue lists.

The runs are written as a user's own loop or a framework prints them (JSON lines, DeepSpeed's
see_memory_usage blocks), at the scales the issue saw: a 20 MiB repro in MiB, a 33-46 GiB device.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from memlog.engine.api import analyze
from tests.shapes import CLASSES, draw


def jsonl(path: Path, steps, values, key: str = "gpu_mem_alloc_gb", decimals: int = 3, **more) -> Path:
    with path.open("w") as out:
        for i, (step, value) in enumerate(zip(steps, values)):
            row = {"step": step, "loss": round(3.2 - 0.2 * math.log1p(i), 4), key: round(value, decimals)}
            row.update({k: round(v[i], decimals) for k, v in more.items()})
            out.write(json.dumps(row) + "\n")
    return path


def fired(report) -> dict[str, object]:
    return {f.rule: f for f in report.findings}


# -- thresholds from the series, not constants --------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("interval", [1, 5, 10])
def test_a_saturating_warmup_is_no_leak(tmp_path, seed, interval):
    """1 - e^(-t/tau), tau ~9 logged points, noise 0.4 % of the level, 216 steps: was LEAK with a projection."""
    rng = random.Random(seed)
    n = 216 // interval
    steps = [interval * (i + 1) for i in range(n)]
    level, amplitude = 40.0, rng.choice((0.1, 0.3, 0.6))
    values = [level * (1 - amplitude * math.exp(-i / 9)) + rng.gauss(0, 0.004 * level) for i in range(n)]
    report = analyze([str(jsonl(tmp_path / "m.jsonl", steps, values))])
    assert "memory-leak" not in fired(report), report.findings[0].message
    assert report.verdict in ("warmup-plateau", "stable", "inconclusive")


@pytest.mark.parametrize("values", [[20.0, 20.0, 30.0], [20.0, 30.0, 30.1], [20.0, 30.0, 40.0]])
def test_three_points_with_one_jump_are_insufficient_data(tmp_path, values):
    report = analyze([str(jsonl(tmp_path / "m.jsonl", [10, 20, 30], values))])
    assert report.verdict == "inconclusive" and set(fired(report)) == {"insufficient-data"}


@pytest.mark.parametrize(("level", "pct", "steps"), [(33.0, 1.2, 1500), (40.0, 1.5, 2000), (46.0, 1.7, 3000)])
def test_small_sustained_growth_of_a_large_level_is_a_leak(tmp_path, level, pct, steps):
    """+1.2 to +1.7 % of a 33-46 GiB level over 1,500-3,000 steps, noise SD 0.17 GiB: was STABLE."""
    rng = random.Random(level)
    at = list(range(10, steps + 1, 10))
    values = [level * (1 + pct / 100 * s / steps) + rng.gauss(0, 0.17) for s in at]
    report = analyze([str(jsonl(tmp_path / "m.jsonl", at, values, decimals=2))])
    assert report.verdict == "leak", [f.message for f in report.findings]


def test_a_tiny_models_steady_rise_in_mib_is_a_leak(tmp_path):
    """20.4 -> 21.0 MiB in 13 readings, every one higher: was STABLE 'within the 0.25 GiB a flat run may move'."""
    values = [20.4 + 0.05 * i for i in range(13)]
    report = analyze([str(jsonl(tmp_path / "m.jsonl", range(1, 14), values, key="allocated_mib", decimals=2))])
    assert report.verdict == "leak", [f.message for f in report.findings]
    assert "0.25 GiB" not in " ".join(f.message for f in report.findings)


def test_a_flat_tiny_model_is_stable_with_a_tolerance_of_its_own_scale(tmp_path):
    rng = random.Random(3)
    values = [20.4 + rng.gauss(0, 0.01) for _ in range(40)]
    report = analyze([str(jsonl(tmp_path / "m.jsonl", range(1, 41), values, key="allocated_mib", decimals=2))])
    stable = fired(report)["stable-memory"]
    assert report.verdict == "stable"
    assert stable.evidence["observed"]["tolerance_gib"] < 0.001  # 1.5 % of 20 MiB, not 0.25 GiB


@pytest.mark.parametrize("shape", CLASSES)
def test_the_same_run_in_mib_and_in_gib_is_judged_alike(tmp_path, shape):
    """Scale invariance: the readings of one draw written in GiB and in MiB (x1024), and scaled to a
    20 MiB repro (above the 0.1 MiB reporting floors), get the same verdict and the same rules."""
    d = draw(shape, 11)
    gib = list(d.values)
    repro = 0.02 / d.level
    runs = {
        "gib": jsonl(tmp_path / "a.jsonl", d.steps, gib, key="gpu_mem_alloc_gb", decimals=6),
        "mib": jsonl(tmp_path / "b.jsonl", d.steps, [v * 1024 for v in gib], key="gpu_mem_alloc_mib", decimals=3),
        "repro": jsonl(tmp_path / "c.jsonl", d.steps, [v * repro * 1024 for v in gib], key="gpu_mem_alloc_mib", decimals=6),
    }
    judged = {name: analyze([str(p)]) for name, p in runs.items()}
    verdicts = {name: (r.verdict, sorted(fired(r))) for name, r in judged.items()}
    assert len(set(map(str, verdicts.values()))) == 1, verdicts


# -- shapes the fixed gates missed --------------------------------------------------------------


def _see_memory_usage(path: Path, allocated_after_step: list[float]) -> Path:
    """A DeepSpeed run with see_memory_usage at every micro-step stage (memory_breakdown), the
    allocated memory of each stage offset from the step's level, as ZeRO-2 prints it."""
    stages = (
        ("Engine before forward", 0.0),
        ("Engine after forward", 3.1),
        ("Engine before backward", 3.1),
        ("Engine after backward", 0.3),
        ("Engine before step", 0.3),
        ("Engine after step", 0.0),
    )
    lines = ["[2024-08-14 09:12:25,871] [INFO] [logging.py:96:log_dist] [Rank 0] DeepSpeed info: version=0.14.4, git-hash=unknown, git-branch=unknown"]
    second = 0
    for step, ma in enumerate(allocated_after_step, start=1):
        for text, extra in stages:
            second += 1
            ts = f"2024-08-14 09:{12 + second // 60:02d}:{second % 60:02d},{(7 * second) % 1000:03d}"
            now = ma + extra
            lines.append(f"[{ts}] [INFO] [utils.py:781:see_memory_usage] {text}")
            lines.append(
                f"[{ts}] [INFO] [utils.py:782:see_memory_usage] MA {now:.2f} GB         Max_MA {now + 0.4:.2f} GB         "
                f"CA {ma + 6.0:.2f} GB         Max_CA {math.ceil(ma + 6.0)} GB "
            )
            lines.append(f"[{ts}] [INFO] [utils.py:789:see_memory_usage] CPU Virtual Memory:  used = 96.1 GB, percent = 9.5%")
        lines.append(f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, lr=[1e-05, 1e-05], mom=[(0.9, 0.999), (0.9, 0.999)]")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("steps", "rise"), [(33, 1.0), (40, 2.0), (45, 2.6)])
def test_a_subtle_deepspeed_leak_printed_every_micro_step_is_found(tmp_path, steps, rise):
    """see_memory_usage every micro-step, +1 to +2.6 GiB (3-5 %) over 33-45 steps: was INCONCLUSIVE or WARMUP PLATEAU."""
    rng = random.Random(steps)
    level = 52.0 if rise > 1.5 else 30.0
    values = [level + rise * i / (steps - 1) + rng.gauss(0, 0.03) for i in range(steps)]
    report = analyze([str(_see_memory_usage(tmp_path / "ds.log", values))])
    assert report.verdict == "leak", [f.message for f in report.findings]


def test_a_jump_then_a_leak_starts_at_the_jump(tmp_path):
    """A one-off jump at step 1500 followed by a leak: was 'started growing at step 1150'."""
    rng = random.Random(5)
    steps = list(range(50, 4001, 50))
    values = [30.0 + rng.gauss(0, 0.05) if s < 1500 else 34.0 + 0.0015 * (s - 1500) + rng.gauss(0, 0.05) for s in steps]
    report = analyze([str(jsonl(tmp_path / "m.jsonl", steps, values, decimals=2))])
    leak = fired(report)["memory-leak"]
    assert "jumped by" in leak.message and "step 1500" in leak.message, leak.message
    assert "1150" not in leak.message
    assert leak.evidence["series"][0]["jump_step"] == 1500


# -- sawtooth floors on every series ------------------------------------------------------------


def _cycles(rng: random.Random, n: int, amplitude: float, level: float, floor_per_cycle: float, noise: float, square: bool):
    """Offload/reload cycles of period 6-8 steps (jittered): a ramp, or up for a rollout and down after."""
    values, cycle = [], 0
    while len(values) < n:
        period = 7 + rng.choice((-1, 0, 0, 1))
        for phase in range(period):
            up = (1.0 if phase in (1, 2) else 0.0) if square else phase / (period - 1)
            values.append(level + amplitude * up + floor_per_cycle * cycle + rng.gauss(0, noise))
        cycle += 1
    return values[:n]


@pytest.mark.parametrize("key", ["host_mem_used_gb", "gpu_mem_alloc_gb", "memory_reserved_gb"])
@pytest.mark.parametrize("square", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_a_sawtooth_is_a_leak_when_its_floor_rises_and_periodic_retention_when_flat(tmp_path, key, square, seed):
    """Host memory of an RL job cycling with offload/reload (amplitude 12-35 GiB, period ~7 steps): a floor
    rising ~2 GiB per cycle was STABLE; a flat one sometimes got no periodic-retention."""
    rng = random.Random(seed)
    n, amplitude = rng.randint(50, 120), rng.uniform(12, 35)
    level = 300.0 if key.startswith("host") else 30.0
    noise = rng.uniform(0.2, 1.0) * level / 300
    rising = _cycles(rng, n, amplitude * level / 300, level, 2.0 * level / 300, noise, square)
    flat = _cycles(rng, n, amplitude * level / 300, level, 0.0, noise, square)
    leak = analyze([str(jsonl(tmp_path / "rising.jsonl", range(1, n + 1), rising, key=key, decimals=2))])
    assert leak.verdict == "leak" and "floor rises" in fired(leak)["memory-leak"].message
    retention = analyze([str(jsonl(tmp_path / "flat.jsonl", range(1, n + 1), flat, key=key, decimals=2))])
    assert retention.verdict == "periodic-retention", [f.message for f in retention.findings]


# -- rates in the unit of the axis ---------------------------------------------------------------


def test_a_rate_is_per_step_when_the_log_numbers_its_steps(tmp_path):
    """Logged every 5 steps with the step printed: the fitted rate is per step, not per reading (5x)."""
    steps = list(range(5, 301, 5))
    values = [20.0 + 0.002 * s for s in steps]  # 2 MiB per step, 10 MiB per reading
    leak = fired(analyze([str(jsonl(tmp_path / "m.jsonl", steps, values, decimals=3))]))["memory-leak"]
    observed = leak.evidence["observed"]
    assert observed["slope_gib_per_step"] == pytest.approx(0.002, rel=0.05)
    assert observed["slope_gib_per_1k_steps"] == pytest.approx(2.0, rel=0.05)


def _axolotl_lines(bar: bool) -> list[str]:
    lines = []
    for i in range(40):
        step = 5 * (i + 1)
        mem = 10.4 + 0.05 * i
        lines.append(
            (f"{step * 100 // 200:3d}%|          | {step}/200 [00:{i:02d}<10:00,  5.03s/it]" if bar else "")
            + f"{{'loss': {1.5 - 0.01 * i:.4f}, 'grad_norm': 0.36, 'learning_rate': 2e-05, 'memory/max_active (GiB)': {mem:.2f}, "
            f"'memory/max_allocated (GiB)': {mem:.2f}, 'memory/device_reserved (GiB)': {mem + 3:.2f}, 'epoch': {0.025 * (i + 1):.3f}}}"
        )
    return lines


def test_a_rate_is_per_reading_when_the_log_numbers_only_its_readings(tmp_path):
    """An HF Trainer (axolotl) dict every logging_steps=5 optimizer steps carries no step number: the
    rate is per reading and named so; it is never printed as a per-step rate ~5x too high."""
    path = tmp_path / "axolotl.log"
    path.write_text("\n".join(_axolotl_lines(bar=False)) + "\n")
    leak = fired(analyze([str(path)]))["memory-leak"]
    observed = leak.evidence["observed"]
    assert "slope_gib_per_step" not in observed and "slope_gib_per_1k_steps" not in observed
    assert observed["slope_gib_per_reading"] == pytest.approx(0.05, rel=0.05)
    assert all("slope_gib_per_reading" in s for s in leak.evidence["series"])
    assert "/step" not in leak.message and "/reading" in leak.message


def test_a_progress_bar_before_each_dict_numbers_its_steps(tmp_path):
    """The same dicts each after the Trainer's bar (`  2%|   | 5/200 [...]`, its `\\r` lost in a
    paste): the bar counts optimizer steps, so the rate is per step, a fifth of the per-reading one."""
    path = tmp_path / "axolotl.log"
    path.write_text("\n".join(_axolotl_lines(bar=True)) + "\n")
    observed = fired(analyze([str(path)]))["memory-leak"].evidence["observed"]
    assert observed["slope_gib_per_step"] == pytest.approx(0.01, rel=0.05) and (observed["from_step"], observed["to_step"]) == (5, 200)


# -- words that match the series -----------------------------------------------------------------


def test_stable_memory_names_the_series_that_is_stable_beside_fragmentation(tmp_path):
    """Allocated flat, reserved +13.6 GiB: stable-memory said "Device memory is stable"; it is allocated memory."""
    steps = list(range(1, 61))
    path = jsonl(
        tmp_path / "m.jsonl",
        steps,
        [31.2 + 0.01 * (i % 3) for i in steps],
        key="gpu_mem_alloc_gb",
        decimals=2,
        gpu_mem_reserved_gb=[36.0 + 13.6 * i / 59 for i in range(60)],
    )
    found = fired(analyze([str(path)]))
    assert "fragmentation" in found
    assert found["stable-memory"].message.startswith("Allocated memory is stable"), found["stable-memory"].message
    assert "Device memory is stable" not in found["stable-memory"].message


def test_stable_memory_names_a_peak_reading_as_a_peak(tmp_path):
    from tests.synthetic import titan_log

    path = titan_log(tmp_path / "titan.log", {0: [23.41, 23.39, 23.42, 23.4] * 5}, list(range(1, 21)))
    stable = fired(analyze([str(path)]))["stable-memory"]
    assert stable.message.startswith("Peak reserved memory is stable"), stable.message


# -- gradient norm -------------------------------------------------------------------------------


def _torchtune(path: Path, grad: dict[int, str], loss: dict[int, str] | None = None) -> Path:
    lines = [
        f"Step {i} | loss:{(loss or {}).get(i, 2.5 - 0.01 * i)} lr:2e-05 tokens_per_second_per_gpu:2864.1 "
        f"peak_memory_active:21.3 peak_memory_alloc:21.3 peak_memory_reserved:24.5 grad_norm:{grad.get(i, '0.43')} "
        for i in range(1, 31)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_grad_norm_beside_a_finite_loss_is_reported(tmp_path, value):
    found = fired(analyze([str(_torchtune(tmp_path / "log_1.txt", {12: value, 13: value}))]))
    finding = found["nan-grad-norm"]
    assert "nan-loss" not in found
    assert finding.evidence["observed"]["non_finite_steps"] == 2 and finding.evidence["observed"]["first_step"] == 12
    assert ("NaN" if value == "nan" else "inf") in finding.message


def test_a_line_whose_loss_is_nan_too_is_reported_once_by_nan_loss(tmp_path):
    found = fired(analyze([str(_torchtune(tmp_path / "log_1.txt", {12: "nan"}, {12: "nan"}))]))
    assert "nan-loss" in found and "nan-grad-norm" not in found


def test_finite_grad_norms_are_not_reported(tmp_path):
    assert "nan-grad-norm" not in fired(analyze([str(_torchtune(tmp_path / "log_1.txt", {}))]))


# -- a run across restarts -----------------------------------------------------------------------


def test_a_leak_in_every_segment_of_a_torchrun_restarted_run_outranks_the_crashes(tmp_path):
    """Each attempt resumes from the last checkpoint, leaks and dies of OOM; torchrun restarts the worker
    group. The leak is found, headlines the report beside the OOM, and the projection starts from the
    last segment (never before its last logged step)."""
    from tests.logwriters import torchtitan as titan
    from tests.logwriters.pytorch import H100_GIB

    rng = random.Random(2)
    lines, segments = [], [(1, 400), (301, 700), (601, 1000)]
    for n, (first, last) in enumerate(segments):
        for step in range(first, last + 1, 10):
            value = 62.0 + 0.04 * (step - first) + rng.gauss(0, 0.05)
            msg = titan.step_line_2025_03(step=step, loss=3.0, mem_gib=value, mem_pct=100 * value / H100_GIB, tps=7421, tflops=341.26, mfu=34.5)
            lines.append(titan.log_line(msg, ts=f"2025-06-01 {8 + n:02d}:{step // 60 % 60:02d}:{step % 60:02d},000", rank=0))
        lines += [
            "[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/opt/torchtitan/torchtitan/train.py", line 512, in train_step',
            "[rank0]:     loss.backward()",
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.11 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.04 GiB memory in use. "
            "Of the allocated memory 75.12 GiB is allocated by PyTorch, and 1.71 GiB is reserved by PyTorch but unallocated.",
        ]
        if n < len(segments) - 1:
            lines.append(
                f"[2025-06-01 {8 + n:02d}:59:03,118] torch.distributed.elastic.agent.server.api: [INFO] [default] Worker "
                f"group FAILED. {2 - n}/3 attempts left; will restart worker group"
            )
    path = tmp_path / "restarts.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    found = fired(report)
    assert report.verdict == "leak" and "oom" in found
    leak = found["memory-leak"]
    assert "2 earlier segments" in leak.message
    assert leak.evidence["projected_capacity_step"] >= 991
