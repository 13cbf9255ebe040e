"""Many series are shaped on worker processes (shapes.shapes_of): the reports must be byte for byte
those of shaping them all in this process (MEMLOG_THREADS=1)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from memlog.base import parallel
from memlog.cli import app
from memlog.engine.api import analyze
from memlog.judge import shapes
from memlog.render.outputs import render
from tests.samples import sample_logs

SAMPLES = [str(p) for p in sample_logs()]
# Samples with the most series to shape (a quick check; every sample is in the slow part).
MANY_SERIES = [s for s in SAMPLES if any(k in s for k in ("custom_untagged_4ranks", "fr4_orz", "ray_driver_mixed"))]


def _json(log: str, monkeypatch: pytest.MonkeyPatch, threads: str, pool: bool) -> str:
    monkeypatch.setenv("MEMLOG_THREADS", threads)
    # Every series set through the pool however few points it has (the threshold is for speed).
    monkeypatch.setattr(shapes, "PROCESS_MIN_POINTS", 0 if pool else 1 << 60)
    return render(analyze([log], processes=pool), "json")


def _same_on_processes(log: str, monkeypatch: pytest.MonkeyPatch, used: list[int]) -> None:
    real = parallel.process_map

    def counted(fn, items, workers, preload=()):
        used.append(workers)
        return real(fn, items, workers, preload)

    monkeypatch.setattr(shapes, "process_map", counted)
    alone = _json(log, monkeypatch, "1", pool=False)
    assert not used  # MEMLOG_THREADS=1: everything in this process
    assert _json(log, monkeypatch, "2", pool=True) == alone


@pytest.mark.parametrize("log", MANY_SERIES)
def test_reports_are_the_same_with_shapes_from_worker_processes(log, monkeypatch):
    used: list[int] = []
    _same_on_processes(log, monkeypatch, used)
    assert used == [2]  # really shaped on two worker processes


@pytest.mark.slow
@pytest.mark.parametrize("log", SAMPLES)
def test_every_samples_report_is_the_same_with_shapes_from_worker_processes(log, monkeypatch):
    _same_on_processes(log, monkeypatch, [])


def _pid(_: int) -> int:
    return os.getpid()


def test_process_map_runs_on_other_processes_and_keeps_the_order():
    assert parallel.process_map(abs, [-3, 1, -2, 5], 2) == [3, 1, 2, 5]
    assert os.getpid() not in parallel.process_map(_pid, [1, 2, 3, 4], 2)


@pytest.mark.parametrize("asked", ["1", ""])
def test_memlog_analyze_uses_worker_processes_only_when_asked(asked, monkeypatch):
    # Off by default: on the 2-core machine it was measured on it did not win (benchmarks/README.md).
    used: list[int] = []
    monkeypatch.setattr(shapes, "process_map", lambda fn, items, workers, preload=(): used.append(workers) or [fn(i) for i in items])
    monkeypatch.setattr(shapes, "PROCESS_MIN_POINTS", 0)
    monkeypatch.setenv("MEMLOG_THREADS", "2")
    monkeypatch.setenv("MEMLOG_PROCESSES", asked)
    result = CliRunner().invoke(app, ["analyze", MANY_SERIES[0], "-o", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.stderr
    assert used == ([2] if asked else [])
