"""Wording shared by rules, reports and renderers: how a message names workers, sizes, durations
and the x axis. One place, so that a finding and a chart say "ranks 0-3" and "9.50 GiB" alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def step_word(series: Iterable) -> str:
    """What the x axis of these series counts, for messages: "reading" when every one is numbered by
    reading order (memory lines without a step, records.py), else "step"."""
    series = list(series)
    return "reading" if series and all(getattr(s, "ordinal", False) for s in series) else "step"


# A series after a restart is labelled `rank0 (segment 2)` (memlog/judge/context.py).
_SEGMENT = re.compile(r"^(?P<worker>.*) \(segment (?P<segment>\d+)\)$")


def workers_phrase(labels: list[str]) -> str:
    """'rank0-3, rank6' style: compact runs of consecutive ranks, other workers listed. Series of
    the same restart segments of each worker are said once: 'ranks 0-3 (segments 1 and 2)'."""
    segments: dict[str, set[int]] = {}
    for label in labels:
        found = _SEGMENT.match(label)
        worker, segment = (found["worker"], int(found["segment"])) if found else (label, 1)
        segments.setdefault(worker, set()).add(segment)
    alike: dict[tuple[int, ...], list[str]] = {}
    for worker, numbers in segments.items():
        alike.setdefault(tuple(sorted(numbers)), []).append(worker)
    return ", ".join(_workers(workers) + ("" if numbers == (1,) else f" ({_segments(list(numbers))})") for numbers, workers in alike.items())


def _segments(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"segment {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 2:
        return f"segments {numbers[0]}-{numbers[-1]}"
    return f"segments {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


def _workers(labels: list[str]) -> str:
    ranks, others = [], []
    for label in labels:
        if label.startswith("rank") and label[4:].isdigit():
            ranks.append(int(label[4:]))
        else:
            others.append(label)
    runs: list[tuple[int, int]] = []
    for r in sorted(set(ranks)):
        if runs and runs[-1][1] == r - 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    parts = [f"rank {a}" if a == b else f"ranks {a}-{b}" for a, b in runs]
    return ", ".join(parts + others[:6] + ([f"and {len(others) - 6} more"] if len(others) > 6 else []))


# Characters of a log line a message quotes.
QUOTED = 160


def quote(text: str) -> str:
    """A log line as a message quotes it: blanks collapsed, cut at QUOTED characters, in backticks."""
    text = " ".join(str(text).split())
    return f"`{text[:QUOTED]}{'...' if len(text) > QUOTED else ''}`"


def gib(value: float) -> str:
    if abs(value) >= 1e9:  # only an absurd reading is this large: say it without 300 digits
        return f"{value:.3g} GiB"
    return f"{value:.2f} GiB" if abs(value) >= 0.1 or value == 0 else f"{value * 1024:.1f} MiB"


def rounded(value: float | None, digits: int = 4) -> float | None:
    """Evidence numbers: finite and short, or None."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(value, digits)


def duration(seconds: float) -> str:
    """'~3.2 h' style, for messages."""
    if seconds < 90:
        return f"~{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"~{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"~{seconds / 3600:.1f} h"
    return f"~{seconds / 86400:.1f} days"
