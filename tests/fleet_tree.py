"""A tree of runs as a platform team has them, for the scan tests (local and Ray): what each run is
and the row memlog scan must give it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.synthetic import titan_log

STEPS = list(range(1, 41))
FLAT = [30.0 + 0.01 * (i % 3) for i in range(len(STEPS))]
LEAK = [20.0 + 0.5 * i for i in range(len(STEPS))]
WARMUP = [min(20.0 + 4 * i, 36.0) + 0.01 * (i % 2) for i in range(len(STEPS))]

# run name -> (verdict, or None when it cannot be read; path relative to the tree)
EXPECTED = {
    "healthy": ("stable", "healthy"),  # per-rank files: one run
    "team-a/leaky": ("leak", "team-a/leaky"),  # torchrun --log-dir, nested two levels down
    "team-b/slurm-101.out": ("leak", "team-b/slurm-101.out"),  # a folder of independent job logs
    "team-b/slurm-102.out": ("warmup-plateau", "team-b/slurm-102.out"),
    "ray/session_2025-01-01_00-00-00_000001_1": ("stable", "ray/session_2025-01-01_00-00-00_000001_1/logs"),
    "binary.log": (None, "binary.log"),  # unreadable: not text
    "gone.log": (None, "gone.log"),  # unreadable: a dangling link
    "empty.log": (None, "empty.log"),  # empty
}


def build(root: Path) -> Path:
    """The tree under `root`; also an empty folder, a config beside a log and a checkpoint, which
    are no runs."""
    (root / "healthy").mkdir(parents=True)
    for rank in (0, 1):
        titan_log(root / "healthy" / f"rank{rank}.log", {rank: FLAT}, STEPS)
    for rank in (0, 1):
        folder = root / "team-a" / "leaky" / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        titan_log(folder / "stdout.log", {rank: LEAK}, STEPS)
        (folder / "stderr.log").write_text("")
    (root / "team-b").mkdir()
    titan_log(root / "team-b" / "slurm-101.out", {0: LEAK}, STEPS)
    titan_log(root / "team-b" / "slurm-102.out", {0: WARMUP}, STEPS)
    (root / "team-b" / "config.json").write_text('{"lr": 0.001}\n')
    (root / "team-b" / "model.safetensors").write_bytes(b"\0" * 64)
    logs = root / "ray" / "session_2025-01-01_00-00-00_000001_1" / "logs"
    logs.mkdir(parents=True)
    titan_log(logs / "worker-4f3a9c-01000000-4242.out", {0: FLAT}, STEPS)
    (logs / "raylet.out").write_text("[2025-01-01 00:00:00,000 I 1 1] (raylet) main.cc:100: Raylet started\n")
    (root / "binary.log").write_bytes(bytes(range(256)) * 64)
    os.symlink(root / "nowhere.log", root / "gone.log")
    (root / "empty.log").write_bytes(b"")
    (root / "nothing-here").mkdir()
    return root
