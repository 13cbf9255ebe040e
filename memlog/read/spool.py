"""Inputs that cannot be read twice (standard input, a FIFO) copied to a temporary file while they
are read, so that the report can still quote its evidence lines afterwards (memlog/engine/excerpt.py
reads them back from the copy, with the same reader, so line numbers agree). The copy holds the
bytes as they came (compressed ones too), at most MAX_SPOOL_BYTES: past that, later evidence lines
are cited by number only. On Linux a copy has no name (an unlinked temporary file read back
through /proc/self/fd), so nothing is left behind even when the process is killed; elsewhere it
is a named temporary file removed at exit."""

from __future__ import annotations

import atexit
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

MAX_SPOOL_BYTES = 1 << 30  # disk, not memory; a longer stream keeps its first GiB quotable
_copies: dict[str, Path] = {}
_open: list[BinaryIO] = []  # the copies' files, open until the process ends
_named: list[Path] = []  # copies that have a name (no /proc), removed at exit


def rereadable(spec: str) -> bool:
    """Whether `spec` can be opened and read again from the start (a regular file)."""
    if spec == "-":
        return False
    try:
        return stat.S_ISREG(os.stat(spec).st_mode)
    except OSError:
        return True  # not a local path (a URL) or gone: nothing to copy here


class _Tee(io.RawIOBase):
    """`raw`, with every byte read also written to `copy` (up to MAX_SPOOL_BYTES)."""

    def __init__(self, raw: BinaryIO, copy: BinaryIO) -> None:
        self._raw, self._copy, self._left = raw, copy, MAX_SPOOL_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        raw: Any = self._raw  # a binary stream has readinto, though typing.BinaryIO does not say so
        read_into = getattr(raw, "readinto1", None) or raw.readinto
        n = read_into(buffer)
        if n and self._left > 0:
            kept = min(n, self._left)
            self._copy.write(memoryview(buffer)[:kept])
            self._left -= kept
        if not n or self._left == 0:
            self._copy.flush()  # kept open: on Linux the copy has no name but this descriptor
        return n


def copied(name: str, raw: BinaryIO) -> BinaryIO:
    """`raw` (the input shown as `name`), read through a copy kept for `copy_of(name)`."""
    copy = tempfile.TemporaryFile(prefix="memlog-input-")
    path = Path(f"/proc/self/fd/{copy.fileno()}")
    if not path.exists():  # no /proc: a named file, removed at exit
        copy.close()
        handle, named = tempfile.mkstemp(prefix="memlog-input-", suffix=".log")
        copy, path = os.fdopen(handle, "w+b"), Path(named)
        _named.append(path)
    _open.append(copy)
    _copies[name] = path
    return _Tee(raw, copy)  # type: ignore[return-value]  # a raw binary stream, read as the BinaryIO it wraps is


def copy_of(name: str) -> Path | None:
    """A path to the copy of a non-rereadable input read in this process, if one was kept."""
    return _copies.get(name)


@atexit.register
def _remove_copies() -> None:
    for copy in _open:
        copy.close()
    for path in _named:
        path.unlink(missing_ok=True)
