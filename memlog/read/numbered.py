"""Lines a viewer numbered: `cat -n`, `nl`, `less -N` or an editor's gutter copied along with the
text (`     1\ttext`, `      1 text`). A source is numbered when nearly all of its first lines start
with a number and the numbers count up one by one; then that number (and the tab or space after
it) is taken off every line. Counting up is the proof: a table whose rows start with a pid and a
tab (Ray's top memory users) or srun's `12: ` labels do not count up line by line.
"""

from __future__ import annotations

import re

import polars as pl

SAMPLE_LINES = 200  # non-empty lines of a source's start looked at
MIN_LINES = 5  # fewer lines do not show a count
NUMBERED_SHARE = 0.95  # of those lines, starting with a number
COUNTING_SHARE = 0.9  # of consecutive numbered lines, the second one more than the first
_NUMBER = re.compile(rb"^ *(\d{1,9})(?:\t| )")
STRIP = r"^ *\d{1,9}(?:\t| )"  # the same, for polars


def numbered(data: bytes) -> bool:
    """Whether the start of a source (bytes of whole lines) was numbered by a viewer."""
    lines = [line for line in data[: 1 << 20].split(b"\n")[: 4 * SAMPLE_LINES] if line.strip()][:SAMPLE_LINES]
    if len(lines) < MIN_LINES:
        return False
    numbers = [int(m.group(1)) for line in lines if (m := _NUMBER.match(line))]
    if len(numbers) < NUMBERED_SHARE * len(lines):
        return False
    counting = sum(b == a + 1 for a, b in zip(numbers, numbers[1:]))
    return counting >= COUNTING_SHARE * (len(numbers) - 1)


def unnumbered(text: pl.Expr) -> pl.Expr:
    return text.str.replace(STRIP, "")
