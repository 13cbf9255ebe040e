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
    """Events keep their own fields in one struct column so events of any shape concatenate."""
    fields = [g for g in dict.fromkeys(pattern.groups + tuple(g for n in pattern.field_groups for g in n))]
    base = ["line_no", "text", "actor", "pid", "ip", "rank", "ts"]
    detail = pl.struct([pl.col(f).cast(pl.String) for f in fields]).alias("detail") if fields else pl.lit(None).alias("detail")
    return hits.select(
        *base,
        detail,
        format=pl.lit(spec.name),
        kind=pl.lit(pattern.event),
    ).with_columns(pl.col("detail").struct.json_encode() if fields else pl.col("detail").cast(pl.String))
