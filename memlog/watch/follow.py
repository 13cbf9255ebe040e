"""A followed file (or the pipe `-`): what makes each poll of `memlog watch` read only new bytes.

A Follower keeps the open file and how far it was read, the unfinished last line (LineCutter) and
its SourceReader (memlog/engine/reader.py: the parser's, the condenser's and the generic reader's
state from poll to poll). It tells growth from a file replaced under its name (identity) or cut in
place (size, and the bytes at its start and before the position), refuses what is not a regular
file, reads a compressed file once whole and an event file again whole when it changed
(memlog/watch/watch.py says what watching does with them). A RunFollower follows an MLflow run the
same way: its metric history read again whole, at most every STORE_POLL_SECONDS.
"""

from __future__ import annotations

import functools
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

import polars as pl

from memlog.base.errors import InputError
from memlog.base.opening import special_kind
from memlog.engine.plan import ReadingPlan
from memlog.engine.reader import SourceReader, StoreReader, is_event_file
from memlog.parse.stores import MlflowRun, read_mlflow_run
from memlog.read.source import CHUNK_BYTES, LineCutter, Piece, Source, compression_of, read_pieces

BATCH_ROWS = 4096  # records a follower gathers from small polls before its condenser takes them
SETTLE_SECONDS = 2.0  # a compressed file found by listing is read once unwritten this long
HEAD_BYTES = 256  # bytes compared at the start of a file and before the position (Follower._cut_in_place)
# An MLflow run is asked for its whole history: a query to a server, not a look at a file's size,
# so no more often than this.
STORE_POLL_SECONDS = 5.0


def not_followed(mode: int) -> str | None:
    """Why a file of this mode is not followed (None: a regular file). Beside what no command reads
    (base/opening.py: devices, sockets), watch follows no FIFO (its bytes are read once, by
    `watch -`) and no directory under a file's name."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    return special_kind(mode)


class Follower:
    """One file followed (or the pipe `-`), with the state that makes each poll read only new bytes:
    where the file was read to, and its SourceReader (memlog/engine/reader.py), which keeps the
    parser's, the condenser's and the generic reader's state from poll to poll."""

    def __init__(self, source: Source, plan: ReadingPlan, settle: bool = False) -> None:
        self.source, self.plan, self.settle = source, plan, settle
        # Lines are read by `lines`; `reader` is it, or a StoreReader for an event file (read whole).
        self.lines = SourceReader(plan, source, batch_rows=BATCH_ROWS)
        self.reader: SourceReader | StoreReader = self.lines
        self.store = is_event_file(source.spec)  # a TensorBoard event file: read again whole as it grows
        self.store_state: tuple[int, int, int] | None = None
        self.compressed = False  # read once, whole (_read_compressed); `ended` once read
        self.changed = False  # a compressed file changed while it was read: to be read again
        self.handle: BinaryIO | None = None
        self.file_id: tuple[int, int] | None = None
        self.position = 0
        self.cutter = LineCutter(own_lines=self.lines.parser.reads_alone)
        self.rotations = 0
        self.truncations = 0
        self.waiting_said = False
        self.pipe: queue.Queue[bytes | None] | None = None
        self.ended = False
        self.written_at: float | None = None  # when its last bytes were written (file) or came (pipe)
        self.refused: str | None = None  # why the file under the name is not read (a FIFO, a device...)
        # The bytes at the start of the file and just before the position: a file cut and written
        # again past its old size in place (same inode, larger) is told from one that grew by them.
        self.head = b""
        self.behind = b""

    # -- reading --------------------------------------------------------------------------------

    @property
    def _file(self) -> BinaryIO:
        """The open file: reading, cutting and rotating run only once `_open` gave one."""
        if self.handle is None:
            raise RuntimeError(f"{self.source.spec}: no file open")
        return self.handle

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when something was read."""
        if self.source.spec == "-":
            return self._poll_pipe()
        if self.ended:
            return False
        if self.store:
            return self._poll_store()
        if not self.compressed and self.handle is None and not self._open():
            return False
        if self.compressed:
            return self._read_compressed()
        cut = self._cut_in_place()
        if cut:
            self._restart("truncated")
        got = self._read_to_end()
        if got:
            self.written_at = os.fstat(self._file.fileno()).st_mtime
        try:
            st = os.stat(self.source.spec)
        except OSError:
            return got or cut  # moved away and not yet recreated: the old file may still grow
        if (st.st_dev, st.st_ino) != self.file_id:
            self._read_to_end()  # the last bytes written to the old file
            self._restart("rotated")
            if self._open() and not self.compressed:  # a compressed one is read whole at the next poll
                self._read_to_end()
            return True
        return got or cut

    def _poll_store(self) -> bool:
        """An event file: read again whole when it changed (event files hold a few records per
        step; a writer may flush a record in parts, read whole at the next poll)."""
        try:
            st = os.stat(self.source.spec)
        except FileNotFoundError:
            return False
        kind = not_followed(st.st_mode)
        if kind is not None:
            why = f"{self.source.spec}: {kind}, not an event file"
            if self.store_state is None:
                raise InputError(why)
            self.refused, self.ended = why, True
            return False
        state = (st.st_ino, st.st_size, st.st_mtime_ns)
        if state == self.store_state:
            return False
        self.store_state, self.written_at = state, st.st_mtime
        self.reader = StoreReader(self.plan, self.source)
        return True

    def _cut_in_place(self) -> bool:
        """The file under the handle is shorter than what was read, or its first bytes or the bytes
        before the position changed: it was cut (copytruncate, `>` again) and maybe written again
        past its old size since the last poll."""
        fd = self._file.fileno()
        if os.fstat(fd).st_size < self.position:
            return True
        if self.position == 0:
            return False
        return os.pread(fd, len(self.head), 0) != self.head or os.pread(fd, len(self.behind), self.position - len(self.behind)) != self.behind

    def _open(self) -> bool:
        """Open the file under the name; False while there is none. Only a regular file is read: a
        FIFO would block the open (or the read) until a writer comes, a device may never end, a
        directory cannot be read. Named so at start, one line (exit 2); found so later under the
        name, this input ends (`refused`) and what was read stands."""
        try:
            st = os.stat(self.source.spec)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise InputError(f"{self.source.spec}: cannot open ({exc.strerror or exc})") from None
        kind = not_followed(st.st_mode)
        if kind is None:
            try:  # O_NONBLOCK: a FIFO put under the name since the stat does not block the open
                handle = os.fdopen(os.open(self.source.spec, os.O_RDONLY | os.O_NONBLOCK), "rb")
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise InputError(f"{self.source.spec}: cannot open ({exc.strerror or exc})") from None
            st = os.fstat(handle.fileno())
            kind = not_followed(st.st_mode)
            if kind is not None:
                handle.close()
        if kind is not None:
            why = f"{self.source.spec}: {kind}, not a log file: watch follows regular files (a pipe: memlog watch - < PIPE)"
            if self.file_id is None:
                raise InputError(why)
            self.refused, self.ended = why, True
            return False
        if compression_of(handle.read(10)) is not None:
            handle.close()
            self.compressed = True
            return True
        handle.seek(0)
        self.handle, self.file_id, self.position, self.head, self.behind = handle, (st.st_dev, st.st_ino), 0, b"", b""
        return True

    def _read_to_end(self) -> bool:
        """Every byte from the position to the current end of the file, a chunk at a time."""

        backlog = os.fstat(self._file.fileno()).st_size - self.position > CHUNK_BYTES

        def blocks() -> Iterator[bytes]:
            while True:
                block = self._file.read(CHUNK_BYTES)
                if not block:
                    return
                if len(self.head) < HEAD_BYTES:
                    self.head += block[: HEAD_BYTES - len(self.head)]
                self.position += len(block)
                self.behind = (self.behind + block)[-HEAD_BYTES:]
                self.source.stats.bytes_read += len(block)
                yield block

        # A few appended lines are scanned here; a backlog (the file as found at start) on all cores.
        return self._absorb((piece for block in blocks() for piece in self.cutter.feed(block)), workers=None if backlog else 1)

    def _read_compressed(self) -> bool:
        """The whole file, decompressed, as `analyze` reads it; then it is done (it cannot grow)."""
        try:
            before = os.stat(self.source.spec)
        except OSError:
            return False  # gone before it was read (a rotation deleted it)
        if self.settle and time.time() - before.st_mtime < SETTLE_SECONDS:
            return False  # possibly still being compressed: read it once finished
        try:
            self._absorb(read_pieces(self.source, own_lines=self.lines.parser.reads_alone), workers=None)
        except InputError:
            return False
        self.reader.finish()
        self.ended, self.written_at = True, before.st_mtime
        try:
            after = os.stat(self.source.spec)
            self.changed = (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns)
        except OSError:
            pass
        return True

    def _restart(self, why: str) -> None:
        """The file was replaced or cut: what is left of the old one is finished; line numbers go on."""
        self._absorb(self.cutter.finish())
        self.lines.end_of_file()
        self.cutter = LineCutter(self.cutter.next_line, self.lines.parser.reads_alone)
        if why == "rotated":
            self.rotations += 1
            self._file.close()
            self.handle = None
        else:
            self.truncations += 1
            self._file.seek(0)
            self.position, self.head, self.behind = 0, b"", b""

    def _poll_pipe(self) -> bool:
        if self.pipe is None:
            self.pipe = queue.Queue()
            threading.Thread(target=_read_pipe, args=(self.pipe,), daemon=True, name="memlog-stdin").start()
        data = []
        while True:
            try:
                block = self.pipe.get_nowait()
            except queue.Empty:
                break
            if block is None:
                self.ended = True
                break
            data.append(block)
        self.source.stats.bytes_read += sum(map(len, data))
        if data:
            self.written_at = time.time()
        pieces = [p for block in data for p in self.cutter.feed(block)]
        if self.ended:
            pieces += list(self.cutter.finish())
        got = self._absorb(iter(pieces))
        if self.ended:
            self.reader.finish()
        return got or self.ended

    # -- parsing ---------------------------------------------------------------------------------

    def _absorb(self, pieces: Iterator[Piece], workers: int | None = 1) -> bool:
        """Scan pieces (on `workers` threads; None: all cores), absorb them in file order."""
        return self.lines.read(pieces, workers)

    def records(self) -> pl.DataFrame | None:
        """Every record read so far, as one frame (condensed where the condenser has binned), the
        generic reader's guess made on what was read where it had not decided yet."""
        return self.reader.records()

    def finish(self) -> None:
        """Watching is over: the unfinished last line and a block still open (a multi-line record
        waiting for its next line) are read as they stand, as `analyze` reads a file's end."""
        if self.reader.finished:  # (a pipe's end, a compressed file)
            return
        self._absorb(self.cutter.finish())
        self.reader.finish()
        self.ended = True
        self.cutter = LineCutter(self.cutter.next_line, self.lines.parser.reads_alone)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class RunFollower:
    """An MLflow run followed (memlog/parse/stores/mlflow.py): its metric history read again whole,
    at most every STORE_POLL_SECONDS of the watcher's clock, and its records replaced when the
    points changed. Speaks as a Follower does to the watcher; a run never ends by itself (as a file
    does not: a finished run may be resumed), and a store that stops answering after the first read
    is said once, what was read standing."""

    compressed = changed = ended = settle = False
    handle = None
    rotations = truncations = 0

    def __init__(self, run: MlflowRun, plan: ReadingPlan, clock: Callable[[], float]) -> None:
        self.run, self.plan, self.clock = run, plan, clock
        self.source = Source(run.name)
        self.reader = StoreReader(plan, self.source, functools.partial(read_mlflow_run, run))  # the first read: a failure is one line, exit 2
        self.read_at = clock()
        self.points = self.source.stats.lines
        self.written_at = _last_seconds(self.reader.records())
        self.refused: str | None = None
        self.failing = False

    def poll(self) -> bool:
        if self.clock() - self.read_at < STORE_POLL_SECONDS:
            return False
        self.read_at = self.clock()
        source = Source(self.run.name)
        try:
            reader = StoreReader(self.plan, source, functools.partial(read_mlflow_run, self.run))
        except InputError as error:
            if not self.failing:
                self.failing, self.refused = True, str(error)
            return False
        self.failing = False
        if source.stats.lines == self.points:
            return False
        self.source, self.reader, self.points = source, reader, source.stats.lines
        self.written_at = _last_seconds(reader.records()) or self.written_at
        return True

    def records(self) -> pl.DataFrame | None:
        return self.reader.records()

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass


def _last_seconds(records: pl.DataFrame | None) -> float | None:
    """When the run's last point was logged (its timestamp, seconds since the epoch)."""
    if records is None or "_seconds" not in records.columns:
        return None
    last = records["_seconds"].max()
    return float(last) if isinstance(last, (int, float)) else None


def _read_pipe(into: queue.Queue) -> None:
    """Standard input's bytes as they come, on a thread of their own (a read blocks)."""
    fd = sys.stdin.fileno()
    try:
        while block := os.read(fd, 1 << 20):
            into.put(block)
    except OSError:
        pass
    into.put(None)
