"""What the hostile-input tests share (tests/*/test_hostile_*.py, one file per stage): every case ends
in a known exit code and an exact message, never a traceback, a hang or unbounded memory.

Exit codes (memlog.cli): 0 judged and nothing at or above --fail-on, 1 a finding at or above it,
2 could not judge. Messages on stderr are `memlog: error: ...` (exit 2, one line) and
`memlog: warning: ...` (one line per damaged source, the run goes on).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from memlog.cli import app
from memlog.judge.rulekit import load_rules
from memlog.parse.catalog import load_specs
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


def baseline(path: Path) -> tuple[int, dict]:
    """Exit code and JSON report of an intact log, to compare its damaged copies with."""
    result = analyze(path, "-o", "json")
    return result.exit_code, report_of(result)


def tried_formats() -> str:
    return ", ".join(s.name for s in load_specs().values() if s.records)


def rule_ids() -> set[str]:
    return {r.id for r in load_rules()}


def warning_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("memlog: warning: ")]


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


def series_rows(path: Path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["series", str(path), "-o", "json", *args])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


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
