"""Hugging Face Trainer (parsers/hf_trainer.yaml): the step rules of its step-less loss dicts, on
small hand-written logs: numbered in file order without step lines (memory lines inherit), and
taking DeepSpeed's step when there is one; axolotl's memory keys in the generated axolotl sample
(exact records against the generator's truth) and in its writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlog.engine.api import analyze, parse_sources
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import parse_line
from tests.logwriters import hf_trainer as hf
from tests.logwriters.deepspeed import see_memory_usage
from tests.parsers.sample_truth import parse, records_match, write
from tests.samplegen import build_all

SPECS = list(load_specs().values())


def _records(tmp_path: Path, lines: list[str]):
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    tables, _ = parse_sources([str(path)], SPECS)
    return [(r["step"], r["kind"], r["loss"], r["mem_allocated_gib"]) for r in tables.records.sort("kind", "step", "reading", "line_no").iter_rows(named=True)]


def test_loss_dicts_without_step_lines_are_numbered_and_memory_inherits(tmp_path):
    got = _records(
        tmp_path,
        [
            see_memory_usage(ma=1.0, max_ma=1.0, ca=2.0, max_ca=2),  # before the first dict: joins it
            "{'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
            see_memory_usage(ma=1.5, max_ma=1.5, ca=2.0, max_ca=2),  # after dict 1: step 1's second reading
            "{'loss': 2.25, 'learning_rate': 1e-05, 'epoch': 0.2}",
            "{'eval_loss': 2.75, 'eval_runtime': 1.0, 'epoch': 0.2}",
        ],
    )
    assert got == [(1, "train", None, 1.0), (1, "train", 2.5, None), (1, "train", None, 1.5), (2, "train", 2.25, None), (2, "validate", 2.75, None)]


def test_loss_dicts_take_the_deepspeed_step_when_there_is_one(tmp_path):
    got = _records(
        tmp_path,
        [
            "[2023-11-07 01:55:23,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]",
            "{'loss': 2.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
            "[2023-11-07 01:55:33,711] [INFO] [logging.py:96:log_dist] [Rank 0] step=20, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]",
            "{'loss': 2.25, 'learning_rate': 1e-05, 'epoch': 0.2}",
        ],
    )
    assert got == [(10, "train", None, None), (10, "train", 2.5, None), (20, "train", None, None), (20, "train", 2.25, None)]


AXOLOTL = [s for s in build_all() if s.path.startswith("hf_trainer/")]


@pytest.mark.parametrize("sample", AXOLOTL, ids=[s.path for s in AXOLOTL])
def test_axolotl_sample_every_record_with_exact_values(sample, tmp_path):
    tables, _ = parse(sample, tmp_path)
    got, expected = records_match(sample, tables)
    assert got == expected and not tables.events
    train = tables.records.filter(tables.records["kind"] == "train")
    assert train["step"].to_list() == list(range(1, 151)) and train["ordinal"].all()
    assert tables.records.filter(tables.records["kind"] == "validate")["step"].to_list() == [50, 100, 150]
    assert train["mem_max_allocated_gib"].null_count() == train.height  # v0.13: window peaks, not running maxima


@pytest.mark.parametrize("sample", AXOLOTL, ids=[s.path for s in AXOLOTL])
def test_axolotl_verdict_is_not_a_leak(sample, tmp_path):
    """Per-log peaks that follow each step's batch without a trend: healthy. memlog currently calls
    this noise `inconclusive` (insufficient-data: no clear shape) rather than stable."""
    report = analyze([str(write(sample, tmp_path))])
    assert report.verdict in ("stable", "inconclusive") and "memory-leak" not in {f.rule for f in report.findings}


@pytest.mark.parametrize(
    ("keys", "columns"),
    [
        ("v0.12", ("mem_max_allocated_gib", "mem_max_reserved_gib")),
        ("v0.13", ("mem_peak_allocated_gib", "mem_peak_reserved_gib")),
    ],
)
def test_axolotl_memory_keys_read_back_in_both_transformers_styles(keys, columns):
    logs = {
        "loss": 1.2345,
        "grad_norm": 0.5,
        "learning_rate": 1e-05,
        **hf.axolotl_memory(active=20.314, allocated=20.111, reserved=23.449, keys=keys),
        "epoch": 0.1,
    }
    for text in (hf.log_dict(logs), hf.log_dict_v5(logs)):
        record = parse_line(SPECS, text)[0][0]
        assert (record[columns[0]], record[columns[1]]) == (20.11, 23.45), text
