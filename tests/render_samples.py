"""Shared by the renderer tests: the sample logs, and their reports computed once per session."""

from __future__ import annotations

import functools
from pathlib import Path

from memlog.engine.api import analyze
from memlog.engine.excerpt import attach_log_lines
from memlog.report.report import Report
from tests.samples import sample_logs

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_LOGS = sample_logs()
SAMPLE_IDS = [p.relative_to(ROOT / "sample_logs").as_posix() for p in SAMPLE_LOGS]


@functools.cache
def sample_report(path: Path) -> Report:
    """The report of one sample log, with its evidence lines read back (as the CLI does for markdown)."""
    report = analyze([str(path)])
    attach_log_lines(report)
    return report


# A sample with every kind of content (leak, OOM, sentinel loss, capacity line) for tests that need one.
TORCHTITAN_LEAK = ROOT / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
