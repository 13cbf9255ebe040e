"""Records of Python's logging through rich's RichHandler, joined back into one line each.

Off a terminal RichHandler lays a record out at the console's width (80 columns unless COLUMNS says
otherwise): `[%x %X]` (blank when the second is the previous record's), the level padded to 8, the
message wrapped at word ends, and `file.py:NN` right-aligned on the record's first line; the wrapped
rest of the message goes on lines indented to the message's column. A key and its value then often
sit on two lines (`... | mem_reserved` / `22.52 GB | ...`). The record is read as the one line the
program logged: the first line without the path, its continuations after it, one blank apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

# A record's first line: the time column (or its blanks), a level, the message's first word.
HEAD = re.compile(r"^(?:\[[^\]\n]{4,40}\]| {8,40}) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +(?=\S)")
PATH = r"\s+[\w.-]+\.py:\d+\s*$"  # RichHandler's `file.py:NN` at the end of a record's first line
MIN_RECORDS = 3  # wrapped records seen before a source is taken as rich's


@dataclass(frozen=True)
class RichRecords:
    """A source laid out by RichHandler: its messages start at column `indent`."""

    indent: int

    def _continues(self, line: str) -> bool:
        return len(line) > self.indent and line[: self.indent].isspace() and not line[self.indent].isspace()

    def settle(self, data: bytes, cut: int, limit: int) -> int:
        """The newline to cut a piece at: before the last record's first line, whose continuation
        lines may be in the next block (source.LineCutter); where it was past `limit` bytes back."""
        end = cut
        while end > 0 and cut - end <= limit:
            start = data.rfind(b"\n", 0, end) + 1
            if HEAD.match(data[start:end].decode("utf-8", errors="replace")):
                return start - 1 if start > 0 else cut
            end = start - 1
        return cut

    def join(self, frame: pl.DataFrame) -> pl.DataFrame:
        """(line_no, text) with each record's continuation lines joined to its first line."""
        text = pl.col("text").str.strip_chars_end(" \r")
        pad = " " * self.indent
        continued = text.str.starts_with(pad) & ~text.str.slice(self.indent, 1).str.contains(r"^\s?$")
        head = pl.col("text").str.contains(HEAD.pattern.replace("(?=\\S)", ""))
        record = (~continued).cum_sum()
        piece = pl.when(continued).then(text.str.strip_chars_start(" ")).when(head).then(text.str.replace(PATH, "")).otherwise(text)
        return (
            frame.with_columns(_record=record, _piece=piece)
            .group_by("_record", maintain_order=True)
            .agg(pl.col("line_no").first(), pl.col("_piece").str.join(" ").alias("text"))
            .drop("_record")
        )


def layout_of(lines: list[str]) -> RichRecords | None:
    """RichHandler's layout when the source's first lines are laid out so (module docstring)."""
    indents = [m.end() for line in lines if (m := HEAD.match(line))]
    if len(indents) < MIN_RECORDS:
        return None
    indent = max(set(indents), key=indents.count)
    layout = RichRecords(indent)
    wrapped = sum(1 for a, b in zip(lines, lines[1:]) if HEAD.match(a) and layout._continues(b))
    ours = sum(1 for line in lines if HEAD.match(line) or layout._continues(line))
    return layout if wrapped >= MIN_RECORDS and ours >= 0.8 * sum(1 for line in lines if line.strip()) else None
