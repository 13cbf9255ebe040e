"""Shapes an independent tester's pastes were misjudged on, drawn over scales, noise and lengths
with the shape generator's own scales (tests/shapes.py): a fall then flat is stable, not undecided."""

from __future__ import annotations

import math
import random

import pytest

from tests.shapes import SCALES, Draw, _noise, judge

SEEDS = range(16)


def _fall_then_flat(seed: int) -> Draw:
    """Memory falls by 3-30 % of its level over the first 10-40 % of the points (linearly, or as a
    decay), then holds flat with noise of at most 0.6 % of the level."""
    rng = random.Random(f"fall-then-flat/{seed}")
    key, per_gib, (lo, hi) = rng.choice(SCALES)
    level = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    sigma = level * rng.choice((0.0, rng.uniform(0.01, 0.1), rng.uniform(0.1, 0.6))) / 100
    n = rng.randint(40, 300)
    k = max(3, int(n * rng.uniform(0.1, 0.4)))
    fall = level * rng.uniform(0.03, 0.3)
    decay = rng.random() < 0.5
    base = [fall * (math.exp(-4 * i / k) if decay else max(0.0, 1 - i / k)) for i in range(n)]
    values = tuple(level + b + e for b, e in zip(base, _noise(rng, n, sigma, rng.choice((0.0, 0.5)))))
    decimals = 2 if per_gib == 1.0 else 1
    while 10**-decimals > max(sigma, fall / k) * per_gib / 10 and decimals < 6:
        decimals += 1
    return Draw("flat", seed, tuple(range(1, n + 1)), values, key, per_gib, decimals, sigma, params={"fall": fall, "k": k, "decay": decay})


@pytest.mark.parametrize("seed", SEEDS)
def test_memory_that_falls_then_holds_is_stable_and_says_it_fell(tmp_path, seed):
    d = _fall_then_flat(seed)
    judged = judge(d, tmp_path)
    assert judged.verdict == "stable", (d.params, judged.verdict, judged.fired)
    (stable,) = [f for f in judged.report.findings if f.rule == "stable-memory"]
    assert "it fell by up to" in stable.message and "then held at" in stable.message, stable.message


def _rounded_creep(seed: int, stairs_ticks: int = 0) -> Draw:
    """A smooth creep (or, with `stairs_ticks`, stairs that many print ticks high every few lines)
    printed with 1-2 decimals of its unit, so coarsely that a logged line moves it by less than a tick:
    the printed values climb one tick every few lines."""
    rng = random.Random(f"rounded-creep/{seed}/{stairs_ticks}")
    key, per_gib, (lo, hi) = rng.choice(SCALES)
    decimals = rng.choice((1, 2))
    tick = 10**-decimals / per_gib  # GiB
    n = rng.randint(40, 300)
    per_point = tick * rng.uniform(0.2, 0.8)
    every = rng.randint(4, 10)
    # Growth of 5-50 % of the level over the run: a leak by any threshold, only the print hides its line.
    level = max(per_point * n * rng.uniform(2, 20), 100 * tick)
    if stairs_ticks:
        base = [stairs_ticks * tick * (i // every) for i in range(n)]
        # A level the print resolves finer than its jumps (20.01, 20.07, 20.13 ... in 0.06 jumps): clean
        # stairs from a whole number of jumps (20.00, 20.06 ...) read the same as a rounded line.
        level = (round(level / tick / stairs_ticks) * stairs_ticks + 1) * tick
    else:
        base = [per_point * i for i in range(n)]
    values = tuple(level + b for b in base)
    return Draw("linear", seed, tuple(range(10, 10 * n + 1, 10)), values, key, per_gib, decimals, 0.0, params={"tick": tick, "every": every})


@pytest.mark.parametrize("seed", SEEDS)
def test_a_creep_rounded_by_the_print_is_steady_growth_not_stairs(tmp_path, seed):
    d = _rounded_creep(seed)
    judged = judge(d, tmp_path)
    assert judged.verdict == "leak", (d.params, judged.verdict)
    (leak,) = [f for f in judged.report.findings if f.rule == "memory-leak"]
    assert "stairs" not in leak.message, leak.message


@pytest.mark.parametrize("seed", range(6))
def test_stairs_higher_than_the_prints_ticks_are_still_stairs(tmp_path, seed):
    d = _rounded_creep(seed, stairs_ticks=6)
    (leak,) = [f for f in judge(d, tmp_path).report.findings if f.rule == "memory-leak"]
    assert "in stairs" in leak.message, leak.message


def _late_step(seed: int) -> Draw:
    """Flat (after a warmup of 0-3 points, or none), one step up at 30-70 % of the run (an evaluation),
    then flat again; the step is 2-30 % of the level, at least 10 noise SDs."""
    rng = random.Random(f"late-step/{seed}")
    key, per_gib, (lo, hi) = rng.choice(SCALES)
    level = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    n = rng.randint(40, 300)
    warm = rng.choice((0, 1, 2, 3))
    at = int(n * rng.uniform(0.3, 0.7))
    size = level * rng.uniform(0.02, 0.3)
    sigma = min(level * rng.choice((0.0, rng.uniform(0.01, 0.1), rng.uniform(0.1, 0.3))) / 100, size / 10)
    warmup_rise = level * rng.uniform(0.2, 0.8)
    base = [-warmup_rise * (1 - i / warm) if i < warm else (size if i >= at else 0.0) for i in range(n)]
    values = tuple(level + b + e for b, e in zip(base, _noise(rng, n, sigma, 0.0)))
    decimals = 2 if per_gib == 1.0 else 1
    while 10**-decimals > max(sigma, size / 20) * per_gib / 10 and decimals < 6:
        decimals += 1
    steps = tuple(range(10, 10 * n + 1, 10))
    return Draw("flat", seed, steps, values, key, per_gib, decimals, sigma, params={"warm": warm, "at_step": steps[at], "size": size})


@pytest.mark.parametrize("seed", SEEDS)
def test_one_step_up_late_in_a_run_is_a_one_off_jump_not_warmup(tmp_path, seed):
    d = _late_step(seed)
    judged = judge(d, tmp_path)
    assert judged.verdict in ("stable", "warmup-plateau"), (d.params, judged.verdict, judged.fired)
    (calm,) = [f for f in judged.report.findings if f.rule in ("stable-memory", "warmup-plateau")]
    assert "a one-off jump of " in calm.message, (d.params, calm.message)
    assert f"at step {d.params['at_step']} " in calm.message, (d.params, calm.message)
    if d.params["warm"]:  # the warmup is said, ending within a logged point of where it did
        assert calm.rule == "warmup-plateau", (d.params, calm.message)
        assert calm.evidence["observed"]["plateau_from_step"] in d.steps[d.params["warm"] - 1 : d.params["warm"] + 2], (d.params, calm.message)
