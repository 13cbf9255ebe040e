"""Verdicts that hold on any run: the shapes of issue 15, each seen wrong once, as regression tests.

Every log here is generated (tests.logwriters), never a bundled sample: late-onset leaks in long
runs, resumes, capacity from another node, drift within noise, memory lines denser than step lines.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

import pytest

from memlog.engine.api import analyze
from tests.logwriters import torchtitan as titan
from tests.logwriters.pytorch import H100, H100_GIB
from tests.synthetic import titan_log, torchtitan_lines


def noise(n: int, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(0, sigma) for _ in range(n)]


def late_leak(steps: list[int], onset: int, growth: float, level: float = 41.8, sigma: float = 0.02, seed: int = 0) -> list[float]:
    end = steps[-1]
    return [round(level + max(0.0, s - onset) / (end - onset) * growth + e, 2) for s, e in zip(steps, noise(len(steps), sigma, seed))]


def flat(steps: list[int], level: float = 41.8, sigma: float = 0.02, seed: int = 1) -> list[float]:
    return [round(level + e, 2) for e in noise(len(steps), sigma, seed)]


def leak_of(report):
    return next((f for f in report.findings if f.rule == "memory-leak"), None)


@pytest.mark.parametrize(("total", "log_freq", "onset_share"), [(200_000, 10, 0.75), (20_000, 10, 0.75), (200_000, 10, 0.95)])
def test_a_leak_that_starts_late_in_a_long_run_is_found_with_its_onset(tmp_path, total, log_freq, onset_share):
    steps = [1, *range(log_freq, total + 1, log_freq)]
    onset = int(total * onset_share)
    memory = {r: flat(steps, seed=r) for r in range(8)}
    memory[5] = late_leak(steps, onset, 10.0, seed=5)
    report = analyze([str(titan_log(tmp_path / "late.log", memory, steps))])
    leak = leak_of(report)
    assert report.verdict == "leak" and leak is not None and leak.severity == "error", [f.message for f in report.findings]
    assert leak.evidence["ranks"] == [5]
    onset_found = leak.evidence["observed"]["from_step"]
    assert abs(onset_found - onset) <= 0.02 * total, (onset_found, onset)
    # The rate is the growth's own, from its onset: 10 GiB over the steps after it.
    assert leak.evidence["observed"]["slope_gib_per_1k_steps"] == pytest.approx(10.0 / (total - onset) * 1000, rel=0.2)
    assert "stable-memory" not in {f.rule for f in report.findings if 5 in f.evidence.get("ranks", [])}


def test_a_late_leak_on_every_rank_is_no_stable_run(tmp_path):
    steps = [1, *range(10, 200_001, 10)]
    memory = {r: late_leak(steps, 150_000, 20.0, seed=r) for r in range(8)}
    report = analyze([str(titan_log(tmp_path / "all.log", memory, steps))])
    assert report.verdict == "leak" and leak_of(report).evidence["ranks"] == list(range(8))


def test_flat_for_half_a_million_steps_then_growth_is_projected_from_its_onset(tmp_path):
    steps = [1, *range(500, 1_000_001, 500)]
    memory = {0: late_leak(steps, 500_000, 10.0)}
    report = analyze([str(titan_log(tmp_path / "half.log", memory, steps, capacity=H100_GIB))])
    leak = leak_of(report)
    observed = leak.evidence["observed"]
    assert observed["from_step"] == pytest.approx(500_000, abs=20_000)
    assert observed["slope_gib_per_1k_steps"] == pytest.approx(0.02, rel=0.2)  # 10 GiB per 500k steps
    # 51.8 GiB at step 1M, +0.02 GiB per 1k steps: the 79.11 GiB capacity at ~2.37M.
    assert leak.evidence["projected_capacity_step"] == pytest.approx(1_000_000 + (H100_GIB - 51.8) / 0.02 * 1000, rel=0.1)
    assert "from the first logged steps" not in leak.message


def test_after_resumes_the_rate_and_projection_come_from_the_live_segment(tmp_path):
    """Three segments (two resumes): the run is judged where it runs now."""
    lines = []
    level = 30.0
    for segment, (first, last, slope) in enumerate([(1, 10_000, 0.0001), (8_001, 18_000, 0.0001), (16_001, 30_000, 0.0004)]):
        steps = list(range(first, last + 1, 10))
        values = [round(level + slope * (s - first), 2) for s in steps]
        lines += torchtitan_lines({0: values}, steps=steps, capacity=H100_GIB if segment == 0 else None)
    path = tmp_path / "resumed.log"
    path.write_text("\n".join(lines) + "\n")
    leak = leak_of(analyze([str(path)]))
    assert leak is not None
    observed = leak.evidence["observed"]
    assert observed["slope_gib_per_1k_steps"] == pytest.approx(0.4, rel=0.15)
    assert observed["from_step"] >= 16_001
    # 35.6 GiB at step 30,000, +0.4 GiB per 1k steps: capacity at ~138,000, not from the dead segment's rate.
    assert leak.evidence["projected_capacity_step"] == pytest.approx(30_000 + (H100_GIB - 35.6) / 0.0004, rel=0.1)


def test_a_chance_drift_within_the_noise_is_no_error_level_leak(tmp_path):
    """A flat series whose autocorrelated noise drifts ~1% of its level is not a leak."""
    rng = random.Random(7)
    steps = list(range(1, 401))
    walk, level, values = 0.0, 40.0, []
    for _ in steps:
        walk = 0.97 * walk + rng.gauss(0, 0.05)
        values.append(round(level + walk, 2))
    report = analyze([str(titan_log(tmp_path / "drift.log", {0: values}, steps))])
    leak = leak_of(report)
    assert leak is None or leak.severity != "error", leak.message


def test_a_flat_warmup_tail_with_a_small_drift_is_no_leak(tmp_path):
    steps = list(range(1, 121))
    rng = random.Random(3)
    values = [round(20 + 12 * (1 - math.exp(-s / 3)) + 0.4 * s / 120 + rng.gauss(0, 0.25), 2) for s in steps]
    report = analyze([str(titan_log(tmp_path / "tail.log", {0: values}, steps))])
    assert report.verdict != "leak", [f.message for f in report.findings]


# ---------------------------------------------------------------------------------------------
# capacity in scope
# ---------------------------------------------------------------------------------------------


def findings_of(report, rule):
    return [f for f in report.findings if f.rule == rule]


def ray_host_stairs_log(path: Path, *, killed_node: str, reader_ip: str | None) -> Path:
    """verl's TaskRunner (on `reader_ip`) logs host memory in stairs from 40 to 96 GiB; Ray's memory
    monitor kills a worker on `killed_node`, a 62.51 GiB node."""
    from tests.logwriters import ray, verl

    lines = []
    for step in range(1, 41):
        host = 40.0 + 8.0 * (step // 6)
        metrics = {"actor/pg_loss": -0.01, "perf/max_memory_allocated_gb": 18.92, "perf/cpu_memory_used_gb": host}
        lines.append(ray.actor_prefix(2476, "TaskRunner", reader_ip) + verl.step_line(step, metrics))
    lines.append(
        ray.memory_monitor_kill(
            node_ip=killed_node,
            node_id="5a1c0e7d2b",
            lease_id="010000002e3a",
            worker_name="WorkerDict.__init__",
            pid=3048142,
            worker_gib=49.21,
            used_gib=59.84,
            total_gib=62.51,
            threshold=0.95,
            worker_id="7be0aa31",
        )
    )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("reader_ip", ["10.0.0.3", None])
def test_a_node_total_from_another_node_never_drops_readings(tmp_path, reader_ip):
    """The kill names node 10.0.0.2 (62.51 GiB); the host readings come from another node (or one the
    line does not name): they are kept, the stairs are a leak, and the conflict is stated."""
    report = analyze([str(ray_host_stairs_log(tmp_path / "ray.log", killed_node="10.0.0.2", reader_ip=reader_ip))])
    leak = leak_of(report)
    assert report.verdict == "leak" and leak is not None and leak.subject == "host", [f.message for f in report.findings]
    assert not findings_of(report, "corrupt-readings")
    (conflict,) = findings_of(report, "capacity-conflict")
    assert "62.51 GiB" in conflict.message and "10.0.0.2" in conflict.message
    assert leak.evidence["capacity_gib"] is None and leak.evidence.get("projected_capacity_step") is None  # projects nothing


def test_a_node_total_judges_the_readings_of_its_own_node(tmp_path):
    """The same run with the readings on the killed node: readings above its total cannot be true."""
    report = analyze([str(ray_host_stairs_log(tmp_path / "ray.log", killed_node="10.0.0.3", reader_ip="10.0.0.3"))])
    assert findings_of(report, "corrupt-readings")
    assert not findings_of(report, "capacity-conflict")


def test_a_capacity_below_most_readings_is_reported_and_the_trend_still_judged(tmp_path):
    steps = list(range(1, 201))
    memory = {0: [round(30.0 + 0.05 * s, 2) for s in steps]}
    path = titan_log(tmp_path / "leak.log", memory, steps, capacity=None)
    report = analyze([str(path)], capacity_gib=10.0)
    assert report.verdict == "leak", [f.message for f in report.findings]
    (conflict,) = findings_of(report, "capacity-conflict")
    assert conflict.message.startswith("--capacity 10.00 GiB is below 200 of 200 readings")
    assert not findings_of(report, "corrupt-readings")


def test_a_device_capacity_printed_on_one_node_never_drops_another_nodes_readings(tmp_path):
    """Node a (H100, prints its 79.11 GiB capacity line) and node b (an H200, no capacity line; its
    step lines' percentage says 139.81 GiB) in one pdsh log: b's readings near 120 GiB are b's to
    judge, a's reading of 412 GiB is impossible."""
    lines = [f"gpu-a: {titan.log_line(titan.capacity(H100, H100_GIB), ts='2025-06-01 08:00:00,000', rank=0)}"]
    for step in range(1, 31):
        ts = f"2025-06-01 08:00:{step:02d},000"
        a = 40.0 if step != 17 else 412.0
        for node, value, total in (("gpu-a", a, H100_GIB), ("gpu-b", 120.0 + 0.001 * step, 139.81)):
            msg = titan.step_line_2025_03(step=step, loss=3.0, mem_gib=value, mem_pct=100 * value / total, tps=7421, tflops=341.26, mfu=34.5)
            lines.append(f"{node}: {titan.log_line(msg, ts=ts, rank=0)}")
    path = tmp_path / "pdsh.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    corrupt = findings_of(report, "corrupt-readings")
    assert len(corrupt) == 1 and corrupt[0].series == ["gpu-a/rank0"] and "412.00 GiB" in corrupt[0].message
    assert not findings_of(report, "capacity-conflict")
    stable = findings_of(report, "stable-memory")
    assert stable and set(stable[0].series) == {"gpu-a/rank0", "gpu-b/rank0"}


# -- no silent inconclusive; messages that cannot lie --------------------------------------------


def titan_step_lines(memory_field: str | None, steps: range) -> str:
    """torchtitan step lines whose memory field is `memory_field` verbatim (None: no memory field)."""
    lines = []
    for step in steps:
        memory = f"  {memory_field}" if memory_field else ""
        lines.append(
            f"[rank0]:[titan] 2025-04-01 10:{step // 60:02d}:{step % 60:02d},000 - root - INFO - step: {step}  "
            f"loss:  5.2110{memory}  tps: 3,104  tflops: 180.02  mfu: 18.20%"
        )
    return "\n".join(lines) + "\n"


def test_the_compact_mib_memory_field_is_read(tmp_path):
    path = tmp_path / "mib.log"
    path.write_text(titan_step_lines("memory: 36943.36MiB(45.60%)", range(1, 41)))
    report = analyze([str(path)])
    assert report.verdict == "stable" and not findings_of(report, "memory-not-read")


def test_memory_printed_in_a_form_no_pattern_reads_is_said_not_left_silent(tmp_path):
    path = tmp_path / "unknown-unit.log"
    path.write_text(titan_step_lines("memory: 36943.36 MiBs(45.60%)", range(1, 41)))
    report = analyze([str(path)])
    assert report.verdict == "inconclusive"
    (finding,) = findings_of(report, "memory-not-read")
    assert finding.severity == "warning"
    assert "'memory: 36943.36 MiBs(45.60%)'" in finding.message and "torchtitan/train-step" in finding.message
    assert finding.lines and finding.lines[0][1] == 1


def test_a_log_without_memory_says_only_the_loss_was_judged(tmp_path):
    path = tmp_path / "loss-only.log"
    path.write_text(titan_step_lines(None, range(1, 41)))
    report = analyze([str(path)])
    (finding,) = findings_of(report, "memory-not-read")
    assert finding.severity == "info" and "only the loss was judged" in finding.message


def test_the_steps_a_memory_not_read_finding_counts_are_the_coverages(tmp_path):
    # Keras prints a progress bar a few times an epoch: 11 lines, 5 steps (an independent tester's
    # paste read "11 step records were read" above a footer of "5 step records")
    epochs = [
        f"{n}/1563 [{'=' * (30 * n // 1563):<30}] - ETA: 1s - loss: {1.5 - e / 10:.4f} - accuracy: 0.6{e}00"
        for e in range(1, 6)
        for n in ((500, 1000, 1563) if e < 3 else (1563,))
    ]
    path = tmp_path / "keras.log"
    path.write_text("\n".join(epochs) + "\n")
    report = analyze([str(path)])
    (finding,) = findings_of(report, "memory-not-read")
    assert finding.evidence["observed"]["step_records"] == report.coverage["records"]
    assert f"{report.coverage['records']:,} step records were read" in finding.message


_SIZE = r"(\d+(?:\.\d+)?) ([KMG]iB)"
_STABLE_NUMBERS = re.compile(rf"moving by at most {_SIZE} \(within the {_SIZE} a flat run may move\)")


def _gib(number: str, unit: str) -> float:
    return float(number) / {"KiB": 1024**2, "MiB": 1024, "GiB": 1}[unit]


@pytest.mark.parametrize("seed", range(6))
def test_stable_memory_never_states_a_movement_above_its_tolerance(tmp_path, seed):
    """Noisy flat runs (spikes, a settling running maximum): whatever the readings scatter, the
    message states the movement the rule bounded, never more than the tolerance it states."""
    rng = random.Random(seed)
    steps = list(range(1, 121))
    level = rng.uniform(10, 70)
    memory = {}
    for rank in range(3):
        values = [round(level + rng.gauss(0, level * 0.002), 2) for _ in steps]
        values[rng.randrange(10, 110)] += round(level * 0.2, 2)  # one spike far outside the tolerance
        memory[rank] = values
    report = analyze([str(titan_log(tmp_path / "flat.log", memory, steps))])
    assert findings_of(report, "stable-memory"), [f.message for f in report.findings]
    for finding in findings_of(report, "stable-memory"):
        found = _STABLE_NUMBERS.search(finding.message).groups()
        movement, tolerance = _gib(*found[:2]), _gib(*found[2:])
        assert movement <= tolerance
        observed = finding.evidence["observed"]
        assert observed["max_movement_gib"] <= observed["tolerance_gib"]


def test_a_flat_host_sawtooth_is_periodic_retention(tmp_path):
    """Host memory that fills for 8 logged steps and is flushed back to the same floor, 12 times."""
    from tests.scenarios import FORMATS_DIR, Expect, Scenario

    for draw in range(3):
        scenario = Scenario(f"host-saw/d{draw}", "sawtooth-flat", "host", "low", 2, 96, Expect("periodic-retention"))
        path = tmp_path / f"saw{draw}.log"
        path.write_text(scenario.render())
        report = analyze([str(path)], formats_dirs=[FORMATS_DIR])
        assert findings_of(report, "periodic-retention"), [f.message for f in report.findings]
        assert not findings_of(report, "memory-leak")


def test_readings_without_a_step_are_named_readings_in_messages(tmp_path):
    """DeepSpeed >= 0.18.3 at its default level: bare see_memory_usage blocks, no step line. The
    series is numbered by reading, and every memory message says "reading", never "step"."""
    from tests.logwriters import deepspeed as ds

    lines = []
    for i in range(60):
        allocated = 20.0 + 0.08 * i  # a steady leak, one reading per block
        lines += [
            "Engine after forward",
            ds.see_memory_usage(ma=allocated, max_ma=allocated + 0.3, ca=allocated + 2, max_ca=allocated + 2),
            ds.cpu_virtual_memory(used_gib=88.3, percent=5.9),
        ]
    path = tmp_path / "bare.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    assert report.verdict == "leak", [f.message for f in report.findings]
    memory = [f for f in report.findings if f.subject in ("device", "host") and f.rule != "corrupt-readings"]
    assert memory
    for finding in memory:
        assert "reading" in finding.message and not re.search(r"\bsteps?\b \d", finding.message), finding.message


def test_memory_blocks_denser_than_step_lines_all_count(tmp_path):
    """DeepSpeed with memory_breakdown: see_memory_usage blocks at every micro-step (3 per step),
    `step=` lines only every 5 steps (steps_per_print). Reserved memory grows, allocated is flat: the
    33 steps of readings are judged as readings, not collapsed to the 7 logged steps."""
    from tests.logwriters import deepspeed as ds

    lines = []
    for step in range(1, 34):
        ts = f"2024-08-14 09:{12 + step // 60:02d}:{step % 60:02d},000"
        for micro in range(3):
            allocated = 24.3 + (9.2 if micro == 1 else 0.0)  # forward peak, back down after the step
            reserved = 38.0 + 0.35 * step
            lines.append(
                ds.log_line(
                    ds.see_memory_usage(ma=allocated, max_ma=allocated + 0.4, ca=reserved, max_ca=reserved), ts=ts, where="utils.py:782:see_memory_usage"
                )
            )
            lines.append(ds.log_line(ds.cpu_virtual_memory(used_gib=96.3, percent=9.6), ts=ts, where="utils.py:789:see_memory_usage"))
        if step % 5 == 0:
            lines.append(ds.log_line(ds.progress(step=step, skipped=0, lr=[2e-5], mom=[(0.9, 0.999)]), ts=ts, where="logging.py:96:log_dist"))
    path = tmp_path / "breakdown.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    assert report.verdict == "fragmentation", [f.message for f in report.findings]
    (finding,) = findings_of(report, "fragmentation")
    assert finding.evidence["observed"]["reserved_growth_gib"] > 9.0  # 0.35 GiB a step over the 28+ steps read
    assert "memory-leak" not in {f.rule for f in report.findings}


@pytest.mark.parametrize("points", [30, 40, 60])
def test_a_few_wiggles_before_a_long_rise_are_no_sawtooth(tmp_path, points):
    """Flat with a period-3 wiggle of 0.01 GiB, then a steady 0.4 GiB/step rise (the wiggle goes on):
    the cycles stop at the onset, so the rise is judged as a leak, not as a bounded sawtooth."""
    values = [round(20 + 0.4 * max(0, i - 9) + 0.01 * (i % 3), 2) for i in range(points)]
    report = analyze([str(titan_log(tmp_path / "wiggle.log", {0: values}, list(range(1, points + 1))))])
    assert report.verdict == "leak", [f.message for f in report.findings]


@pytest.mark.parametrize("scale", [1e20, 1e154, 1e300])
def test_absurd_finite_readings_are_corrupt_never_a_leak_nor_a_crash(tmp_path, scale):
    """Readings far beyond any device, with a percentage that would make an equally absurd capacity."""
    lines = titan_step_lines(None, range(1, 40)).splitlines()
    lines = [line.replace("  tps:", f"  memory: {scale * i:.2f}GiB(40.00%)  tps:") for i, line in enumerate(lines, 1)]
    path = tmp_path / "absurd.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    assert report.verdict != "leak" and findings_of(report, "corrupt-readings")
    assert all(len(f.message) < 2000 for f in report.findings)


@pytest.mark.parametrize("first", [2**60, 2**63 - 100])
def test_steps_beyond_float_precision_stay_apart_and_are_judged(tmp_path, first):
    """Steps are 64-bit integers end to end: 60 steps near 2**60 are 60 records (not one), steps
    near 2**63 are kept, and a leak over them is found."""
    lines = titan_step_lines(None, range(60)).splitlines()
    lines = [
        line.replace(f"step: {i}  ", f"step: {first + i}  ").replace("  tps:", f"  memory: {30 + 0.3 * i:.2f}GiB(40.00%)  tps:") for i, line in enumerate(lines)
    ]
    path = tmp_path / "huge-steps.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    assert report.coverage["records"] == 60 and report.coverage["steps"] == [first, first + 59]
    assert report.verdict == "leak", [f.message for f in report.findings]
    assert f"from step {first} to {first + 59}" in findings_of(report, "memory-leak")[0].message
