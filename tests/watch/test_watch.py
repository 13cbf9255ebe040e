"""`memlog watch`: a writer (thread or process) appends to a file or a pipe while watch follows it.

Each test runs watch as its own process (as users do: Ctrl-C, pipes, exit codes) over lines written
by tests.logwriters (tests/synthetic.py). Writers write slowly enough that "before the writer
finishes" means something: a leak is evident after a few dozen steps, the writer writes hundreds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from memlog.watch.watch import Watcher
from tests.synthetic import torchtitan_lines

ROOT = Path(__file__).resolve().parents[2]
CAPACITY = 79.11


def noise(i: int) -> float:
    """Small irregular noise, the same on every run (no period for a sawtooth detector to find)."""
    return 0.02 * ((i * 7919) % 13) / 13


def leak_lines(n: int, rank: int = 0, start: float = 20.0) -> list[str]:
    """Flat for 10 steps, then +0.1 GiB per step (capacity line first)."""
    memory = [start + (0.0 if i < 10 else 0.1 * (i - 9)) + noise(i) for i in range(n)]
    return torchtitan_lines({rank: memory}, capacity=CAPACITY)


def flat_lines(n: int, rank: int = 0, first_step: int = 1) -> list[str]:
    memory = [30.0 + noise(i) for i in range(n)]
    return torchtitan_lines({rank: memory}, steps=list(range(first_step, first_step + n)), capacity=CAPACITY)


def start_watch(*args: str, stdin=None) -> subprocess.Popen:
    """watch in its own process; its output goes to files (a pipe it never drains could block it)."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlog.cli", "watch", *args, "--interval", "0.2"],
        cwd=ROOT,
        stdin=stdin,
        stdout=out,
        stderr=err,
        text=True,
    )
    proc.outputs = (out, err)
    return proc


def wait_for(proc: subprocess.Popen, text: str, *, stream: int = 0, timeout: float = 60) -> None:
    """Wait until watch has printed `text` (stream 0: stdout, 1: stderr): it has started, or judged."""
    handle = proc.outputs[stream]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        handle.seek(0)
        if text in handle.read():
            return
        assert proc.poll() is None, "watch ended early"
        time.sleep(0.1)
    raise AssertionError(f"watch did not print {text!r} within {timeout} s")


class SlowWriter(threading.Thread):
    """Appends lines to a file (or writes them to a pipe) a few at a time, then sets `done`. With
    `hold`, its last `hold` lines wait until it is stopped: a run still going when watch ends, on
    a busy machine as on an idle one."""

    def __init__(self, lines: list[str], path: Path | None = None, pipe=None, pause: float = 0.03, batch: int = 2, hold: int = 0):
        super().__init__(daemon=True)
        self.lines, self.path, self.pipe, self.pause, self.batch, self.hold = lines, path, pipe, pause, batch, hold
        self.done = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            for i in range(0, len(self.lines), self.batch):
                if self.hold and i >= len(self.lines) - self.hold:
                    self.stop.wait()  # the run goes on until the test stops it
                if self.stop.is_set():
                    return
                text = "".join(line + "\n" for line in self.lines[i : i + self.batch])
                if self.pipe is not None:
                    self.pipe.write(text)
                    self.pipe.flush()
                else:
                    with open(self.path, "a") as handle:
                        handle.write(text)
                time.sleep(self.pause)
            self.done.set()
        except (BrokenPipeError, ValueError, OSError):
            return  # watch exited and closed the pipe: the point of --exit-on


def finish(proc: subprocess.Popen, writer: SlowWriter | None = None, timeout: float = 90) -> tuple[int, str, str]:
    try:
        proc.wait(timeout=timeout)
    finally:
        if writer is not None:
            writer.stop.set()
        if proc.poll() is None:
            proc.kill()
    texts = []
    for handle in proc.outputs:
        handle.seek(0)
        texts.append(handle.read())
        handle.close()
    return proc.returncode, texts[0], texts[1]


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_leak_in_a_growing_file_exits_1_before_the_writer_finishes(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("")
    writer = SlowWriter(leak_lines(600), path=log, hold=100)
    proc = start_watch(str(log), "--exit-on", "leak", "-o", "jsonl")
    writer.start()
    code, out, err = finish(proc, writer)
    assert code == 1, err  # watch ended by itself on the leak, the run still going (its last lines held)
    objects = json_lines(out)
    assert objects[-1]["watch"]["event"] == "final" and objects[-1]["watch"]["ended"] == "stopped"
    leak = next(o for o in objects if o["verdict"] == "leak")
    finding = next(f for f in leak["findings"] if f["rule"] == "memory-leak")
    assert {"rule", "severity", "subject", "message", "evidence", "hints", "lines"} <= set(finding)
    warning = leak["watch"]["early_warning"][0]  # the capacity step, and a clock time (the log has timestamps)
    assert warning["capacity_step"] > leak["coverage"]["steps"][1] and warning["capacity_at"]
    assert "--exit-on leak" in err


def test_leak_from_a_pipe_exits_1_before_the_writer_finishes():
    proc = start_watch("-", "--exit-on", "leak", stdin=subprocess.PIPE)
    writer = SlowWriter(leak_lines(600), pipe=proc.stdin, hold=100)
    writer.start()
    code, out, err = finish(proc, writer)
    assert code == 1, err  # ended by itself on the leak, the pipe still open
    assert "verdict leak" in out and "+ error memory-leak" in out  # piped text: a line per change


def test_healthy_run_keeps_being_followed_and_ctrl_c_prints_the_verdict(tmp_path):
    log = tmp_path / "train.log"
    proc = start_watch(str(log), "--exit-on", "leak", "-o", "jsonl")  # the file does not exist yet
    wait_for(proc, "waiting for it", stream=1)
    writer = SlowWriter(flat_lines(80), path=log, pause=0.01)
    writer.start()
    writer.join(30)
    assert writer.done.is_set()
    wait_for(proc, '"verdict": "stable"')
    assert proc.poll() is None, "a healthy run is followed on"
    with open(log, "a") as handle:  # and still read: more steps of the same run, up to the Ctrl-C
        handle.write("\n".join(flat_lines(20, first_step=81)[1:]) + "\n")
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 0, err
    final = json_lines(out)[-1]
    assert final["watch"]["ended"] == "interrupted"
    assert final["verdict"] == "stable" and final["coverage"]["steps"] == [1, 100]


def test_ctrl_c_exit_code_follows_fail_on(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(leak_lines(60)) + "\n")
    proc = start_watch(str(log))  # --exit-on never: watch goes on after the leak
    wait_for(proc, "verdict leak")
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    code, out, _ = finish(proc)
    assert code == 1 and "memlog verdict: LEAK" in out
    proc = start_watch(str(log), "--fail-on", "never")
    wait_for(proc, "verdict leak")
    proc.send_signal(signal.SIGINT)
    assert finish(proc)[0] == 0


def test_rotation_is_followed_into_the_new_file(tmp_path):
    log = tmp_path / "train.log"
    lines = leak_lines(200)
    log.write_text("\n".join(lines[:8]) + "\n")  # the capacity line and flat steps
    proc = start_watch(str(log), "--exit-on", "leak", "-o", "jsonl")
    wait_for(proc, '"verdict"')  # judged: the first file was read
    os.rename(log, tmp_path / "train.log.1")  # logrotate's create: a new file under the name
    writer = SlowWriter(lines[8:], path=log)
    writer.start()
    code, out, err = finish(proc, writer)
    assert code == 1, err
    final = json_lines(out)[-1]
    assert final["watch"]["rotations"] == 1
    assert final["coverage"]["steps"][0] == 1  # the steps before the rotation are part of the run judged


def test_truncation_reads_the_file_again_from_its_start(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(flat_lines(60)) + "\n")
    proc = start_watch(str(log), "--exit-on", "leak", "-o", "jsonl")
    wait_for(proc, '"verdict": "stable"')
    log.write_text("")  # truncated in place (copytruncate), then a restarted run leaks
    writer = SlowWriter(leak_lines(400), path=log)
    writer.start()
    code, out, err = finish(proc, writer)
    assert code == 1, err
    final = json_lines(out)[-1]
    assert final["watch"]["truncations"] == 1
    assert any(f["rule"] == "memory-leak" for f in final["findings"])


def test_a_rank_file_appearing_in_a_watched_directory_is_picked_up(tmp_path):
    (tmp_path / "rank0.log").write_text("\n".join(flat_lines(60, rank=0)) + "\n")
    proc = start_watch(str(tmp_path), "--exit-on", "leak", "-o", "jsonl")
    wait_for(proc, '"verdict": "stable"')
    writer = SlowWriter(leak_lines(600, rank=1), path=tmp_path / "rank1.log")
    writer.start()
    code, out, err = finish(proc, writer)
    assert code == 1, err
    final = json_lines(out)[-1]
    assert final["coverage"]["ranks"] == [0, 1]
    leak = next(f for f in final["findings"] if f["rule"] == "memory-leak")
    assert leak["evidence"]["ranks"] == [1]


def test_a_poll_reads_only_the_appended_bytes(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\n".join(flat_lines(3000)) + "\n")
    watcher = Watcher([str(log)])
    follower = next(iter(watcher.followers.values()))
    watcher.poll()
    read = follower.source.stats.bytes_read
    assert read == log.stat().st_size
    extra = "\n".join(flat_lines(5, first_step=3001)[1:]) + "\n"
    partial = flat_lines(1, first_step=3006)[1]
    with open(log, "a") as handle:
        handle.write(extra + partial[:20])  # a line still being written
    watcher.poll()
    assert follower.source.stats.bytes_read - read == len(extra) + 20
    report = watcher.judge()
    assert report.coverage["steps"] == [1, 3005]  # the unfinished line waits for its end
    with open(log, "a") as handle:
        handle.write(partial[20:] + "\n")
    watcher.poll()
    assert watcher.judge().coverage["steps"] == [1, 3006]
    watcher.close()


def gzipped(path: Path, lines: list[str], *, age: float = 60.0) -> None:
    """A finished rotation: `lines` gzip-compressed, last written `age` seconds ago."""
    import gzip

    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    os.utime(path, (time.time() - age, time.time() - age))


def test_a_compressed_log_named_is_read_whole_and_watching_ends(tmp_path):
    log = tmp_path / "train.log.gz"
    gzipped(log, leak_lines(60), age=0)
    proc = start_watch(str(log))
    code, out, err = finish(proc, timeout=60)
    assert code == 1, err  # it cannot grow: the verdict on all of it, exit by --fail-on (as at a pipe's end)
    assert "watch ended" in out and "memlog verdict: LEAK" in out
    assert "read whole, not followed (it cannot grow)" in err and "Traceback" not in err
    proc = start_watch(str(log), "--fail-on", "never", "-o", "jsonl")
    code, out, _ = finish(proc, timeout=60)
    final = json_lines(out)[-1]
    assert code == 0 and final["watch"]["ended"] == "ended" and final["coverage"]["steps"] == [1, 60]


def test_a_compressed_rotation_in_a_watched_directory_is_part_of_the_run(tmp_path):
    """logrotate's compress: train.log.1.gz holds the first steps, train.log goes on from there."""
    lines = flat_lines(100)
    gzipped(tmp_path / "train.log.1.gz", lines[:61])  # the capacity line and steps 1-60
    (tmp_path / "train.log").write_text("\n".join(lines[61:]) + "\n")
    proc = start_watch(str(tmp_path), "-o", "jsonl")
    wait_for(proc, "read whole", stream=1)
    wait_for(proc, '"verdict": "stable"')
    assert proc.poll() is None, "the live file is still followed"
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 0, err
    final = json_lines(out)[-1]
    assert final["coverage"]["steps"] == [1, 100] and len(final["coverage"]["sources"]) == 2


def test_a_compressed_file_still_being_written_is_read_once_finished(tmp_path):
    import gzip

    whole = gzip.compress(("\n".join(flat_lines(80)) + "\n").encode())
    rotated = tmp_path / "train.log.1.gz"
    rotated.write_bytes(whole[: len(whole) // 2])  # logrotate still compressing it
    watcher = Watcher([str(tmp_path)])
    watcher.poll()
    assert watcher.judge() is None  # not read while it may still grow
    rotated.write_bytes(whole)
    os.utime(rotated, (time.time() - 60, time.time() - 60))
    watcher.poll()
    report = watcher.judge()
    assert report.coverage["steps"] == [1, 80] and not report.coverage["sources"][0].get("damaged")
    assert not watcher.ended  # a directory can gain files
    watcher.close()


def test_sigterm_prints_the_verdict_and_exits_by_fail_on(tmp_path):
    """A batch scheduler sends SIGTERM before it kills the job: the same ending as Ctrl-C."""
    log = tmp_path / "train.log"
    log.write_text("")
    writer = SlowWriter(leak_lines(3000), path=log, pause=0.05)  # still writing when the signal comes
    proc = start_watch(str(log))
    writer.start()
    wait_for(proc, "verdict leak")
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc, writer)
    assert code == 1, err
    assert not writer.done.is_set()
    assert "watch terminated" in out and "memlog verdict: LEAK" in out and "Traceback" not in err
    log.write_text("\n".join(flat_lines(60)) + "\n")  # a healthy run: exit 0, the last object says why it ended
    proc = start_watch(str(log), "-o", "jsonl")
    wait_for(proc, '"verdict": "stable"')
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == 0, err
    final = json_lines(out)[-1]
    assert final["watch"]["event"] == "final" and final["watch"]["ended"] == "terminated"


def _status_log(tmp_path):
    """A two-rank run with escape sequences in its lines, ending in a Ray worker's death whose
    text a finding quotes in the status area: the first 81 lines, and the rest to append."""
    from tests.logwriters import ray

    memory = {r: [30.0 + 2 * r + noise(i) for i in range(300)] for r in (0, 1)}
    lines = torchtitan_lines(memory, capacity=CAPACITY)
    hostile = "\x1b]0;PWNED\x07\x1b[2J\x1b[31m\x9b1A\u202e"
    lines.insert(200, lines[199] + "  " + hostile)  # a step line with escapes at its end (read as a step)
    lines.insert(210, hostile + " torch.OutOfMemory? " + hostile)  # a line of nothing but
    lines.append(
        ray.worker_died(
            task_id="ab12", worker_id="cd34", node_id="ef56", ip="10.0.0.1", port=1234, pid=42, exit_type="SYSTEM_ERROR", exit_detail=f"killed {hostile} here"
        )
    )
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines[:81]) + "\n")
    return log, lines[81:]


def _check_terminal(data: bytes) -> list[str]:
    """What a terminal received from watch: nothing from the log acts on it (the only escapes are
    the redraw's own), and each redraw moves up exactly the lines the drawing before wrote. Returns
    the status areas drawn, the closing report last."""
    import re

    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    assert b"\x07" not in data and b"\x1b]" not in data and "\x9b" not in text and "\u202e" not in text
    assert re.sub(r"\x1b\[\d+F\x1b\[J", "", text).count("\x1b") == 0, "an escape sequence other than the redraw's"
    redraws = list(re.finditer(r"\x1b\[(\d+)F\x1b\[J", text))
    assert len(redraws) >= 3, text
    blocks = re.split(r"\x1b\[\d+F\x1b\[J", text)
    for match, drawn in zip(redraws, blocks):
        assert int(match.group(1)) == drawn.count("\n")
    for block in blocks[:-1]:  # each status area: the verdict and a row per rank with its level
        assert "verdict: STABLE" in block or "verdict: CRASH" in block
        assert re.search(r"^  rank0 +30\.\d\d GiB", block, re.M) and re.search(r"^  rank1 +32\.\d\d GiB", block, re.M), block
    assert "verdict: STABLE" in blocks[0] and "crash: A Ray worker died (SYSTEM_ERROR: killed" in blocks[-2]
    assert "memlog verdict: CRASH" in blocks[-1]  # Ctrl-C: the area is cleared and the verdict printed
    return blocks


def test_the_terminal_status_area_is_redrawn_at_most_once_an_interval(tmp_path):
    """The status area as watch draws it on a terminal, paced by a fake clock: steps arrive 10 lines
    every 0.2 s for 4 s, judged at most once a second (the default --interval), each drawing over the
    last; the closing report clears the area."""
    from memlog.render.live import LiveOutput
    from memlog.watch.watch import StopRequest, watch_loop

    log, rest = _status_log(tmp_path)
    now, written, judged = [0.0], [], []
    watcher = Watcher([str(log)], interval=1.0, clock=lambda: now[0])
    out = LiveOutput("text", written.append, terminal=True, width=160)
    stop = StopRequest()

    def sleep(seconds: float) -> None:  # the loop's wait: the clock moves, and lines arrive
        now[0] += seconds
        due = int(now[0] / 0.2) * 10
        if rest and due > 0:
            with open(log, "a") as handle:
                handle.write("\n".join(rest[:due]) + "\n")
            del rest[:due]
        if not rest and now[0] > 6.0:
            stop(signal.SIGINT, None)  # Ctrl-C once everything was read

    def on_report(report) -> bool:
        judged.append(now[0])
        out.update(report)
        return False

    report, why = watch_loop(watcher, on_report, stop=stop, sleep=sleep)
    out.final(report, why)
    _check_terminal("".join(written).encode())
    assert all(b - a >= 1.0 for a, b in zip(judged, judged[1:])), judged  # at most once an interval


def test_the_terminal_status_area_is_redrawn_in_place_and_safe(tmp_path):
    """watch on a real pseudo-terminal: the status area (verdict, a row per rank with its level) is
    drawn, then redrawn over itself (cursor up as many lines as were drawn, clear to the end); escape
    sequences written in the log never reach the terminal (reading strips them, memlog/parse/unwrap.py,
    and status_lines passes what it prints through render.safe: either one suffices here). Paced by
    what the terminal shows (events), not by the clock."""
    import fcntl
    import pty
    import struct
    import termios

    log, rest = _status_log(tmp_path)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm", "NO_COLOR": "1"}  # no colour: every escape but the redraw's is foreign
    err = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlog", "watch", str(log), "--interval", "0.1"], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=slave, stderr=err, env=env
    )
    os.close(slave)
    received: list[bytes] = []
    shown = threading.Condition()  # notified at every read from the terminal

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: watch exited and the terminal closed
                data = b""
            with shown:
                received.append(data)
                shown.notify_all()
            if not data:
                return

    def redraws() -> int:
        return b"".join(received).count(b"\x1b[J")

    def wait_until(condition) -> None:
        with shown:
            assert shown.wait_for(lambda: condition() or (received and not received[-1]), timeout=120) and condition(), b"".join(received)[-2000:]

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        wait_until(lambda: b"verdict: STABLE" in b"".join(received))
        for i in range(0, len(rest), 100):  # the rest arrives in three writes, each once the last was drawn
            drawn = redraws()
            with open(log, "a") as handle:
                handle.write("\n".join(rest[i : i + 100]) + "\n")
            wait_until(lambda: redraws() > drawn)
        wait_until(lambda: b"crash: A Ray worker died" in b"".join(received).rsplit(b"\x1b[J", 1)[-1])
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
        os.close(master)
    err.seek(0)
    assert code == 1, err.read()  # the crash is an error finding (--fail-on error)
    _check_terminal(b"".join(received))


def test_a_compressed_file_that_changed_while_read_is_read_again(tmp_path, monkeypatch):
    """A rotation's .gz rewritten while it was being read (logrotate compressing it again) counts
    as read only once it was read unchanged: what the first read took is dropped, not added twice."""
    import memlog.watch.follow as watch

    rotated = tmp_path / "train.log.1.gz"
    gzipped(rotated, flat_lines(40))
    real = watch.read_pieces
    reads = []

    def rewritten_during_the_first_read(source, **how):
        yield from real(source, **how)
        reads.append(source.spec)
        if len(reads) == 1:
            gzipped(rotated, flat_lines(80))

    monkeypatch.setattr(watch, "read_pieces", rewritten_during_the_first_read)
    watcher = Watcher([str(tmp_path)])
    watcher.poll()
    assert len(reads) == 1 and watcher.judge() is None  # the first read is dropped
    watcher.poll()
    report = watcher.judge()
    assert len(reads) == 2 and report.coverage["steps"] == [1, 80] and report.coverage["records"] == 80
    watcher.poll()
    assert len(reads) == 2  # read whole once: never again
    watcher.close()


def test_the_status_area_never_cuts_the_time_to_the_oom(tmp_path):
    """On a narrow terminal a row's early warning moves to a line of its own (in short) rather than
    being cut at the edge; on a wide one it stays on the row."""
    from memlog.render.live import status_lines

    log = tmp_path / "train.log"
    log.write_text("\n".join(torchtitan_lines({0: [30.0 + 0.2 * i + noise(i) for i in range(120)]}, capacity=CAPACITY)) + "\n")
    watcher = Watcher([str(log)], interval=0)
    watcher.poll()
    report = watcher.judge()
    narrow, wide = status_lines(report, 60), status_lines(report, 200)
    assert any(line.startswith("      -> OOM at step ~") and len(line) <= 60 for line in narrow), narrow
    assert any(line.startswith("  rank0") and "reaches 79.11 GiB at step ~" in line for line in wide), wide
    watcher.close()
