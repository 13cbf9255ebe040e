"""Seeded, deterministic generators of realistic sample logs with ground truth.

``build_all()`` returns every Sample; ``write_all(root)`` writes their text to
``root / sample.path`` byte-for-byte (``\\r`` and ANSI escapes included).
Regenerate the committed logs with ``python -m tests.samplegen``. The text of
every line comes from the line writers in ``tests.logwriters``.

A hand-written (or real, anonymised) log is a first-class sample too: drop it
in ``sample_logs/<format>/`` and add its golden verdict in ``tests/golden/``
(``MEMLOG_UPDATE_GOLDEN=1 pytest tests/engine/test_golden.py``, then review it). The
generator check (tests/tooling/test_samplegen.py) covers only the files the generator
writes; ``write_all`` never touches other files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import axolotl, deepspeed, megatron, nemo, ray_rl, torchtitan, torchtune
from .common import Sample, Truth

__all__ = ["SAMPLES", "Sample", "Truth", "build_all", "write_all"]

# One entry per sample log, collected from the format modules.
SAMPLES: list[Callable[[], Sample]] = [
    *torchtitan.SAMPLES,
    *deepspeed.SAMPLES,
    *ray_rl.SAMPLES,
    *megatron.SAMPLES,
    *nemo.SAMPLES,
    *torchtune.SAMPLES,
    *axolotl.SAMPLES,
]


def build_all() -> list[Sample]:
    samples = [make() for make in SAMPLES]
    paths = [s.path for s in samples]
    if len(set(paths)) != len(paths):
        raise ValueError(f"duplicate sample paths: {paths}")
    return samples


def write_all(root: Path) -> list[Path]:
    """Write every sample under ``root``; returns the written paths."""
    written = []
    for sample in build_all():
        path = Path(root) / sample.path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Binary write: no newline translation, so the bytes equal sample.text.
        path.write_bytes(sample.text.encode("utf-8"))
        written.append(path)
    return written
