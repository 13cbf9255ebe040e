"""Hostile and broken input, the reading stage (memlog/read/): files that cannot be read, damaged
bytes (invalid UTF-8, NUL, cut or corrupt compressed streams, a failing disk, over-long lines), a
log still being written, FIFOs and standard input. Nothing readable: exit 2 and one line naming the
file and the problem. Partly damaged: the rest is analysed, and the damage counted (with the first
line affected) on stderr and in the JSON coverage. Shared helpers and the exit codes:
tests/hostile.py."""

from __future__ import annotations

import gzip
import io
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memlog.read import source as reading
from tests.hostile import CAPACITY_GIB, FLAT_GIB, REPO, analyze, baseline, cannot_judge, flat_lines, report_of, run_measured, series_rows, warning_lines, write
from tests.synthetic import torchtitan_lines


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


def test_missing_file(tmp_path):
    path = tmp_path / "missing.log"
    assert cannot_judge(analyze(path)) == f"memlog: error: {path}: no such file"


def test_directory(tmp_path):
    assert cannot_judge(analyze(tmp_path)) == f"memlog: error: {tmp_path}: a directory with no log files in it"


def test_unreadable_file(flat_log, monkeypatch):
    if os.geteuid() == 0:
        # Root reads anything whatever the mode bits: make open() refuse as it would for a user.
        real_open = open

        def refusing_open(path, *args, **kwargs):
            if str(path) == str(flat_log):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(reading, "open", refusing_open, raising=False)
    else:
        flat_log.chmod(0)
    assert cannot_judge(analyze(flat_log)) == f"memlog: error: {flat_log}: permission denied"


def test_empty_file(tmp_path):
    path = write(tmp_path / "empty.log", b"")
    assert cannot_judge(analyze(path)) == f"memlog: error: no training-step records found in {path}: it is empty"


def test_empty_stdin():
    assert cannot_judge(analyze("-", input=b"")) == "memlog: error: no training-step records found in <stdin>: it is empty"


def test_random_binary(tmp_path):
    data = random.Random(7).randbytes(256 * 1024)
    path = write(tmp_path / "core.bin", b"\x00" + data)  # not the gzip magic
    line = cannot_judge(analyze(path))
    assert re.fullmatch(
        rf"memlog: error: no training-step records found in {re.escape(str(path))}: "
        r"not a text log \((\d+)% of the bytes are undecodable or NUL\)",
        line,
    ), line
    assert int(re.search(r"\((\d+)%", line).group(1)) >= 40


def test_invalid_utf8_is_replaced_counted_and_the_rest_analysed(tmp_path, flat_log):
    code, clean = baseline(flat_log)
    raw = [line.encode() for line in flat_lines()]
    raw.insert(3, "Température: 30°C".encode("latin-1"))  # 2 undecodable bytes, physical line 4
    raw[6] += b" \xff\xfe\xfd"  # after the last field of a step line: 3 more
    path = write(tmp_path / "latin1.log", b"\n".join(raw) + b"\n")
    result = analyze(path, "-o", "json")
    assert result.exit_code == code
    assert warning_lines(result) == [f"memlog: warning: {path}: 5 undecodable byte(s) replaced (first: line 4); analysed what was readable"]
    report = report_of(result)
    assert report["coverage"]["records"] == clean["coverage"]["records"]
    assert report["verdict"] == clean["verdict"]
    source = report["coverage"]["sources"][0]
    assert (source["replaced_bytes"], source["first_replaced_line"]) == (5, 4)


def test_nul_bytes_are_removed_counted_and_the_records_kept(tmp_path, flat_log):
    """A crash before the file system flushed leaves a zero-filled block, often glued to the next line."""
    code, clean = baseline(flat_log)
    raw = [line.encode() for line in flat_lines()]
    raw[7] = b"\0" * 4096 + raw[7]  # physical line 8
    raw.append(b"\0" * 100)
    path = write(tmp_path / "crashed.log", b"\n".join(raw))
    result = analyze(path, "-o", "json")
    assert result.exit_code == code
    assert warning_lines(result) == [f"memlog: warning: {path}: 4,196 NUL byte(s) removed (first: line 8); analysed what was readable"]
    report = report_of(result)
    assert report["coverage"]["records"] == clean["coverage"]["records"]
    assert (report["coverage"]["sources"][0]["nul_bytes"], report["coverage"]["sources"][0]["first_nul_line"]) == (4196, 8)


def zlib_prefix(data: bytes) -> tuple[bytes, str | None]:
    """What zlib itself decompresses from a gzip file fed one byte at a time, up to the byte where
    it sees the damage, and its complaint: the most any reader can keep."""
    import zlib

    decompressor, out = zlib.decompressobj(31), []
    for i in range(len(data)):
        try:
            out.append(decompressor.decompress(data[i : i + 1]))
        except zlib.error as exc:
            return b"".join(out), str(exc)
    return b"".join(out), None if decompressor.eof else "truncated"


def test_truncated_gzip_analyses_what_came_before(tmp_path, flat_log):
    code, clean = baseline(flat_log)
    lines = flat_lines(memory=FLAT_GIB * 40)  # long enough that the cut falls after many records
    whole = gzip.compress(("\n".join(lines) + "\n").encode())
    cut = whole[: len(whole) * 3 // 4]
    path = write(tmp_path / "train.log.gz", cut)
    readable, _ = zlib_prefix(cut)
    complete = readable.count(b"\n")
    assert not readable.endswith(b"\n")  # the cut falls inside a line: it is named as cut short
    result = analyze(path, "-o", "json")
    assert result.exit_code == code
    [warning] = warning_lines(result)
    assert re.fullmatch(
        rf"memlog: warning: {re.escape(str(path))}: reading stopped after line {complete:,}, the last complete line "
        rf"\(line {complete + 1:,} is cut short\): compressed stream is truncated or corrupt \(.+\); analysed what was readable",
        warning,
    ), warning
    report = report_of(result)
    source = report["coverage"]["sources"][0]
    assert source["gzip"] and "truncated or corrupt" in source["damaged"]
    assert (source["first_damaged_line"], source["lines"]) == (complete + 1, complete + 1)
    assert 0 < report["coverage"]["records"] < len(lines) - 1


def test_corrupt_gzip_keeps_every_line_before_the_damage(tmp_path):
    """GzipFile dropped what the failing call had decompressed (up to 128 KiB of input: here the
    whole file); every line zlib can produce before it sees the damage is analysed, and the
    warning names the last complete one."""
    lines = flat_lines(memory=FLAT_GIB * 40)
    whole = gzip.compress(("\n".join(lines) + "\n").encode())
    rng = random.Random(7)
    for _ in range(200):  # damage zlib detects mid-stream (most garbage decodes until the checksum)
        damaged = bytearray(whole)
        at = rng.randrange(len(whole) // 3, len(whole) * 2 // 3)
        damaged[at : at + 16] = rng.randbytes(16)
        readable, why = zlib_prefix(bytes(damaged))
        if why and "check" not in why and why != "truncated" and readable.count(b"\n") > 50:
            break
    else:
        pytest.fail("no located damage found")
    complete = readable.count(b"\n")
    path = write(tmp_path / "damaged.log.gz", bytes(damaged))
    result = analyze(path, "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0, result.stderr
    [warning] = warning_lines(result)
    assert f"reading stopped after line {complete:,}, the last complete line" in warning, warning
    assert why in warning
    source = report_of(result)["coverage"]["sources"][0]
    assert source["first_damaged_line"] == complete + 1
    assert source["lines"] >= complete
    assert report_of(result)["coverage"]["records"] >= complete - 2  # the capacity line is not a record


def test_gzip_whose_checksum_fails_says_the_damage_cannot_be_placed(tmp_path):
    """Most corrupt deflate data decodes (to wrong text) until the checksum at the end: the text is
    analysed, and the warning says some of it is corrupt without pretending to know where."""
    lines = flat_lines(memory=FLAT_GIB * 40)
    damaged = bytearray(gzip.compress(("\n".join(lines) + "\n").encode()))
    damaged[-8] ^= 0xFF  # the CRC-32 in the trailer
    path = write(tmp_path / "crc.log.gz", bytes(damaged))
    result = analyze(path, "-o", "json", "--fail-on", "never")
    [warning] = warning_lines(result)
    assert warning == (
        f"memlog: warning: {path}: compressed stream is truncated or corrupt (Error -3 while decompressing data: "
        f"incorrect data check): read to the end (line {len(lines):,}) but the checksum fails, so some of the "
        "text is corrupt and where cannot be told; analysed what was readable"
    )
    assert report_of(result)["coverage"]["sources"][0]["first_damaged_line"] is None


def test_concatenated_gzip_members_and_zero_padding_are_read(tmp_path):
    lines = flat_lines(memory=FLAT_GIB * 4)
    half = len(lines) // 2
    data = gzip.compress(("\n".join(lines[:half]) + "\n").encode()) + gzip.compress(("\n".join(lines[half:]) + "\n").encode()) + b"\0" * 512
    result = analyze(write(tmp_path / "appended.log.gz", data), "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    assert report_of(result)["coverage"]["sources"][0]["lines"] == len(lines)


@pytest.mark.parametrize(
    "data",
    [
        b"\x1f\x8b",  # the magic and nothing else
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + random.Random(3).randbytes(4000),  # header, garbage deflate
        b"\x1f\x8b\x63" + random.Random(4).randbytes(100),  # unknown compression method
    ],
    ids=["magic-only", "garbage-deflate", "bad-method"],
)
def test_corrupt_gzip_with_nothing_before_the_damage(tmp_path, data):
    path = write(tmp_path / "corrupt.gz", data)
    line = cannot_judge(analyze(path))
    assert re.fullmatch(
        rf"memlog: error: {re.escape(str(path))}: compressed stream is truncated or corrupt \(.+\); "
        r"no training-step records before the damage",
        line,
    ), line


def test_read_error_mid_file_keeps_what_was_read(flat_log, monkeypatch):
    class FailingDisk(io.RawIOBase):
        """Returns the file's bytes once, then fails like a dying disk (EIO)."""

        def __init__(self, data: bytes):
            self.data = data

        def readable(self):
            return True

        def readinto(self, buffer):
            if not self.data:
                raise OSError(5, "Input/output error")
            n = min(len(buffer), len(self.data))
            buffer[:n], self.data = self.data[:n], self.data[n:]
            return n

    code, clean = baseline(flat_log)
    monkeypatch.setattr(reading, "open", lambda path, mode: FailingDisk(Path(path).read_bytes()), raising=False)
    result = analyze(flat_log, "-o", "json")
    assert result.exit_code == code
    assert warning_lines(result) == [
        f"memlog: warning: {flat_log}: reading stopped after line 13, the last complete line: read error (Input/output error); analysed what was readable"
    ]
    assert report_of(result)["coverage"]["records"] == clean["coverage"]["records"]


def test_long_line_without_newline_is_cut_and_counted(tmp_path, flat_log):
    code, clean = baseline(flat_log)
    path = write(tmp_path / "long.log", flat_log.read_bytes() + b"x" * (3 * reading.MAX_LINE_BYTES))
    result = analyze(path, "-o", "json")
    assert result.exit_code == code
    assert warning_lines(result) == [f"memlog: warning: {path}: 1 over-long line(s) cut (first: line 14); analysed what was readable"]
    source = report_of(result)["coverage"]["sources"][0]
    assert (source["truncated_lines"], source["first_truncated_line"], source["lines"]) == (1, 14, 14)


def test_a_50_mb_line_without_newline_keeps_memory_bounded(tmp_path, flat_log):
    line_bytes = 50 * 1024 * 1024
    path = tmp_path / "huge_line.log"
    with path.open("wb") as out:
        out.write(flat_log.read_bytes())
        for _ in range(50):
            out.write(b"x" * (1024 * 1024))
    small, small_peak = run_measured(str(flat_log))
    huge, huge_peak = run_measured(str(path))
    assert huge.returncode == small.returncode == 0, huge.stderr
    assert f"memlog: warning: {path}: 1 over-long line(s) cut (first: line 14)" in huge.stderr
    # Reading holds one chunk and the first MAX_LINE_BYTES of the line, never the whole line.
    grown_kib = huge_peak - small_peak
    assert grown_kib < line_bytes // 1024, f"peak RSS grew by {grown_kib} KiB for a {line_bytes >> 20} MiB line"


def test_crlf_line_endings_read_like_lf(tmp_path, flat_log):
    code, clean = baseline(flat_log)
    path = write(tmp_path / "windows.log", flat_log.read_bytes().replace(b"\n", b"\r\n"))
    result = analyze(path, "-o", "json")
    assert result.exit_code == code and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] == clean["verdict"]
    assert report["coverage"]["records"] == clean["coverage"]["records"]
    assert report["coverage"]["lines_read"] == clean["coverage"]["lines_read"]


def test_truncated_last_line(tmp_path, flat_log):
    """A job killed mid-write leaves half a line: what it holds whole is read, nothing is invented."""
    code, clean = baseline(flat_log)
    text = flat_log.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    cut = text.rstrip("\n")[: -(len(last) - last.index("memory:") - len("memory: 3"))]  # `... memory: 3`
    path = write(tmp_path / "killed.log", cut)
    result = analyze(path, "-o", "json")
    assert result.exit_code == code and result.stderr == ""
    rows = series_rows(path)
    assert len(rows) == clean["coverage"]["records"]  # the cut line still gives its step and loss
    assert rows[-1]["step"] == 12 and rows[-1]["mem_peak_reserved_gib"] is None
    assert [r["mem_peak_reserved_gib"] for r in rows[:-1]] == pytest.approx(FLAT_GIB[:-1])


def test_a_log_still_being_written(tmp_path):
    """A writer appends (in two halves per line, so the reader meets partial last lines) while
    analyze runs again and again: every run succeeds and none sees a leak in flat memory."""
    lines = torchtitan_lines({0: [30.0 + 0.01 * (i % 3) for i in range(400)]}, capacity=CAPACITY_GIB)
    path = write(tmp_path / "live.log", lines[:4])
    done = threading.Event()

    def writer():
        with path.open("a") as out:
            for line in lines[4:]:
                half = len(line) // 2
                out.write(line[:half])
                out.flush()
                out.write(line[half:] + "\n")
                out.flush()
                time.sleep(0.002)
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    seen = []
    while not done.is_set() or len(seen) < 3:
        result = analyze(path, "-o", "json")
        assert result.exit_code == 0 and result.stderr == "", result.stderr
        report = report_of(result)
        assert report["verdict"] != "leak"
        seen.append(report["coverage"]["records"])
        if len(seen) > 200:
            break
    thread.join(timeout=30)
    assert len(seen) >= 3 and seen == sorted(seen) and seen[0] >= 3  # records only ever accumulate
    assert report_of(analyze(path, "-o", "json"))["coverage"]["records"] == len(lines) - 1


@pytest.mark.parametrize("output", ["markdown", "github", "html"])
def test_a_fifo_is_read_once_and_never_hangs(tmp_path, output):
    """Quoting evidence lines must not open the input a second time: a FIFO would block forever."""
    import os
    import subprocess
    import sys
    import threading

    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)
    log = Path(__file__).resolve().parents[2] / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
    writer = threading.Thread(target=lambda: fifo.write_bytes(log.read_bytes()), daemon=True)
    writer.start()
    result = subprocess.run([sys.executable, "-m", "memlog", "analyze", str(fifo), "-o", output], capture_output=True, timeout=120)
    assert result.returncode == 1, result.stderr


def test_a_fifo_and_stdin_quote_the_same_evidence_lines_as_the_file(tmp_path):
    """Lines are kept while a non-rereadable input is read (memlog/read/spool.py): the markdown report of
    a FIFO and of standard input quotes the step lines a regular file's report quotes, and the
    copies are gone when memlog ends."""
    import os
    import subprocess
    import sys
    import threading

    log = Path(__file__).resolve().parents[2] / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()

    def quoted(args, **kw):
        result = subprocess.run(
            [sys.executable, "-m", "memlog", "analyze", *args, "-o", "markdown"],
            capture_output=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(private_tmp)},
            **kw,
        )
        assert result.returncode == 1, result.stderr
        return [line for line in result.stdout.decode().splitlines() if "step:" in line]

    from_file = quoted([str(log)])
    assert from_file  # the leak's evidence quotes step lines
    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_bytes(log.read_bytes()), daemon=True).start()
    assert [line.replace(str(fifo), str(log)) for line in quoted([str(fifo)])] == from_file
    with open(log, "rb") as stdin:
        assert [line.replace("<stdin>", str(log)) for line in quoted(["-"], stdin=stdin)] == from_file
    assert not list(private_tmp.iterdir())


def test_other_compressors_are_read_or_named(tmp_path):
    """bzip2 and xz are read like gzip (standard library); zstd is named with what to do; a file
    of NUL bytes is named as such."""
    import bz2
    import lzma
    import subprocess
    import sys

    log = Path(__file__).resolve().parents[2] / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
    (tmp_path / "run.log.bz2").write_bytes(bz2.compress(log.read_bytes()))
    (tmp_path / "run.log.xz").write_bytes(lzma.compress(log.read_bytes()))
    (tmp_path / "run.log.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 64)
    (tmp_path / "zero.log").write_bytes(b"\x00" * 4096)

    def run(name):
        return subprocess.run([sys.executable, "-m", "memlog", "analyze", str(tmp_path / name)], capture_output=True, text=True)

    for name in ("run.log.bz2", "run.log.xz"):
        assert run(name).returncode == 1  # the leak, read through the decompressor
    zst, zero = run("run.log.zst"), run("zero.log")
    assert zst.returncode == 2 and "zstd-compressed" in zst.stderr and len(zst.stderr.splitlines()) == 1
    assert zero.returncode == 2 and "bytes are NUL" in zero.stderr


def test_stdin_closed_or_a_directory_is_one_line(tmp_path):
    """`memlog analyze - <&-` and a directory on fd 0 are named in one line, exit 2. A shell's
    `< DIR` itself cannot reach memlog: CPython stops at start-up ("Fatal Python error:
    init_sys_streams: <stdin> is a directory", exit 1) before any of memlog's code runs; the README
    says so. The directory case is reached here by rebinding fd 0 once Python has started."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for command in ("analyze", "watch"):
        closed = subprocess.run(["sh", "-c", f'exec "$0" -m memlog {command} - <&-', sys.executable], capture_output=True, text=True, timeout=60, cwd=REPO)
        assert (closed.returncode, closed.stdout) == (2, ""), closed.stderr
        assert closed.stderr.splitlines() == ["memlog: error: <stdin>: standard input is closed; pipe or redirect a log into it, or name the file"]
    rebound = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.dup2(os.open(sys.argv[1], os.O_RDONLY), 0); sys.argv = ['memlog', 'analyze', '-']; from memlog.cli import main; main()",
            str(folder),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert (rebound.returncode, rebound.stdout) == (2, ""), rebound.stderr
    assert rebound.stderr.splitlines() == ["memlog: error: <stdin>: is a directory, not a log file; name the directory as an argument to read its logs"]
    shell = subprocess.run(
        ["sh", "-c", 'exec "$0" -m memlog analyze - < "$1"', sys.executable, str(folder)], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert shell.stdout == ""
    if shell.returncode != 2:  # today's CPython: refused before memlog runs (documented in the README)
        assert shell.returncode == 1 and "init_sys_streams: <stdin> is a directory" in shell.stderr, shell.stderr
