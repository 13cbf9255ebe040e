"""Hostile and broken input, the renderers: finite extremes (1e300, the largest float, steps past
2**53) render in every output mode, and the report itself says what was skipped. Shared helpers:
tests/hostile.py."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memlog.read import source as reading
from tests.hostile import CAPACITY_GIB, FLAT_GIB, analyze, corrupt_values_spec, flat_lines, write
from tests.synthetic import torchtitan_lines


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


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
