"""The shapes a guess is made of: a record pattern (`Pattern`) and the canonical columns it reads
(`Column`), and how a shape's keys are mapped to columns (`columns_of`), for line shapes (guess.py)
and table rows (table.py) alike."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from memlog.base.columns import MEMORY_COLUMNS
from memlog.parse.generic.fields import Field
from memlog.parse.generic.mapping import Meaning, in_memory_block, loss_rank, meaning_of, memory_rank, on_host_line, unit_in_key, words

MIN_REPEATS = 3  # a line shape seen fewer times is not a series


@dataclass
class Column:
    """One canonical column of a pattern: the key it comes from and how it is read."""

    column: str
    key: str
    meaning: Meaning
    form: str
    quote: str
    printed_unit: bool  # some line printed a unit after the value
    unit: str | None  # the unit the values are in when none is printed (from the key, the line, or their size)
    unit_guessed: bool
    running_max: bool
    position: int | None = None  # a table's column index
    text: str = ""
    of: str = ""  # form "total": the key of the value the column's number is the total of


@dataclass
class Pattern:
    name: str
    head: str
    counter: int | None
    columns: list[Column]
    lines: list[tuple[int, str]]  # (index in sample, text after prefix) of its lines
    inherit: bool = False
    ordinal: bool = False
    interleaved: int | None = None
    table: tuple[str, list[str]] | None = None  # (separator, header words) of a table's rows
    first_epoch: int = 0  # the number of the log's first epoch, for a counter within an epoch
    bar: bool = False  # a table's rows are a progress bar redrawn within each epoch (table.py)
    # The devices its lines name, one a line (fields.DEVICE), when they are its workers (guess._devices).
    devices: list[str] = field(default_factory=list)


def magnitude_unit(values: list[float], host: bool) -> str:
    """A unit for memory values printed without one: bytes, MiB or GiB by their size."""
    finite = sorted(v for v in values if v == v and v not in (float("inf"), float("-inf")))
    median = finite[len(finite) // 2] if finite else 0.0
    if median > 4 * 1024**2:
        return "B"
    if median > (4096 if host else 512):
        return "MiB"
    return "GiB"


def running_max(values: list[float]) -> bool:
    finite = [v for v in values if v == v]
    return len(finite) >= 2 and all(b >= a for a, b in zip(finite, finite[1:]))


def _context(text: str, f: Field) -> str:
    """The words before a line's fields (`Memory info of GPU`), for keys that only say `current`."""
    first = re.search(r"\d", text)
    return text[: first.start()] if first else ""


def columns_of(
    lines: list[str], per_line: list[list[Field]], counter_span: list[tuple[int, int] | None], header: str | None = None, steps: list[int | None] | None = None
) -> list[Column]:
    """Map the shape's keys to canonical columns: one key per column, the plainest. `header`: the
    line above the shape's lines, for sizes whose key says nothing but the header does. A key is
    read when half the shape's lines print it, or half its steps (`steps`, each line's): a block
    prints one key a line, several lines a step (Galvatron's `iter_3_after_forward: X MB`)."""
    by_key: dict[str, list[tuple[str, Field]]] = defaultdict(list)
    at: dict[str, set[int]] = defaultdict(set)
    for n, (text, found, span) in enumerate(zip(lines, per_line, counter_span)):
        for f in found:
            if span and f.start < span[1] and f.end > span[0]:
                continue  # the counter itself
            by_key[f.key].append((text, f))
            step = steps[n] if steps else None
            if step is not None:
                at[f.key].add(step)
    all_steps = {s for s in steps or () if s is not None}
    candidates: dict[str, list[tuple[tuple, Column]]] = defaultdict(list)
    for key, seen in by_key.items():
        if len(seen) < MIN_REPEATS or (len(seen) < 0.5 * len(lines) and len(at[key]) < max(MIN_REPEATS, 0.5 * len(all_steps))):
            continue
        text0, f0 = seen[0]
        printed = [f.unit for _, f in seen if f.unit]
        if "%" in printed:
            continue
        key_unit = unit_in_key(f0.of or key)
        line_unit = None
        meaning = meaning_of(key, printed[0] if printed else key_unit)
        if f0.form == "total" and (meaning is None or meaning.role != "capacity"):
            continue  # only a memory value's total is read: the size of the device or host it is on
        if meaning is None and set(words(key)) <= {"current", "peak", "max", "used", "allocated", "reserved", "total"}:
            context = _context(text0, f0)
            meaning = meaning_of(f"{context} {key}", printed[0] if printed else None)
        if meaning is None and printed:
            meaning = in_memory_block(key, printed[0], header)
        if meaning is None:
            continue
        meaning = on_host_line(meaning, key, {f.key for f in per_line[lines.index(text0)]})
        values = [f.value for _, f in seen]
        running = meaning.role == "memory" and meaning.peak and running_max(values)
        column = meaning.column(running)
        unit, guessed = None, False
        if column in MEMORY_COLUMNS or meaning.role == "capacity":
            unit_match = re.search(r"\((?P<u>[KMGT]i?B|bytes)\)", _context(text0, f0))
            line_unit = unit_match["u"] if unit_match else None
            unit = printed[0] if printed else key_unit or line_unit
            if unit is None:
                unit, guessed = magnitude_unit(values, meaning.host), True
        col = Column(column, key, meaning, f0.form, f0.quoted, bool(printed), unit, guessed, running, of=f0.of)
        col.text = meaning.describe(key, unit, guessed, running)
        rank = loss_rank(key) if meaning.role == "loss" else memory_rank(meaning, key)
        candidates[column].append((rank, col))
    return [min(options, key=lambda o: o[0])[1] for options in candidates.values()]
