"""Shared building blocks for the sample-log generators.

Everything here is deterministic: randomness comes only from ``seeded_rng`` and
time only from ``Clock`` (a fixed start plus explicit offsets), so building a
sample twice gives the same bytes. The text of every line comes from the line
writers in ``tests.logwriters``; this package adds the scenarios and their truth.

A sample is assembled as a list of ``Emit`` items (one physical output line
each, already carrying every prefix), then ``LogDoc.to_sample`` numbers the
lines and turns the annotations attached to items into ground truth.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tests.logwriters import python, pytorch
from tests.logwriters.mixing import interleave, interleave_chunks, seeded_rng
from tests.logwriters.pytorch import excepthook_prefix, torchrun_prefix
from tests.logwriters.torchtitan import COLOR, NO_COLOR, Palette

__all__ = [  # the line writers and mixing helpers are tests.logwriters'; re-exported for the generators
    "COLOR",
    "NO_COLOR",
    "Clock",
    "Emit",
    "LogDoc",
    "Palette",
    "Sample",
    "Truth",
    "clamp",
    "excepthook_prefix",
    "interleave",
    "interleave_chunks",
    "merge_readings",
    "reading",
    "seeded_rng",
    "torchrun_prefix",
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
# Time: a run's clock, its instants written by tests.logwriters
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


# --------------------------------------------------------------------------
# Readings: ground truth as memlog's records table holds it (memlog/tables/records.py)
# --------------------------------------------------------------------------
#
# A *reading* is what one printed line says: its worker (memlog's label: `rank3`, `main`, a Ray
# actor), its step or None, its kind and its canonical values as printed. merge_readings turns them
# into the records memlog must build, one per line read:
# - in a worker that prints no step at all, the readings marked `ordinal` are numbered 1, 2, 3...;
# - a reading without a step takes the step of the worker's nearest earlier step-bearing reading,
#   or of its first one when it comes before all of them; a worker with no step at all takes the
#   source's (any worker's) steps the same way;
# - within a (worker, kind, step), the k-th line of one kind (one set of values, as one pattern
#   prints them) is that kind's reading k; a source with no step at all numbers each worker's lines
#   of a kind 1, 2, 3... as its steps;
# - a line that prints its own step and the very values an earlier line of its kind printed at that
#   step is a repeat (two log handlers, a re-read tail; records.py _split_collided) and reads nothing.


def reading(worker: str, step: int | None = None, kind: str = "train", *, ordinal: bool = False, **values) -> dict:
    # One NaN object for every NaN value, so that two builds' truths compare equal (NaN != NaN, but
    # containers compare their items by identity first).
    values = {k: math.nan if isinstance(v, float) and v != v else v for k, v in values.items()}
    return {"worker": worker, "kind": kind, "step": step, "ordinal": ordinal, "values": values}


def merge_readings(readings: list[dict]) -> list[dict]:
    """The records memlog must build from the readings, given in file order (module docstring)."""
    by_worker: dict[str, list[dict]] = {}
    for r in readings:
        by_worker.setdefault(r["worker"], []).append(r)
    own: dict[int, int] = {}  # id(reading) -> the step it prints, or its ordinal number
    for items in by_worker.values():
        printed = {id(r): r["step"] for r in items if r["step"] is not None}
        if not printed:  # a worker without step lines numbers its ordinal readings
            printed = {id(r): n for n, r in enumerate((r for r in items if r["ordinal"]), start=1)}
        own.update(printed)

    def fill(items: list[dict]) -> dict[int, int]:
        """Nearest earlier step of `items`, or the first one for readings before all steps."""
        known = [own[id(r)] for r in items if id(r) in own]
        if not known:
            return {}
        last, out = known[0], {}
        for r in items:
            last = own.get(id(r), last)
            out[id(r)] = last
        return out

    steps, shared = {}, fill(readings)  # a worker with no step at all takes the source's steps
    for items in by_worker.values():
        steps.update(fill(items) or {id(r): shared[id(r)] for r in items if id(r) in shared})
    merged: dict[tuple, dict] = {}
    nth: Counter = Counter()  # (worker, kind, step, kind of line) -> lines so far
    printed: set[tuple] = set()  # step-bearing lines seen: one printed again with the same values is a repeat
    for r in readings:
        line_kind = (r["step"] is not None, r["ordinal"], frozenset(r["values"]))
        if r["step"] is not None:
            again = (r["worker"], r["kind"], r["step"], line_kind, tuple(sorted(r["values"].items())))
            if again in printed:
                continue
            printed.add(again)
        if id(r) not in steps:  # nothing in the source has a step: a worker's k-th line of a kind is reading k
            nth[(r["worker"], "numbered", line_kind)] += 1
            steps[id(r)] = nth[(r["worker"], "numbered", line_kind)]
        at = (r["worker"], r["kind"], steps[id(r)])
        index = nth[(*at, line_kind)]
        nth[(*at, line_kind)] += 1
        merged[(*at, line_kind, index)] = {
            "worker": r["worker"],
            "kind": r["kind"],
            "step": steps[id(r)],
            "reading": index,
            **{k: v for k, v in r["values"].items() if v is not None},
        }
    return list(merged.values())
