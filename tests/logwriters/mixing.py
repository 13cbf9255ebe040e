"""Deterministic helpers for assembling written lines into one log: a seeded random generator, and the
way torchrun's tee threads interleave several ranks' lines. Items are anything with a ``t`` (seconds)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")


class Timed(Protocol):
    t: float  # when the line was printed


Line = TypeVar("Line", bound=Timed)


def seeded_rng(name: str) -> random.Random:
    """A Random seeded from a name (stable across runs and processes; str hash() is not)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def interleave(rng: random.Random, streams: Sequence[Sequence[Line]], jitter: float = 0.004) -> list[Line]:
    """Merge ranks' line streams like torchrun's tee threads: each rank's order kept, across ranks by
    time plus a small seeded jitter (lines printed within a few ms come out shuffled)."""
    keyed: list[tuple[float, Line]] = []
    for stream in streams:
        last = float("-inf")
        for item in stream:
            # Strictly increasing per stream, so sorting never reorders a rank.
            key = max(item.t + rng.uniform(0.0, jitter), last + 1e-9)
            last = key
            keyed.append((key, item))
    keyed.sort(key=lambda k: k[0])
    return [item for _key, item in keyed]


def interleave_chunks(rng: random.Random, streams: Sequence[Sequence[T]], max_chunk: int = 6) -> list[T]:
    """Merge multi-line bursts (tracebacks) in random runs of 1..max_chunk lines: each rank writes its
    burst at once, the tee threads copy whatever is there when they wake up."""
    queues = [list(s) for s in streams]
    out: list[T] = []
    while any(queues):
        live = [i for i, q in enumerate(queues) if q]
        i = rng.choice(live)
        n = rng.randint(1, max_chunk)
        out.extend(queues[i][:n])
        del queues[i][:n]
    return out
