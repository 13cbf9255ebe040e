"""Read: bytes from files, stdin or gzip into chunks of numbered lines.

A chunk is a polars DataFrame with `line_no` (1-based physical line, i.e. counted by `\\n`) and
`text`. Text is decoded as lossy UTF-8 one chunk at a time, split into lines by polars, and never
held as one Python string per line, so a multi-GB log costs one chunk of memory at a time.
A `\\r` also ends a line (tqdm bars put metrics after it); the pieces keep their physical line number.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

import polars as pl

from memlog.base.errors import InputError
from memlog.base.names import shown
from memlog.base.opening import SpecialFileError, open_bounded
from memlog.read import hardwrap, numbered, spool
from memlog.read.gunzip import GZIP_MAGIC, CorruptGzip, SalvagingGzipReader  # GZIP_MAGIC: memlog.watch.watch imports it from here
from memlog.read.remote import is_url, open_url

# 4 MiB: polars still amortises its per-chunk cost, and the few chunks in flight at once
# (memlog/base/parallel.py) stay small. Sparse 1 GiB log, 2 cores: 8 MiB chunks 4.9 s and 450 MiB peak,
# 4 MiB 4.9 s and 264 MiB, 2 MiB 6.2 s and 222 MiB.
CHUNK_BYTES = 4 * 1024 * 1024
# Longer lines are cut here: no real metric line is this long, and it bounds memory on a
# pathological file with a huge line and no newline.
MAX_LINE_BYTES = 1024 * 1024


@dataclass
class ReadStats:
    """What reading saw, for the report's parse coverage."""

    bytes_read: int = 0
    lines: int = 0
    truncated_lines: int = 0  # lines longer than MAX_LINE_BYTES, cut
    replaced_bytes: int = 0  # undecodable bytes replaced by U+FFFD
    nul_bytes: int = 0  # NUL bytes (zero-filled blocks a crash leaves behind), removed
    gzip: bool = False
    damaged: str | None = None  # why reading stopped early (truncated gzip, I/O error), if it did
    # The first line the damage touched (cut short, or the one after the last complete line);
    # None when reading went on to the end and the damage cannot be placed (a gzip checksum).
    first_damaged_line: int | None = None
    damage_located: bool = True
    first_truncated_line: int | None = None
    first_replaced_line: int | None = None
    first_nul_line: int | None = None

    def add(self, piece: ReadStats) -> None:
        """Count in what one piece saw; pieces are added in file order, so `first_*` stay first."""
        self.lines += piece.lines
        self.truncated_lines += piece.truncated_lines
        self.replaced_bytes += piece.replaced_bytes
        self.nul_bytes += piece.nul_bytes
        self.first_truncated_line = _first(self.first_truncated_line, piece.first_truncated_line)
        self.first_replaced_line = _first(self.first_replaced_line, piece.first_replaced_line)
        self.first_nul_line = _first(self.first_nul_line, piece.first_nul_line)


def _first(a: int | None, b: int | None) -> int | None:
    """The earlier of two line numbers, either of which may be unknown."""
    return b if a is None else a if b is None else min(a, b)


@dataclass
class Source:
    """One input: a path, or `-` for standard input. `identity`: what its path says of who wrote it
    (memlog/read/inputs.py), for lines that do not say it themselves."""

    spec: str
    stats: ReadStats = field(default_factory=ReadStats)
    identity: dict[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The name every report shows: text, so a file name that is not UTF-8 (its bytes reach
        Python as surrogates) is shown with U+FFFD where it cannot be decoded; `spec` opens it."""
        return "<stdin>" if self.spec == "-" else shown(self.spec)


def stdin() -> BinaryIO:
    """Standard input's bytes. Closed (`<&-`), or a directory (`< DIR`; CPython itself refuses that
    at start-up, before memlog runs, but a process can rebind fd 0 later): one clear line."""
    if sys.stdin is None:
        raise InputError("<stdin>: standard input is closed; pipe or redirect a log into it, or name the file")
    buffer = sys.stdin.buffer
    try:
        mode = os.fstat(buffer.fileno()).st_mode
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        mode = 0  # no file descriptor (an in-memory stream): nothing to check
    if stat.S_ISDIR(mode):
        raise InputError("<stdin>: is a directory, not a log file; name the directory as an argument to read its logs")
    return buffer


def _open(spec: str) -> BinaryIO:
    if spec == "-":
        return stdin()
    if is_url(spec):
        return open_url(spec)
    if os.path.isdir(spec):
        raise InputError(f"{spec}: is a directory, not a log file")
    try:
        return open_bounded(spec, open)  # never blocks on a FIFO without a writer, never reads /dev/zero
    except SpecialFileError as exc:
        raise InputError(f"{spec}: {exc}") from None
    except FileNotFoundError:
        raise InputError(f"{spec}: no such file") from None
    except PermissionError:
        raise InputError(f"{spec}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{spec}: cannot open ({exc.strerror or exc})") from None


def compression_of(head: bytes) -> str | None:
    """The compressor a file's first 10 bytes name: gzip, bzip2, xz or zstd; None for none of them."""
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] == b"1AY&SY":
        return "bzip2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


class ByteReader(Protocol):
    """What reading asks of a stream, plain or decompressing: bytes, up to `size` of them."""

    def read(self, size: int = -1, /) -> bytes: ...


def _maybe_gunzip(raw: BinaryIO, stats: ReadStats) -> ByteReader:
    """Detect gzip by its magic bytes, not by the file name."""
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]  # a raw stream typed as BinaryIO
    compression = compression_of(buffered.peek(10)[:10])
    if compression == "gzip":
        stats.gzip = True
        return SalvagingGzipReader(buffered)
    # The other compressors logs are kept in: the standard library reads bzip2 and xz; zstd it
    # cannot, and says so (as damage: reading never raises).
    if compression == "bzip2":
        import bz2

        return bz2.BZ2File(buffered)
    if compression == "xz":
        import lzma

        return lzma.LZMAFile(buffered)
    if compression == "zstd":
        stats.damaged = "a zstd-compressed file, which memlog cannot read: decompress it first (`zstd -d FILE`, or `zstdcat FILE | memlog analyze -`)"
        return io.BytesIO(b"")
    return buffered


def _lzma_error() -> type[Exception]:
    import lzma

    return lzma.LZMAError


def _blocks(stream: ByteReader, stats: ReadStats, chunk_bytes: int) -> Iterator[bytes]:
    """Raw blocks of about `chunk_bytes`; a damaged gzip stream or I/O error ends reading with the
    reason recorded. Gzip is read in small steps so that a truncated file keeps what came before
    the damage."""
    step = min(chunk_bytes, 1 << 20) if stats.gzip else chunk_bytes
    # read1: one underlying read per call, so the bytes read before an I/O error are kept.
    read = getattr(stream, "read1", stream.read)
    pending: list[bytes] = []
    size = 0
    while True:
        try:
            block = read(step)
        except CorruptGzip as exc:
            stats.damaged = f"compressed stream is truncated or corrupt ({exc})"
            stats.damage_located = exc.located
            break
        except (EOFError, zlib.error, _lzma_error()) as exc:
            stats.damaged = f"compressed stream is truncated or corrupt ({exc or type(exc).__name__})"
            break
        except OSError as exc:
            stats.damaged = f"read error ({exc.strerror or exc})"
            break
        if not block:
            break
        stats.bytes_read += len(block)
        pending.append(block)
        size += len(block)
        if size >= chunk_bytes:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


@dataclass
class Piece:
    """Whole lines of one source, starting at physical line `first_line_no`. Turning it into a frame
    (`to_frame`) needs nothing from other pieces, so pieces can be decoded on several threads."""

    data: bytes
    first_line_no: int
    stats: ReadStats  # what cutting it saw (lines, an over-long line); to_frame adds the rest
    wrap: hardwrap.Wrap | hardwrap.RichRecords | None = None  # how the source was hard-wrapped, if it was
    numbered: bool = False  # its lines carry a viewer's line numbers (read/numbered.py)


class LineCutter:
    """Blocks of bytes re-cut into pieces of whole lines, numbered on from block to block; the
    unfinished last line is carried to the next block, and cut at MAX_LINE_BYTES."""

    def __init__(self, next_line: int = 1, own_lines: hardwrap.OwnLines | None = None) -> None:
        """`own_lines`: which lines a loaded format reads on their own (hardwrap.wrap_of)."""
        self.own_lines = own_lines
        self.carry = b""
        self.dropping = False  # inside an over-long line whose start was already kept
        self.next_line = next_line
        self.wrap: hardwrap.Wrap | hardwrap.RichRecords | None = None  # decided on the source's first lines
        self.numbered = False  # decided with the wrap
        self.decided = False
        self.first_lines = b""  # what it is decided on, gathered over the first pieces
        # NUL bytes in the dropped part of over-long lines: no piece holds them, yet a file of NULs
        # only (no newline, so one endless line) must count as what it is, whatever its size.
        self.dropped_nul = 0
        self.first_dropped_nul_line: int | None = None

    def _settled(self, data: bytes, cut: int) -> int:
        """The newline to cut at: before, not after, a line the next line continues (a hard wrap)."""
        if not self.decided:  # once enough lines were seen (watch may see a few lines first)
            self.first_lines += data[: min(cut + 1, hardwrap.ENOUGH_BYTES)]
            self.wrap = hardwrap.wrap_of(self.first_lines, self.own_lines)
            self.numbered = numbered.numbered(self.first_lines)
            self.decided = len(self.first_lines) >= hardwrap.ENOUGH_BYTES or self.first_lines.count(b"\n") >= hardwrap.SAMPLE_LINES
            if self.decided:
                self.first_lines = b""
        return cut if self.wrap is None else self.wrap.settle(data, cut, MAX_LINE_BYTES // 4)

    def feed(self, block: bytes) -> Iterator[Piece]:
        if self.dropping:
            cut = block.find(b"\n")
            self._count_dropped_nul(block, 0, len(block) if cut < 0 else cut, self.next_line - 1)
            if cut < 0:
                return
            block = block[cut + 1 :]
            self.dropping = False
        if self.decided and self.wrap is None and (cut := block.rfind(b"\n")) >= 0:
            # No hard wraps to join (most logs): the piece is the carry and the block up to its last
            # newline, copied once (joining the two first copied the whole block twice).
            n_lines = self.carry.count(b"\n") + block.count(b"\n", 0, cut + 1)
            yield Piece(b"".join((self.carry, memoryview(block)[: cut + 1])), self.next_line, ReadStats(lines=n_lines), numbered=self.numbered)
            self.next_line += n_lines
            self.carry = block[cut + 1 :]
        else:
            yield from self._cut(self.carry + block if self.carry else block)
        if len(self.carry) > MAX_LINE_BYTES:
            # Keep the start of the line, drop the rest up to the next newline.
            cut_stats = ReadStats(lines=1, truncated_lines=1, first_truncated_line=self.next_line)
            self._count_dropped_nul(self.carry, MAX_LINE_BYTES, len(self.carry), self.next_line)
            yield Piece(self.carry[:MAX_LINE_BYTES] + b"\n", self.next_line, cut_stats)
            self.next_line += 1
            self.carry, self.dropping = b"", True

    def _count_dropped_nul(self, data: bytes, start: int, end: int, line_no: int) -> None:
        nul = data.count(b"\0", start, end)
        if nul:
            self.dropped_nul += nul
            self.first_dropped_nul_line = self.first_dropped_nul_line or line_no

    def _cut(self, data: bytes) -> Iterator[Piece]:
        """`data` (the carry and a block) cut after its last newline, or before the hard-wrapped
        lines that end it; the rest is carried."""
        cut = data.rfind(b"\n")
        if cut >= 0:
            cut = self._settled(data, cut)
        if cut >= 0:
            self.carry = data[cut + 1 :]
            n_lines = data.count(b"\n", 0, cut + 1)
            yield Piece(data[: cut + 1], self.next_line, ReadStats(lines=n_lines), self.wrap, self.numbered)
            self.next_line += n_lines
        else:
            self.carry = data

    def finish(self) -> Iterator[Piece]:
        """The end of the input: an unfinished last line is still a line."""
        if self.carry:
            # More than one when hard-wrapped lines were held back; those end in their newline.
            ended = self.carry.endswith(b"\n")
            lines = self.carry.count(b"\n") + (not ended)
            yield Piece(self.carry if ended else self.carry + b"\n", self.next_line, ReadStats(lines=lines), self.wrap, self.numbered)
            self.next_line += lines
            self.carry = b""


def _whole_lines(blocks: Iterator[bytes], stats: ReadStats, own_lines: hardwrap.OwnLines | None = None) -> Iterator[Piece]:
    """Re-cut blocks so that each piece ends at a newline; cap the length of the carried tail.
    Reading stopped by damage: the line it begins in is the unfinished last line if there is one,
    else the line after the last complete one."""
    cutter = LineCutter(own_lines=own_lines)
    for block in blocks:
        yield from cutter.feed(block)
    if stats.damaged and stats.damage_located:
        stats.first_damaged_line = cutter.next_line
    yield from cutter.finish()
    stats.add(ReadStats(nul_bytes=cutter.dropped_nul, first_nul_line=cutter.first_dropped_nul_line))


def to_frame(piece: Piece) -> pl.DataFrame:
    """Decode and split a piece into (line_no, text); what it finds goes into `piece.stats`. The
    piece lets go of its bytes: while it waits to be absorbed it holds only its stats."""
    data, first_line_no, stats = piece.data, piece.first_line_no, piece.stats
    piece.data = b""
    if b"\0" in data:
        # Zero-filled blocks (a crash before the file system flushed) carry nothing; drop them
        # here so that a NUL run glued to the next line does not hide it from the parser.
        stats.nul_bytes += data.count(b"\0")
        stats.first_nul_line = first_line_no + data.count(b"\n", 0, data.index(b"\0"))
        data = data.replace(b"\0", b"")
    lines = _split_utf8(data, stats.lines)
    if lines is None:
        text = data.decode("utf-8", errors="replace")
        replaced = text.count("\ufffd")
        lines = pl.Series("text", [text], dtype=pl.String).str.split("\n").explode()
        lines = lines.head(len(lines) - 1)  # the piece after the final newline is empty
    else:  # valid UTF-8: a U+FFFD is one the log printed, counted as decoding would count it
        # (in polars, which lets go of the GIL: `in` on the bytes would hold it for ~2 ms)
        printed = lines.str.contains(_REPLACEMENT, literal=True)
        replaced = int(lines.str.count_matches(_REPLACEMENT, literal=True).sum()) if printed.any() else 0
    stats.replaced_bytes += replaced
    frame = pl.DataFrame({"text": lines}).with_row_index("line_no", offset=first_line_no)
    frame = frame.with_columns(pl.col("line_no").cast(pl.Int64))
    if replaced:
        stats.first_replaced_line = _first_line_with(frame, "\ufffd")
    if piece.numbered:
        frame = frame.with_columns(numbered.unnumbered(pl.col("text")))
    if b"\r" in data:
        # CRLF first, then bare CR as a line break of its own (tqdm progress bars).
        frame = frame.with_columns(pl.col("text").str.strip_chars_end("\r"))
        frame = frame.with_columns(pl.col("text").str.split("\r")).explode("text")
    if piece.wrap is not None:
        frame = piece.wrap.join(frame)
    long = frame["text"].str.len_bytes() > MAX_LINE_BYTES
    if long.any():
        stats.first_truncated_line = stats.first_truncated_line or int(frame.filter(long)["line_no"][0])
        stats.truncated_lines += int(long.sum())
        frame = frame.with_columns(pl.col("text").str.slice(0, MAX_LINE_BYTES))
    return frame


_REPLACEMENT = "\ufffd"
_BOM = b"\xef\xbb\xbf"
# Bytes polars' reader takes for a compressed file and decompresses (gzip, zlib, zstd): a piece
# that starts with them is a log's own bytes, decoded in Python.
_DECOMPRESSED = (b"\x1f\x8b", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x28\xb5\x2f\xfd")


def _split_utf8(data: bytes, lines: int) -> pl.Series | None:
    """The lines of `data` (whole lines, no NUL) split by polars' own reader, in parallel and
    without a Python string of the whole piece: a NUL, which cannot occur, as the column
    separator, no quoting. None where it would not give what decoding and splitting give: bytes
    that are not UTF-8 (they are replaced, as decoding does), a byte-order mark (the reader drops
    it) or a compressor's magic bytes (it decompresses) at the start, or a line count other than
    the one the cutter counted."""
    if not data or data.startswith((_BOM, *_DECOMPRESSED)):
        return None
    try:
        frame = pl.read_csv(data, has_header=False, separator="\0", quote_char=None, schema={"text": pl.String})
    except Exception:
        return None
    if frame.height != lines:
        return None
    # The reader reads an empty line as null, and drops the `\r` of a CRLF: to_frame strips it anyway.
    return frame.to_series().fill_null("")


def _first_line_with(frame: pl.DataFrame, char: str) -> int:
    return int(frame.filter(pl.col("text").str.contains(char, literal=True))["line_no"][0])


def read_pieces(source: Source, chunk_bytes: int = CHUNK_BYTES, own_lines: hardwrap.OwnLines | None = None) -> Iterator[Piece]:
    """The pieces of one source in file order; add each piece's stats to `source.stats` once it
    has been through `to_frame`. `own_lines`: LineCutter's."""
    raw = _open(source.spec)
    if not spool.rereadable(source.spec):  # standard input, a FIFO: keep a copy for the evidence lines
        raw = spool.copied(source.name, raw)
    try:
        yield from _whole_lines(_blocks(_maybe_gunzip(raw, source.stats), source.stats, chunk_bytes), source.stats, own_lines)
    finally:
        if sys.stdin is None or raw is not sys.stdin.buffer:
            raw.close()


def read_chunks(source: Source, chunk_bytes: int = CHUNK_BYTES, own_lines: hardwrap.OwnLines | None = None) -> Iterator[pl.DataFrame]:
    """Yield DataFrames of (line_no, text) for one source, chunk by chunk (`own_lines`: LineCutter's)."""
    for piece in read_pieces(source, chunk_bytes, own_lines):
        frame = to_frame(piece)
        source.stats.add(piece.stats)
        yield frame
