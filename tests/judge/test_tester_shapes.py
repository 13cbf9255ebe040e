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
