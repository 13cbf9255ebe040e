"""Minimal torchtitan step lines for rule and CLI tests (the realistic logs are in samplegen/)."""

from __future__ import annotations


def torchtitan_lines(memory_by_rank: dict[int, list[float]], *, steps: list[int] | None = None,
                     loss_by_rank: dict[int, float] | None = None, capacity: float | None = None) -> list[str]:
    """Interleaved `[rankN]:[titan] ... step: ...` lines, one per rank and step."""
    n = len(next(iter(memory_by_rank.values())))
    steps = steps or list(range(1, n + 1))
    lines = []
    if capacity:
        lines += [f"[rank{r}]:[titan] 2025-06-01 08:00:00,000 - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with {capacity:.2f}GiB memory" for r in memory_by_rank]
    for i, step in enumerate(steps):
        for rank, values in memory_by_rank.items():
            loss = (loss_by_rank or {}).get(rank, 10.0 - 0.01 * i)
            pct = 100 * values[i] / (capacity or 79.11)
            lines.append(
                f"[rank{rank}]:[titan] 2025-06-01 08:{i // 60:02d}:{i % 60:02d},000 - root - INFO - "
                f"step: {step:2}  loss: {loss:7.4f}  memory: {values[i]:5.2f}GiB({pct:.2f}%)  tps: 7,421  tflops: 341.26  mfu: 34.50%"
            )
    return lines
