"""Shared building blocks for the sample-log generators.

Everything here is deterministic: randomness comes only from ``seeded_rng`` and
time only from ``Clock`` (a fixed start plus explicit offsets), so building a
sample twice gives the same bytes.

A sample is assembled as a list of ``Emit`` items (one physical output line
each, already carrying every prefix), then ``LogDoc.to_sample`` numbers the
lines and turns the annotations attached to items into ground truth.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable, Sequence

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
# ANSI colours (torchtitan/tools/utils.py ``class Color``; reset is 39, not 0)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Palette:
    red: str
    green: str
    yellow: str
    blue: str
    magenta: str
    cyan: str
    white: str
    reset: str
    orange: str
    turquoise: str


COLOR = Palette(
    red="\033[31m",
    green="\033[32m",
    yellow="\033[33m",
    blue="\033[34m",
    magenta="\033[35m",
    cyan="\033[36m",
    white="\033[37m",
    reset="\033[39m",
    orange="\033[38;2;180;60;0m",  # 24-bit, added 2025-06-25
    turquoise="\033[38;2;54;234;195m",  # 24-bit, added 2025-07-15
)

# torchtitan's NoColor: same attributes, all empty strings.
NO_COLOR = Palette(*([""] * 10))


# --------------------------------------------------------------------------
# Randomness and time
# --------------------------------------------------------------------------


def seeded_rng(name: str) -> random.Random:
    """A Random seeded from a name (stable across runs; str hash() is not)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


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
        dt = self.at(t)
        return dt.strftime("%Y-%m-%d %H:%M:%S") + f",{dt.microsecond // 1000:03d}"

    def glog(self, t: float, level: str) -> str:
        """torch.distributed's glog-style head: ``W0318 10:02:11.530000``.

        Real torchrun logs show the microseconds as milliseconds * 1000.
        """
        dt = self.at(t)
        return f"{level}{dt:%m%d %H:%M:%S}.{dt.microsecond // 1000:03d}000"

    def c10(self, t: float, level: str, nanos: int) -> str:
        """c10 (C++) warning head: ``W318 10:03:31.612834271`` (month not padded)."""
        dt = self.at(t)
        mmdd = dt.month * 100 + dt.day
        ns = (dt.microsecond // 1000) * 1_000_000 + nanos % 1_000_000
        return f"{level}{mmdd} {dt:%H:%M:%S}.{ns:09d}"

    def elastic(self, t: float) -> str:
        """torchelastic failure time: ``2025-03-18_10:03:32``."""
        return self.at(t).strftime("%Y-%m-%d_%H:%M:%S")


# --------------------------------------------------------------------------
# Prefixes
# --------------------------------------------------------------------------


def torchrun_prefix(rank: int) -> str:
    """tail_log.py header ``f"[{name}{local_rank}]:"`` with --role rank: no space."""
    return f"[rank{rank}]:"


def excepthook_prefix(rank: int) -> str:
    """Prefix on Python tracebacks raised under torch.distributed: with a space.

    Under ``torchrun --tee`` it stacks behind the tee header:
    ``[rank0]:[rank0]: Traceback (most recent call last):``.
    """
    return f"[rank{rank}]: "


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


def interleave(rng: random.Random, streams: Sequence[Sequence[Emit]], jitter: float = 0.004) -> list[Emit]:
    """Merge several ranks' line streams the way torchrun's tee threads do.

    Each rank's own order is kept. Across ranks lines are ordered by time plus
    a small seeded jitter, so near-simultaneous lines (every rank printing its
    step line within a few ms) come out in a shuffled-looking order.
    """
    keyed: list[tuple[float, Emit]] = []
    for stream in streams:
        last = float("-inf")
        for item in stream:
            # Strictly increasing per stream, so sorting never reorders a rank.
            key = max(item.t + rng.uniform(0.0, jitter), last + 1e-9)
            last = key
            keyed.append((key, item))
    keyed.sort(key=lambda k: k[0])
    return [item for _key, item in keyed]


def interleave_chunks(rng: random.Random, streams: Sequence[Sequence[Emit]], max_chunk: int = 6) -> list[Emit]:
    """Merge multi-line bursts (tracebacks) in random chunks of 1..max_chunk lines.

    Each rank writes its traceback in one go but the tee threads copy whatever
    is available when they wake up, so bursts from different ranks interleave
    in runs of lines.
    """
    queues = [list(s) for s in streams]
    out: list[Emit] = []
    while any(queues):
        live = [i for i, q in enumerate(queues) if q]
        i = rng.choice(live)
        n = rng.randint(1, max_chunk)
        out.extend(queues[i][:n])
        del queues[i][:n]
    return out


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
