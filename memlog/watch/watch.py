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
start; a file cut in place (copytruncate, `>` again) is read again from its start, even when it was
written past its old size before the next poll (its first bytes, or those before where it was read
to, changed). Only regular files are read: a FIFO, a device or a directory under a name is refused
with one line (named so at start: exit 2; put there later: that input ends with what was read). Lines
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

Ctrl-C and SIGTERM never interrupt a read or a judgement: they are recorded (StopRequest), and
watching ends at the loop's next turn with a last read of what was appended, a closing judgement of
everything read and the verdict printed whole.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memlog.base.config import Config
from memlog.base.errors import MemlogError
from memlog.engine.options import ReadingOptions
from memlog.engine.plan import ReadingPlan
from memlog.judge.rulekit import Finding
from memlog.parse.stores import is_mlflow_input, mlflow_runs
from memlog.read.inputs import directory_sources, file_source, natural_key
from memlog.read.source import Source, stdin
from memlog.report.report import Report
from memlog.tables.records import Keep
from memlog.watch.follow import Follower, RunFollower
from memlog.watch.judging import capacity_projections, judge_held, leak_found

POLL_SECONDS = 0.2  # how often files are looked at for new bytes when nothing arrived
RESCAN_SECONDS = 2.0  # how often directories and globs are listed again for new files


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


class Watcher:
    """The inputs followed, found again as directories and globs gain files, judged as they grow."""

    def __init__(
        self,
        inputs: list[str],
        options: ReadingOptions = ReadingOptions(),
        *,
        config: Config | None = None,
        capacity_gib: float | None = None,
        notice: Callable[[str], None] = lambda message: None,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: what paces judging and rescans (tests give a fake one; nothing waits on it)."""
        self.inputs = list(inputs)
        self.config, self.capacity_gib = config if config is not None else options.loaded_config(), capacity_gib
        self.plan = ReadingPlan.of(options, config=self.config, keep=Keep.judged())
        self.notice, self.interval, self.clock = notice, interval, clock
        self.followers: dict[str, Follower | RunFollower] = {}
        self.compressed_said: set[str] = set()
        self.last_scan = float("-inf")
        self.judged_at = float("-inf")
        self.judge_seconds = 0.0
        self.unjudged = False
        self.progress = Progress()
        self.report: Report | None = None
        # Listed inputs (a directory, a glob, an MLflow store) can gain files or runs: watching them
        # never ends by itself.
        self.listing = any(
            spec != "-" and (os.path.isdir(spec) or is_mlflow_input(spec) or (not os.path.exists(spec) and any(c in spec for c in "*?[")))
            for spec in self.inputs
        )
        if "-" in self.inputs:
            stdin()  # closed, or a directory: one line now, not a dead reader thread
        self.discover(force=True)

    def discover(self, force: bool = False) -> None:
        """Follow every file the inputs name now (directories and globs are listed again)."""
        now = self.clock()
        if not force and now - self.last_scan < RESCAN_SECONDS:
            return
        self.last_scan = now
        for spec in self.inputs:
            if spec == "-":
                self._follow(Source("-"))
            elif is_mlflow_input(spec):
                self._follow_runs(spec, first=force)
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

    def _follow_runs(self, spec: str, first: bool) -> None:
        """Every run of an MLflow store or server (listed again: runs start). A store that does not
        answer at the start is one line (exit 2); later, what was read stands."""
        try:
            runs = mlflow_runs(spec)
        except MemlogError:
            if first:
                raise
            return
        for run in runs:
            if run.name not in self.followers:
                self.followers[run.name] = RunFollower(run, self.plan, self.clock)

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
            if isinstance(follower, Follower) and follower.compressed and follower.ended:
                self._compressed_read(spec, follower)
            if follower.refused:
                self.notice(follower.refused + "; what was read of it stands")
                follower.refused = None
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
        self.notice(f"{spec}: compressed: read whole, not followed (it cannot grow)" + (f"; {damage}, analysed what was readable" if damage else ""))

    def due(self) -> bool:
        """Time to judge: something new, at least `interval` since the last judgement, and at least
        as long as the last judgement took (judging never takes more than half the time)."""
        wait = max(self.interval, self.judge_seconds)
        return self.unjudged and self.clock() - self.judged_at >= wait

    def judge(self) -> Report | None:
        """The verdict on everything read so far (None while no record or fatal event was read)."""
        started = self.clock()
        self.unjudged = False
        readers = [f.reader for f in self.followers.values()]
        record_frames = [frame for f in self.followers.values() if (frame := f.records()) is not None]
        event_frames = [frame for r in readers if (frame := r.event_frame()) is not None]
        self.judged_at = self.clock()
        if not record_frames and not event_frames:
            return self.report
        # Restart segments a follower's condenser no longer holds are counted as analyze counts them.
        summarised = [s for r in readers for s in r.summarised()]
        guessed = [g for r in readers if (g := r.guess_said()) is not None]
        sources = [f.source for f in self.followers.values()]
        report = judge_held(record_frames, event_frames, summarised, sources, config=self.config, capacity_gib=self.capacity_gib, guessed=guessed)
        if report is None:
            return self.report
        report.extra["watch"] = self._state(report)
        self.report = report
        self.judge_seconds = self.clock() - started
        self.judged_at = self.clock()
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
            if not follower.reader.finished:
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


# Further apart than any two time zones (UTC-12 .. UTC+14) and a minute's rounding: the log's last
# timestamp and when its last line reached watch are then not the same moment in two zones, and
# the log is an old one replayed (a paste piped in, a finished run's file).
LIVE_CLOCK_SLACK_SECONDS = 27 * 3600


def early_warning(report: Report) -> list[dict]:
    """Per leaking series: when it reaches its capacity, in steps and in clock time. The time left
    after the last logged step is the log's own (its timestamps) when it has them, else the pace at
    which watching saw the steps arrive (Progress), else unknown; it runs from when the last line
    was written (the file's modification time, or when the pipe delivered it). A log whose own
    clock shows it was written long before that is not live: the time is given by its own clock,
    as the leak finding gives it, and nothing is counted down (`capacity_clock`: "log")."""
    state = report.extra.get("watch") or {}
    pace = state.get("steps_per_second")
    written = state.get("last_written") or time.time()
    last_step = (report.coverage.get("steps") or [None, None])[1]
    logged_last = _last_logged_moment(report)
    replayed = logged_last is not None and abs(written - logged_last) > LIVE_CLOCK_SLACK_SECONDS
    warnings = []
    for p in capacity_projections(report):
        step, at, in_seconds, clock = p["capacity_step"], None, p["capacity_seconds"], None
        if replayed and in_seconds is not None:
            assert logged_last is not None  # (replayed)
            at, in_seconds, clock = _log_clock(logged_last + in_seconds), None, "log"
        else:
            if in_seconds is None and pace and last_step is not None:
                in_seconds = max(0.0, (step - last_step) / pace)
            if in_seconds is not None:
                at = time.strftime("%Y-%m-%d %H:%M", time.localtime(written + in_seconds))
                in_seconds, clock = max(0.0, written + in_seconds - time.time()), "watch"
        warnings.append(
            {
                "series": p["series"],
                "rank": p["rank"],
                "capacity_step": step,
                "capacity_in_seconds": None if in_seconds is None else round(in_seconds),
                "capacity_at": at,
                "capacity_clock": clock,
                "capacity_gib": p["capacity_gib"],
            }
        )
    return warnings


def _last_logged_moment(report: Report) -> float | None:
    """The moment of the log's last timestamped step, by its own clock (read as UTC, as projection.py
    reads it): the leak finding's projected time less the time left it projects."""
    for f in report.findings:
        at, seconds = f.evidence.get("projected_capacity_at"), f.evidence.get("projected_capacity_seconds")
        if at and seconds is not None:
            moment = datetime.strptime(at, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)
            return moment.timestamp() - seconds
    return None


def _log_clock(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


class StopRequest:
    """A signal handler for SIGINT and SIGTERM while watching: it only records that one came, and
    watch_loop ends at its next turn, once the read or judgement in progress is done, reads what
    was appended up to then and judges everything read. Nothing a signal interrupts is lost
    halfway (a chunk half absorbed, a verdict half printed). A second Ctrl-C while that last read
    and judgement run raises KeyboardInterrupt, for a user who will not wait."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum: int, frame) -> None:
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = self.signal or signum

    @property
    def why(self) -> str:
        return "terminated" if self.signal == signal.SIGTERM else "interrupted"


@contextmanager
def stopped_by_signals() -> Iterator[StopRequest]:
    """SIGINT and SIGTERM, from now until the context closes, ask watching to stop (StopRequest):
    a batch scheduler's SIGTERM ends watching as Ctrl-C does, never the process with nothing printed."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def watch_loop(
    watcher: Watcher,
    on_report: Callable[[Report], bool],
    *,
    stop: StopRequest | None = None,
    stop_after: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Report | None, str]:
    """Poll and judge until `on_report(report)` says stop (True: "stopped"), the pipes end
    ("ended"), `stop` records a Ctrl-C ("interrupted") or SIGTERM ("terminated"), or `stop_after`
    seconds of the watcher's clock pass ("timeout"). Returns the verdict on everything read (judged
    once more if anything came since) and why it ended."""
    stop = stop or StopRequest()
    started = watcher.clock()
    why = "timeout"
    try:
        while True:
            got = watcher.poll()
            if watcher.due():
                report = watcher.judge()
                if report is not None and on_report(report):
                    return report, "stopped"
            if stop.signal is not None:
                why = stop.why
            elif watcher.ended:
                why = "ended"
                break
            elif stop_after is None or watcher.clock() - started < stop_after:
                if not got:
                    sleep(POLL_SECONDS)
                continue
            watcher.poll()  # what was appended up to the signal (or the time) counts in the verdict
            break
    finally:
        watcher.finish()
        watcher.close()
    if watcher.unjudged:
        watcher.judge()
    return watcher.report, why


def no_records_error(watcher: Watcher) -> MemlogError:
    from memlog.engine.reader import nothing_found

    sources = [f.source for f in watcher.followers.values()]
    return nothing_found(sources, watcher.plan) if sources else MemlogError("no input file appeared")
