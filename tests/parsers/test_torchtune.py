"""torchtune (parsers/torchtune.yaml): parsing the DiskLogger sample gives exactly the generator's
ground truth, its verdict is a torchtune maintainer's, and the line writers read back (v0.1's
`gpu_resources` and peak lines are spec samples, checked by test_specs)."""

from __future__ import annotations

import pytest

from memlog.engine.api import analyze
from memlog.parse.chunks import parse_line
from tests.logwriters import torchtune as tt
from tests.parsers.sample_truth import SPECS, parse, records_match, write
from tests.samplegen import build_all

SAMPLES = [s for s in build_all() if s.path.startswith("torchtune/")]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.path for s in SAMPLES])
def test_every_record_with_exact_values(sample, tmp_path):
    tables, _ = parse(sample, tmp_path)
    got, expected = records_match(sample, tables)
    assert got == expected and not tables.events
    assert tables.records["step"].to_list() == list(range(1, len(sample.truth.records) + 1))


# Peaks since the previous step that repeat to within a few MiB on packed batches are stable; on MPS
# a flat live set under a growing Metal pool is the pool's fragmentation.
VERDICTS = {"torchtune/log_1743584400.txt": "stable", "torchtune/mps/log_1746089112.txt": "fragmentation"}


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.path for s in SAMPLES])
def test_verdict_is_a_maintainers(sample, tmp_path):
    assert analyze([str(write(sample, tmp_path))]).verdict == VERDICTS[sample.path]


def test_writers_read_back():
    stats = tt.memory_stats(active_bytes=21 << 30, allocated_bytes=20 << 30, reserved_bytes=24 << 30)
    line = tt.log_line(25, {"loss": tt.item(1.0743), "lr": 2e-05, "tokens_per_second_per_gpu": tt.item(2864.12), **stats, "grad_norm": tt.item(0.43)})
    assert line.endswith(" ") and "peak_memory_active:21.0 " in line
    rec = parse_line(SPECS, line)[0][0]
    assert (rec["step"], rec["loss"], rec["lr"], rec["mem_peak_allocated_gib"], rec["mem_peak_reserved_gib"]) == (25, tt.item(1.0743), 2e-05, 20.0, 24.0)
    for text in tt.model_init_summary(allocated=16.02, reserved=16.13, active=16.02):
        assert parse_line(SPECS, text) == ([], [])
