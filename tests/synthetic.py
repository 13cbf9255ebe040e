"""Minimal torchtitan step lines for rule and CLI tests (the realistic logs are in samplegen/), written
by tests.logwriters."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tests.logwriters import torchtitan as titan
from tests.logwriters.pytorch import H100, H100_GIB


def torchtitan_lines(
    memory_by_rank: dict[int, list[float]], *, steps: list[int] | None = None, loss_by_rank: dict[int, float] | None = None, capacity: float | None = None
) -> list[str]:
    """Interleaved `[rankN]:[titan] ... step: ...` lines (2025-03 format, no colour), one per rank and step."""
    n = len(next(iter(memory_by_rank.values())))
    steps = steps or list(range(1, n + 1))
    lines = []
    if capacity:
        lines += [titan.log_line(titan.capacity(H100, capacity), ts="2025-06-01 08:00:00,000", rank=r) for r in memory_by_rank]
    for i, step in enumerate(steps):
        ts = f"2025-06-01 08:{i // 60:02d}:{i % 60:02d},000"
        for rank, values in memory_by_rank.items():
            loss = (loss_by_rank or {}).get(rank, 10.0 - 0.01 * i)
            msg = titan.step_line_2025_03(
                step=step, loss=loss, mem_gib=values[i], mem_pct=100 * values[i] / (capacity or H100_GIB), tps=7421, tflops=341.26, mfu=34.5
            )
            lines.append(titan.log_line(msg, ts=ts, rank=rank))
    return lines


def titan_log(path: Path, memory: dict[int, list[float]], steps: list[int], *, capacity: float | None = H100_GIB, seconds_per_step: float = 1.0) -> Path:
    """A torchtitan log (2025-03 format) of `memory[rank][i]` at `steps[i]`, ranks interleaved,
    timestamps one `seconds_per_step` apart (a step counter going back, a resume, still moves the clock on)."""
    start = dt.datetime(2025, 6, 1, 8, 0, 0)
    elapsed, previous = 0.0, 0
    with path.open("w") as out:
        if capacity:
            for rank in memory:
                out.write(titan.log_line(titan.capacity(H100, capacity), ts="2025-06-01 08:00:00,000", rank=rank) + "\n")
        for i, step in enumerate(steps):
            elapsed += max(step - previous, 1) * seconds_per_step
            previous = step
            ts = (start + dt.timedelta(seconds=elapsed)).strftime("%Y-%m-%d %H:%M:%S,000")
            for rank, values in memory.items():
                msg = titan.step_line_2025_03(step=step, loss=3.0, mem_gib=values[i], mem_pct=100 * values[i] / H100_GIB, tps=7421, tflops=341.26, mfu=34.5)
                out.write(titan.log_line(msg, ts=ts, rank=rank) + "\n")
    return path
