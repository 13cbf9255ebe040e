"""Records of Python's logging through rich's RichHandler, joined back into one line each.

Off a terminal RichHandler lays a record out at the console's width (80 columns unless COLUMNS says
otherwise): `[%x %X]` (blank when the second is the previous record's), the level padded to 8, the
message wrapped at word ends, and `file.py:NN` right-aligned on the record's first line; the wrapped
rest of the message goes on lines indented to the message's column. A key and its value then often
sit on two lines (`... | mem_reserved` / `22.52 GB | ...`). The record is read as the one line the
program logged: the first line without the path, its continuations after it, one blank apart.

A launcher may label every line it relays (`[rank0]: `, ` 0: `, a kubectl timestamp): the layout
then starts after that label, and a continuation line belongs to the last record of the same label
(timestamps in it aside), however the lines of several ranks interleave. Nothing here knows the
launchers' labels (those are the parse stage's wrappers): a label is whatever comes before the
layout, found from where the layout is.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import polars as pl

_LEVEL = r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)(?P<pad> +)\S"
# A record's first line: a label (lazily, as short as it can be), the time column (or its blanks),
# a level, the message's first character. In the dialect both Python's `re` and polars' share.
HEAD = rf"^(?P<label>.*?)(?P<time>\[[^\]\n]{{4,40}}\]| {{8,40}}) {_LEVEL}"
_HEAD = re.compile(HEAD)
PATH = r"\s+[\w.-]+\.py:\d+\s*$"  # RichHandler's `file.py:NN` at the end of a record's first line
# Times in a label (kubectl's and journald's) differ from line to line of one stream: left out of
# what tells the streams apart.
TIMES = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?Z?|\d\d:\d\d:\d\d(?:[.,]\d+)?"
_TIMES = re.compile(TIMES)
MIN_RECORDS = 3  # wrapped records seen before a source is taken as rich's
BACK_LINES = 256  # lines looked back over for the records still open where a piece is cut
MIN_REACH = 4  # a stream's last line this close to a cut may have its record go on after it


def _stream(label: str) -> str:
    return _TIMES.sub("T", label)


@dataclass(frozen=True)
class RichRecords:
    """A source laid out by RichHandler: its messages start `indent` columns after the layout's start."""

    indent: int

    def _continuation(self) -> re.Pattern[str]:
        # A label (lazily), exactly `indent` blanks, the message's next words.
        return re.compile(self._continuation_regex())

    def _continuation_regex(self) -> str:
        return rf"^(?P<label>.*?) {{{self.indent}}}(?P<rest>\S.*)$"

    def kind(self, line: str, continuation: re.Pattern[str] | None = None) -> tuple[str, str] | None:
        """("head" or "more", the line's stream) for a record's first line or a continuation line;
        None for any other line."""
        head = _HEAD.match(line)
        if head is not None:
            start = len(head["label"]) + len(head["time"]) + 1 + len(head["level"]) + len(head["pad"]) - self.indent
            if start >= 0:
                return "head", _stream(line[:start])
        more = (continuation or self._continuation()).match(line)
        return ("more", _stream(more["label"])) if more is not None else None

    def settle(self, data: bytes, cut: int, limit: int) -> int:
        """The newline to cut a piece at (source.LineCutter): where no record is cut in two, each
        stream's last record taken as going on in the next block; found among the last BACK_LINES
        lines and `limit` bytes, else the cut is left where it was."""
        continuation = self._continuation()
        lines: list[tuple[int, tuple[str, str] | None]] = []  # (where the line starts, its kind), last first
        end = cut
        while end > 0 and len(lines) < BACK_LINES and cut - end <= limit:
            start = data.rfind(b"\n", 0, end) + 1
            lines.append((start, self.kind(data[start:end].decode("utf-8", errors="replace").rstrip("\r"), continuation)))
            end = start - 1
        lines.reverse()
        # A record spans from its first line to its last; one still open at the window's start or
        # end spans beyond it. A cut before line i is good when no record spans across it.
        first_of: dict[str, int] = {}  # each stream's open record: the index of its first line (-1: before the window)
        spans: list[tuple[int, int]] = []  # (index of a record's first line, of its last line)
        last: dict[str, int] = {}
        gap = 1  # the most lines of other streams seen between two lines of one record, plus one
        for i, (_, found) in enumerate(lines):
            if found is None:
                continue
            what, stream = found
            if what == "head":
                if stream in first_of:
                    spans.append((first_of[stream], last[stream]))
                first_of[stream] = i
            elif stream not in first_of:
                first_of[stream] = -1
            else:
                gap = max(gap, i - last[stream])
            last[stream] = i
        # Each stream's last record may go on in the next block; where no cut is left so, only those
        # whose last line is as near the cut as a record's lines lie apart (not a rank that stopped
        # logging after a one-line record at the window's start).
        reach = max(MIN_REACH, 2 * gap)
        for near in (len(lines), reach):
            ends = [(first, len(lines) if len(lines) - last[stream] <= near else last[stream]) for stream, first in first_of.items()]
            for i in range(len(lines), 0, -1):
                if not any(first < i <= final for first, final in spans + ends):
                    return cut if i == len(lines) else lines[i][0] - 1
            if end <= 0 and near == len(lines) and cut <= limit:
                return -1  # a record open since the first line held: all of it waits for the next block
        return cut

    def join(self, frame: pl.DataFrame) -> pl.DataFrame:
        """(line_no, text) with each record's continuation lines joined to its first line (its
        label's last record's, when several streams interleave)."""
        text = pl.col("text").str.strip_chars_end(" \r")
        # (each regex run once: an expression used twice is evaluated twice)
        frame = frame.with_columns(_text=text).with_columns(
            _h=pl.col("_text").str.extract_groups(HEAD), _m=pl.col("_text").str.extract_groups(self._continuation_regex())
        )
        head, more = pl.col("_h").struct, pl.col("_m").struct
        start = sum(head.field(g).str.len_chars() for g in ("label", "time", "level", "pad")) + 1 - self.indent
        frame = frame.with_columns(_start=start).with_columns(_head=head.field("label").is_not_null() & (pl.col("_start") >= 0))
        frame = frame.with_columns(_more=~pl.col("_head") & more.field("label").is_not_null())
        label = pl.when(pl.col("_head")).then(pl.col("_text").str.slice(0, pl.col("_start"))).when(pl.col("_more")).then(more.field("label"))
        frame = frame.with_columns(
            _stream=label.str.replace_all(TIMES, "T"),
            _piece=pl.when(pl.col("_head"))
            .then(pl.col("_text").str.replace(PATH, ""))
            .when(pl.col("_more"))
            .then(more.field("rest"))
            .otherwise(pl.col("_text")),
        ).drop("_h", "_m", "_text", "_start")
        # Each line of a stream belongs to the stream's last record so far; a line of no record, or
        # a continuation with no first line before it in the piece, stands alone.
        streams = frame["_stream"].drop_nulls().unique()
        record = pl.col("_head").cast(pl.Int64).cum_sum()
        frame = frame.with_columns(_record=record.over("_stream") if len(streams) > 1 else record)
        joined = (pl.col("_head") | pl.col("_more")) & (pl.col("_record") > 0)
        frame = frame.with_columns(_group=pl.when(joined).then(pl.col("_stream").cast(pl.Categorical).to_physical()).otherwise(-1))
        frame = frame.with_columns(_record=pl.when(joined).then(pl.col("_record")).otherwise(-pl.col("line_no")))
        return (
            frame.group_by("_group", "_record", maintain_order=True)
            .agg(pl.col("line_no").first(), pl.col("_piece").str.join(" ").alias("text"))
            .drop("_group", "_record")
        )


def layout_of(lines: list[str]) -> RichRecords | None:
    """RichHandler's layout when the source's first lines are laid out so (module docstring): the
    message's column after the time column's start, from the first lines that print a time."""
    starts = [len(m["time"]) + 1 + len(m["level"]) + len(m["pad"]) for line in lines if (m := _HEAD.match(line)) and m["time"].startswith("[")]
    if len(starts) < MIN_RECORDS:
        return None
    layout = RichRecords(Counter(starts).most_common(1)[0][0])
    continuation = layout._continuation()
    kinds = [layout.kind(line, continuation) for line in lines]
    last: dict[str, str] = {}
    wrapped = 0
    for found in kinds:
        if found is None:
            continue
        what, stream = found
        wrapped += what == "more" and last.get(stream) == "head"
        last[stream] = what
    ours = sum(1 for found in kinds if found is not None)
    return layout if wrapped >= MIN_RECORDS and ours >= 0.8 * sum(1 for line in lines if line.strip()) else None
