"""Parse: run every loaded format spec over a chunk of lines.

Per chunk: one literal pre-filter over the raw text (Aho-Corasick, so lines that no pattern could
match cost almost nothing), unwrap the survivors, then extract each pattern's matches. Returns
the matched rows; the caller accumulates them across chunks and sources.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from memlog.formats import FormatSpec, LinePattern, all_logger_prefixes
from memlog.unwrap import Unwrapper


@dataclass
class Matches:
    """The rows one chunk yielded: record rows (one per matched step line) and event rows."""

    records: list[pl.DataFrame]
    events: list[pl.DataFrame]


class ChunkParser:
    def __init__(self, specs: Iterable[FormatSpec]):
        self.specs = list(specs)
        self.unwrap = Unwrapper(all_logger_prefixes(self.specs))
        self.literals = sorted({lit for spec in self.specs for lit in spec.literals})

    def __call__(self, lines: pl.DataFrame) -> Matches:
        candidates = lines.filter(pl.col("text").str.contains_any(self.literals)) if self.literals else lines.clear()
        if candidates.is_empty():
            return Matches([], [])
        unwrapped = self.unwrap(candidates)
        records, events = [], []
        for spec in self.specs:
            for pattern in spec.records:
                hits = pattern.extract(unwrapped)
                if not hits.is_empty():
                    records.append(hits.drop("text").with_columns(format=pl.lit(spec.name), kind=pl.lit(pattern.kind)))
            for pattern in spec.events:
                hits = pattern.extract(unwrapped)
                if not hits.is_empty():
                    events.append(_event_rows(hits, spec, pattern))
        return Matches(records, events)


def _event_rows(hits: pl.DataFrame, spec: FormatSpec, pattern: LinePattern) -> pl.DataFrame:
    """Events keep their own fields as one JSON string column, so events of any shape concatenate."""
    fields = list(dict.fromkeys(pattern.groups + tuple(g for names in pattern.field_groups for g in names)))
    detail = (
        pl.struct([pl.col(f).cast(pl.String) for f in fields]).struct.json_encode()
        if fields
        else pl.lit(None, dtype=pl.String)
    )
    return hits.select(
        "line_no", "text", "actor", "pid", "ip", "rank", "ts",
        detail.alias("detail"),
        format=pl.lit(spec.name),
        kind=pl.lit(pattern.event),
    )


def parse_line(specs: Iterable[FormatSpec], line: str) -> tuple[list[dict], list[dict]]:
    """Records and events that one raw line yields: for spec samples, tests and `formats check`."""
    import json

    specs = list(specs)
    matches = ChunkParser(specs)(pl.DataFrame({"line_no": [1], "text": [line]}))
    records = [row for frame in matches.records for row in frame.iter_rows(named=True)]
    events = []
    for frame in matches.events:
        for row in frame.iter_rows(named=True):
            events.append({**(json.loads(row["detail"]) if row["detail"] else {}), "kind": row["kind"], "rank": row["rank"]})
    return records, events


def sample_mismatches(spec: FormatSpec, context: Iterable[FormatSpec] = ()) -> list[str]:
    """Check a spec's embedded samples: each `record:`/`event:` must come out with those values."""
    problems = []
    specs = [spec, *context]
    for i, sample in enumerate(spec.samples):
        line = sample.get("line", "")
        records, events = parse_line(specs, line)
        for key, found in (("record", records), ("event", events)):
            expected = sample.get(key)
            if expected is None:
                continue
            if not found:
                problems.append(f"{spec.name} sample {i + 1}: no {key} from {line[:80]!r}")
                continue
            row = found[0]
            for field_, want in expected.items():
                got = row.get(field_)
                if isinstance(want, float) and isinstance(got, (int, float)) and got is not None:
                    ok = abs(got - want) <= 1e-9 * max(1.0, abs(want))
                else:
                    ok = got == want or (want is not None and str(got) == str(want))
                if not ok:
                    problems.append(f"{spec.name} sample {i + 1}: {field_} = {got!r}, expected {want!r}")
    return problems
