"""torchtitan (parsers/torchtitan.yaml): parsing the torchtitan sample logs gives exactly the
generator's ground truth; validation lines are not training steps."""

from __future__ import annotations

import math

import pytest

from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import parse_line
from tests.samplegen import build_all

SAMPLES = [s for s in build_all() if s.path.startswith("torchtitan/")]
SPECS = list(load_specs().values())
# Event kinds whose truth the generator records, and the detail field each carries.
EVENT_FIELDS = {
    "capacity": ("capacity_gib", "mem_capacity_gib"),
    "model_memory": ("mem_gib", "mem_gib"),
    "alloc_retries": ("count", "count"),
    "pp_loss_not_visible": ("loss_rank", "loss_rank"),
    "oom": (None, None),
}


@pytest.fixture(scope="module", params=SAMPLES, ids=[s.path for s in SAMPLES])
def parsed(request, tmp_path_factory):
    sample = request.param
    path = tmp_path_factory.mktemp("s") / "run.log"
    path.write_bytes(sample.text.encode())
    tables, _ = parse_sources([str(path)], SPECS)
    return sample, tables


def test_every_record_with_exact_values(parsed):
    sample, tables = parsed
    rows = {(r["rank"], r["kind"], r["step"]): r for r in tables.records.iter_rows(named=True)}
    truth = {(t["rank"], t["kind"], t["step"]): t for t in sample.truth.records}
    assert set(rows) == set(truth)
    for key, expected in truth.items():
        for field, value in expected.items():
            if field in ("rank", "kind", "step"):
                continue
            got = rows[key][field]
            if value is None:
                assert got is None, (key, field)
            else:
                assert got is not None and math.isclose(got, value, rel_tol=1e-12), (key, field, got, value)


def _number(value):
    return None if value is None else float(value)


def test_events_on_their_lines(parsed):
    sample, tables = parsed
    for kind, (truth_field, detail_field) in EVENT_FIELDS.items():
        expected = {(e["rank"], e["line_no"], _number(e.get(truth_field)) if truth_field else None) for e in sample.truth.events if e["kind"] == kind}
        # Only rank-prefixed copies: torchrun's failure summary repeats each OOM message unprefixed.
        got = {
            (e.rank, e.line_no, _number(e.detail.get(detail_field)) if detail_field else None) for e in tables.events if e.kind == kind and e.rank is not None
        }
        assert got == expected, kind


def test_validate_lines_are_not_training_steps():
    records, _ = parse_line(SPECS, "[titan] 2025-07-20 10:00:00,000 - root - INFO - validate step: 25  loss:  2.9134  memory: 40.10GiB(50.69%)  tps: 9,120")
    assert [r["kind"] for r in records] == ["validate"]
