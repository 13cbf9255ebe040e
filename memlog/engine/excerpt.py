"""The log lines behind the findings, read back from the files by line number for the reports.

Rules cite evidence as (source, line); the issue report quotes those lines. They are read again
after the analysis (the first pass keeps no raw text: that would cost memory on a 10 GB log),
with the same reader, so gzip and line numbering agree with the parse. Bounded: at most
`max_lines` lines, each cut to `max_chars`, and reading a file stops after its last wanted line.
Standard input and FIFOs cannot be read twice: they are read back from the copy kept while they
were read (memlog/read/spool.py); without one, the text of the parsed events stands in.
"""

from __future__ import annotations

import os
import stat

import polars as pl

from memlog.base.errors import MemlogError
from memlog.parse.unwrap import strip_escapes
from memlog.read import spool
from memlog.read.hardwrap import OwnLines
from memlog.read.source import Source, read_chunks
from memlog.report.report import Report

MAX_LINES = 40
MAX_CHARS = 300


def evidence_lines(report: Report, max_lines: int = MAX_LINES) -> list[tuple[str, int]]:
    """The (source, line) anchors of the findings, most severe finding first, without repeats."""
    wanted: dict[tuple[str, int], None] = {}
    for finding in report.findings:
        for anchor in finding.lines:
            wanted.setdefault(anchor, None)
    return list(wanted)[:max_lines]


def attach_log_lines(report: Report, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS, own_lines: OwnLines | None = None) -> None:
    """Fill `report.log_lines` with the text of the evidence lines (ANSI escapes removed, cut).
    `own_lines`: the reading's (hardwrap.wrap_of), so that lines are joined as they were read."""
    by_source: dict[str, set[int]] = {}
    for source, line in evidence_lines(report, max_lines):
        by_source.setdefault(source, set()).add(line)
    event_text = {(e.source, e.line_no): e.text for e in report.events}
    for name, lines in by_source.items():
        found: dict[int, str] = {}
        # Only a regular file can be read a second time: a FIFO or standard input is read back
        # from the copy kept while it was read (memlog/read/spool.py), else the event texts stand in.
        path = name if name != "<stdin>" and _regular_file(name) else spool.copy_of(name)
        if path is not None:
            try:
                found = _read_lines(str(path), lines, own_lines)
            except (MemlogError, OSError):
                found = {}  # moved or deleted since: fall back to what the parse kept
        for line in lines:
            text = found.get(line, event_text.get((name, line)))
            if text is not None:
                report.log_lines[(name, line)] = _cut(text, max_chars)


def _regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _read_lines(path: str, wanted: set[int], own_lines: OwnLines | None) -> dict[int, str]:
    last = max(wanted)
    keep = sorted(wanted)
    found: dict[int, str] = {}
    for chunk in read_chunks(Source(path), own_lines=own_lines):  # lines joined as they were read
        hits = chunk.filter(pl.col("line_no").is_in(keep)).with_columns(strip_escapes(pl.col("text")).alias("text"))
        for line_no, text in hits.iter_rows():
            found.setdefault(line_no, text)  # a `\r`-split line keeps its first piece
        if chunk.height and chunk["line_no"][-1] >= last:
            break
    return found


def _cut(text: str, max_chars: int) -> str:
    text = text.rstrip()
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
