"""W&B history as users export it (issue 37): the UI's CSV export (a `Step` column and one column per
key) and the API's history rows as JSON lines (`_step`, `_runtime`, `_timestamp` and the keys), with
W&B's system metric of per-GPU allocated memory in bytes. Both are read by the generic reader, no
extra needed, and judged as the same series printed as a torchtitan log. (A run folder's `.wandb`
transaction log is not read: the W&B SDK no longer ships a Python reader for it.)"""

from __future__ import annotations

import json

import pytest

from memlog.engine.api import analyze
from tests.synthetic import torchtitan_lines

GIB = 1 << 30


def leak(n: int) -> list[float]:
    return [20.0 + (0.0 if i < 10 else 0.1 * (i - 9)) + 0.02 * ((i * 7919) % 13) / 13 for i in range(n)]


def warmup(n: int) -> list[float]:
    return [20.0 + 8.0 * min(i, 30) / 30 + 0.02 * ((i * 7919) % 13) / 13 for i in range(n)]


def exported_csv(path, memory: list[float]) -> str:
    rows = ["Step,_runtime,_timestamp,train/loss,system/gpu.0.memoryAllocatedBytes"]
    rows += [f"{i},{2.0 * i:.1f},{1.7e9 + 2 * i:.0f},{10 - 0.01 * i:.4f},{gib * GIB:.0f}" for i, gib in enumerate(memory, start=1)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def exported_jsonl(path, memory: list[float]) -> str:
    rows = [
        {"_step": i, "_runtime": 2.0 * i, "_timestamp": 1.7e9 + 2 * i, "train/loss": 10 - 0.01 * i, "system/gpu.0.memoryAllocatedBytes": round(gib * GIB)}
        for i, gib in enumerate(memory, start=1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.mark.parametrize("export", [exported_csv, exported_jsonl], ids=["ui_csv", "api_jsonl"])
@pytest.mark.parametrize("series", [leak, warmup], ids=["leak", "warmup"])
def test_a_wandb_export_is_judged_as_the_same_series_printed(tmp_path, export, series):
    memory = series(200)
    read = analyze([export(tmp_path / ("history.csv" if export is exported_csv else "history.jsonl"), memory)])
    log = tmp_path / "train.log"
    log.write_text("\n".join(torchtitan_lines({0: memory})) + "\n")
    printed = analyze([str(log)])
    assert read.verdict == printed.verdict and read.verdict in ("leak", "warmup-plateau")
    assert read.coverage["records"] == 200 and read.coverage["steps"] == [1, 200]  # steps from Step / _step
