"""`memlog formats check`: how a log's lines meet the format specs, and where near misses fail.

One normal parse (api.parse_sources) with an observer on the chunk parser: per pattern it counts
the lines the regex matched and the near misses, lines that contain the pattern's literal but that
no pattern of any format matched. For the first few near misses of each pattern it finds how far
the regex got: the longest prefix of the regex that still matches the line, and where in the line
that match ends. That search runs in Python on those few lines only, with a bounded number of tries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from memlog.base.errors import FormatSpecError
from memlog.engine.plan import ReadingOptions, ReadingPlan
from memlog.engine.reader import read_sources
from memlog.parse.formats import FormatSpec
from memlog.read.source import Source

EXAMPLES_PER_PATTERN = 3  # near-miss lines shown per pattern
MAX_PREFIX_TRIES = 600  # regex compilations per near-miss line
SEARCH_TIMEOUT_S = 0.05  # per prefix search: a pathological prefix must not stall the check
# All the prefix searches of one near miss: past it the pattern is too slow to check (exit 2).
LINE_BUDGET_S = 1.0


class SlowRegex(Exception):
    """A search of the pattern (or a prefix of it) ran past its time budget: it backtracks."""


@dataclass
class NearMiss:
    line_no: int
    text: str
    regex_stop: int = 0  # characters of the regex that still match
    text_stop: int = 0  # where in the line that partial match ends


@dataclass
class PatternStats:
    spec: str
    section: str  # "record" or "event"
    name: str
    literal: str
    regex: str
    matched: int = 0
    near_misses: int = 0
    examples: list[NearMiss] = field(default_factory=list)


@dataclass
class FormatCheck:
    sources: list[Source]
    patterns: list[PatternStats]
    records_by_format: dict[str, int]
    events_by_format: dict[str, int]

    def specs_in_order(self) -> list[str]:
        """Formats that found most first, then the rest in load order."""
        names = list(dict.fromkeys(p.spec for p in self.patterns))
        found = lambda n: (self.records_by_format.get(n, 0), self.events_by_format.get(n, 0))
        return sorted(names, key=lambda n: (found(n) == (0, 0), -found(n)[0], -found(n)[1]))


class _Observer:
    """Collects per-pattern counts and near misses from ChunkParser, one chunk at a time."""

    def __init__(self, specs: Sequence[FormatSpec]):
        self.stats = {
            (spec.name, p.name, section): PatternStats(spec.name, section, p.name, p.literal, p.regex)
            for spec in specs
            for section, patterns in (("record", spec.records), ("event", spec.events))
            for p in patterns
        }

    def __call__(self, unwrapped: pl.DataFrame, observed: list[tuple]) -> None:
        keys = ["line_no", "text"]
        matched = [hits.select(keys) for _, _, hits in observed if not hits.is_empty()]
        any_match = pl.concat(matched).unique() if matched else unwrapped.select(keys).clear()
        for spec, pattern, hits in observed:
            stats = self.stats[(spec.name, pattern.name, "record" if pattern.event is None else "event")]
            stats.matched += hits.height
            near = unwrapped.select(keys).filter(pl.col("text").str.contains(pattern.literal, literal=True))
            near = near.join(any_match, on=keys, how="anti")
            stats.near_misses += near.height
            wanted = EXAMPLES_PER_PATTERN - len(stats.examples)
            if wanted > 0 and near.height:
                stats.examples += [NearMiss(n, t) for n, t in near.head(wanted).iter_rows()]


def check_formats(inputs: Sequence[str], options: ReadingOptions = ReadingOptions()) -> FormatCheck:
    """How the inputs meet the specs, read as every command reads them (the plan of `options`)."""
    plan = ReadingPlan.of(options)
    observer = _Observer(list(plan.specs))
    tables, sources = read_sources(replace(plan, observe=observer), inputs)
    patterns = list(observer.stats.values())
    for stats in patterns:
        for miss in stats.examples:
            miss.regex_stop, miss.text_stop = _placed(stats, miss)
    events: dict[str, int] = {}
    for event in tables.events:
        events[event.format] = events.get(event.format, 0) + 1
    return FormatCheck(sources, patterns, tables.formats, events)


def _placed(stats: PatternStats, miss: NearMiss) -> tuple[int, int]:
    """where_it_stops, or the spec named in one line when its pattern backtracks catastrophically
    (`(?:a|aa)+b`): polars reads logs with it in linear time, but this search is Python's."""
    try:
        return where_it_stops(stats.regex, miss.text)
    except SlowRegex:
        raise FormatSpecError(
            f"format {stats.spec!r}: {stats.section} pattern {stats.name!r} backtracks catastrophically on line {miss.line_no}"
            f" (a search ran past {SEARCH_TIMEOUT_S:g} s; a repeat whose parts can match the same text, like (a|aa)+,"
            " is the usual cause): rewrite it so that each character can match one way only"
        ) from None


def where_it_stops(pattern: str, text: str) -> tuple[int, int]:
    """(characters of `pattern`, end of the match in `text`) for the longest prefix of the pattern
    that still matches somewhere in the text; (0, 0) when none does. Prefixes that cut a group are
    closed with `)` so they still compile; prefixes that cannot compile are skipped. SlowRegex when
    a search runs past SEARCH_TIMEOUT_S or all of them past LINE_BUDGET_S."""
    import time

    import regex

    deadline = time.monotonic() + LINE_BUDGET_S
    tries = 0
    for cut in range(len(pattern), 0, -1):
        prefix = _closed(pattern[:cut])
        if prefix is None:
            continue
        tries += 1
        if tries > MAX_PREFIX_TRIES:
            break
        try:
            match = regex.search(prefix, text, timeout=SEARCH_TIMEOUT_S)
        except TimeoutError:
            raise SlowRegex(prefix) from None
        except (regex.error, OverflowError, ValueError):
            continue
        if time.monotonic() > deadline:
            raise SlowRegex(prefix)
        if match is not None:
            return cut, match.end()
    return 0, 0


def _closed(prefix: str) -> str | None:
    """`prefix` with its open groups closed, or None if it ends inside an escape or a class."""
    depth, i, in_class = 0, 0, False
    while i < len(prefix):
        char = prefix[i]
        if char == "\\":
            if i + 1 >= len(prefix):
                return None
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if prefix[i + 1 : i + 2] == "^":
                i += 1
            if prefix[i + 1 : i + 2] == "]":  # a leading ] is a literal
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        i += 1
    if in_class or depth < 0:
        return None
    return prefix + ")" * depth


def render_check(result: FormatCheck) -> str:
    """The report `memlog formats check` prints."""
    lines = [f"{source.name}: {source.stats.lines:,} lines read" for source in result.sources]
    lines.append("A step record joins all lines of one worker's step; it counts under the format of its first line.")
    by_spec: dict[str, list[PatternStats]] = {}
    for stats in result.patterns:
        by_spec.setdefault(stats.spec, []).append(stats)
    silent = []
    for name in result.specs_in_order():
        patterns = by_spec[name]
        if not any(p.matched or p.near_misses for p in patterns):
            silent.append(name)
            continue
        records, events = result.records_by_format.get(name, 0), result.events_by_format.get(name, 0)
        lines += ["", f"{name}: {_count(records, 'step record')}, {_count(events, 'event')}"]
        width = max(len(p.name) for p in patterns)
        for stats in patterns:
            misses = f", {_count(stats.near_misses, 'near miss', 'near misses')}" if stats.near_misses else ""
            lines.append(f"  {stats.section:<6} {stats.name:<{width}}  {_count(stats.matched, 'line')} matched{misses}")
        for stats in patterns:
            if stats.examples:
                lines.append(f"  near misses of {stats.name} (lines with '{stats.literal}' that match no pattern):")
                lines += [f"    {line}" for miss in stats.examples for line in _describe(miss, stats.regex)]
    if silent:
        lines += ["", f"no line matched: {', '.join(silent)}"]
    return "\n".join(lines) + "\n"


def _describe(miss: NearMiss, pattern: str) -> list[str]:
    out = [f"line {miss.line_no}: {_clip(miss.text, 0, 110)}"]
    if miss.regex_stop == 0:
        return out + ["  no part of the pattern matches this line"]
    if miss.text_stop == 0:
        out.append(f"  matches none of the line's text (the start of the line is {_clip(miss.text, 0, 30)})")
    else:
        out.append(
            f"  matches up to column {miss.text_stop}: {_clip(miss.text, 0, miss.text_stop, keep_end=True)},"
            f" then comes {_clip(miss.text, miss.text_stop, miss.text_stop + 30)}"
        )
    out.append(f"  where the pattern expects {_clip(pattern, miss.regex_stop, miss.regex_stop + 50)}")
    return out


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def _clip(text: str, start: int, end: int, keep_end: bool = False) -> str:
    """text[start:end] in quotes, shortened with `...` to at most ~60 characters."""
    piece = text[start:end]
    if len(piece) > 60:
        piece = "..." + piece[-57:] if keep_end else piece[:57] + "..."
    return f"'{piece}'"
