"""Smaller failures of issue 40, each one line on stderr and exit 2: standard output on a full disk
(/dev/full), `memlog` or `memlog rules` with no command, and a file of NUL bytes only, which gets one
message whatever its size (past MAX_LINE_BYTES it is one endless line, most of it dropped unread)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.read import source as reading
from tests.synthetic import torchtitan_lines

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
FULL = "memlog: error: cannot write to standard output (No space left on device)"


def flat_log(path: Path) -> Path:
    path.write_text("\n".join(torchtitan_lines({0: [30.0 + 0.01 * (i % 3) for i in range(12)]}, capacity=79.11)) + "\n")
    return path


def memlog(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlog", *args], stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=300)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["analyze"], ["analyze", "-o", "html"], ["scan", "--jobs", "1", "-o", "json"], ["compare", "LOG"], ["series"]])
def test_a_full_disk_on_stdout_is_one_line(tmp_path, command):
    log = str(flat_log(tmp_path / "flat.log"))
    args = [log if a == "LOG" else a for a in command]
    with open("/dev/full", "w") as full:
        proc = memlog(args[0], log, *args[1:], stdout=full)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [FULL]


@pytest.mark.parametrize("args, commands", [([], "analyze, scan, watch"), (["rules"], "list, explain")])
def test_no_command_is_a_usage_error_line(args, commands):
    proc = memlog(*args)
    assert proc.returncode == 2
    assert proc.stdout.count("Usage: memlog") == 1  # the help, once
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"memlog: error: missing command: one of {commands}"), proc.stderr
    assert lines[0].endswith(f"(see `memlog{' ' + args[0] if args else ''} --help`)")


@pytest.mark.parametrize("size", [1, 70_000, reading.MAX_LINE_BYTES + 1, 3 * reading.CHUNK_BYTES + 5, 20_000_000])
def test_a_file_of_nul_bytes_gets_one_message_whatever_its_size(tmp_path, size):
    path = tmp_path / "zeroed.log"
    with path.open("wb") as out:
        out.truncate(size)  # a sparse file: zeros, as a preallocated log is
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"memlog: error: no training-step records found in {path}: all {size:,} bytes are NUL (a zeroed or preallocated file, not a log)"
    ]


def test_nul_bytes_dropped_with_an_over_long_line_are_counted(tmp_path):
    """Text, then a line of NULs longer than a chunk (cut, most of it dropped unread), then text:
    every NUL is counted, on the line it is in."""
    lines = torchtitan_lines({0: [30.0 + 0.01 * (i % 3) for i in range(12)]}, capacity=79.11)
    path = tmp_path / "holes.log"
    nul = 2 * reading.CHUNK_BYTES
    path.write_bytes(("\n".join(lines[:5]) + "\n").encode() + b"\0" * nul + b"\n" + ("\n".join(lines[5:]) + "\n").encode())
    result = runner.invoke(app, ["analyze", str(path), "-o", "json"])
    assert result.exit_code in (0, 1), result.stderr
    assert f"{nul:,} NUL byte(s) removed (first: line 6)" in result.stderr
