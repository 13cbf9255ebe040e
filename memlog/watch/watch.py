"""Watch: follow growing logs like `tail -F` and re-judge the run as steps arrive.

Each followed file keeps its reading state between polls: the open file and how far it was read,
the unfinished last line (reading.LineCutter), the parser's multi-line state (parse.ChunkParser)
and the records read so far (condensed as `analyze` condenses them: memlog/tables/condense.py). A poll
reads only the bytes appended since the last one, so its reading cost follows what was appended,
never the size of the file. Judging runs the same rules as `analyze` over the records held
(api.judge); they grow with the logarithm of the steps per worker (condense.py), and a judgement
is made at most once per `interval` seconds, and never more often than it takes (a slow judgement
waits as long again), so judging takes at most half the time of a long run.

What `tail -F` does, this does: a file named but not yet created is waited for; a file replaced
under its name (logrotate's create, a restarted job) is read to its end, then the new one from its
start; a file cut shorter in place (copytruncate, `>` again) is read again from its start. Lines
after a rotation or truncation continue the source's line numbers (the series stay one run; a
restarted step counter starts a new segment as in `analyze`). A directory or glob is looked at
again every RESCAN_SECONDS, so rank files that appear later are followed too. `-` reads a pipe;
when every input is a pipe and all have ended, watching ends.

A compressed file (gzip, bzip2, xz: by its first bytes, not its name) cannot grow: it is a finished
rotation (logrotate's `compress` next to the live file), so it is read once, whole, as `analyze`
reads it, and its records are part of the run judged; it is never followed. One found by listing a
directory or glob is read once its last write is SETTLE_SECONDS old (logrotate may still be
compressing it), and read again if it changed while being read. When every input named is a pipe
that ended or a compressed file, nothing more can come and watching ends, as at a pipe's end.
"""

from __future__ import annotations

import glob
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from memlog.base.config import Config
from memlog.base.errors import InputError, MemlogError
from memlog.engine.options import ReadingOptions
from memlog.engine.plan import ReadingPlan
from memlog.engine.reader import SourceReader
from memlog.judge.rulekit import Finding
from memlog.read.inputs import directory_sources, file_source, natural_key
from memlog.read.source import CHUNK_BYTES, LineCutter, Piece, Source, compression_of, read_pieces, stdin
from memlog.report.report import Report
from memlog.tables.records import Keep
from memlog.watch.judging import capacity_projections, judge_held, leak_found

POLL_SECONDS = 0.2  # how often files are looked at for new bytes when nothing arrived
RESCAN_SECONDS = 2.0  # how often directories and globs are listed again for new files
BATCH_ROWS = 4096  # records a follower gathers from small polls before its condenser takes them
SETTLE_SECONDS = 2.0  # a compressed file found by listing is read once unwritten this long


@dataclass
class Progress:
    """What watching has seen so far, for the status and the early warning: when (wall clock)
    each step was first read live (not from the backlog found at start)."""

    started: float = field(default_factory=time.time)
    live: list[tuple[float, int]] = field(default_factory=list)  # (time read, highest step then)

    def steps_per_second(self) -> float | None:
        """The training's pace as watching saw it: steps per second over the live reads (the
        last ten minutes), or None before two reads a few seconds apart."""
        if len(self.live) < 2:
            return None
        recent = [(t, s) for t, s in self.live if t >= self.live[-1][0] - 600] or self.live[-2:]
        (t0, s0), (t1, s1) = recent[0], recent[-1]
        if t1 - t0 < 2 or s1 <= s0:
            return None
        return (s1 - s0) / (t1 - t0)


class Follower:
    """One file followed (or the pipe `-`), with the state that makes each poll read only new bytes:
    where the file was read to, and its SourceReader (memlog/engine/reader.py), which keeps the
    parser's, the condenser's and the generic reader's state from poll to poll."""

    def __init__(self, source: Source, plan: ReadingPlan, settle: bool = False) -> None:
        self.source, self.plan, self.settle = source, plan, settle
        self.reader = SourceReader(plan, source, batch_rows=BATCH_ROWS)
        self.compressed = False  # read once, whole (_read_compressed); `ended` once read
        self.changed = False  # a compressed file changed while it was read: to be read again
        self.handle = None
        self.file_id: tuple[int, int] | None = None
        self.position = 0
        self.cutter = LineCutter()
        self.rotations = 0
        self.truncations = 0
        self.waiting_said = False
        self.pipe: queue.Queue[bytes | None] | None = None
        self.ended = False
        self.written_at: float | None = None  # when its last bytes were written (file) or came (pipe)

    # -- reading --------------------------------------------------------------------------------

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when something was read."""
        if self.source.spec == "-":
            return self._poll_pipe()
        if self.ended:
            return False
        if not self.compressed and self.handle is None and not self._open():
            return False
        if self.compressed:
            return self._read_compressed()
        got = self._read_to_end()
        if got:
            self.written_at = os.fstat(self.handle.fileno()).st_mtime
        try:
            st = os.stat(self.source.spec)
        except OSError:
            return got  # moved away and not yet recreated: the old file may still grow
        if (st.st_dev, st.st_ino) != self.file_id:
            self._read_to_end()  # the last bytes written to the old file
            self._restart("rotated")
            if self._open() and not self.compressed:  # a compressed one is read whole at the next poll
                self._read_to_end()
            return True
        if st.st_size < self.position:
            self._restart("truncated")
            self._read_to_end()
            return True
        return got

    def _open(self) -> bool:
        try:
            handle = open(self.source.spec, "rb")  # noqa: SIM115 - kept open while followed
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise InputError(f"{self.source.spec}: cannot open ({exc.strerror or exc})") from None
        if compression_of(handle.read(10)) is not None:
            handle.close()
            self.compressed = True
            return True
        handle.seek(0)
        st = os.fstat(handle.fileno())
        self.handle, self.file_id, self.position = handle, (st.st_dev, st.st_ino), 0
        return True

    def _read_to_end(self) -> bool:
        """Every byte from the position to the current end of the file, a chunk at a time."""

        backlog = os.fstat(self.handle.fileno()).st_size - self.position > CHUNK_BYTES

        def blocks() -> Iterator[bytes]:
            while True:
                block = self.handle.read(CHUNK_BYTES)
                if not block:
                    return
                self.position += len(block)
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
            self._absorb(read_pieces(self.source), workers=None)
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
        self.reader.end_of_file()
        self.cutter = LineCutter(self.cutter.next_line)
        if why == "rotated":
            self.rotations += 1
            self.handle.close()
            self.handle = None
        else:
            self.truncations += 1
            self.handle.seek(0)
            self.position = 0

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
        return self.reader.read(pieces, workers)

    def records(self) -> pl.DataFrame | None:
        """Every record read so far, as one frame (condensed where the condenser has binned), the
        generic reader's guess made on what was read where it had not decided yet."""
        self.reader.settle_guess()
        return self.reader.records()

    def finish(self) -> None:
        """Watching is over: the unfinished last line and a block still open (a multi-line record
        waiting for its next line) are read as they stand, as `analyze` reads a file's end."""
        if self.ended or self.compressed:
            return
        self._absorb(self.cutter.finish())
        self.reader.finish()
        self.ended = True
        self.cutter = LineCutter(self.cutter.next_line)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def _read_pipe(into: queue.Queue) -> None:
    """Standard input's bytes as they come, on a thread of their own (a read blocks)."""
    fd = sys.stdin.fileno()
    try:
        while block := os.read(fd, 1 << 20):
            into.put(block)
    except OSError:
        pass
    into.put(None)


class Watcher:
    """The inputs followed, found again as directories and globs gain files, judged as they grow."""

    def __init__(
        self, inputs: list[str], options: ReadingOptions = ReadingOptions(), *, config: Config | None = None, capacity_gib: float | None = None,
        notice: Callable[[str], None] = lambda message: None, interval: float = 1.0,
    ) -> None:
        self.inputs = list(inputs)
        self.config, self.capacity_gib = config if config is not None else options.loaded_config(), capacity_gib
        self.plan = ReadingPlan.of(options, config=self.config, keep=Keep.judged())
        self.notice, self.interval = notice, interval
        self.followers: dict[str, Follower] = {}
        self.compressed_said: set[str] = set()
        self.last_scan = 0.0
        self.judged_at = 0.0
        self.judge_seconds = 0.0
        self.unjudged = False
        self.progress = Progress()
        self.report: Report | None = None
        # Listed inputs (a directory, a glob) can gain files: watching them never ends by itself.
        self.listing = any(spec != "-" and (os.path.isdir(spec) or (not os.path.exists(spec) and any(c in spec for c in "*?[")))
                           for spec in self.inputs)
        if "-" in self.inputs:
            stdin()  # closed, or a directory: one line now, not a dead reader thread
        self.discover(force=True)

    def discover(self, force: bool = False) -> None:
        """Follow every file the inputs name now (directories and globs are listed again)."""
        now = time.monotonic()
        if not force and now - self.last_scan < RESCAN_SECONDS:
            return
        self.last_scan = now
        for spec in self.inputs:
            if spec == "-":
                self._follow(Source("-"))
            elif os.path.isdir(spec):
                for source in directory_sources(Path(spec)):
                    self._follow(source, settle=True)
            elif not os.path.exists(spec) and any(c in spec for c in "*?["):
                for path in sorted(glob.glob(spec, recursive=True), key=natural_key):
                    if os.path.isfile(path):
                        self._follow(file_source(path), settle=True)
            else:
                if spec not in self.followers and not os.path.exists(spec):
                    self.notice(f"{spec}: does not exist yet; waiting for it")
                self._follow(file_source(spec))

    def _follow(self, source: Source, settle: bool = False) -> None:
        if source.spec not in self.followers:
            self.followers[source.spec] = Follower(source, self.plan, settle)

    @property
    def ended(self) -> bool:
        """Only pipes and compressed files were named, and all were read to their end: nothing more can come."""
        return not self.listing and bool(self.followers) and all(f.ended for f in self.followers.values())

    def poll(self) -> bool:
        """Read what every input appended; True when anything was read."""
        self.discover()
        got = False
        for spec, follower in list(self.followers.items()):
            got |= follower.poll()
            if follower.compressed and follower.ended:
                self._compressed_read(spec, follower)
        if got:
            self.unjudged = True
        return got

    def _compressed_read(self, spec: str, follower: Follower) -> None:
        """Say once that a compressed file was read whole (and if it was damaged); one that changed
        while it was read is read again from scratch."""
        if follower.changed and not follower.settle:
            follower.changed = False  # named on the command line: what was read stands
        if follower.changed:
            self.followers[spec] = Follower(Source(spec, identity=follower.source.identity), self.plan, settle=True)
            return
        if spec in self.compressed_said:
            return
        self.compressed_said.add(spec)
        damage = follower.source.stats.damaged
        self.notice(f"{spec}: compressed: read whole, not followed (it cannot grow)"
                    + (f"; {damage}, analysed what was readable" if damage else ""))

    def due(self) -> bool:
        """Time to judge: something new, at least `interval` since the last judgement, and at least
        as long as the last judgement took (judging never takes more than half the time)."""
        wait = max(self.interval, self.judge_seconds)
        return self.unjudged and time.monotonic() - self.judged_at >= wait

    def judge(self) -> Report | None:
        """The verdict on everything read so far (None while no record or fatal event was read)."""
        started = time.monotonic()
        self.unjudged = False
        readers = [f.reader for f in self.followers.values()]
        record_frames = [frame for f in self.followers.values() if (frame := f.records()) is not None]
        event_frames = [frame for r in readers if (frame := r.event_frame()) is not None]
        self.judged_at = time.monotonic()
        if not record_frames and not event_frames:
            return self.report
        # Restart segments a follower's condenser no longer holds are counted as analyze counts them.
        summarised = [s for r in readers for s in r.summarised()]
        guessed = [g for r in readers if (g := r.guess_said()) is not None]
        sources = [f.source for f in self.followers.values()]
        report = judge_held(record_frames, event_frames, summarised, sources, config=self.config, capacity_gib=self.capacity_gib,
                            guessed=guessed)
        if report is None:
            return self.report
        report.extra["watch"] = self._state(report)
        self.report = report
        self.judge_seconds = time.monotonic() - started
        self.judged_at = time.monotonic()
        return report

    def _state(self, report: Report) -> dict:
        steps = report.coverage.get("steps")
        if steps and self.report is not None:  # the backlog read at start does not show the pace
            self.progress.live.append((time.time(), steps[1]))
        return {
            "files": len([f for f in self.followers.values() if f.handle is not None or f.source.spec == "-"]),
            "rotations": sum(f.rotations for f in self.followers.values()),
            "truncations": sum(f.truncations for f in self.followers.values()),
            "steps_per_second": self.progress.steps_per_second(),
            "last_written": max((f.written_at for f in self.followers.values() if f.written_at), default=None),
        }

    def finish(self) -> None:
        """Nothing more is read: every follower's last line and open block count (judge() after)."""
        for follower in self.followers.values():
            if not follower.ended:
                follower.finish()
                self.unjudged = True

    def close(self) -> None:
        for follower in self.followers.values():
            follower.close()


# -- what changed between two judgements ---------------------------------------------------------


def finding_key(f: Finding) -> tuple[str, str, str]:
    """A finding as watching tracks it: its rule, what it is about and how severe it is (its
    numbers change at every step; a change of these is news)."""
    return (f.rule, f.subject, f.severity)


@dataclass
class Change:
    report: Report
    previous_verdict: str | None
    new: list[Finding]
    gone: list[tuple[str, str, str]]

    @property
    def verdict_changed(self) -> bool:
        return self.previous_verdict != self.report.verdict


def changes(previous: Report | None, report: Report) -> Change | None:
    """What is news in `report` after `previous`: a new verdict, findings new or gone; None if nothing."""
    before = {finding_key(f) for f in previous.findings} if previous else set()
    now = {finding_key(f) for f in report.findings}
    new = [f for f in report.findings if finding_key(f) not in before]
    gone = sorted(before - now)
    previous_verdict = previous.verdict if previous else None
    if not new and not gone and previous_verdict == report.verdict:
        return None
    return Change(report, previous_verdict, new, gone)


def should_exit(report: Report, exit_on: str) -> bool:
    """`--exit-on`: leak (a finding implying the leak verdict), error (any error finding), never."""
    if exit_on == "leak":
        return leak_found(report)
    if exit_on == "error":
        return report.fails("error")
    return False


def early_warning(report: Report) -> list[dict]:
    """Per leaking series: when it reaches its capacity, in steps and in clock time. The time left
    after the last logged step is the log's own (its timestamps) when it has them, else the pace at
    which watching saw the steps arrive (Progress), else unknown; it runs from when the last line
    was written (the file's modification time, or when the pipe delivered it)."""
    state = report.extra.get("watch") or {}
    pace = state.get("steps_per_second")
    written = state.get("last_written") or time.time()
    last_step = (report.coverage.get("steps") or [None, None])[1]
    warnings = []
    for p in capacity_projections(report):
        step, at, in_seconds = p["capacity_step"], None, p["capacity_seconds"]
        if in_seconds is None and pace and last_step is not None:
            in_seconds = max(0.0, (step - last_step) / pace)
        if in_seconds is not None:
            at = time.strftime("%Y-%m-%d %H:%M", time.localtime(written + in_seconds))
            in_seconds = max(0.0, written + in_seconds - time.time())
        warnings.append({"series": p["series"], "rank": p["rank"], "capacity_step": step,
                         "capacity_in_seconds": None if in_seconds is None else round(in_seconds), "capacity_at": at,
                         "capacity_gib": p["capacity_gib"]})
    return warnings


class Terminated(Exception):
    """SIGTERM arrived (a batch scheduler stopping the job): end watching as Ctrl-C does."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # raised once: the closing verdict is printed whole
    raise Terminated


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While watching, SIGTERM raises Terminated in the main thread (its default kills the process
    with nothing printed); once watching ends (a first SIGTERM, or watch_loop finishing), SIGTERM
    is ignored until the context closes, so the closing verdict is judged and printed whole."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _finishing() -> None:
    """Watching is over: a SIGTERM from now on would cut the closing judgement or verdict short."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _raise_terminated:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def watch_loop(watcher: Watcher, on_report: Callable[[Report], bool], *, stop_after: float | None = None) -> tuple[Report | None, str]:
    """Poll and judge until `on_report(report)` says stop (True: "stopped"), the pipes end
    ("ended"), Ctrl-C ("interrupted"), SIGTERM ("terminated") or `stop_after` seconds pass
    ("timeout"). Returns the verdict on everything read (judged once more if anything came since)
    and why it ended. SIGTERM is only caught here when the caller made it raise (sigterm_raises)."""
    started = time.monotonic()
    why = "timeout"
    try:
        while True:
            got = watcher.poll()
            if watcher.due():
                report = watcher.judge()
                if report is not None and on_report(report):
                    return report, "stopped"
            if watcher.ended:
                why = "ended"
                break
            if stop_after is not None and time.monotonic() - started >= stop_after:
                break
            if not got:
                time.sleep(POLL_SECONDS)
    except (KeyboardInterrupt, Terminated) as exc:
        why = "terminated" if isinstance(exc, Terminated) else "interrupted"
        _finishing()  # after Ctrl-C, a SIGTERM during this last read would escape the loop
        watcher.poll()  # what was written up to the interrupt counts in the verdict printed
    finally:
        _finishing()
        watcher.finish()
        watcher.close()
    if watcher.unjudged:
        watcher.judge()
    return watcher.report, why


def no_records_error(watcher: Watcher) -> MemlogError:
    from memlog.engine.api import nothing_found

    sources = [f.source for f in watcher.followers.values()]
    return MemlogError(nothing_found(sources, watcher.specs) if sources else "no input file appeared")

