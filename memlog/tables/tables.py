"""Tables: what reading a run yields, the records (memlog/tables/records.py) and the events
(memlog/base/events.py), with the counts the report's coverage gives."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from memlog.base.events import Event
from memlog.tables.records import steps_read


@dataclass
class Tables:
    records: pl.DataFrame
    events: list[Event]
    events_dropped: dict[str, int]
    # What the generic reader guessed, per source it read (memlog/parse/generic: Guessed).
    guessed: list = field(default_factory=list)
    # What was summarised while reading, per source (memlog/tables/condense.py Summarised): counted, not held.
    summarised: list = field(default_factory=list)
    # Sources whose steps repeat other sources' (a console beside per-rank files: tables/streams.py),
    # each with the sources it repeats; their step records are left out.
    repeated: dict[str, list[str]] = field(default_factory=dict)

    def events_of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    @property
    def step_count(self) -> int:
        """Steps read: records, counting a condensed one as the steps it stands for, and the steps of
        segments summarised."""
        held = int(self.records.select(steps_read(self.records)).item()) if self.records.height else 0
        return held + sum(n for s in self.summarised for n in s.steps.values())

    @property
    def formats(self) -> dict[str, int]:
        """Steps read per format (summarised segments' included)."""
        found: dict[str, int] = {}
        if not self.records.is_empty():
            counts = self.records.group_by("format").agg(steps_read(self.records).alias("len")).sort("format")
            found = dict(zip(counts["format"].to_list(), counts["len"].to_list()))
        for summary in self.summarised:
            for fmt, n in summary.steps.items():
                found[fmt] = found.get(fmt, 0) + n
        return found
