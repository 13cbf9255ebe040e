"""Hostile and broken input: every case ends in a known exit code and an exact message, never a
traceback, a hang or unbounded memory. Partly damaged input is analysed, and the damage is
counted (with the first line affected) on stderr and in the JSON coverage.

Exit codes (memlog.cli): 0 judged and nothing at or above --fail-on, 1 a finding at or above it,
2 could not judge. Messages on stderr are `memlog: error: ...` (exit 2, one line) and
`memlog: warning: ...` (one line per damaged source, the run goes on).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import random
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.base import config as config_module
from memlog.cli import app
from memlog.judge.rulekit import load_rules
from memlog.parse.catalog import load_specs
from memlog.read import source as reading
from tests.synthetic import torchtitan_lines

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
CAPACITY_GIB = 79.11
FLAT_GIB = [30.0 + 0.01 * (i % 3) for i in range(12)]


def analyze(*args, **kwargs):
    return runner.invoke(app, ["analyze", *map(str, args)], **kwargs)


def cannot_judge(result) -> str:
    """Exit 2, nothing on stdout, one line on stderr and no traceback: that line."""
    assert result.exit_code == 2, (result.exit_code, result.stdout[-500:], result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def report_of(result) -> dict:
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    return json.loads(result.stdout)


def flat_lines(ranks=(0,), memory=FLAT_GIB) -> list[str]:
    return torchtitan_lines({r: list(memory) for r in ranks}, capacity=CAPACITY_GIB)


def write(path: Path, data: bytes | str | list[str]) -> Path:
    if isinstance(data, list):
        data = "\n".join(data) + "\n"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


def baseline(path: Path) -> tuple[int, dict]:
    """Exit code and JSON report of an intact log, to compare its damaged copies with."""
    result = analyze(path, "-o", "json")
    return result.exit_code, report_of(result)


def tried_formats() -> str:
    return ", ".join(s.name for s in load_specs().values() if s.records)


def rule_ids() -> set[str]:
    return {r.id for r in load_rules()}


# --- nothing readable: exit 2 and one line naming the file and the problem ------------------


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


def test_debug_shows_the_traceback(tmp_path):
    path = tmp_path / "missing.log"
    result = analyze(path, "--debug")
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.splitlines()[-1] == f"memlog: error: {path}: no such file"


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


def test_millions_of_lines_without_records(tmp_path):
    path = write(tmp_path / "noise.log", b"epoch 3 batch 17 data loader ok\n" * 2_000_000)
    assert cannot_judge(analyze(path)) == (
        f"memlog: error: no training-step records found in {path}: none of 2,000,000 lines matches a known format (tried: {tried_formats()})"
    )


def test_internal_error_is_one_line_even_for_a_polars_panic(flat_log, monkeypatch):
    from polars.exceptions import PanicException

    import memlog.engine.api

    for exc in (ValueError("boom\nsecond line"), PanicException("index out of bounds")):

        def explode(*args, exc=exc, **kwargs):
            raise exc

        monkeypatch.setattr(memlog.engine.api, "analyze", explode)
        assert cannot_judge(analyze(flat_log)) == (
            f"memlog: error: internal error: {type(exc).__name__}: {str(exc).splitlines()[0]} (run with --debug for a traceback)"
        )


# --- partly damaged: analyse the rest, count the damage on stderr and in the JSON -------------


def warning_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("memlog: warning: ")]


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


PEAK_RSS_CHILD = textwrap.dedent(
    """
    import resource, sys
    from memlog.cli import main
    sys.argv = ["memlog", "analyze", *sys.argv[1:]]
    try:
        main()
    finally:
        print("peak_rss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
    """
)


def run_measured(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    """`memlog analyze ARGS` in a fresh interpreter: the result and its peak RSS in KiB."""
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS_CHILD, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    peak = re.search(r"peak_rss_kib (\d+)", proc.stderr)
    assert peak, proc.stderr
    return proc, int(peak.group(1))


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


def series_rows(path: Path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["series", str(path), "-o", "json", *args])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


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


def test_interleaved_partial_lines_from_concurrent_ranks(tmp_path):
    """Ranks writing to one file without line buffering glue half a line to another rank's line.
    No value may be credited to the wrong rank."""
    lines = torchtitan_lines({0: [30.0] * 12, 1: [40.0] * 12}, capacity=CAPACITY_GIB)
    damaged, glued = [], 0
    cuts = ("memory:", "loss:", "GiB")  # after a field name, mid-field, after a value
    for line in lines:
        if line.startswith("[rank1]") and "step:" in line and glued < len(cuts) and " 1  loss" not in line:
            # rank1's line stops mid-way, rank0's next line lands behind it, then rank1's rest.
            at = line.index(cuts[glued]) + (len(cuts[glued]) if cuts[glued] != "GiB" else -1)
            damaged.append(("head", line[:at]))
            damaged.append(("tail", line[at:]))
            glued += 1
        else:
            damaged.append(("whole", line))
    out, pending_tail = [], None
    for kind, text in damaged:
        if kind == "head":
            out.append(text)
        elif kind == "tail":
            pending_tail = text
        else:
            if pending_tail is not None and text.startswith("[rank0]") and out and not out[-1].startswith("[rank0]"):
                out[-1] += text
                out.append(pending_tail)
                pending_tail = None
            else:
                out.append(text)
    assert pending_tail is None and glued == 3
    path = write(tmp_path / "shared_stdout.log", out)
    result = analyze(path, "-o", "json")
    assert result.exit_code == 0 and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] != "leak"
    rows = series_rows(path)
    by_rank = {r: [row for row in rows if row["rank"] == r] for r in (0, 1)}
    assert [row["step"] for row in by_rank[0]] == list(range(1, 13))  # every rank0 line recovered
    assert {row["mem_peak_reserved_gib"] for row in by_rank[0]} == {30.0}
    assert {row["mem_peak_reserved_gib"] for row in by_rank[1]} <= {40.0, None}


def corrupt_values_spec(tmp_path: Path) -> Path:
    """A user format that passes any token through as a number, so the engine sees raw nan/inf."""
    formats = tmp_path / "formats"
    formats.mkdir()
    write(
        formats / "plain.yaml",
        textwrap.dedent(
            r"""
            name: plainmem
            title: plain memory lines (test)
            records:
              - name: step
                literal: "train_step="
                regex: '^train_step=(?P<step>\d+) mem=(?P<mem_allocated_gib>\S+) loss=(?P<loss>\S+)$'
            """
        ),
    )
    return formats


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_nan_inf_overflow_negative_and_absurd_readings_are_not_a_leak(tmp_path, where):
    corrupt = ["nan", "inf", "1e309", "-4.5", "99999.0", "-inf", "NaN"]
    values = [f"{v:.2f}" for v in FLAT_GIB * 2]
    at = 8 if where == "middle" else len(values) - len(corrupt)
    values[at : at + len(corrupt)] = corrupt
    lines = [f"train_step={i + 1} mem={v} loss={2.0 - 0.01 * i:.4f}" for i, v in enumerate(values)]
    path = write(tmp_path / "corrupt.log", lines)
    result = analyze(path, "--formats-dir", corrupt_values_spec(tmp_path), "--capacity", "80", "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    report = report_of(result)
    assert report["coverage"]["records"] == len(lines)  # parsed, then judged corrupt, not dropped unseen
    assert report["verdict"] != "leak"
    assert all(f["rule"] != "memory-leak" for f in report["findings"])
    if "corrupt-readings" in rule_ids():
        assert any(f["rule"] == "corrupt-readings" for f in report["findings"]), report["findings"]


def test_torchtitan_nan_loss_and_memory_above_capacity_are_not_a_leak(tmp_path):
    lines = flat_lines(memory=FLAT_GIB * 2)
    for i in range(-3, 0):  # the last three steps: the place a leak would show
        lines[i] = re.sub(r"memory: +[\d.]+GiB\([\d.]+%\)", f"memory: {900.0 * -i:.2f}GiB(999.00%)", lines[i])
        lines[i] = re.sub(r"loss: +[\d.]+", "loss: nan" if i % 2 else "loss: inf", lines[i])
    path = write(tmp_path / "absurd.log", lines)
    result = analyze(path, "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    report = report_of(result)
    assert report["coverage"]["records"] == len(lines) - 1  # every step line (the first line is the capacity)
    assert report["verdict"] != "leak"
    if "corrupt-readings" in rule_ids():
        assert any(f["rule"] == "corrupt-readings" for f in report["findings"]), report["findings"]


def test_step_number_that_overflows_is_not_credited_to_another_step(tmp_path, flat_log):
    lines = flat_lines()
    lines[4] = lines[4].replace("step:  4", "step: 99999999999999999999999").replace("30.01GiB", "77.00GiB")
    path = write(tmp_path / "overflow.log", lines)
    rows = series_rows(path)
    assert [r["step"] for r in rows] == [s for s in range(1, 13) if s != 4]
    assert 77.0 not in {r["mem_peak_reserved_gib"] for r in rows}


def test_steps_going_backwards_start_a_new_segment(tmp_path, flat_log):
    """A resume from checkpoint appends to the same file: the step counter goes back."""
    code, clean = baseline(flat_log)
    first = flat_lines()
    resumed = torchtitan_lines({0: FLAT_GIB}, steps=list(range(6, 18)), capacity=CAPACITY_GIB)
    path = write(tmp_path / "resumed.log", first + resumed)
    result = analyze(path, "-o", "json")
    assert result.exit_code == code and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] == clean["verdict"] != "leak"
    assert report["coverage"]["event_counts"]["restart"] == 1
    assert report["coverage"]["records"] == 2 * clean["coverage"]["records"]


def test_duplicated_steps_count_once(tmp_path, flat_log):
    """`tee -a` twice into one file, or a launcher echoing a worker: every line twice."""
    code, clean = baseline(flat_log)
    path = write(tmp_path / "twice.log", [line for line in flat_lines() for _ in range(2)])
    result = analyze(path, "-o", "json")
    assert result.exit_code == code and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] == clean["verdict"]
    assert report["coverage"]["records"] == clean["coverage"]["records"]
    assert "restart" not in report["coverage"]["event_counts"]


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


# --- config files ----------------------------------------------------------------------------


def config_error(flat_log: Path, tmp_path: Path, text: str) -> tuple[str, Path]:
    cfg = write(tmp_path / "memlog.yaml", text)
    return cannot_judge(analyze(flat_log, "--config", cfg)), cfg


def test_config_missing(tmp_path, flat_log):
    cfg = tmp_path / "nope.yaml"
    assert cannot_judge(analyze(flat_log, "--config", cfg)) == f"memlog: error: {cfg}: config file not found"


def test_config_invalid_yaml(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "rules: [unclosed\n  capacity_gib: 80\n")
    assert re.fullmatch(rf"memlog: error: {re.escape(str(cfg))}: invalid YAML \(.+\)", line), line


def test_config_not_a_mapping(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "- rules\n- capacity_gib\n")
    assert line == f"memlog: error: {cfg}: the config must be a mapping"


def test_config_unknown_keys(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "colour: red\ncapacity_gib: 80\n")
    assert line == f"memlog: error: {cfg}: unknown keys ['colour'] (known: {sorted(config_module.KEYS)})"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("capacity_gib: eighty", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got 'eighty'"),
        ("capacity_gib: .inf", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got inf"),
        ("capacity_gib: -80", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got -80"),
        ("capacity_gib: true", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got True"),
        # found by scripts/fuzz.py: an integer too large for a float overflowed deep in the analysis
        ("capacity_gib: " + "1" + "0" * 400, "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got " + "1" + "0" * 39),
        ("capacity_gib: .nan", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got nan"),
        ("rules: [memory-leak]", "{cfg}: `rules` maps rule ids to mappings of threshold: value"),
        ("rules: {memory-leak: 5}", "{cfg}: `rules` maps rule ids to mappings of threshold: value"),
        ("formats_dirs: 5", "{cfg}: formats_dirs must be a list of paths"),
        ("rules: {memory-leak: {min_growth_gib: fast}}", "rule memory-leak: threshold min_growth_gib must be a number, got 'fast'"),
        ("rules: {memory-leak: {min_growth_gib: .nan}}", "rule memory-leak: threshold min_growth_gib must be a number, got nan"),
        ("rules: {memory-leak: {min_growth_gib: .inf}}", "rule memory-leak: threshold min_growth_gib must be a number, got inf"),
        ("rules: {no-such-rule: {x: 1}}", "config names unknown rules: ['no-such-rule']"),
    ],
)
def test_config_wrong_types(tmp_path, flat_log, text, message):
    line, cfg = config_error(flat_log, tmp_path, text + "\n")
    assert line == "memlog: error: " + message.format(cfg=cfg)


def test_config_unknown_threshold(tmp_path, flat_log):
    line, _ = config_error(flat_log, tmp_path, "rules: {memory-leak: {bogus: 1}}\n")
    assert line.startswith("memlog: error: rule memory-leak: unknown threshold 'bogus' (known: ")


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "{{rules: !!python/object/apply:os.system ['touch {marker}']}}",
        "!!python/name:os.system",
        "!!python/object:memlog.base.config.Config {{capacity_gib: 80}}",
        "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
    ],
)
def test_config_yaml_tags_are_rejected_and_never_run(tmp_path, flat_log, tag):
    marker = tmp_path / "pwned"
    line, cfg = config_error(flat_log, tmp_path, tag.format(marker=marker) + "\n")
    assert re.fullmatch(rf"memlog: error: {re.escape(str(cfg))}: invalid YAML \(.*python.*\)", line), line
    assert not marker.exists()


# --- code never runs from a config or an untrusted spec folder (issue 13.1) ------------------

PAYLOAD = "from pathlib import Path\nPath({marker!r}).write_text('ran')\ndef create(options):\n    raise SystemExit\n"


def payload_spec(folder: Path, module: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write(folder / "mine.yaml", f"name: mine\nblock_parser: {{module: {module!r}}}\n")


@pytest.mark.parametrize("via", ["--config", "--formats-dir"])
def test_a_block_parser_beside_an_untrusted_spec_never_runs(tmp_path, flat_log, via):
    """A pull request's tree can hold a config and specs: analysing with them must not run its code."""
    marker = tmp_path / "pwned"
    formats = tmp_path / "formats"
    payload_spec(formats, "evil.py")
    write(formats / "evil.py", PAYLOAD.format(marker=str(marker)))
    if via == "--config":
        cfg = write(tmp_path / "memlog.yaml", "formats_dirs: [formats]\n")
        line = cannot_judge(analyze(flat_log, "--config", cfg))
    else:
        line = cannot_judge(analyze(flat_log, "--formats-dir", formats))
    assert "evil.py: not a block parser memlog ships" in line and "--plugins-dir" in line, line
    assert not marker.exists()


@pytest.mark.parametrize("module", ["../evil.py", "/tmp/evil.py", "sub/evil.py", "..", ".hidden.py"])
def test_a_block_parser_path_is_refused_even_from_a_trusted_folder(tmp_path, flat_log, module):
    marker = tmp_path / "pwned"
    write(tmp_path / "evil.py", PAYLOAD.format(marker=str(marker)))
    plugins = tmp_path / "plugins"
    payload_spec(plugins, module.replace("/tmp/evil.py", str(tmp_path / "evil.py")))
    line = cannot_judge(analyze(flat_log, "--plugins-dir", plugins))
    assert "`module` is a file name such as NAME.py, not a path" in line, line
    assert not marker.exists()


def test_a_symlink_out_of_the_trusted_folder_is_not_in_it(tmp_path, flat_log):
    marker = tmp_path / "pwned"
    outside = write(tmp_path / "outside.py", PAYLOAD.format(marker=str(marker)))
    plugins = tmp_path / "plugins"
    payload_spec(plugins, "linked.py")
    (plugins / "linked.py").symlink_to(outside)
    line = cannot_judge(analyze(flat_log, "--plugins-dir", plugins))
    assert "linked.py: no such Python file in" in line, line
    assert not marker.exists()


def test_a_trusted_plugin_folder_runs_its_parser(tmp_path, flat_log):
    """The opt-in works: --plugins-dir loads the folder's Python file (here it refuses to build)."""
    marker = tmp_path / "ran"
    plugins = tmp_path / "plugins"
    payload_spec(plugins, "mine.py")
    write(plugins / "mine.py", PAYLOAD.format(marker=str(marker)))
    line = cannot_judge(analyze(flat_log, "--plugins-dir", plugins))
    assert "mine.py: cannot load (SystemExit" in line, line
    assert marker.exists()


def test_the_config_file_has_no_way_to_trust_plugins(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "plugins_dirs: [plugins]\n")
    assert "unknown keys ['plugins_dirs']" in line


# --- user format specs (--formats-dir) -------------------------------------------------------


def spec_error(flat_log: Path, tmp_path: Path, text: str) -> tuple[str, Path]:
    formats = tmp_path / "formats"
    formats.mkdir(exist_ok=True)
    spec = write(formats / "mine.yaml", textwrap.dedent(text))
    return cannot_judge(analyze(flat_log, "--formats-dir", formats)), spec


GOOD_RECORD = r"""
      - name: r
        literal: "train_step="
        regex: '^train_step=(?P<step>\d+)'
"""


@pytest.mark.parametrize(
    ("regex", "why"),
    [
        (r"^train_step=(?P<step>\d+", "unclosed group"),
        (r"(?<=x)train_step=(?P<step>\d+)", "look-behind: not in Rust's regex"),
        (r"^train_step=(?P<step>\d+) (\1)", "backreference: not in Rust's regex"),
        (r"^train_step=(?P<step>\d+)(a{1000}){1000}", "compiles past the size limit"),
    ],
)
def test_spec_invalid_regex_names_the_file(tmp_path, flat_log, regex, why):
    text = f"""
    name: mine
    records:
      - name: r
        literal: "train_step="
        regex: '{regex}'
    """
    line, spec = spec_error(flat_log, tmp_path, text)
    assert re.fullmatch(r"memlog: error: mine\.yaml: records entry 'r': invalid regex \(.+\)", line), (why, line)


def test_spec_invalid_regex_among_good_ones_is_the_one_named(tmp_path, flat_log):
    """A spec's group names are read in one call for all its regexes:
    one that does not compile must still be named, not its neighbours or the batch (memlog/parse/regexes.py)."""
    text = f"""
    name: mine
    logger_prefixes: ['\\[\\d+\\] ']
    records:{GOOD_RECORD}
      - name: bad
        literal: "eval_step="
        regex: '^eval_step=(?P<step>\\d+'
        fields: ['loss=(?P<loss>[0-9.]+)']
    events:
      - name: o
        literal: "OOM"
        regex: 'OOM'
        event: oom
    """
    line, _ = spec_error(flat_log, tmp_path, text)
    assert re.fullmatch(r"memlog: error: mine\.yaml: records entry 'bad': invalid regex \(.+\)", line), line


def test_group_names_read_together_are_those_read_one_by_one():
    """memlog/parse/regexes.py reads the group names of a spec's or the wrappers' regexes in one call."""
    from memlog.parse import regexes
    from memlog.parse.wrappers import builtin_wrappers

    specs = load_specs().values()
    wrappers = builtin_wrappers().values()
    every = sorted(
        {r for spec in specs for p in spec.patterns for r in (p.regex, *p.fields)}
        | {p for spec in specs for p in spec.logger_prefixes}
        | {r for w in wrappers for r in (w.prefix, w.suffix, w.marker and w.marker["regex"]) if r}
    )
    one_by_one = {}
    for regex_ in every:
        regexes._GROUP_NAMES.clear()
        one_by_one[regex_] = regexes.group_names(regex_)
    regexes._GROUP_NAMES.clear()
    regexes.learn_group_names(every)
    assert {r: regexes._GROUP_NAMES[r] for r in every} == one_by_one
    assert any(one_by_one.values()) and not all(one_by_one.values())  # names read, and unnamed groups left out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("records: {r: 1}", "{spec}: `records` must be a list"),
        ("records: [5]", "mine.yaml: each entry of `records` must be a mapping, got 5"),
        ("logger_prefixes: '^x'", "{spec}: `logger_prefixes` must be a list"),
        ("logger_prefixes: [5]", "{spec}: `logger_prefixes` must be a list of regexes"),
        ("logger_prefixes: ['(?P<ts>\\d+) ']" + GOOD_RECORD.replace("\n", "\n    ").rstrip(), None),
        ("logger_prefixes: ['([0-9']" + GOOD_RECORD.replace("\n", "\n    ").rstrip(), None),
        ("name: !!python/name:os.system", None),
    ],
)
def test_spec_wrong_shapes(tmp_path, flat_log, body, message):
    line, spec = spec_error(flat_log, tmp_path, ("name: mine\n" if not body.startswith("name:") else "") + body + "\n")
    if message is None:
        assert line.startswith((f"memlog: error: {spec.name}: logger prefix ", f"memlog: error: {spec}: cannot read format spec (")), line
    else:
        assert line == "memlog: error: " + message.format(spec=spec)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("fields", "'mfu=(?P<mfu_pct>\\d+)'", "`fields` must be a list of regexes (or of `{regex: ..., units: {...}}`)"),
        ("fields", "[{regex: 'mfu=(?P<mfu_pct>\\d+)'}]", "`fields` must be a list of regexes (or of `{regex: ..., units: {...}}`)"),
        ("units", "[GiB]", "`units` maps group names to units"),
        ("kind", "[train]", "`kind` must be a string"),
        ("inherit_step", "'yes'", "`inherit_step` must be true or false"),
    ],
)
def test_spec_wrong_field_types(tmp_path, flat_log, field, value, message):
    text = f"name: mine\nrecords:\n  - name: r\n    literal: 'train_step='\n    regex: '^train_step=(?P<step>\\d+)'\n    {field}: {value}\n"
    line, _ = spec_error(flat_log, tmp_path, text)
    assert line == f"memlog: error: mine.yaml: records entry 'r': {message}"


def test_spec_pathological_regex_runs_in_linear_time(tmp_path):
    """`(a+)+$` backtracks exponentially in Python's re on `aaaa...!`; polars' Rust regex is
    linear. 20,000 lines of 2,000 such characters must finish well inside the timeout."""
    formats = tmp_path / "formats"
    formats.mkdir()
    write(
        formats / "evil.yaml",
        "name: evil\nrecords:\n  - name: r\n    literal: ' a'\n    regex: '^(?P<step>\\d+) (a+)+$'\n",
    )
    path = tmp_path / "aaaa.log"
    with path.open("wb") as out:
        for i in range(20_000):
            out.write(b"%d " % i + b"a" * 2000 + b"!\n")
    started = time.monotonic()
    proc, _ = run_measured(str(path), "--formats-dir", str(formats), timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert "none of 20,000 lines matches a known format" in proc.stderr
    assert elapsed < 60, f"took {elapsed:.1f}s"


# --- the fuzz script, on a small budget ------------------------------------------------------


def test_fuzz_small_budget_finds_no_crash_or_hang(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "fuzz.py"),
            "--budget",
            "150",
            "--workers",
            "2",
            "--seed",
            "1",
            "--timeout",
            "30",
            "--save",
            str(tmp_path / "found"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = dict(re.findall(r"^(\w[\w ]*\w): +(\S+)", proc.stdout, re.MULTILINE))
    assert figures["inputs"] == "150" and figures["crashes"] == "0" and figures["hangs"] == "0", proc.stdout


def test_readme_guarantees_match_the_code():
    from memlog import cli

    readme = (REPO / "docs" / "guarantees.md").read_text(encoding="utf-8")
    block = readme[readme.index("<!-- BEGIN guarantees -->") : readme.index("<!-- END guarantees -->")]
    assert f"`MAX_LINE_BYTES` ({reading.MAX_LINE_BYTES >> 20} MiB)" in block
    assert f"{reading.CHUNK_BYTES >> 20} MiB chunks" in block
    for code in (cli.EXIT_OK, cli.EXIT_FINDING, cli.EXIT_CANNOT_JUDGE):
        assert f"\n| {code} | " in block


@pytest.mark.parametrize("output", ["text", "markdown"])
def test_the_report_itself_says_what_was_skipped(tmp_path, output):
    """Not only stderr: the report a user pastes into an issue carries the counts and first lines."""
    raw = [line.encode() for line in flat_lines()]
    raw[5] += b" \xff"
    path = write(tmp_path / "damaged.log", b"\n".join(raw) + b"\n" + b"\0" * 8 + b"x" * (2 * reading.MAX_LINE_BYTES))
    result = analyze(path, "-o", output, "--no-chart" if output == "text" else "--chart")
    assert result.exit_code in (0, 1), result.stderr
    expected = "1 over-long line(s) cut (first: line 14); 1 undecodable byte(s) replaced (first: line 6); 8 NUL byte(s) removed (first: line 14)"
    assert expected in " ".join(result.stdout.split())


@pytest.mark.parametrize("loss", ["-inf", "inf", "nan"])
def test_a_loss_that_is_never_finite(tmp_path, loss):
    """Found by scripts/fuzz.py: a constant -inf loss crashed the pipeline-parallel sentinel check."""
    lines = [re.sub(r"loss: +[\d.]+", f"loss: {loss}", line) for line in flat_lines()]
    path = write(tmp_path / "inf_loss.log", lines)
    result = analyze(path, "-o", "json", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr
    report = report_of(result)
    assert report["verdict"] not in ("leak", "pp-sentinel-loss")
    assert report["coverage"]["records"] == len(lines) - 1


@pytest.mark.parametrize("output", ["markdown", "github", "html"])
def test_a_fifo_is_read_once_and_never_hangs(tmp_path, output):
    """Quoting evidence lines must not open the input a second time: a FIFO would block forever."""
    import os
    import subprocess
    import sys
    import threading

    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)
    log = Path(__file__).resolve().parent.parent / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
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

    log = Path(__file__).resolve().parent.parent / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
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


def test_yaml_bombs_and_endless_configs_fail_in_one_line(tmp_path):
    import subprocess
    import sys

    log = Path(__file__).resolve().parent.parent / "sample_logs" / "torchtitan" / "fr5_two_points.log"
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        "rules:\n  memory-leak: &a {x: [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n"
        + "".join(f"k{i}: &k{i} [*{'a' if i == 0 else f'k{i - 1}'}, *{'a' if i == 0 else f'k{i - 1}'}]\n" for i in range(150))
    )
    specs = tmp_path / "formats"
    specs.mkdir()
    (specs / "big.yaml").write_text("name: big\n" + "#" * (2 * 1024 * 1024) + "\n")
    for args, why in ((["--config", "/dev/zero"], "is a device"), (["--config", str(bomb)], "aliases"), (["--formats-dir", str(specs)], "larger than")):
        result = subprocess.run([sys.executable, "-m", "memlog", "analyze", *args, str(log)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and why in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_other_compressors_are_read_or_named(tmp_path):
    """bzip2 and xz are read like gzip (standard library); zstd is named with what to do; a file
    of NUL bytes is named as such."""
    import bz2
    import lzma
    import subprocess
    import sys

    log = Path(__file__).resolve().parent.parent / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
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


def test_closed_stdout_or_stderr_is_not_an_internal_error():
    """`>&-` left sys.stdout None ("internal error: AttributeError"); `2>&-` made the error message
    itself raise, so a missing file ended in exit 1, a verdict's code. Found by scripts/fuzz.py."""
    log = REPO / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"

    def run(args, redirect):
        return subprocess.run(["sh", "-c", f'exec "$0" -m memlog {args} {redirect}', sys.executable], capture_output=True, text=True, timeout=120, cwd=REPO)

    no_stdout = run(f"analyze {log}", ">&-")
    assert no_stdout.returncode == 2
    assert no_stdout.stderr.splitlines() == ["memlog: error: standard output is closed: there is nowhere to write to (redirect it to a file instead)"]
    assert run(f"analyze {log}", "2>&- >/dev/null").returncode == 1  # the leak: the verdict's own code
    assert run("analyze /nonexistent.log", "2>&-").returncode == 2
    assert run(f"analyze {log}", ">&- 2>&-").returncode == 2


@pytest.mark.parametrize("extreme", ["1e300", "-1e300", "1e154", "1.7976931348623157e308"])
def test_finite_extremes_render_in_every_mode(tmp_path, extreme):
    """Found by scripts/fuzz.py: a finite loss of 1e300 overflowed the HTML chart's tick arithmetic
    (pygal); the chart is replaced by a line saying why, the rest of the page stays."""
    lines = [f"train_step={i + 1} mem={v:.2f} loss={extreme if i in (5, 9) else 2.0 - 0.01 * i}" for i, v in enumerate(FLAT_GIB * 2)]
    path = write(tmp_path / "extreme.log", lines)
    spec = corrupt_values_spec(tmp_path)
    for output in ("text", "json", "markdown", "github", "sarif", "junit", "html"):
        result = analyze(path, "--formats-dir", spec, "-o", output, "--fail-on", "never")
        assert result.exit_code == 0 and result.stderr == "", (output, result.stderr)
    assert "Not drawn: values from" in result.stdout or extreme == "1e154"


@pytest.mark.parametrize(
    "low, high",
    [
        (1e300, 1e300),
        (0.0, 5e-324),
        (-1.7e308, 1.7e308),
        (2.5, 2.5),
        (30.0, 31.0),
        (1.7976931348623157e308, 1.7976931348623157e308),
        (-1.7976931348623157e308, 1.7976931348623157e308),
        (-1.7e308, -1.7e308),
    ],
)
def test_html_value_ticks_cover_any_finite_range(low, high):
    """Found by scripts/fuzz.py: a loss of 1e300 at every step (1e300 - 1 == 1e300) and readings
    5e-324 apart gave log10(0), a domain error; -1.7e308..1.7e308 overflowed the span; a flat
    largest float overflowed when widened (seed 2028, input 5257)."""
    from memlog.render.outputs.html import _value_ticks

    ticks = _value_ticks(low, high)
    assert 2 <= len(ticks) <= 13
    assert ticks[0] <= low and ticks[-1] >= high and ticks == sorted(ticks)
    assert all(isinstance(t, float) and math.isfinite(t) for t in ticks)


def test_a_loss_of_1e300_at_every_step_renders(tmp_path):
    lines = [f"train_step={i + 1} mem={v:.2f} loss=1e300" for i, v in enumerate(FLAT_GIB * 2)]
    path = write(tmp_path / "flat_extreme.log", lines)
    result = analyze(path, "--formats-dir", corrupt_values_spec(tmp_path), "-o", "html", "--fail-on", "never")
    assert result.exit_code == 0 and result.stderr == "", result.stderr


@pytest.mark.parametrize("where", ["rules:\n  memory-leak: {min_growth_gib: %s}\n", "compare: {fail_on_increase_pct: %s}\n"])
def test_a_threshold_too_large_for_a_float_is_a_config_error(tmp_path, flat_log, where):
    """Found by scripts/fuzz.py: math.isfinite(10**400) raises OverflowError (an internal error)."""
    cfg = write(tmp_path / "memlog.yaml", where % ("1" + "0" * 400))
    if where.startswith("compare"):
        result = runner.invoke(app, ["compare", str(flat_log), str(flat_log), "--config", str(cfg)])
    else:
        result = analyze(flat_log, "--config", cfg)
    line = cannot_judge(result)
    assert "must be a number, got 1000000000000000000000000000000000000000" in line and len(line) < 300, line


def test_fuzz_findings_near_the_float_limits(tmp_path, flat_log):
    """Found by scripts/fuzz.py (seed 2026): steps past 2**53 that a float cannot tell apart gave
    the HTML chart a zero-width axis; losses of -1.7e308 and 1.7e308 gave the markdown sparkline
    and the text chart NaN positions; `min_readings: 0` made corrupt-readings index an empty list
    (now refused when the config is read: a count is at least 1, rulekit.UNIT_BOUNDS)."""
    base = 2**53
    lines = torchtitan_lines({0: FLAT_GIB}, steps=[base + i for i in range(len(FLAT_GIB))], capacity=CAPACITY_GIB)
    steps_log = write(tmp_path / "steps.log", lines)
    extremes = [f"train_step={i + 1} mem={v:.2f} loss={'-' if i % 2 else ''}1.7e308" for i, v in enumerate(FLAT_GIB * 2)]
    loss_log = write(tmp_path / "loss.log", extremes)
    spec = corrupt_values_spec(tmp_path)
    for output in ("text", "markdown", "html"):
        for log, extra in ((steps_log, []), (loss_log, ["--formats-dir", spec])):
            result = analyze(log, *extra, "-o", output, "--fail-on", "never", *(["--chart"] if output == "text" else []))
            assert result.exit_code == 0 and result.stderr == "", (output, log.name, result.stderr)
    # fuzz input 7700 as found (DeepSpeed lines, a step of 2**53): its HTML chart divided by zero
    found = write(
        tmp_path / "found.log",
        b'[2024-08-14 09:12:39,213] [INFO] [utils.py:789:see_eemori_usage] CPU Virtual Memory:  used =096.06 GB, Percent = 9.5%\n[2024-08-14 09:12:39,618] [INF\xcf] [logging.py:96:log_dirt] [Rank 0] step=9007199254740992, skipped=0, lr=[4.000000000000001e-06, 4.000000000000001e-06], mom=[(0.9, 0.999), (0.9, 0.999)]\n[2024-08-14 09:12:39,622] [INFO] [utids.py:781:see_memory_usagg] Engine after steq\n[2024-08-14 09:12:39,623] [INFO] [utils.py:782:see_memosy_usage] MA 23.53 GB         Max_MA 24.73 GB         CA 37.96 GB   "     Max_CA 38 GB \n[2024-08-14 09:12:39,624] _INFO] [utils.py:789:see_memory_usage] CPU Virtual Memory:  used = 96.19 GB, percent = 9.5%\n',
    )
    result = analyze(found, "-o", "html", "--fail-on", "never")
    assert result.exit_code == 0 and "Not drawn" in result.stdout, result.stderr
    cfg = write(tmp_path / "memlog.yaml", "rules:\n  corrupt-readings: {min_readings: 0}\n")  # now refused: a count is at least 1
    result = analyze(flat_log, "--config", cfg, "-o", "json")
    assert result.exit_code == 2 and result.stderr == "memlog: error: rule corrupt-readings: threshold min_readings counts readings: at least 1, got 0\n"


def test_a_count_no_float_holds_counts_nothing(tmp_path):
    """fuzz seed 2029, input 20298: `number of nan iterations:` followed by 400 nines (inf as a
    float) made nan-loss convert infinity to an integer (internal error). A count that is not a
    whole number a float holds exactly (inf, 1e300, -1) is a corrupt line: it counts nothing."""
    source = (Path(__file__).resolve().parent.parent / "sample_logs/megatron/core_v011_bf16_nan.log").read_text().splitlines()
    at = [i for i, line in enumerate(source) if "number of nan iterations:   0" in line]
    for bad in ("9" * 400, "1e300", "inf", "nan"):
        lines = list(source)
        lines[at[0]] = lines[at[0]].replace("number of nan iterations:   0", f"number of nan iterations: {bad}")
        lines[at[1]] = lines[at[1]].replace("number of skipped iterations:   0", f"number of skipped iterations: {bad}")
        log = write(tmp_path / "run.log", lines)
        result = analyze(log, "-o", "json", "--fail-on", "never")
        assert result.exit_code == 0 and result.stderr == "", (bad, result.stderr)
        assert json.loads(result.stdout)["verdict"]
