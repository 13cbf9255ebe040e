"""NeMo (parsers/nemo.yaml): parsing the NeMo 2 sample log gives exactly the generator's ground truth
(srun's task label names the rank, the step is global_step, the memory metrics are bytes), its verdict
is a NeMo maintainer's, and the line writer reads back (NeMo 1's tqdm postfix and the other shapes
are spec samples, checked by test_specs)."""

from __future__ import annotations

import pytest

from memlog.engine.api import analyze
from memlog.parse.chunks import parse_line
from tests.logwriters import nemo
from tests.parsers.sample_truth import SPECS, events_match, parse, records_match, write
from tests.samplegen import build_all

SAMPLES = [s for s in build_all() if s.path.startswith("nemo/")]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.path for s in SAMPLES])
def test_every_record_with_exact_values_and_no_events(sample, tmp_path):
    tables, _ = parse(sample, tmp_path)
    got, expected = records_match(sample, tables)
    assert got == expected
    assert events_match(sample, tables, {}) == ([], [])


def test_steps_are_global_steps_of_rank_0_and_memory_is_bytes(tmp_path):
    sample = SAMPLES[0]
    tables, _ = parse(sample, tmp_path)
    assert set(tables.records["worker"].cast(str)) == {"rank0"}
    assert tables.records["step"].to_list() == list(range(60))
    assert tables.records["mem_max_reserved_gib"][-1] == 62_403_100_672 / 1024**3
    assert "Validation: iteration 5/5" in sample.text and "Initializing distributed: GLOBAL_RANK: 15" in sample.text


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.path for s in SAMPLES])
def test_verdict_is_a_maintainers(sample, tmp_path):
    """Process-lifetime peaks that rise over the first optimizer steps and then hold are warmup."""
    report = analyze([str(write(sample, tmp_path))])
    assert report.verdict == "warmup-plateau"


def test_progress_line_reads_back():
    metrics = {
        "lr": nemo.f32(1.5e-6),
        "global_batch_size": 256.0,
        "global_step": 9.0,
        "max_memory_reserved": 62193385472.5,  # averaged over a progress_interval
        "max_memory_allocated": nemo.f32(54113218560.0),
        "reduced_train_loss": nemo.f32(9.874),
        "train_step_timing in s": 2.411,
    }
    line = nemo.progress_line(epoch=0, iteration=9, total=1999, metrics=metrics)
    assert "| global_step: 9 |" in line and "| max_memory_reserved: 6.219e+10 |" in line
    rec = parse_line(SPECS, line)[0][0]
    assert (rec["step"], rec["loss"], rec["lr"]) == (9, 9.874, 1.5e-6)
    assert rec["mem_max_reserved_gib"] == 6.219e10 / 1024**3 and rec["mem_max_allocated_gib"] == 54113218560 / 1024**3
    assert parse_line(SPECS, nemo.validation_progress(3, 10)) == ([], [])
