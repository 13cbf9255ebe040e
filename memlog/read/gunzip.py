"""Gzip that keeps everything before the damage.

`gzip.GzipFile` loses the text a call was decompressing when zlib finds corrupt data (up to a
128 KiB input buffer's worth, a few thousand lines). This reader feeds zlib itself and, when zlib
raises, replays the failing input one byte at a time from a copy of the decompressor taken before
the call, so every byte zlib could produce before it saw the damage is returned; the error is
raised on the next call. Members written one after another (`gzip >> log.gz`) are read in turn,
and zero padding after the last member is skipped, as GzipFile does.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
INPUT_BYTES = 64 * 1024  # compressed bytes fed at a time; a replay after damage costs at most this
CHECKSUM_FAILED = ("incorrect data check", "incorrect length check")


class CorruptGzip(Exception):
    """The stream is damaged. `located`: False when only the checksum at the end of a member
    failed, i.e. some text is corrupt but zlib cannot tell where."""

    def __init__(self, message: str, located: bool = True) -> None:
        super().__init__(message)
        self.located = located


class SalvagingGzipReader:
    """A read-only stream of the decompressed bytes, with `read1`/`read` like a file."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer
        self.input = b""
        self.in_member = False  # fed at least one byte of the current member
        self.error: CorruptGzip | None = None

    def _more_input(self) -> bytes:
        data = self.raw.read(INPUT_BYTES)
        if not self.in_member:
            data = data.lstrip(b"\0")  # zero padding between or after members
            while not data:
                chunk = self.raw.read(INPUT_BYTES)
                if not chunk:
                    return b""
                data = chunk.lstrip(b"\0")
        return data

    def read1(self, size: int = -1) -> bytes:
        if self.error is not None:
            raise self.error
        size = size if size and size > 0 else 1 << 20
        while True:
            if not self.input:
                self.input = self._more_input()
                if not self.input:
                    if self.in_member:
                        raise CorruptGzip("compressed file ended before the end-of-stream marker was reached")
                    return b""
            if not self.in_member and self.input[:1] != GZIP_MAGIC[:1]:
                raise CorruptGzip("data after the last gzip member that is not gzip")
            self.in_member = True
            before = self.decompressor.copy()
            try:
                out = self.decompressor.decompress(self.input, size)
            except zlib.error as exc:
                located = not any(why in str(exc) for why in CHECKSUM_FAILED)
                self.error = CorruptGzip(str(exc), located)
                out = _salvage(before, self.input)
                if out:
                    return out
                raise self.error from None
            self.input = self.decompressor.unconsumed_tail
            if self.decompressor.eof:
                self.input = self.decompressor.unused_data
                self.decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self.in_member = False
                self.input = self.input.lstrip(b"\0")
            if out:
                return out

    read = read1


def _salvage(decompressor, data: bytes) -> bytes:
    """What `decompressor` yields from `data` before it raises, fed one byte at a time."""
    out = []
    for i in range(len(data)):
        try:
            out.append(decompressor.decompress(data[i : i + 1]))
        except zlib.error:
            break
    return b"".join(out)
