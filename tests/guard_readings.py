"""Injected readings for the guard's tests (memlog.guard.ReplayReader): a leak, a healthy run with
a warm-up, and a clock the test moves."""

from __future__ import annotations

import math
import random

from memlog.guard import Reading, ReplayReader


class Clock:
    """A clock the test moves: the readings' times and the judgements' durations."""

    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now


def leaking(onset: int = 60, rate: float = 0.2, base: float = 20.0, capacity: float | None = 80.0, seed: int = 0) -> ReplayReader:
    """Flat at `base` GiB, then `rate` GiB more per step from `onset`: full at onset + (capacity - base) / rate."""
    rng = random.Random(seed)

    def read(step: int) -> Reading:
        allocated = base + max(0, step - onset) * rate + rng.gauss(0, 0.02)
        return Reading(allocated_gib=allocated, reserved_gib=allocated + 2.0, capacity_gib=capacity, host_rss_gib=12.0, host_total_gib=512.0)

    return ReplayReader(read)


def healthy(level: float = 70.0, warmup: float = 5.0, seed: int = 1) -> ReplayReader:
    """A warm-up from 40 GiB towards `level` (10 GiB below the capacity), 63% of the way after
    `warmup` steps, 95% after three times that; with noise."""
    rng = random.Random(seed)

    def read(step: int) -> Reading:
        allocated = level - 30.0 * math.exp(-step / warmup) + rng.gauss(0, 0.05)
        return Reading(allocated_gib=allocated, reserved_gib=allocated + 3.0, capacity_gib=80.0, host_rss_gib=12.0 + rng.gauss(0, 0.01))

    return ReplayReader(read)


def ticking(reader: ReplayReader, clock: Clock, seconds_per_step: float = 1.0) -> ReplayReader:
    """`reader`, each reading moving `clock` to its step's time: for loops a framework runs."""
    start = clock.now

    def read(step: int) -> Reading:
        clock.now = start + step * seconds_per_step
        return reader.read(step)

    return ReplayReader(read)
