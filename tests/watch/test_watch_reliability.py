"""`memlog watch` loses nothing (issue 40): a signal at any moment ends watching with the verdict on
everything read, lines appended before it included; a file cut and written again is read from its
first byte; what is not a regular file is refused at open, never waited on.

Everything runs in this process, against a fake sleep: a signal is sent with os.kill at the exact
moment under test (the handler only records it, so it acts at that point, not at a time), and no
test waits on the wall clock.
"""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memlog.base.errors import InputError
from memlog.cli import app
from memlog.commands.watch import run_watch
from memlog.engine.api import analyze
from memlog.watch import follow
from memlog.watch.watch import Watcher, stopped_by_signals, watch_loop
from tests.watch.test_watch import flat_lines, leak_lines

runner = CliRunner()


def no_sleep(seconds: float) -> None:
    """watch_loop's sleep when nothing was read: nothing to wait for here (the files are written)."""


def write(path, lines: list[str], mode: str = "w") -> None:
    with open(path, mode) as handle:
        handle.write("".join(line + "\n" for line in lines))


def loop(watcher: Watcher, stop, on_report=lambda report: False, stop_after: float | None = None):
    return watch_loop(watcher, on_report, stop=stop, stop_after=stop_after, sleep=no_sleep)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_backlog_is_read_judges_everything_read(tmp_path, monkeypatch, signum):
    """The signal comes while the first chunk of a long backlog is being absorbed (the audit's
    "none of 80,000 lines matches"): the read in progress completes and the verdict covers it."""
    log = tmp_path / "train.log"
    write(log, leak_lines(3000))
    expected = analyze([str(log)])
    absorb, calls = follow.SourceReader.absorb, []

    def absorb_then_signal(self, piece, scanned):
        calls.append(piece)
        if len(calls) == 1:
            os.kill(os.getpid(), signum)
        return absorb(self, piece, scanned)

    monkeypatch.setattr(follow.SourceReader, "absorb", absorb_then_signal)
    with stopped_by_signals() as stop:
        report, why = loop(Watcher([str(log)], interval=3600), stop)
    assert why == ("terminated" if signum == signal.SIGTERM else "interrupted")
    assert (report.verdict, report.coverage["records"], report.coverage["steps"]) == (
        expected.verdict,
        expected.coverage["records"],
        expected.coverage["steps"],
    )


def test_lines_appended_before_the_signal_are_in_the_closing_verdict(tmp_path):
    log = tmp_path / "train.log"
    lines = flat_lines(200)
    write(log, lines[:100])
    reports = []

    def on_report(report) -> bool:
        reports.append(report)
        if len(reports) == 1:
            write(log, lines[100:], "a")  # the run writes on, and the scheduler's SIGTERM follows at once
            os.kill(os.getpid(), signal.SIGTERM)
        return False

    with stopped_by_signals() as stop:
        report, why = loop(Watcher([str(log)], interval=0), stop, on_report)
    assert why == "terminated"
    assert reports[0].coverage["steps"] == [1, 99] and report.coverage["steps"] == [1, 200]


@pytest.mark.parametrize("moment", ["judging", "printing"])
def test_a_signal_while_the_closing_verdict_is_judged_or_printed_changes_nothing(tmp_path, monkeypatch, moment):
    """Watching ended (here: at once, stop_after=0): a SIGTERM during the closing judgement or while
    the verdict is printed neither cuts it short nor becomes an error; the exit code is --fail-on's."""
    log = tmp_path / "train.log"
    lines = leak_lines(400)
    write(log, lines[:300])
    judge, judged, printed = Watcher.judge, [], []

    def judge_then_grow(self):
        report = judge(self)
        judged.append(report)
        if len(judged) == 1:
            write(log, lines[300:], "a")  # new steps after the first judgement: the closing one reads them
        elif moment == "judging":
            os.kill(os.getpid(), signal.SIGTERM)
        return report

    def output(text: str) -> None:
        if moment == "printing" and "memlog verdict" in text:
            os.kill(os.getpid(), signal.SIGTERM)
        printed.append(text)

    monkeypatch.setattr(Watcher, "judge", judge_then_grow)
    code = run_watch([str(log)], interval=3600, stop_after=0, write=output)
    text = "".join(printed)
    assert code == 1 and "memlog verdict: LEAK" in text and len(judged) == 2
    assert judged[0].coverage["steps"][1] == 299 and judged[-1].coverage["steps"][1] == 400


def test_a_file_cut_and_written_again_past_its_old_size_is_read_from_its_first_byte(tmp_path):
    """copytruncate, then a restarted run writes more than the old file held before the next poll:
    its size alone says "grown"; its bytes say it was cut."""
    log = tmp_path / "train.log"
    write(log, flat_lines(60))
    watcher = Watcher([str(log)], interval=0)
    watcher.poll()
    assert watcher.judge().coverage["steps"] == [1, 60]
    write(log, leak_lines(400))  # the same inode, cut and written again, larger
    watcher.poll()
    watcher.finish()
    report = watcher.judge()
    assert report.extra["watch"]["truncations"] == 1
    expected = analyze([str(log)])
    assert report.verdict == expected.verdict == "leak"
    # every step of the new file was read (its first ones too), after the old file's 60
    assert report.coverage["records"] == expected.coverage["records"] + 60
    watcher.close()


def test_a_file_that_only_grew_is_not_read_again(tmp_path):
    log = tmp_path / "train.log"
    lines = flat_lines(120)
    write(log, lines[:60])
    watcher = Watcher([str(log)], interval=0)
    watcher.poll()
    write(log, lines[60:], "a")
    watcher.poll()
    watcher.finish()
    report = watcher.judge()
    assert report.extra["watch"]["truncations"] == 0 and report.coverage["records"] == 120
    watcher.close()


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_special_file_named_is_refused_at_open_with_one_line(tmp_path, kind):
    path = {"fifo": tmp_path / "pipe", "directory": tmp_path, "device": "/dev/zero"}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes it: opening it plainly would block for ever
    if kind == "directory":  # a directory is watched for the files it gains, not refused
        return
    watcher = Watcher([str(path)], interval=0)
    with pytest.raises(InputError, match="not a log file"):
        watcher.poll()
    watcher.close()
    result = runner.invoke(app, ["watch", str(path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "memlog: error:" in result.stderr and "not a log file" in result.stderr


@pytest.mark.parametrize("replacement", ["fifo", "directory"])
def test_a_file_replaced_by_a_special_file_ends_that_input_with_what_was_read(tmp_path, replacement):
    log = tmp_path / "train.log"
    write(log, flat_lines(60))
    notices: list[str] = []
    watcher = Watcher([str(log)], interval=0, notice=notices.append)
    watcher.poll()
    log.unlink()
    if replacement == "fifo":
        os.mkfifo(log)
    else:
        log.mkdir()
    with stopped_by_signals() as stop:
        report, why = loop(watcher, stop)
    assert why == "ended" and report.coverage["steps"] == [1, 60] and report.verdict == "stable"
    assert any("not a log file" in n for n in notices)


LONG = leak_lines(1500)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(1, 40), signum=st.sampled_from([signal.SIGINT, signal.SIGTERM]), appended=st.integers(0, 300))
def test_whenever_the_signal_comes_the_verdict_is_analyzes_of_what_was_written(tmp_path_factory, at, signum, appended):
    """Property: a signal at the `at`-th chunk absorbed (small chunks: many of them), with `appended`
    more lines written just before it: the closing verdict is analyze's on the whole file."""
    log = tmp_path_factory.mktemp("signal") / "train.log"
    write(log, LONG[: len(LONG) - appended])
    absorbed = [0]
    absorb = follow.SourceReader.absorb

    def absorb_then_signal(self, piece, scanned):
        absorbed[0] += 1
        if absorbed[0] == at:
            write(log, LONG[len(LONG) - appended :], "a")
            os.kill(os.getpid(), signum)
        return absorb(self, piece, scanned)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(follow, "CHUNK_BYTES", 4096)
        patch.setattr(follow.SourceReader, "absorb", absorb_then_signal)
        with stopped_by_signals() as stop:
            report, why = loop(Watcher([str(log)], interval=0), stop, stop_after=600)  # (a bound, never reached)
    expected = analyze([str(log)])
    assert why == ("terminated" if signum == signal.SIGTERM else "interrupted")  # (the file has > 40 chunks)
    assert (report.verdict, report.coverage["records"]) == (expected.verdict, expected.coverage["records"])
