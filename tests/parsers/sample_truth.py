"""What the parser tests of generated sample logs share: parse a sample as memlog does and compare its
records (one per line read) and events with the generator's ground truth (tests/samplegen/common.py
reading / merge_readings)."""

from __future__ import annotations

from pathlib import Path

from memlog.base.columns import ALL_VALUE_COLUMNS
from memlog.base.events import typed_detail
from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs

SPECS = list(load_specs().values())


def write(sample, directory: Path) -> Path:
    path = directory / Path(sample.path).name
    path.write_bytes(sample.text.encode())
    return path


def parse(sample, directory: Path):
    path = write(sample, directory)
    tables, _ = parse_sources([str(path)], SPECS)
    return tables, path


def as_read(record: dict) -> tuple:
    """A record as (worker, kind, step, reading, its non-null values), values to 12 significant
    digits; a NaN as the string 'nan' (NaN equals nothing, itself included)."""
    values = tuple(sorted((c, "nan" if record[c] != record[c] else float(f"{record[c]:.12g}")) for c in ALL_VALUE_COLUMNS if record.get(c) is not None))
    return record["worker"], record["kind"], record["step"], record["reading"], values


def records_match(sample, tables) -> tuple[list, list]:
    """(what memlog read, what the generator printed), each sorted: equal when every line was read right."""
    got = sorted(map(as_read, tables.records.iter_rows(named=True)), key=str)
    return got, sorted(map(as_read, sample.truth.records), key=str)


def events_match(sample, tables, fields: dict[str, tuple[str, ...]]) -> tuple[list, list]:
    """(memlog's events, the generator's) as (kind, line, detail fields), typed as memlog/base/events.py reads them."""
    expected = sorted(
        (e["kind"], e["line_no"], tuple(typed_detail(e["kind"], {f: e.get(f) for f in fields.get(e["kind"], ())}).get(f) for f in fields.get(e["kind"], ())))
        for e in sample.truth.events
    )
    got = sorted((e.kind, e.line_no, tuple(e.detail.get(f) for f in fields.get(e.kind, ()))) for e in tables.events)
    return got, expected
