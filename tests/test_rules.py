"""Each rule fires on its shape and stays silent on the others."""

from __future__ import annotations

import random

import pytest

from memlog.api import analyze
from memlog.rulekit import load_rules

from tests.synthetic import torchtitan_lines


def run(tmp_path, memory_by_rank, **kw):
    path = tmp_path / "run.log"
    path.write_text("\n".join(torchtitan_lines(memory_by_rank, **kw)) + "\n")
    report = analyze([str(path)])
    return report, {f.rule: f for f in report.findings}


def noisy(values, sd, seed=0):
    rng = random.Random(seed)
    return [round(v + rng.gauss(0, sd), 2) for v in values]


def test_rules_have_ids_docs_and_thresholds():
    rules = load_rules()
    assert {r.id for r in rules} >= {"memory-leak", "warmup-plateau", "stable-memory", "insufficient-data", "pp-sentinel-loss", "oom"}
    for rule in rules:
        assert rule.summary and rule.explanation and rule.not_meaning and rule.examples


class TestMemoryLeak:
    def test_fires_on_a_straight_line_from_step_one(self, tmp_path):
        report, fired = run(tmp_path, {0: [21 + 9.5 * i for i in range(6)]}, capacity=79.11)
        assert report.verdict == "leak"
        ev = fired["memory-leak"].evidence
        assert ev["observed"]["slope_gib_per_step"] == pytest.approx(9.5, abs=0.01)
        assert ev["projected_capacity_step"] == pytest.approx(7.1, abs=0.1)

    def test_fires_on_slow_creep_under_noise(self, tmp_path):
        steps = [1] + list(range(10, 1001, 10))
        values = [34.0] + [41.8 + 0.003 * (s - 10) for s in steps[1:]]
        report, fired = run(tmp_path, {0: noisy(values, 0.04)}, steps=steps)
        assert "memory-leak" in fired and "warmup-plateau" not in fired
        assert fired["memory-leak"].evidence["observed"]["slope_gib_per_step"] == pytest.approx(0.003, rel=0.2)

    def test_silent_on_warmup_then_flat(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([18.2, 31.6] + [31.9] * 28, 0.03)})
        assert "memory-leak" not in fired

    def test_silent_on_flat_noise(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([23.4] * 40, 0.05, seed=3)})
        assert "memory-leak" not in fired

    def test_only_the_leaking_rank_is_named(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([30.0] * 20, 0.02), 1: [30 + 0.5 * i for i in range(20)]})
        assert fired["memory-leak"].evidence["ranks"] == [1]


class TestWarmupPlateau:
    def test_fires_with_knee_and_level(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([18.2, 31.6] + [31.9] * 28, 0.03)})
        assert report.verdict == "warmup-plateau"
        observed = fired["warmup-plateau"].evidence["observed"]
        assert observed["plateau_from_step"] in (2, 3)
        assert observed["plateau_gib_min"] == pytest.approx(31.9, abs=0.1)

    def test_fires_with_only_three_points_on_the_plateau(self, tmp_path):
        report, fired = run(tmp_path, {0: [19.5, 33.8, 33.9, 33.8, 33.85]})
        assert "warmup-plateau" in fired

    def test_silent_when_flat_from_the_start(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([23.4] * 40, 0.02)})
        assert "warmup-plateau" not in fired and "stable-memory" in fired


class TestStableAndInsufficient:
    def test_stable_from_the_start(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([23.41] * 40, 0.02), 1: noisy([23.38] * 40, 0.02, seed=1)})
        assert report.verdict == "stable"
        assert set(fired) == {"stable-memory"}

    def test_two_points_are_insufficient(self, tmp_path):
        report, fired = run(tmp_path, {0: [19.5, 33.8]}, steps=[1, 10])
        assert report.verdict == "inconclusive"
        msg = fired["insufficient-data"].message
        assert "only 2 logged points" in msg and "log_freq = 1" in msg and "60 steps at the current log interval of 10" in msg

    def test_insufficient_silent_when_decided(self, tmp_path):
        report, fired = run(tmp_path, {0: noisy([23.4] * 40, 0.02)})
        assert "insufficient-data" not in fired


class TestPipelineSentinel:
    def test_fires_on_constant_minus_one_and_names_the_real_ranks(self, tmp_path):
        mem = {r: noisy([20.0] * 10, 0.01, seed=r) for r in range(4)}
        report, fired = run(tmp_path, mem, loss_by_rank={0: -1.0, 1: -1.0})
        ev = fired["pp-sentinel-loss"].evidence
        assert ev["sentinel_ranks"] == [0, 1] and ev["real_loss_ranks"] == [2, 3]
        assert report.verdict == "pp-sentinel-loss"

    @pytest.mark.parametrize("value", [-2.0, -8.0])
    def test_summed_placeholders(self, tmp_path, value):
        report, fired = run(tmp_path, {0: [20.0] * 6}, loss_by_rank={0: value})
        assert "pp-sentinel-loss" in fired
        assert "LOG_RANK=0,4" in fired["pp-sentinel-loss"].message

    def test_silent_on_real_or_fractional_negative_loss(self, tmp_path):
        _, fired = run(tmp_path, {0: [20.0] * 6})
        assert "pp-sentinel-loss" not in fired
        _, fired = run(tmp_path, {0: [20.0] * 6}, loss_by_rank={0: -1.5})
        assert "pp-sentinel-loss" not in fired


class TestOom:
    def test_fires_with_step_and_rank(self, tmp_path):
        lines = torchtitan_lines({0: [21 + 9.5 * i for i in range(6)]})
        lines.append("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free.")
        path = tmp_path / "oom.log"
        path.write_text("\n".join(lines) + "\n")
        report = analyze([str(path)])
        oom = next(f for f in report.findings if f.rule == "oom")
        assert "during step 7" in oom.message and "tried to allocate 2.00 GiB" in oom.message
        assert oom.lines == [(str(path), 7)]

    def test_silent_without_oom(self, tmp_path):
        _, fired = run(tmp_path, {0: [20.0] * 6})
        assert "oom" not in fired


def test_restart_segments_are_judged_separately(tmp_path):
    # Two runs of the same flat job appended to one file: the second restarts at step 1 with a
    # higher level. Joined, they would look like growth.
    first = noisy([20.0] * 15, 0.01)
    second = noisy([25.0] * 15, 0.01, seed=2)
    lines = torchtitan_lines({0: first}) + torchtitan_lines({0: second})
    path = tmp_path / "restart.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze([str(path)])
    assert report.verdict == "stable"
    assert report.coverage["event_counts"]["restart"] == 1
    assert report.findings[0].series == ["rank0", "rank0 (segment 2)"]
