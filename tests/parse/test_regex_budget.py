"""A user spec's regex that backtracks catastrophically (issue 40). Logs are read by polars, whose
regex engine runs in linear time whatever the pattern; the one backtracking search memlog runs on
a user's pattern is `formats check` placing where a near miss stops (memlog/engine/formatcheck.py).
There a search past its time budget names the format and pattern in one line, exit 2, instead of
timing out prefix after prefix for minutes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine import formatcheck

runner = CliRunner()
# The catastrophic part first, a long tail after it: each of the hundreds of prefixes that still
# hold the repeat and the `b` after it backtracked until its own timeout.
EVIL = (
    r"step (?P<step>\d+) (?:a|aa)+b memory (?P<mem_allocated_gib>[\d.]+) GiB"
    r" of the device in use at this point of the training run"
)
SPEC = f"""name: evil
records:
  - name: r
    literal: 'step'
    regex: '{EVIL}'
    units: {{mem_allocated_gib: GiB}}
samples:
  - line: 'step 1 aab memory 3.5 GiB of the device in use at this point of the training run'
    record: {{step: 1, mem_allocated_gib: 3.5}}
"""


@pytest.fixture
def evil(tmp_path):
    specs = tmp_path / "formats"
    specs.mkdir()
    (specs / "evil.yaml").write_text(SPEC)
    log = tmp_path / "near.log"
    log.write_text("".join(f"step {i} {'a' * 40}c memory 3.5 GiB\n" for i in range(120)))
    return specs, log


def test_formats_check_names_a_catastrophic_pattern_in_one_line(evil):
    specs, log = evil
    result = runner.invoke(app, ["formats", "check", "--formats-dir", str(specs), str(log)])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memlog: error: format 'evil': record pattern 'r' backtracks catastrophically on line 1 ")


def test_analyze_reads_with_the_same_pattern_in_linear_time(evil):
    """The spec itself is fine for reading: polars' engine does not backtrack (no line matches here)."""
    specs, log = evil
    result = runner.invoke(app, ["analyze", "--formats-dir", str(specs), "--format", "evil", str(log)])
    assert result.exit_code == 2 and "none of 120 lines matches" in result.stderr, result.stderr


def test_where_it_stops_refuses_a_search_past_its_timeout():
    with pytest.raises(formatcheck.SlowRegex):
        formatcheck.where_it_stops(r"(?:a|aa)+b", "a" * 40 + "c")


def test_all_the_prefix_searches_of_a_line_share_one_budget(monkeypatch):
    """Each search may stay under its own timeout and hundreds of them still add up: a budget spent
    (here: none to spend) ends the search too."""
    monkeypatch.setattr(formatcheck, "LINE_BUDGET_S", -1.0)
    with pytest.raises(formatcheck.SlowRegex):
        formatcheck.where_it_stops(r"^step: (?P<step>\d+) loss", "step: 12 lost")
    monkeypatch.setattr(formatcheck, "LINE_BUDGET_S", 1.0)
    assert formatcheck.where_it_stops(r"^step: (?P<step>\d+) loss", "step: 12 lost") == (24, 12)
