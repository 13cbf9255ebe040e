"""Shared building blocks for the sample-log generators.

Everything here is deterministic: randomness comes only from ``seeded_rng`` and
time only from ``Clock`` (a fixed start plus explicit offsets), so building a
sample twice gives the same bytes. The text of every line comes from the line
writers in ``memlog.logwriters``; this package adds the scenarios and their truth.

A sample is assembled as a list of ``Emit`` items (one physical output line
each, already carrying every prefix), then ``LogDoc.to_sample`` numbers the
lines and turns the annotations attached to items into ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable

from memlog.logwriters import python, pytorch
from memlog.logwriters.mixing import interleave, interleave_chunks, seeded_rng
from memlog.logwriters.pytorch import excepthook_prefix, torchrun_prefix
from memlog.logwriters.torchtitan import COLOR, NO_COLOR, Palette

__all__ = [  # the line writers and mixing helpers are memlog.logwriters'; re-exported for the generators
    "COLOR", "NO_COLOR", "Clock", "Emit", "LogDoc", "Palette", "Sample", "Truth", "clamp", "excepthook_prefix",
    "interleave", "interleave_chunks", "seeded_rng", "torchrun_prefix",
]

# --------------------------------------------------------------------------
# Ground-truth data classes (field names are part of the parser-test contract)
# --------------------------------------------------------------------------


@dataclass
class Truth:
    # One per printed training/validation step line, in file order:
    # {"rank": int|None, "step": int, "kind": "train"|"validate", <fields>}
    records: list[dict]
    # {"kind": str, "rank": int|None, "line_no": int (1-based), ...extra fields}
    events: list[dict]
    capacity_gib: float | None


@dataclass
class Sample:
    path: str  # relative to sample_logs/, e.g. "torchtitan/fr1_pp2_ep2_leak_oom.log"
    text: str
    truth: Truth
    description: str  # one sentence: scenario and what it demonstrates


# --------------------------------------------------------------------------
# Time: a run's clock, its instants written by memlog.logwriters
# --------------------------------------------------------------------------


def clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, x))


class Clock:
    """Wall clock of a run: a fixed start datetime plus float seconds offsets."""

    def __init__(self, start: datetime):
        self.start = start

    def at(self, t: float) -> datetime:
        # Round to whole milliseconds so every derived format agrees.
        return self.start + timedelta(milliseconds=round(t * 1000))

    def asctime(self, t: float) -> str:
        """Python logging ``%(asctime)s``: ``2025-03-18 10:02:15,112``."""
        return python.asctime(self.at(t))

    def glog(self, t: float, level: str) -> str:
        """torch.distributed's glog-style head: ``W0318 10:02:11.530000``."""
        return pytorch.glog_head(self.at(t), level)

    def c10(self, t: float, level: str, nanos: int) -> str:
        """c10 (C++) warning head: ``W318 10:03:31.612834271`` (month not padded)."""
        return pytorch.c10_head(self.at(t), level, nanos)

    def elastic(self, t: float) -> str:
        """torchelastic failure time: ``2025-03-18_10:03:32``."""
        return pytorch.elastic_time(self.at(t))


# --------------------------------------------------------------------------
# Emitted lines, interleaving, assembly
# --------------------------------------------------------------------------


@dataclass
class Emit:
    """One physical output line (no trailing newline) plus its ground truth."""

    t: float  # seconds since the run's clock start; orders lines within a block
    rank: int | None  # torchrun tee rank, None for torchrun's own lines
    text: str
    record: dict | None = None
    events: list[dict] = field(default_factory=list)


class LogDoc:
    """Accumulates Emit lines in file order and builds the Sample."""

    def __init__(self) -> None:
        self.lines: list[Emit] = []

    def add(self, item: Emit) -> None:
        if "\n" in item.text:
            raise ValueError(f"Emit must be a single physical line: {item.text!r}")
        self.lines.append(item)

    def extend(self, items: Iterable[Emit]) -> None:
        for item in items:
            self.add(item)

    def to_sample(self, path: str, description: str, capacity_gib: float | None) -> Sample:
        records: list[dict] = []
        events: list[dict] = []
        for line_no, item in enumerate(self.lines, start=1):
            if item.record is not None:
                records.append(dict(item.record))
            for ev in item.events:
                full = {"kind": ev["kind"], "rank": item.rank, "line_no": line_no}
                full.update({k: v for k, v in ev.items() if k != "kind"})
                events.append(full)
        text = "".join(item.text + "\n" for item in self.lines)
        return Sample(
            path=path,
            text=text,
            truth=Truth(records=records, events=events, capacity_gib=capacity_gib),
            description=description,
        )
