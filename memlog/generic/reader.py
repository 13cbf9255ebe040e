"""The generic reader's seam with the engine: one `SourceGuesser` per source (memlog/api.py).

It only sees a source's chunks while no format spec has claimed a line of it: the first chunk a
spec reads makes it step aside for good, and what it read of that source is dropped, so a log a
spec reads costs it nothing beyond that first chunk. Until then it holds up to HOLD_CHUNKS chunks,
learns a guess from their lines (guess.py), then reads the held chunks and every later one
through the spec it guessed, like any spec. A structured file (trainer_state.json) is read whole
by structured.py instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from memlog.formats import FormatSpec, all_logger_prefixes, spec_from_mapping
from memlog.generic.guess import SAMPLE_LINES, Guess, guess, spec_path, to_spec
from memlog.generic.structured import StructuredFile
from memlog.parse import ChunkParser, Matches
from memlog.unwrap import Unwrapper

HOLD_CHUNKS = 4  # chunks held while too few candidate lines were seen to guess
GENERIC = "generic"  # the format name the guessed records carry


@dataclass
class Guessed:
    """What coverage says of a source the generic reader read."""

    source: str
    reader: str
    mapping: str
    columns: list[dict] = field(default_factory=list)
    weak: str | None = None
    lines: int = 0
    keys: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        found = {"source": self.source, "reader": self.reader, "mapping": self.mapping, "columns": self.columns}
        if self.weak:
            found["weak"] = self.weak
        return found


def guessed_spec(result: Guess, name: str = GENERIC) -> FormatSpec:
    return spec_from_mapping(to_spec(result, name), spec_path(name))


class SourceGuesser:
    def __init__(self, source: str, specs: list[FormatSpec], wrappers) -> None:
        self.source = source
        self.prefixes = all_logger_prefixes(specs)
        self.wrappers = wrappers
        self.unwrap = Unwrapper(self.prefixes, wrappers)
        self.held: list[pl.DataFrame] = []
        self.sample: list[str] = []
        self.guess: Guess | None = None
        self.parser: ChunkParser | None = None
        self.matches: list[pl.DataFrame] = []
        self.structured: StructuredFile | None = None
        self.first = True

    def feed(self, lines: pl.DataFrame, skip: set[int]) -> list[pl.DataFrame]:
        """A chunk no spec claimed a line of (`skip`: line numbers of its events). Returns the
        record frames read so far that are ready."""
        if skip:
            lines = lines.filter(~pl.col("line_no").is_in(list(skip)))
        if self.first:
            self.first = False
            if StructuredFile.detect(lines):
                self.structured = StructuredFile(self.source)
        if self.structured is not None:
            self.structured.feed(lines)
            return []
        if self.parser is not None:
            return self._read(lines)
        self.held.append(lines)
        candidates = self.unwrap(lines.filter(pl.col("text").str.contains(r"\d")).head(SAMPLE_LINES - len(self.sample)))
        self.sample += candidates["text"].to_list()
        if len(self.sample) >= SAMPLE_LINES or len(self.held) >= HOLD_CHUNKS:
            return self._decide()
        return []

    def _decide(self) -> list[pl.DataFrame]:
        self.guess = guess(self.sample)
        held, self.held, self.sample = self.held, [], []
        if not self.guess.ok:
            return []
        carrier = FormatSpec("_prefixes", "", "", spec_path("_prefixes"), tuple(self.prefixes), (), (), ())
        self.parser = ChunkParser([carrier, guessed_spec(self.guess)], wrappers=self.wrappers)
        return [frame for chunk in held for frame in self._read(chunk)]

    def _read(self, lines: pl.DataFrame) -> list[pl.DataFrame]:
        assert self.parser is not None
        matches: Matches = self.parser(lines)
        return matches.records

    def finish(self) -> tuple[list[pl.DataFrame], Guessed | None]:
        if self.structured is not None:
            frames, described = self.structured.finish()
            return frames, described
        frames = self._decide() if self.guess is None else []
        if self.parser is not None:
            frames += self.parser.finish_source().records
        if self.guess is None:
            return frames, None
        if not self.guess.ok:
            if self.guess.weak:
                return [], Guessed(self.source, GENERIC, "", weak=self.guess.weak, keys=sorted(set(self.guess.keys_seen))[:12])
            return [], None
        return frames, Guessed(self.source, GENERIC, self.guess.describe(), self.guess.mapping())
