"""Lines hard-wrapped at a fixed width (a terminal pasted into an issue, a log viewer that breaks
lines at 512 characters) joined back into the lines the program printed.

The longest lines of a source's start give the width W (at least MIN_WIDTH). A line of length W
continues on the next one unless the next one starts the way the source's lines start (`_start`:
its first characters, digits blurred, as seen on any line that does not follow a line of length
W ending mid-text: a line there starts anew, since a wrapped line's last piece is shorter than W).
So step lines that merely share a length are not joined (what follows each is the next ordinary
line), nor is a source where nearly every line would continue another (lines all printed at one
length), nor a terminal's padding (every line W long, the shorter ones filled with blanks, which joining drops;
there a line cut just where a blank was printed cannot be told from a padded one and is not
joined). A source is taken as wrapped when at least MIN_CUTS of its first lines continue. A
joined line keeps the number of its first physical line. A row of a box-drawn table (nvidia-smi's:
`| N/A  41C  P0  312W / 400W |  31211MiB / 81920MiB | ... |`) is printed whole, its border last, and
all its rows share one length: none of them is a cut piece (`_TABLE_ROW`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from memlog.read.richlog import RichRecords, layout_of

MIN_WIDTH = 60  # narrower "wraps" are ordinary short lines
SAMPLE_LINES = 2000  # lines of a source's first piece looked at to decide
START_CHARS = 6  # how much of a line says how it starts
MIN_CUTS = 3  # a long message printed twice is not a wrap
NEAR_WIDTH = 3  # lines this much shorter than W are "just short of it"
PADDED_SHARE = 0.9  # lines of length W in a terminal's padded output
MAX_CONTINUED = 0.8  # a wrap leaves lines that start anew (after each wrapped line's last piece)
ENOUGH_BYTES = 256 * 1024  # a first piece this long (or of SAMPLE_LINES lines) decides for the source
_DIGITS = re.compile(r"\d")
# A line that starts with a border (`|` or `+`, behind at most a launcher's label such as `0: ` or
# `[rank0]:`) and ends with one: a table's row, never cut. (Megatron's `| key: v |` lines start with text.)
_TABLE_ROW = r"^\S{0,24}\s?[|+][-=+ ].*[|+]\s*$"


@dataclass(frozen=True)
class Wrap:
    """How a source was hard-wrapped: at `width`; how its lines start; padded with blanks or not."""

    width: int
    starts: frozenset[str]
    padded: bool

    def may_continue(self, line: bytes) -> bool:
        """Whether a physical line (bytes, no newline) may go on on the next line: a piece is not
        cut after it (whether it does go on is decided with the next line at hand, in `join`)."""
        if len(line) < self.width:  # a character is at least one byte
            return False
        text = line.decode("utf-8", errors="replace").rstrip("\r")
        return len(text) == self.width and re.search(_TABLE_ROW, text) is None

    def settle(self, data: bytes, cut: int, limit: int) -> int:
        """The newline to cut a piece at: before, not after, a line the next line continues (cut
        where it was when that is more than `limit` bytes back: no joined line is that long)."""
        settled = cut
        while settled >= 0:
            start = data.rfind(b"\n", 0, settled) + 1
            if not self.may_continue(data[start:settled]):
                break
            settled = start - 1
            if cut - settled > limit:
                return cut
        return settled

    def join(self, frame: pl.DataFrame) -> pl.DataFrame:
        """(line_no, text) with each cut line joined to the lines it continues on."""
        text = pl.col("text").str.strip_chars_end("\r")
        next_start = text.str.slice(0, START_CHARS).str.replace_all(r"\d", "0").shift(-1)
        cut = (text.str.len_chars() == self.width) & ~next_start.is_in(list(self.starts)).fill_null(True) & ~text.str.contains(_TABLE_ROW)
        if self.padded:  # a blank at the end is the terminal's padding (a cut on a blank is lost)
            cut = cut & ~text.str.contains(r"\s$")
        starts = ~cut.shift(1, fill_value=False)
        joined = (
            frame.with_columns(_line=starts.cum_sum()).group_by("_line", maintain_order=True).agg(pl.col("line_no").first(), text.str.join("")).drop("_line")
        )
        return joined.with_columns(pl.col("text").str.strip_chars_end(" ")) if self.padded else joined


def _start(text: str) -> str:
    """How a line starts, digits blurred: `[rank3]:[titan] 2025` and `[rank5]:[titan] 2024` alike."""
    return _DIGITS.sub("0", text[:START_CHARS])


# Which of some lines a loaded format reads on its own (the engine's parser: ChunkParser.reads_alone).
OwnLines = Callable[[Sequence[str]], Sequence[bool]]


def wrap_of(data: bytes, own_lines: OwnLines | None = None) -> Wrap | RichRecords | None:
    """How the start of a source was hard-wrapped, or None (module docstring); or the records of
    rich's RichHandler, wrapped by it (read/richlog.py). `own_lines`: which lines a format reads on
    their own; when most of the would-be continuations are, the source is not wrapped."""
    lines = data[: 1 << 20].decode("utf-8", errors="replace").split("\n")[:SAMPLE_LINES]
    lines = [line.rstrip("\r") for line in lines]
    if len(lines) < 3:
        return None
    if (rich := layout_of(lines)) is not None:
        return rich
    width = max(len(line) for line in lines)
    if width < MIN_WIDTH:
        return None
    full = [i for i, line in enumerate(lines[:-1]) if len(line) == width and re.search(_TABLE_ROW, line) is None]
    padded = len(full) + 1 >= PADDED_SHARE * len(lines)
    # A terminal's cut piles lines up at exactly W; a format's longest lines spread just below their
    # longest (a step line one digit shorter): lines that reach W no more often than they stop short
    # of it are lines of that length, not a wrap.
    if not padded and 2 * sum(width - NEAR_WIDTH <= len(line) < width for line in lines) >= len(full):
        return None
    # Lines that may be continuations: after a full line (with a terminal's padding, only after
    # one ending mid-text: a padded short line ends in blanks).
    after_cut = {i + 1 for i in full if not (padded and lines[i][-1].isspace())}
    if len(after_cut) > MAX_CONTINUED * len(lines):
        return None  # nearly every line would continue another: lines of one length, not a wrap
    starts = frozenset(_start(line) for i, line in enumerate(lines) if i not in after_cut)
    continued = [lines[i] for i in sorted(after_cut) if _start(lines[i]) not in starts]
    if len(continued) < MIN_CUTS:
        return None
    # A format's lines that are all one length and always followed by one other line (Megatron's
    # iteration line, then its memory line) look cut by length alone: only what the lines say tells
    # them apart. A terminal's cut leaves a piece no format reads as a line of its own.
    if own_lines is not None and 2 * sum(own_lines(continued)) >= len(continued):
        return None
    return Wrap(width, starts, padded)
