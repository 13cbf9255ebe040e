"""Each rule fires on its shape and stays silent on the others."""

from __future__ import annotations

import random
import re

import pytest

from memlog.engine.api import analyze
from memlog.judge.rulekit import Example, load_rules
from tests.scenarios import FORMATS_DIR, SECONDS_PER_STEP, example_log
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


def test_a_leak_on_a_steps_floor_and_peak_quotes_levels_one_of_them_had(tmp_path):
    """DeepSpeed's see_memory_usage lines cycle within each step: a worker is judged by its step floor
    and peak, and both leak. The levels the message quotes are those of one of them (the one its
    line fits best), never their midpoint: a level no reading had."""
    from benchmarks import generate

    (log,) = generate.generate("deepspeed", 2 * 1024 * 1024, tmp_path)
    report = analyze([str(log)])
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    per_series = {s["series"]: (s["start_gib"], s["end_gib"]) for s in leak.evidence["series"]}
    assert {"main [floor]", "main [peak]"} <= set(per_series), per_series
    quoted = re.search(r"([\d.]+) GiB -> ([\d.]+) GiB", leak.message)
    assert quoted is not None and float(quoted[1]) < float(quoted[2]), leak.message
    assert any(abs(float(quoted[1]) - a) < 0.01 and abs(float(quoted[2]) - b) < 0.01 for a, b in per_series.values()), (leak.message, per_series)


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

    def test_untagged_ranks_printing_in_any_order_never_give_the_placeholder_as_the_real_loss(self, tmp_path):
        """8 ranks print untagged lines (srun without --tee), in a different order each step: they
        are read as copies in print order, each mixing placeholder and real lines. The real loss the
        message gives is a real one, and it says the ranks cannot be told apart."""
        rng = random.Random(7)
        lines = []
        for step in range(1, 41):
            losses = [-1.0] * 4 + [round(8.0 - step / 10, 4)] * 4
            rng.shuffle(losses)
            for loss in losses:
                lines.append(
                    f"[titan] 2025-09-12 10:00:{step % 60:02d},{rng.randint(100, 999)} - root - INFO - step: {step:2d}  loss: {loss:7.4f}  "
                    f"grad_norm: {rng.uniform(0.3, 1.2):7.4f}  memory: 15.00GiB(18.96%)  tps: {rng.randint(5000, 7000):,}  tflops: 320.00  mfu: 32.00%"
                )
        log = tmp_path / "untagged.log"
        log.write_text("\n".join(lines) + "\n")
        report = analyze([str(log)])
        message = next(f.message for f in report.findings if f.rule == "pp-sentinel-loss")
        last = re.search(r"last value (-?[\d.]+) at step (\d+)", message)
        assert last is not None and float(last[1]) == 4.0 and last[2] == "40", message
        assert "cannot be told" in message

    def test_silent_on_real_or_fractional_negative_loss(self, tmp_path):
        _, fired = run(tmp_path, {0: [20.0] * 6})
        assert "pp-sentinel-loss" not in fired
        _, fired = run(tmp_path, {0: [20.0] * 6}, loss_by_rank={0: -1.5})
        assert "pp-sentinel-loss" not in fired


class TestOom:
    def test_fires_with_step_and_rank(self, tmp_path):
        lines = torchtitan_lines({0: [21 + 9.5 * i for i in range(6)]})
        lines.append(
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free."
        )
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


# -- every rule file's worked examples, run as tests -----------------------------------------------

EXAMPLES = [(rule.id, i, e) for rule in load_rules() for i, e in enumerate(rule.examples) if isinstance(e, Example)]


def judge(tmp_path, example: Example, name: str = "run.log"):
    path = tmp_path / name
    path.write_text(example_log(example))
    report = analyze([str(path)], formats_dirs=[FORMATS_DIR])
    return report, {f.rule: f for f in report.findings}


def test_every_rule_has_firing_and_silent_examples():
    for rule in load_rules():
        assert {e.fires for e in rule.examples if isinstance(e, Example)} == {True, False}, rule.id
        assert rule.thresholds or rule.id in ("oom", "crash", "keyboard-interrupt", "unread-values"), (
            f"{rule.id}: no named thresholds (only rules reading an event or the reader's report have none)"
        )
        for threshold in rule.thresholds:
            assert threshold.description and threshold.unit is not None


@pytest.mark.parametrize(("rule_id", "index", "example"), EXAMPLES, ids=[f"{r}-{i + 1}" for r, i, _ in EXAMPLES])
def test_rule_example(tmp_path, rule_id, index, example):
    report, fired = judge(tmp_path, example)
    assert (rule_id in fired) == example.fires, f"{example}: fired {sorted(fired)}"
    if example.fires:
        assert fired[rule_id].evidence["thresholds"] == report.thresholds[rule_id]


def series_example(text="", fires=True, **columns_by_name) -> Example:
    return Example(text or "test", fires, **columns_by_name)


class TestFragmentation:
    def test_reserved_rising_with_flat_allocated_is_not_a_leak(self, tmp_path):
        steps = list(range(1, 61))
        ex = series_example(
            columns={"mem_allocated_gib": {0: [24.3 + 0.01 * (i % 3) for i in range(60)]}, "mem_reserved_gib": {0: [30.0 + 0.15 * i for i in range(60)]}},
            steps=steps,
        )
        report, fired = judge(tmp_path, ex)
        assert "memory-leak" not in fired and report.verdict == "fragmentation"
        finding = fired["fragmentation"]
        assert finding.severity == "warning" and "not live tensors" in finding.message
        assert any("expandable_segments:True" in h for h in finding.hints)
        assert finding.evidence["observed"]["reserved_growth_gib"] == pytest.approx(0.15 * 59, rel=0.05)

    def test_running_maxima_pair(self, tmp_path):
        ex = series_example(columns={"mem_max_allocated_gib": {0: [24.3] * 40}, "mem_max_reserved_gib": {0: [30.0 + 0.2 * i for i in range(40)]}})
        _, fired = judge(tmp_path, ex)
        assert "fragmentation" in fired and "memory-leak" not in fired

    def test_known_bad_deepspeed_version_is_named(self, tmp_path):
        ex = series_example(
            columns={"mem_allocated_gib": {0: [24.3] * 40}, "mem_reserved_gib": {0: [30.0 + 0.2 * i for i in range(40)]}},
            lines=("[rank0]:[titan] 2025-06-01 08:00:00,000 - root - INFO - running framework DeepSpeed 0.16.0",),
        )
        _, fired = judge(tmp_path, ex)
        assert "DeepSpeed 0.16.0" in fired["fragmentation"].hints[0]


class TestLeakNumbersAndHints:
    def test_projection_names_step_and_wall_time(self, tmp_path):
        steps = list(range(1, 201))
        ex = series_example(memory={0: [40.0 + 0.05 * s for s in steps]}, steps=steps, capacity_gib=79.11)
        _, fired = judge(tmp_path, ex)
        ev = fired["memory-leak"].evidence
        left = ev["projected_capacity_step"] - 200
        assert left == pytest.approx((79.11 - 50.0) / 0.05, rel=0.02)
        assert ev["projected_capacity_seconds"] == pytest.approx(left * SECONDS_PER_STEP, rel=0.02)
        assert "after the last logged step (around 2025-06-01" in fired["memory-leak"].message
        assert ev["confidence"]["slope_ci_gib_per_step"][0] > 0 and ev["confidence"]["trend_p_value_max"] < 0.01
        assert ev["series"][0]["points"] == 200

    def test_host_leak_with_flat_device_projects_to_the_node_total(self, tmp_path):
        ex = series_example(
            memory={0: [30.0 + 0.01 * (i % 2) for i in range(30)]},
            columns={"host_mem_used_gib": {0: [400.0 + 2.0 * i for i in range(30)]}},
            lines=("[rank0]:[titan] 2025-06-01 08:05:00,000 - root - INFO - node memory: 458.0 / 937.5 GiB",),
        )
        report, fired = judge(tmp_path, ex)
        leak = fired["memory-leak"]
        assert report.verdict == "leak" and leak.subject == "host"
        assert "the growth is in host memory" in leak.message
        assert leak.evidence["capacity_gib"] == 937.5 and leak.evidence["projected_capacity_step"] == pytest.approx(30 + (937.5 - 458) / 2, abs=1)
        assert "offload" in " ".join(leak.hints)

    def test_host_stairs_say_how_much_and_how_often(self, tmp_path):
        host = [310.0 + 12.0 * (i // 2) + (0.1 if i % 3 else 0.0) for i in range(8)]
        _, fired = judge(tmp_path, series_example(memory={0: [30.1] * 8}, columns={"host_mem_used_gib": {0: host}}))
        leak = fired["memory-leak"]
        assert leak.evidence["pattern"] == "stairs"
        assert "in stairs: +12.0" in leak.message and "every ~2 steps" in leak.message

    def test_known_bad_version_only_for_that_version(self, tmp_path):
        line = "[rank0]:[titan] 2025-06-01 08:00:00,000 - root - INFO - running framework DeepSpeed {}"
        for version, named in (("0.16.0", True), ("0.16.1", False)):
            ex = series_example(memory={0: [20.0 + 0.5 * i for i in range(20)]}, lines=(line.format(version),))
            _, fired = judge(tmp_path, ex, f"v{version}.log")
            assert any("known leak" in h for h in fired["memory-leak"].hints) == named

    def test_running_max_few_new_peaks_is_not_a_leak_but_a_steady_climb_is(self, tmp_path):
        settled = [30.0, 31.2, 31.2, 32.0, 32.0, 32.6] + [32.6] * 40
        report, fired = judge(tmp_path, series_example(columns={"mem_max_allocated_gib": {0: settled}}), "settled.log")
        assert "memory-leak" not in fired and report.verdict == "warmup-plateau"
        assert "running maximum" in fired["warmup-plateau"].message
        rng = random.Random(5)
        climbing, top = [], 0.0
        for i in range(80):
            top = max(top, 30.0 + 0.02 * i + rng.gauss(0, 0.05))
            climbing.append(round(top, 2))
        _, fired = judge(tmp_path, series_example(columns={"mem_max_allocated_gib": {0: climbing}}), "climb.log")
        assert "memory-leak" in fired and "running maximum" in fired["memory-leak"].message

    def test_pipeline_stages_at_different_flat_levels_are_never_averaged(self, tmp_path):
        report, fired = judge(tmp_path, series_example(memory={r: noisy([22.7 if r < 4 else 18.0] * 30, 0.02, seed=r) for r in range(8)}))
        assert report.verdict == "stable" and "memory-leak" not in fired
        assert "depending on the worker" in fired["stable-memory"].message

    def test_flat_device_without_host_series_says_growth_elsewhere_is_not_in_this_log(self, tmp_path):
        _, fired = judge(tmp_path, series_example(memory={0: noisy([23.4] * 30, 0.02)}))
        assert any("not in this log" in h for h in fired["stable-memory"].hints)


class TestPeriodicRetention:
    @staticmethod
    def sawtooth(n, period, floor_rise=0.0):
        return [40.0 + floor_rise * (i // period) + 0.3 * (i % period) for i in range(n)]

    def test_names_the_period_and_the_loss_log_interval(self, tmp_path):
        steps = [5 * k for k in range(1, 81)]  # memory every 5 steps, loss every 50 (a flush each log step)
        values = self.sawtooth(80, 10)
        loss = {0: [9.0 - 0.01 * i for i in range(80)]}
        text = example_log(series_example(columns={"mem_allocated_gib": {0: values}}, steps=steps, loss=loss))
        text = "\n".join(line for line in text.splitlines() if "loss:" not in line or int(line.split("step:")[1].split()[0]) % 50 == 0)
        path = tmp_path / "saw.log"
        path.write_text(text + "\n")
        report = analyze([str(path)], formats_dirs=[FORMATS_DIR])
        fired = {f.rule: f for f in report.findings}
        finding = fired["periodic-retention"]
        assert finding.severity == "warning" and report.verdict == "periodic-retention" and "memory-leak" not in fired
        assert finding.evidence["observed"]["period_steps"] == 50
        assert "matches the loss log interval of 50 steps" in finding.message

    def test_relates_the_period_to_the_memory_log_interval(self, tmp_path):
        _, fired = judge(tmp_path, series_example(memory={0: self.sawtooth(60, 6)}, steps=[10 * k for k in range(1, 61)]))
        assert "every 6 logged points at the memory log interval of 10 steps" in fired["periodic-retention"].message

    def test_rising_floor_is_a_leak(self, tmp_path):
        _, fired = judge(tmp_path, series_example(memory={0: self.sawtooth(60, 6, floor_rise=0.25)}))
        assert "periodic-retention" not in fired
        assert fired["memory-leak"].evidence["pattern"] == "sawtooth" and "floor rises" in fired["memory-leak"].message


class TestCorruptAndNan:
    def test_impossible_readings_are_listed_and_excluded(self, tmp_path):
        values = [23.4] * 30
        values[10], values[20] = 1136404.0, 812.4
        report, fired = judge(tmp_path, series_example(memory={0: values}, capacity_gib=79.11))
        assert report.verdict == "stable" and "memory-leak" not in fired
        ev = fired["corrupt-readings"].evidence
        assert ev["observed"]["readings"] == 2 and ev["observed"]["above_capacity"] == 2
        assert [r["step"] for r in ev["readings"]] == [11, 21]

    def test_negative_and_nan_readings_without_a_known_capacity(self, tmp_path):
        path = tmp_path / "neg.log"
        text = example_log(series_example(columns={"mem_allocated_gib": {0: [23.4] * 20}}))
        text = text.replace("step:  5  allocated: 23.40GiB", "step:  5  allocated: -3.20GiB")
        text = text.replace("step:  9  allocated: 23.40GiB", "step:  9  allocated: nanGiB")
        text = text.replace("step: 12  allocated: 23.40GiB", "step: 12  allocated: 2048.00GiB")
        path.write_text(text)
        report = analyze([str(path)], formats_dirs=[FORMATS_DIR])
        ev = next(f for f in report.findings if f.rule == "corrupt-readings").evidence
        assert {r["reason"] for r in ev["readings"]} == {"negative", "not a number", "above capacity"}

    def test_nan_loss_is_its_own_finding_and_ignores_the_pp_sentinel(self, tmp_path):
        loss = {0: [-1.0] * 20, 1: [9.0 - 0.1 * i if i < 12 else float("nan") for i in range(20)]}
        report, fired = judge(tmp_path, series_example(memory={0: [23.4] * 20, 1: [20.1] * 20}, loss=loss))
        finding = fired["nan-loss"]
        assert finding.evidence["ranks"] == [1] and finding.evidence["observed"]["first_step"] == 13
        assert "diverged" in finding.message and "says nothing about memory" in finding.message
        assert report.verdict == "pp-sentinel-loss" and "memory-leak" not in fired


def _megatron_lines(spec: dict[int, dict]) -> tuple[str, ...]:
    """Megatron-LM iteration lines (tests.logwriters.megatron), one per iteration of `spec`: its loss
    (None: Megatron left it out), grad norm (None: absent) and skipped / NaN iteration counts."""
    from tests.logwriters import megatron

    return tuple(
        megatron.iteration_line(
            iteration=it,
            train_iters=10000,
            elapsed_ms=900.0,
            lr=3e-4,
            global_batch_size=64,
            consumed_samples=64 * it,
            losses={} if v.get("loss") is None else {"lm loss": v["loss"]},
            loss_scale=65536.0,
            grad_norm=v.get("grad", 0.5),
            skipped=v.get("skipped", 0),
            nan=v.get("nan", 0),
        )
        for it, v in spec.items()
    )


def test_nan_loss_reads_megatrons_nan_counts_and_its_vanished_losses(tmp_path):
    """A Megatron line counts the NaN iterations it skipped even when it prints a finite average; a
    NaN loss that was not skipped vanishes from the line, leaving `grad norm: nan`; an interval whose
    iterations were all skipped prints neither loss nor grad norm, and is not a NaN."""
    counted = {100: {"loss": 3.1}, 200: {"loss": 3.0, "skipped": 4, "nan": 3}, 300: {"loss": 2.9}, 400: {"loss": 2.8}}
    _, fired = judge(tmp_path, series_example(memory={0: [23.4] * 10}, lines=_megatron_lines(counted)), "counted.log")
    finding = fired["nan-loss"]
    assert finding.evidence["observed"] == {"non_finite_steps": 1, "first_step": 200, "series_diverged": 0, "nan_iterations": 3, "skipped_iterations": 4}
    assert "counts 3 iterations with a NaN or infinite loss" in finding.message and "intermittent" in finding.message
    assert finding.series == ["main"] and finding.severity == "warning"
    vanished = {100: {"loss": 3.1}, 200: {"loss": 3.0}, 300: {"grad": float("nan")}, 400: {"grad": float("nan")}}
    _, fired = judge(tmp_path, series_example(memory={0: [23.4] * 10}, lines=_megatron_lines(vanished)), "vanished.log")
    finding = fired["nan-loss"]
    assert finding.evidence["observed"]["loss_vanished_steps"] == 2 and finding.evidence["observed"]["series_diverged"] == 1
    assert "training diverged" in finding.message and "a NaN loss vanishes from its line" in finding.message
    skipped = {100: {"grad": None, "skipped": 100}, 200: {"loss": 3.0}, 300: {"loss": 2.9}}
    _, fired = judge(tmp_path, series_example(memory={0: [23.4] * 10}, lines=_megatron_lines(skipped)), "skipped.log")
    assert "nan-loss" not in fired


def test_insufficient_data_names_the_steps_needed_for_three_points(tmp_path):
    _, fired = judge(tmp_path, series_example(memory={0: [19.5, 33.8, 34.9]}, steps=[1, 10, 20]))
    assert "only 3 logged points" in fired["insufficient-data"].message
    assert fired["insufficient-data"].evidence["observed"]["more_points_needed"] == 5


def test_a_trend_below_the_leak_thresholds_is_described_not_hidden(tmp_path):
    from memlog.base.config import Config

    steps = list(range(1, 101))
    path = tmp_path / "creep.log"
    path.write_text(example_log(series_example(memory={0: [40.0 + 0.01 * s for s in steps]}, steps=steps)))
    report = analyze([str(path)], formats_dirs=[FORMATS_DIR], config=Config(rules={"memory-leak": {"min_growth_pct": 50}}))
    finding = next(f for f in report.findings if f.rule == "insufficient-data")
    assert report.verdict == "inconclusive"
    assert "it rises 0.99 GiB (fitted) from step 1 to 100" in finding.message and "less than the leak thresholds" in finding.message


OOM_TEXT = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 0 has a total capacity of 79.11 GiB of which 2.31 GiB is free."


@pytest.mark.parametrize(
    "labels, workers",
    [
        (("gpu-a07: ", "gpu-a08: "), ["gpu-a07/main", "gpu-a08/main"]),  # two nodes under pdsh
        (
            ("(WorkerDict pid=3611, ip=10.0.0.2) ", "(WorkerDict pid=3611, ip=10.0.0.3) "),  # one pid on two nodes
            ["WorkerDict pid=3611, ip=10.0.0.2", "WorkerDict pid=3611, ip=10.0.0.3"],
        ),
        (("(WorkerDict pid=3611) ", "(WorkerDict pid=3650) "), ["WorkerDict pid=3611", "WorkerDict pid=3650"]),  # two local actors
        (("[rank0]: ", ""), ["rank0"]),  # torchrun's failure summary repeats rank 0's error: one OOM
        (("gpu-a07: [rank0]: ", "gpu-a07: "), ["gpu-a07/rank0"]),  # ... on the node it came from
        (("(WorkerDict pid=3611, ip=10.0.0.2) ", ""), ["WorkerDict pid=3611, ip=10.0.0.2"]),  # the driver's re-raise
    ],
)
def test_identical_oom_lines_of_two_processes_are_two_and_a_summary_is_none(tmp_path, labels, workers):
    log = tmp_path / "crash.log"
    log.write_text("".join(f"{label}{OOM_TEXT}\n" for label in labels))
    [oom] = [f for f in analyze([str(log)]).findings if f.rule == "oom"]
    assert sorted(oom.series) == workers


@pytest.mark.parametrize(
    "paste, memory",
    [
        (
            "ray.exceptions.WorkerCrashedError: The worker died unexpectedly while executing this task. Check "
            "python-core-worker-*.log files for more information.",
            "unknown",
        ),
        ("srun: error: gpu-b14: task 12: Killed\nsrun: error: gpu-b14: tasks 8-11,13-15: Exited with exit code 1", "likely"),
        (
            "[rank3]:[E304 11:32:40.551908231 ProcessGroupNCCL.cpp:1423] [PG ID 0 PG GUID 0(default_pg) Rank 3] Heartbeat "
            "monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2",
            "no",
        ),
        (
            "(raylet) Worker unexpectedly exits with a connection error code 2. There are some potential root causes. (1) The "
            "process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker "
            "is crashed unexpectedly due to SIGSEGV or other unexpected errors.\n"
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "likely",
        ),
    ],
)
def test_a_crash_pasted_alone_is_judged_a_crash(tmp_path, paste, memory):
    """The crash messages users paste on their own (launchers-and-crashes.md, log-formats.md §3.5) are
    a crash, whether memory may be involved is said, and the headline claims nothing about memory."""
    log = tmp_path / "paste.log"
    log.write_text(paste + "\n")
    report = analyze([str(log)])
    assert report.verdict == "crash"
    [crash] = [f for f in report.findings if f.rule == "crash"]
    assert crash.evidence["observed"]["memory_involved"] == memory
    assert "no out-of-memory error proves memory did it" in report.headline.headline


@pytest.mark.parametrize("first_jump, every, jumps", [(100, 100, 3), (50, 50, 6), (150, 80, 4)])
def test_stairs_after_a_flat_stretch_start_at_their_first_jump(tmp_path, first_jump, every, jumps):
    """A staircase after a long flat stretch: the growth starts where the first jump is, whatever
    point a hinge fitted to the whole would pick, and the level held is the one before it."""
    n = first_jump + every * jumps
    level = [30.0 + 3.0 * (i >= first_jump) + 3.0 * sum(i >= first_jump + every * k for k in range(1, jumps)) for i in range(n)]
    steps = list(range(10, 10 * n + 1, 10))
    report, found = run(tmp_path, {0: noisy(level, 0.01)}, steps=steps)
    said = re.search(r"it started growing at step (\d+) after holding at ~([\d.]+) GiB", found["memory-leak"].message)
    assert said and int(said[1]) == steps[first_jump - 1] and abs(float(said[2]) - 30.0) < 0.05


def test_a_stable_verdict_says_the_reading_that_strays_from_the_level(tmp_path):
    """Flat memory with one spike is stable (the level does not move), and the spike is said with its
    value and step rather than hidden behind "moving by at most 0.00 GiB"."""
    values = noisy([30.0] * 100, 0.01)
    _, found = run(tmp_path, {0: values[:50] + [39.0] + values[51:]}, steps=list(range(10, 1001, 10)))
    assert "39.00 GiB at step 510 on rank 0" in found["stable-memory"].message
    _, calm = run(tmp_path, {0: values}, steps=list(range(10, 1001, 10)))
    assert "stray" not in calm["stable-memory"].message


@pytest.mark.parametrize("order", ["leak first", "flat first", "alternating"])
def test_two_unlabelled_nodes_copies_are_followed_where_their_readings_cross(tmp_path, order):
    """Two nodes both print `[rank0]:` (no launcher label): one leaks from 30 GiB through the other's
    flat 34 GiB. The copies keep their identity where the readings cross: a leak from the first step
    on one, stable memory on the other, and no warmup invented."""
    n = 200
    leak, flat = noisy([30.0 + 0.05 * i for i in range(n)], 0.005, seed=1), noisy([34.0] * n, 0.005, seed=2)
    lines = torchtitan_lines({0: leak, 1: flat})
    if order != "leak first":
        pairs = [lines[k : k + 2] for k in range(0, len(lines), 2)]
        lines = [line for i, pair in enumerate(pairs) for line in (pair[::-1] if order == "flat first" or i % 2 else pair)]
    path = tmp_path / "two_nodes.log"
    path.write_text("\n".join(line.replace("[rank1]:", "[rank0]:") for line in lines) + "\n")
    found = {f.rule: f for f in analyze([str(path)]).findings}
    assert "warmup-plateau" not in found
    assert "from step 1 to 200" in found["memory-leak"].message and "started growing" not in found["memory-leak"].message
    assert len(found["stable-memory"].series) == 1


def test_the_real_loss_of_unlabelled_ranks_is_found_among_their_copies(tmp_path):
    """srun without --tee: eight ranks print unprefixed lines, the first stage's four a -1.0 loss. The
    copies that print the real loss are named, not a LOG_RANK to set (no rank filter is at work)."""
    n = 60
    memory = {r: noisy([40.0 if r < 4 else 30.0] * n, 0.02, seed=r) for r in range(8)}
    lines = torchtitan_lines(memory, loss_by_rank=dict.fromkeys(range(4), -1.0))
    path = tmp_path / "unlabelled.log"
    path.write_text("\n".join(re.sub(r"^\[rank\d+\]:", "", line) for line in lines) + "\n")
    message = {f.rule: f for f in analyze([str(path)]).findings}["pp-sentinel-loss"].message
    assert "The real loss is logged by main#" in message and "LOG_RANK" not in message
