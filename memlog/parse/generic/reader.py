"""The generic reader's seam with the engine: one `SourceGuesser` per source (memlog/engine/api.py).

It only sees a source's chunks while no format spec has claimed a line of it: the first chunk a
spec reads makes it step aside for good, and what it read of that source is dropped, so a log a
spec reads costs it nothing beyond that first chunk. Until then it holds up to HOLD_CHUNKS chunks,
learns a guess from their lines (guess.py), then reads the held chunks and every later one
through the spec it guessed, like any spec. A structured file (trainer_state.json) is read whole
by structured.py instead.
"""

from __future__ import annotations

import polars as pl

from memlog.parse.chunks import ChunkParser, Matches
from memlog.parse.formats import FormatSpec, all_logger_prefixes, spec_from_mapping
from memlog.parse.generic.guess import SAMPLE_LINES, Guess, guess, spec_path, to_spec
from memlog.parse.generic.guessed import Guessed
from memlog.parse.generic.structured import StructuredFile
from memlog.parse.unwrap import Unwrapper
from memlog.tables.records import read_values

HOLD_CHUNKS = 4  # chunks held while too few candidate lines were seen to guess
GENERIC = "generic"  # the format name the guessed records carry


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
        self.sample_lines: list[int] = []  # the line number of each sample line
        self.guess: Guess | None = None
        self.parser: ChunkParser | None = None
        self.matches: list[pl.DataFrame] = []
        self.structured: StructuredFile | None = None
        self.first = True

    def feed(self, lines: pl.DataFrame, skip: set[int]) -> list[pl.DataFrame]:
        """A chunk no spec claimed a line of (`skip`: line numbers of its events). Returns the
        record frames read so far that are ready."""
        lines = self.unwrap.with_line_prefixes(lines)  # (the parser's scan did it already, for most callers)
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
        candidates = self.unwrap(lines.filter(pl.col("text").str.contains(r"\S")).head(SAMPLE_LINES - len(self.sample)))
        self.sample += candidates["text"].to_list()
        self.sample_lines += candidates["line_no"].to_list()
        if len(self.sample) >= SAMPLE_LINES or len(self.held) >= HOLD_CHUNKS:
            return self._decide()
        return []

    def claimed(self, line_nos: set[int]) -> None:
        """Lines an event read only once the source ended (a message still open in its last chunk):
        no lines to guess from, as the events of earlier chunks are not (`feed`'s `skip`)."""
        if self.guess is not None or not line_nos:
            return
        keep = [i for i, n in enumerate(self.sample_lines) if n not in line_nos]
        self.sample, self.sample_lines = [self.sample[i] for i in keep], [self.sample_lines[i] for i in keep]
        self.held = [chunk.filter(~pl.col("line_no").is_in(list(line_nos))) for chunk in self.held]

    def file_replaced(self) -> None:
        """The file was cut or replaced and is read again from its start: a JSON document read so
        far gives way to the new one (its lines are read as they come, as any log's are)."""
        if self.structured is not None:
            self.structured = StructuredFile(self.source)

    def provisional(self) -> tuple[list[pl.DataFrame], Guessed | None]:
        """What a guess on the sample gathered so far reads of the chunks held, without deciding (a
        source still being written, judged before its end): the guess is made again as lines come,
        and for good only when the sample is full or the source ends, as for a whole read, so that
        watch ends where analyze does."""
        if self.guess is not None or self.structured is not None or not self.sample:
            return [], None
        trial = guess(self.sample)
        if not trial.ok:
            return [], self._said(trial)
        parser = self._parser(trial)
        frames = [frame for chunk in self.held for frame in evaluations_apart(parser(chunk).records)]
        return frames + evaluations_apart(parser.finish_source().records), self._said(trial)

    def _decide(self) -> list[pl.DataFrame]:
        self.guess = guess(self.sample)
        held, self.held, self.sample, self.sample_lines = self.held, [], [], []
        if not self.guess.ok:
            return []
        self.parser = self._parser(self.guess)
        return [frame for chunk in held for frame in self._read(chunk)]

    def _parser(self, result: Guess) -> ChunkParser:
        carrier = FormatSpec("_prefixes", "", "", spec_path("_prefixes"), tuple(self.prefixes), (), (), ())
        return ChunkParser([carrier, guessed_spec(result)], wrappers=self.wrappers)

    def _read(self, lines: pl.DataFrame) -> list[pl.DataFrame]:
        assert self.parser is not None
        matches: Matches = self.parser(lines)
        return evaluations_apart(matches.records)

    def finish(self) -> tuple[list[pl.DataFrame], Guessed | None]:
        if self.structured is not None:
            frames, described = self.structured.finish()
            return frames, described
        frames = self._decide() if self.guess is None else []
        if self.parser is not None:
            frames += evaluations_apart(self.parser.finish_source().records)
        if self.guess is not None and not self.guess.ok:
            frames = []
        return frames, self.described()

    def described(self) -> Guessed | None:
        """What the guess says of the source, once made (None before, or when nothing was worth
        saying)."""
        return None if self.guess is None else self._said(self.guess)

    def _said(self, result: Guess) -> Guessed | None:
        if not result.ok:
            return Guessed(self.source, GENERIC, "", weak=result.weak, keys=sorted(set(result.keys_seen))[:12]) if result.weak else None
        return Guessed(self.source, GENERIC, result.describe(), result.mapping())


def evaluations_apart(frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """The frames (one pattern's rows each) without training rows read from a line an evaluation
    pattern read too: `eval step 3/40: eval_loss=2.9, mem=44.6GB` has the step and the loss a
    training shape's pattern looks for anywhere in a line, and it is the evaluation's."""
    evaluated = [f["line_no"] for f in frames if f.height and f["kind"][0] == "validate"]
    if not evaluated:
        return frames
    lines = pl.concat(evaluated).implode()
    return [f if not f.height or f["kind"][0] == "validate" else f.filter(~pl.col("line_no").is_in(lines)) for f in frames]


def guess_spec_text(log: str, specs: list[FormatSpec], wrappers, name: str | None = None) -> str:
    """`memlog formats guess LOG`: the spec the generic reader would read LOG with, as YAML with
    sample lines taken from the log (each with the record it yields), ready to edit and load."""
    import re

    import yaml

    from memlog.base.errors import MemlogError
    from memlog.parse.chunks import parse_line
    from memlog.read.source import Source, read_chunks

    source = Source(log)
    guesser = SourceGuesser(source.name, specs, wrappers)
    spec_parser = ChunkParser(specs, wrappers=wrappers)
    raw: list[tuple[int, str]] = []
    for chunk in read_chunks(source):
        matches = spec_parser(chunk)
        if read_values(matches.records):
            formats = sorted({f for frame in matches.records for f in frame["format"].unique().to_list()})
            raise MemlogError(f"{source.name}: already read by format {', '.join(formats)}; nothing to guess")
        if len(raw) < SAMPLE_LINES:
            raw += list(zip(chunk["line_no"].to_list(), chunk["text"].to_list()))[: SAMPLE_LINES - len(raw)]
        skip = {n for frame in matches.events for n in frame["line_no"].to_list()}
        guesser.feed(chunk, skip)
        if guesser.guess is not None or guesser.structured is not None:
            break
    if guesser.structured is not None:
        raise MemlogError(f"{source.name}: a trainer_state.json document, read as it is (no spec needed)")
    if guesser.guess is None:
        guesser._decide()
    result = guesser.guess
    if result is None or not result.ok:
        why = result.weak if result is not None and result.weak else "no memory or loss values in a repeating line shape"
        raise MemlogError(f"{source.name}: nothing to guess: {why}")
    stem = re.sub(r"[^a-z0-9]+", "-", source.name.rsplit("/", 1)[-1].lower().rsplit(".", 1)[0]).strip("-")
    name = name or f"guessed-{stem or 'log'}"
    mapping = to_spec(result, name)
    spec = spec_from_mapping(mapping, spec_path(name))
    samples: list[dict] = []
    taken: dict[str, int] = {}
    for _, text in raw:
        if len(samples) >= 3 * len(spec.records):
            break
        records, _ = parse_line([spec, *specs], text)
        if not records or not text.isprintable():
            continue
        record = records[0]
        pattern = str(record.get("pattern", "")).split("/", 1)[-1]
        if taken.get(pattern, 0) >= 3:
            continue
        taken[pattern] = taken.get(pattern, 0) + 1
        expected = {k: v for k, v in record.items() if v is not None and (k in ("loss", "grad_norm", "lr") or k.endswith(("_gib", "_pct")))}
        if record.get("step") is not None and not record.get("inherited"):
            expected = {"step": record["step"], **expected}
        samples.append({"line": text, "record": expected})
    mapping["samples"] = samples
    header = (
        f"# Guessed by `memlog formats guess` from {source.name}.\n"
        "# Check the mapping (which key is which column, its unit), edit the regexes to taste, then\n"
        "# `memlog formats test DIR` and `memlog analyze --formats-dir DIR LOG`.\n"
    )
    return header + yaml.safe_dump(mapping, sort_keys=False, allow_unicode=False, width=4096)
