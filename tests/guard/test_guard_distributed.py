"""The guard's stop agreed across ranks (memlog/guard/agree.py), in two real processes with a gloo
process group (tests/guard_ranks.py): one rank's projected OOM stops both at the same step, both
save there, and neither is left blocked in a collective."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if not os.environ.get("MEMLOG_REQUIRE_GUARD"):  # CI installs memlog[torch]: this test must run there
    pytest.importorskip("torch", reason="pip install 'memlog[torch]' to test the agreement across ranks")

ROOT = Path(__file__).resolve().parents[2]


def test_one_ranks_projected_oom_stops_every_rank_at_the_same_step(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    ranks = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.guard_ranks", str(rank), "2", str(tmp_path / "pg"), str(tmp_path)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    # A safety net only: a hang would end by the process group's own timeout (60 s) well before this.
    outputs = [rank.communicate(timeout=600) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [err[-2000:] for _, err in outputs]
    healthy, leaking = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert healthy["world_size"] == leaking["world_size"] == 2
    stopped = leaking["stopped"]
    assert healthy["stopped"] == stopped and stopped % 10 == 0  # at the same agreement step (agree_every=10)
    assert 360 - 200 - 20 <= stopped <= 360 - 200  # rank 1's readings reach the capacity at step 360
    assert healthy["saved"] == leaking["saved"] == [stopped]  # both save there (a save is collective too)
    assert healthy["decision"]["by_rank"] == leaking["decision"]["by_rank"] == 1
    assert healthy["decision"]["reason"].startswith("rank 1 asked to stop (nearest projected OOM at step 3")
    assert leaking["decision"]["reason"].startswith("projected OOM at step")
    report = json.loads((tmp_path / "memlog-guard-rank0.json").read_text())
    assert report["guard"]["decision"]["action"] == "stop" and report["report"]["verdict"] != "leak"  # rank 0 itself is healthy
