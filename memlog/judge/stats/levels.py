"""Flat levels and the steps between them: where one step up splits a series into two flat levels,
whether a rise is such a step rather than warmup, and whether stairs are only a print's rounding.

Why: a late one-off jump (an evaluation, a checkpoint save) read as a hinge lands a few points off
and was called warmup up to it; a creep printed to 0.01 GiB moves one tick every few lines and was
called stairs. Pure functions of steps and values, like the other detectors here.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlog.judge.stats.estimators import median, theil_sen
from memlog.judge.stats.noise import robust_sigma


def step_index(values: Sequence[float], lo: int, near: int, width: int, min_before: int, min_after: int) -> int | None:
    """The first index on the new level of the one step, within `width` points of `near`, that best
    splits values[lo:] into two flat levels (least squares about two means), with `min_before`
    points or more before it and `min_after` after; None when there is no room for one."""
    ys = values[lo:]
    n = len(ys)
    first, last = max(min_before, near - lo - width), min(n - min_after, near - lo + width)
    if first > last:
        return None
    prefix, squares = [0.0], [0.0]
    for y in ys:
        prefix.append(prefix[-1] + y)
        squares.append(squares[-1] + y * y)

    def sse(a: int, b: int) -> float:
        total = prefix[b] - prefix[a]
        return squares[b] - squares[a] - total * total / (b - a)

    return lo + min(range(first, last + 1), key=lambda k: sse(0, k) + sse(k, n))


def step_change(x: Sequence[float], y: Sequence[float], flat_from: int, at: int, *, min_before: int, flat_share: float, sigmas: float) -> float:
    """The size of the rise to index `at` when it is one step up after a flat stretch from
    `flat_from` and memory holds after it, else 0.0: the stretch holds `min_before` points or more,
    the robust lines before and after it move by at most `flat_share` of the step (a trend test would
    call a wobble of a hundredth of the step a rise, over many points), and the step stands `sigmas`
    noise sigmas out (like a warmup's rise)."""
    if at - flat_from < min_before:
        return 0.0
    before, after = theil_sen(x[flat_from:at], y[flat_from:at]), theil_sen(x[at:], y[at:])
    if before is None or after is None:
        return 0.0
    size = after.intercept + after.slope * x[at] - median(y[flat_from:at])
    noise = max(robust_sigma(y[flat_from:at]), robust_sigma(y[at:]))
    moved = max(abs(before.slope) * (x[at - 1] - x[flat_from]), abs(after.slope) * (x[-1] - x[at]))
    return size if size > sigmas * noise and moved <= flat_share * size else 0.0


def print_ticks(values: Sequence[float], ticks: float) -> bool:
    """Whether stairs found in `values` are a steady line rounded by the logger (a creep of 0.5 MiB a
    step printed to 0.01 GiB moves one tick every few lines): no line moves the reading by more than
    `ticks` ticks of the print's resolution. The resolution is the smallest difference between two
    readings, when every reading is a whole number of it (a staircase from 20.37 GiB in 1 GiB jumps
    is resolved finer than its jumps)."""
    moves = [abs(b - a) for a, b in zip(values, values[1:]) if b != a]
    tick = min(moves, default=0.0)
    if tick <= 0 or max(moves) > ticks * tick * (1 + 1e-9):
        return False
    return all(abs(v / tick - round(v / tick)) <= 0.01 for v in values)
