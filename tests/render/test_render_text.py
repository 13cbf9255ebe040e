"""Terminal output: verdict first, a chart that fits 100 columns, colour only when it should be."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.commands.common import ascii_only, colour
from memlog.render.chart import _finite_points, _nice_ticks, render_chart
from memlog.render.outputs.text import render_text
from memlog.report.report import SeriesView
from tests.render_samples import ROOT, SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report

runner = CliRunner()
ESC = "\x1b"


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_text_with_chart_fits_100_columns(log):
    report = sample_report(log)
    text = render_text(report)
    lines = text.splitlines()
    assert lines[0].startswith("memlog verdict: ")
    # A log that prints only a loss (sample_logs/generic/epoch_loss_nan.log) charts the loss; a
    # crash-only paste (no step record) has nothing to chart.
    charted = re.search(r"(Device|Host) memory per (rank|worker) vs (?:step|reading)|Loss per (rank|worker) vs (?:step|reading)", text) and "┤" in text
    assert bool(charted) == (report.coverage["records"] > 0)
    assert max(len(line) for line in lines) <= 100
    assert ESC not in text


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_ascii_fallback_is_pure_ascii(log):
    report = sample_report(log)
    text = render_text(report, ascii_only=True)
    assert text.isascii()
    if report.coverage["records"]:
        assert (
            re.search(r"(Device|Host) memory per (rank|worker) vs (?:step|reading)|Loss per (rank|worker) vs (?:step|reading)", text)
            and "+" in text
            and "|" in text
        )


def test_chart_draws_knee_fit_and_capacity():
    leak = sample_report(ROOT / "sample_logs" / "torchtitan" / "fr2_logfreq_creep.log")
    chart = render_chart(leak)
    assert "warmup knee at step" in chart and "tail fit" in chart and "capacity 79.11 GiB" in chart
    assert "━" in chart  # the capacity line itself, not only its legend


def test_chart_marks_sentinel_ranks_in_the_loss_panel():
    report = sample_report(ROOT / "sample_logs" / "torchtitan" / "fr5_pp8_warmup_plateau.log")
    chart = render_chart(report, subjects=("loss",))
    assert "ranks 0-3: -1 placeholder" in chart
    memory = render_chart(report, subjects=("device",))
    assert "placeholder" not in memory  # the sentinel is about loss only


def test_colour_chart_keeps_the_terminal_background():
    chart = render_chart(sample_report(TORCHTITAN_LEAK), colour=True)
    assert "\x1b[38;5;" in chart
    assert "\x1b[48;5;" not in chart


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [
        ({}, False, False),
        ({}, True, True),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, True),  # empty NO_COLOR is ignored
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": ""}, False, False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
        ({"TERM": "dumb"}, True, False),
    ],
)
def test_colour_decision(monkeypatch, env, tty, expected):
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty, raising=False)
    assert colour() is expected


def test_ascii_only_follows_the_stdout_encoding(monkeypatch):
    class Latin1:
        encoding = "ISO-8859-1"

    monkeypatch.setattr(sys, "stdout", Latin1())
    assert ascii_only()


def test_no_color_run_has_no_escape_codes_and_force_color_has(monkeypatch):
    log = str(TORCHTITAN_LEAK)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ESC not in runner.invoke(app, ["analyze", log]).stdout
    monkeypatch.delenv("NO_COLOR")
    coloured = runner.invoke(app, ["analyze", log]).stdout
    assert ESC in coloured


def test_a_chart_renders_in_a_non_tty_run_and_no_chart_drops_it():
    log = str(TORCHTITAN_LEAK)
    piped = runner.invoke(app, ["analyze", log]).stdout
    assert "Device memory per rank vs step" in piped
    assert "Device memory per rank vs step" not in runner.invoke(app, ["analyze", log, "--no-chart"]).stdout


def _imports_plotext(*args: str) -> bool:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "memlog.cli", *args], capture_output=True, text=True, cwd=ROOT, check=False)
    return "plotext" in result.stderr


def test_plotext_is_imported_only_when_a_chart_is_drawn():
    log = str(TORCHTITAN_LEAK)
    assert not _imports_plotext("analyze", log, "-o", "json")
    assert not _imports_plotext("analyze", log, "--no-chart")
    assert _imports_plotext("analyze", log)


def test_plot_command():
    log = str(ROOT / "sample_logs" / "torchtitan" / "fr5_pp8_warmup_plateau.log")
    out = runner.invoke(app, ["plot", log]).stdout
    assert "Device memory per rank" in out and "Loss per rank" in out and "memlog verdict" not in out
    loss = runner.invoke(app, ["plot", log, "--metric", "loss", "--rank", "5"]).stdout
    assert "Device memory" not in loss and "rank5" in loss and "rank4" not in loss
    tps = runner.invoke(app, ["plot", log, "--metric", "tps", "--width", "80"])
    assert tps.exit_code == 0 and "tps per rank" in tps.stdout
    assert max(len(line) for line in tps.stdout.splitlines()) <= 80
    bad = runner.invoke(app, ["plot", log, "--metric", "nope"])
    assert bad.exit_code == 2 and "unknown metric 'nope'" in bad.stderr
    missing = runner.invoke(app, ["plot", log, "--rank", "99"])
    assert missing.exit_code == 2 and "no rank 99" in missing.stderr


def test_nice_ticks_are_whole_steps_including_the_ends():
    assert _nice_ticks(1, 30) == [1, 5, 10, 15, 20, 25, 30]
    assert _nice_ticks(1, 1000)[0] == 1 and _nice_ticks(1, 1000)[-1] == 1000
    assert _nice_ticks(7, 7) == [7]
    for low, high in [(1, 2), (3, 97), (10, 123457), (0, 6)]:
        ticks = _nice_ticks(low, high)
        assert ticks == sorted(set(ticks)) and ticks[0] == low and ticks[-1] == high


def test_thinning_keeps_peaks_and_drops_non_finite():
    values = [1.0] * 10_000
    values[5_000], values[7_000] = 99.0, math.nan
    view = SeriesView("device", "rank0", 0, "mem_reserved_gib", list(range(10_000)), values)
    steps, kept = _finite_points(view, 100)
    assert len(steps) <= 400 and 99.0 in kept and steps == sorted(steps) and 5_000 in steps
    assert all(math.isfinite(v) for v in kept)


def test_a_non_utf8_stdout_gets_ascii_text_and_utf8_data():
    log = str(ROOT / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log")
    env = {**__import__("os").environ, "PYTHONIOENCODING": "ascii", "NO_COLOR": "1"}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "memlog.cli", "analyze", log, *args], capture_output=True, cwd=ROOT, env=env, check=False)

    text = run()
    assert text.returncode == 1 and text.stdout.isascii() and b"Device memory per rank" in text.stdout
    data = run("-o", "json")
    assert data.returncode == 1 and json.loads(data.stdout.decode("utf-8"))["verdict"] == "leak"


def test_long_worker_names_do_not_widen_the_chart():
    report = sample_report(TORCHTITAN_LEAK)
    saved = [view.label for view in report.series]
    try:
        for view in report.series:
            view.label = "WorkerDict pid=123456, ip=10.0.0.1 " * 5 + view.label
        chart = render_chart(report)
    finally:
        for view, label in zip(report.series, saved):
            view.label = label
    assert max(len(line) for line in chart.splitlines()) <= 100
