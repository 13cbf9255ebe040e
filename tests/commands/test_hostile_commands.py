"""Hostile and broken input, the command line: an internal error is one line (the traceback only
with --debug), closed standard streams keep the exit codes, the documented guarantees match the
code, and the fuzz script runs clean on a small budget. Shared helpers: tests/hostile.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from memlog.read import source as reading
from tests.hostile import REPO, analyze, cannot_judge, flat_lines, write


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


def test_debug_shows_the_traceback(tmp_path):
    path = tmp_path / "missing.log"
    result = analyze(path, "--debug")
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.splitlines()[-1] == f"memlog: error: {path}: no such file"


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
