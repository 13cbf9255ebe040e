"""Hugging Face Trainer (parsers/hf_trainer.yaml): the step rules of its step-less loss dicts, on
small hand-written logs: numbered in file order without step lines (memory lines inherit), and
taking DeepSpeed's step when there is one."""

from __future__ import annotations

from pathlib import Path

from memlog.api import parse_sources
from memlog.formats import load_specs
from memlog.logwriters.deepspeed import see_memory_usage

SPECS = list(load_specs().values())


def _records(tmp_path: Path, lines: list[str]):
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    tables, _ = parse_sources([str(path)], SPECS)
    return [(r["step"], r["kind"], r["loss"], r["mem_allocated_gib"]) for r in tables.records.sort("kind", "step", "reading", "line_no").iter_rows(named=True)]


def test_loss_dicts_without_step_lines_are_numbered_and_memory_inherits(tmp_path):
    got = _records(tmp_path, [
        see_memory_usage(ma=1.0, max_ma=1.0, ca=2.0, max_ca=2),  # before the first dict: joins it
        "{'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
        see_memory_usage(ma=1.5, max_ma=1.5, ca=2.0, max_ca=2),  # after dict 1: step 1's second reading
        "{'loss': 2.25, 'learning_rate': 1e-05, 'epoch': 0.2}",
        "{'eval_loss': 2.75, 'eval_runtime': 1.0, 'epoch': 0.2}",
    ])
    assert got == [(1, "train", None, 1.0), (1, "train", 2.5, None), (1, "train", None, 1.5), (2, "train", 2.25, None), (2, "validate", 2.75, None)]


def test_loss_dicts_take_the_deepspeed_step_when_there_is_one(tmp_path):
    got = _records(tmp_path, [
        "[2023-11-07 01:55:23,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]",
        "{'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
        "[2023-11-07 01:55:33,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=20, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]",
        "{'loss': 2.25, 'learning_rate': 1e-05, 'epoch': 0.2}",
    ])
    assert got == [(10, "train", None, None), (10, "train", 2.5, None), (20, "train", None, None), (20, "train", 2.25, None)]
