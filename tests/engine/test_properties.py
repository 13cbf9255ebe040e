"""Property-based tests (hypothesis) for the reader, the unwrapper and every format spec.

1. Arbitrary bytes never raise: the reader (plain, gzip, truncated gzip), the unwrapper and the
   whole parse of every format, and what comes out is clean (no newline, NUL or escape in a line).
2. Prefixes round-trip: a body wrapped in generated torchrun/Ray/logger prefixes (tests.logwriters)
   and ANSI colours unwraps to the same body, with the rank, pid and ip that made them.
3. Generated valid lines round-trip to the values that made them. For every sample line of every
   spec in parsers/ that yields a record, each number in the line is nudged once to learn which
   record field it feeds (and by what unit scale); hypothesis then writes new numbers of the same
   shape into those places and the parse must return exactly them. New formats are covered as
   soon as their spec has samples.
"""

from __future__ import annotations

import gzip
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache

import polars as pl
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from memlog.base.columns import ALL_VALUE_COLUMNS
from memlog.engine.api import parse_sources, select_specs
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import parse_line
from memlog.parse.formats import FormatSpec, all_logger_prefixes
from memlog.parse.unwrap import INTERLEAVED, Unwrapper, split_interleaved
from memlog.read.source import Source, compression_of, read_chunks
from tests.logwriters import ray
from tests.logwriters.python import asctime
from tests.logwriters.pytorch import torchrun_prefix
from tests.logwriters.torchtitan import logger_prefix

SPECS = load_specs()
UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
VALUE_FIELDS = frozenset(ALL_VALUE_COLUMNS) | {"step"}
# Derandomized: CI sees the same examples each run; MEMLOG_PROPERTY_EXAMPLES=N explores N fresh ones
# (as tests/judge/test_verdict_properties.py), so a chance find is a finding, not a red CI.
_EXPLORE = int(os.environ.get("MEMLOG_PROPERTY_EXAMPLES", "0"))
FAST = settings(max_examples=_EXPLORE or 60, deadline=None, derandomize=not _EXPLORE, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Bytes that stress a reader: newlines, CRs, NULs, gzip magic, invalid UTF-8, escapes.
hostile_bytes = st.lists(
    st.one_of(
        st.binary(max_size=64),
        st.sampled_from(
            [b"\n", b"\r", b"\r\n", b"\0" * 17, b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\xfd7zXZ\x00", b"\xff\xfe", b"\xe2\x82", b"\x1b[2J", b"step: 1 "]
        ),
    ),
    max_size=40,
).map(b"".join)
hostile_text = st.lists(
    st.one_of(st.text(max_size=8), st.sampled_from(["\x1b", "\x1b[", "\x1b]0;", "\x07", "[rank1]:", "(pid=3) ", "step:", "\u202e", "\x9b"])),
    max_size=25,
).map("".join)


def read_all(path, **kw) -> tuple[pl.DataFrame, Source]:
    source = Source(str(path))
    frames = list(read_chunks(source, **kw))
    return (pl.concat(frames) if frames else pl.DataFrame({"line_no": [], "text": []}, schema={"line_no": pl.Int64, "text": pl.String})), source


# --- 1. arbitrary input never raises ------------------------------------------------------------


@FAST
@given(data=hostile_bytes, chunk=st.integers(1, 500))
@example(data=b"(\xb5/\xfd", chunk=1)  # zstd's magic alone: named, no line read (hypothesis found it)
def test_reader_never_raises_and_lines_are_clean(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("r") / "x.log"
    path.write_bytes(data)
    frame, source = read_all(path, chunk_bytes=chunk)
    texts = frame["text"].to_list()
    assert not any("\n" in t or "\r" in t or "\0" in t for t in texts)
    if compression_of(data[:10]) is None:  # a compressed file's lines are its content's (zstd: none read)
        assert source.stats.nul_bytes == data.count(b"\0")
        assert source.stats.lines == data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    numbers = frame["line_no"].to_list()
    assert numbers == sorted(numbers) and all(1 <= n <= max(source.stats.lines, 1) for n in numbers)


@FAST
@given(data=hostile_bytes, cut=st.floats(0, 1), flip=st.integers(0, 10_000))
def test_gzip_intact_truncated_or_flipped_never_raises(tmp_path_factory, data, cut, flip):
    assume(compression_of(data[:10]) is None)  # plain data that starts with a compressor's magic is read as that
    directory = tmp_path_factory.mktemp("g")
    packed = gzip.compress(data)
    (directory / "plain.log").write_bytes(data)
    (directory / "packed.log").write_bytes(packed)
    plain, _ = read_all(directory / "plain.log")
    unpacked, source = read_all(directory / "packed.log")
    assert source.stats.gzip and source.stats.damaged is None
    assert unpacked.rows() == plain.rows()  # gzip is transparent
    cut_at = max(2, int(len(packed) * cut))
    (directory / "cut.log").write_bytes(packed[:cut_at])
    truncated, source = read_all(directory / "cut.log")
    assert source.stats.damaged or cut_at == len(packed)
    assert truncated.rows()[:-1] == plain.rows()[: max(truncated.height - 1, 0)]  # a prefix, but for a partial last line
    flipped = bytearray(packed)
    flipped[2 + flip % (len(packed) - 2)] ^= 1 << (flip % 8)
    (directory / "flipped.log").write_bytes(bytes(flipped))
    read_all(directory / "flipped.log")  # must not raise


@FAST
@given(lines=st.lists(hostile_text, max_size=20))
def test_unwrapper_never_raises_and_leaves_no_control_characters(lines):
    unwrap = Unwrapper(all_logger_prefixes(SPECS.values()))
    frame = unwrap(pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "text": lines}, schema={"line_no": pl.Int64, "text": pl.String}))
    assert frame.height >= len(lines)  # a line glued from two ranks comes out as two rows
    assert set(frame["line_no"].to_list()) <= set(range(1, len(lines) + 1))
    for text in frame["text"].to_list():
        assert UNSAFE.search(text) is None, repr(text)


# Pieces of torchrun prefixes and the text around them, glued in any order.
prefix_soup = st.lists(st.sampled_from(["[rank0]:", "[rank12]:", "[titan]", "]:", "[", "]", ":", " ", "\t", ")", "(", "x", "9"]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(prefix_soup, min_size=1, max_size=8))
def test_the_literal_test_before_cutting_glued_lines_misses_none(texts):
    """split_interleaved runs its regex only on lines with a `]:` beyond a leading prefix."""
    frame = pl.DataFrame({"line_no": list(range(1, len(texts) + 1)), "text": texts}, schema={"line_no": pl.Int64, "text": pl.String})
    glued = frame.select(pl.col("text").str.contains(INTERLEAVED)).to_series().to_list()
    pieces = split_interleaved(frame).group_by("line_no").len().sort("line_no")["len"].to_list()
    assert [n > 1 for n in pieces] == glued


@pytest.mark.parametrize("name", sorted(n for n, s in SPECS.items() if s.records or s.events))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_format_parses_arbitrary_and_mangled_lines_without_raising(tmp_path_factory, name, data):
    """Arbitrary bytes, and the spec's own sample lines with random bytes spliced in or cut off."""
    spec = SPECS[name]
    samples = [s["line"] for s in spec.samples if isinstance(s.get("line"), str)] or ["x"]
    pieces = data.draw(st.lists(st.one_of(
        hostile_bytes,
        st.tuples(st.sampled_from(samples), st.integers(0, 400), hostile_bytes, st.booleans()).map(
            lambda t: (t[0][: t[1]] + t[2].decode("latin-1") + (t[0][t[1]:] if t[3] else "")).encode("utf-8", "surrogatepass")
        ),
    ), max_size=12))  # fmt: skip
    path = tmp_path_factory.mktemp("f") / "x.log"
    path.write_bytes(b"\n".join(pieces))
    tables, _ = parse_sources([str(path)], select_specs(SPECS, name))
    if not tables.records.is_empty():
        assert tables.records["step"].null_count() == 0
    for event in tables.events:
        assert UNSAFE.search(event.text) is None


# --- 2. prefixes round-trip ----------------------------------------------------------------------

BODY_CHARS = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp", "Cf"), exclude_characters="[]()#\\")
SGR = st.sampled_from(["\x1b[31m", "\x1b[0m", "\x1b[38;2;54;234;195m", "\x1b[1;33m", "\x1b[39m"])


@FAST
@given(
    # Not starting with a blank or `>`: a line `>` is itself a markdown-quote wrapper (an empty quoted line).
    body=st.text(BODY_CHARS, min_size=1, max_size=80).filter(lambda b: not b[0].isspace() and b[0] != ">"),
    colours=st.lists(st.tuples(st.integers(0, 80), SGR), max_size=4),
    rank=st.none() | st.integers(0, 4095),
    actor_pid_ip=st.none()
    | st.tuples(st.from_regex(r"[A-Z][A-Za-z]{0,20}", fullmatch=True) | st.none(), st.integers(1, 4_000_000), st.ip_addresses(v=4).map(str)),
    titan_ts=st.none() | st.datetimes(datetime(1970, 1, 1), datetime(2999, 12, 31)).map(asctime),
)
def test_prefixes_unwrap_to_the_body_and_the_values_that_made_them(body, colours, rank, actor_pid_ip, titan_ts):
    coloured = body
    for at, code in sorted(((min(at, len(body)), code) for at, code in colours), reverse=True):
        coloured = coloured[:at] + code + coloured[at:]  # descending body positions stay valid
    line = coloured
    if titan_ts is not None:
        line = logger_prefix(titan_ts) + line
    if rank is not None:
        line = torchrun_prefix(rank) + line
    if actor_pid_ip is not None:
        actor, pid, ip = actor_pid_ip
        line = ray.actor_prefix(pid, actor, ip) + line
    frame = Unwrapper(all_logger_prefixes([SPECS["torchtitan"]]))(pl.DataFrame({"line_no": [1], "text": [line]}))
    row = frame.row(0, named=True)
    assert frame.height == 1
    assert row["text"] == body
    assert row["rank"] == rank
    assert (row["actor"], row["pid"], row["ip"]) == (actor_pid_ip if actor_pid_ip else (None, None, None))
    assert row["ts"] == titan_ts


# --- 3. generated valid lines round-trip ---------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.])(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?P<exp>[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Slot:
    """One number in a sample line and the record fields it feeds: field -> (record index, scale)."""

    start: int
    end: int
    commas: bool
    decimals: int | None  # digits after the point; None: no point
    exponent: str
    feeds: tuple[tuple[int, str, float], ...]

    def text(self, whole: int, fraction: int) -> str:
        if self.exponent:  # scientific notation: a one-digit mantissa
            whole = whole % 9 + 1
        digits = f"{whole:,}" if self.commas else str(whole)
        if self.decimals is not None:
            digits += "." + str(fraction % 10**self.decimals).zfill(self.decimals) if self.decimals else "."
        return digits + self.exponent


def records_of(spec: FormatSpec, line: str) -> list[dict]:
    records, _ = parse_line([spec], line)
    return [{k: v for k, v in r.items() if k in VALUE_FIELDS} for r in records if r.get("format") == spec.name]


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@cache
def slots(spec_name: str, sample_index: int) -> tuple[str, tuple[Slot, ...]]:
    """Nudge each number of the sample once; the fields that change are the ones it feeds."""
    spec = SPECS[spec_name]
    line = spec.samples[sample_index]["line"]
    base = records_of(spec, line)
    found = []
    for m in NUMBER.finditer(line):
        frac = m.group("frac")
        slot = Slot(m.start(), m.end(), "," in m.group("int"), len(frac) - 1 if frac else None, m.group("exp") or "", ())
        probe = slot.text(int(m.group("int").replace(",", "")) + 7, 3)
        nudged = records_of(spec, line[: m.start()] + probe + line[m.end() :])
        if len(nudged) != len(base):
            continue  # the number is structure (a prefix, a timestamp), not a value
        feeds = []
        for i, (old, new) in enumerate(zip(base, nudged)):
            for field in VALUE_FIELDS & old.keys():
                if not _same(new.get(field), old.get(field)) and new.get(field) is not None and _value(probe) != 0:
                    feeds.append((i, field, new[field] / _value(probe)))
        if feeds:
            found.append(Slot(slot.start, slot.end, slot.commas, slot.decimals, slot.exponent, tuple(feeds)))
    return line, tuple(found)


RECORD_SAMPLES = [
    pytest.param(name, i, id=f"{name}-{i + 1}")
    for name, spec in sorted(SPECS.items())
    for i, sample in enumerate(spec.samples)
    if isinstance(sample.get("record"), dict) and isinstance(sample.get("line"), str)
]


def test_every_spec_with_records_has_samples_that_feed_fields():
    """The round-trip below only means something if the nudging finds the numbers."""
    for name, spec in SPECS.items():
        if spec.records:
            assert any(slots(p.values[0], p.values[1])[1] for p in RECORD_SAMPLES if p.values[0] == name), name


@pytest.mark.parametrize(("name", "index"), RECORD_SAMPLES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_generated_lines_round_trip_to_their_values(name, index, data):
    line, found = slots(name, index)
    assume(found)
    pieces, expected, end = [], {}, len(line)
    for slot in reversed(found):
        text = slot.text(
            data.draw(st.integers(0, 10**7) if slot.exponent == "" else st.integers(1, 9), label=f"whole@{slot.start}"),
            data.draw(st.integers(0, 10**9), label=f"fraction@{slot.start}"),
        )
        pieces.append(line[slot.end : end] + "")
        pieces.append(text)
        end = slot.start
        for record, field, scale in slot.feeds:
            expected[(record, field)] = _value(text) * scale
    generated = line[:end] + "".join(reversed(pieces))
    got = records_of(SPECS[name], generated)
    for (record, field), want in expected.items():
        assert record < len(got), (generated, got)
        value = got[record].get(field)
        assert value is not None and math.isclose(value, want, rel_tol=1e-9, abs_tol=1e-12), (field, value, want, generated)
