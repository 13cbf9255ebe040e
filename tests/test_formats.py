"""Every embedded sample line of every format spec parses to the values it documents."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from memlog.errors import FormatSpecError
from memlog.formats import load_spec, load_specs
from memlog.parse import ChunkParser, parse_line, sample_mismatches

SPECS = load_specs()
SAMPLES = [(name, i) for name, spec in SPECS.items() for i in range(len(spec.samples))]


@pytest.mark.parametrize(("name", "index"), SAMPLES, ids=[f"{n}-{i + 1}" for n, i in SAMPLES])
def test_spec_sample_parses_to_documented_values(name, index):
    spec = SPECS[name]
    single = type(spec)(**{**spec.__dict__, "samples": (spec.samples[index],)})
    assert sample_mismatches(single, [s for s in SPECS.values() if s is not spec]) == []


def test_every_spec_has_samples():
    for spec in SPECS.values():
        assert spec.samples, f"{spec.name} has no samples"


def test_every_pattern_is_matched_by_a_sample_of_its_spec():
    """A pattern no sample exercises could stop matching unnoticed."""
    unexercised = []
    for spec in SPECS.values():
        matched = set()

        def observe(_unwrapped, observed, own=spec):
            matched.update(pattern.name for s, pattern, hits in observed if s is own and hits.height)

        parser = ChunkParser(list(SPECS.values()), observe)
        for sample in spec.samples:
            texts = [piece for physical in sample.get("line", "").split("\n") for piece in physical.split("\r")]
            parser(pl.DataFrame({"line_no": list(range(1, len(texts) + 1)), "text": texts}))
        unexercised += [f"{spec.name}/{p.name}" for p in spec.patterns if p.name not in matched]
    assert unexercised == []


def test_a_wrong_sample_expectation_is_reported(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: toy\nrecords:\n  - name: s\n    literal: 'it='\n    regex: 'it=(?P<step>\\d+) loss=(?P<loss>[\\d.]+)'\n"
        "samples:\n  - line: 'it=3 loss=1.5'\n    record: {step: 3, loss: 2.5}\n"
    )
    problems = sample_mismatches(load_spec(bad))
    assert problems == ["toy sample 1: loss = 1.5, expected 2.5"]


def test_validate_lines_are_not_training_steps():
    records, _ = parse_line(SPECS.values(), "[titan] 2025-07-20 10:00:00,000 - root - INFO - validate step: 25  loss:  2.9134  memory: 40.10GiB(50.69%)  tps: 9,120")
    assert [r["kind"] for r in records] == ["validate"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<step>\\d+'\n", "invalid regex"),
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<step>\\d+) (?P<lossy>\\d+)'\n", "not canonical columns"),
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<loss>\\d+)'\n", "needs a (?P<step>...) group, or `inherit_step: true`"),
        ("name: x\nevents:\n  - name: e\n    literal: a\n    regex: 'a'\n", "needs `event:`"),
        ("- just a list\n", "is a mapping"),
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?<=a)(?P<step>\\d+)'\n", "invalid regex"),
    ],
)
def test_invalid_specs_are_rejected_with_a_reason(tmp_path: Path, body, message):
    path = tmp_path / "x.yaml"
    path.write_text(body)
    with pytest.raises(FormatSpecError, match=re.escape(message)):
        load_spec(path)
