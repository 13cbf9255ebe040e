"""One run's row of a scan: what a worker judges, in a local worker process (memlog/scan/fleet.py) or
as a Ray task (memlog/scan/on_ray.py). Both back-ends import it; neither imports the other.

Like memlog/scan/fleet.py, it imports neither polars nor the engine at load: a worker process sets its
thread counts (limit_threads) before the engine (and polars) load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from memlog.engine.options import ReadingOptions
from memlog.scan.runs import Run

MAX_LEAKING = 16  # leaking workers a row names


@dataclass(frozen=True)
class ScanOptions:
    """What every run is judged with (the options of `memlog analyze` that apply to a fleet)."""

    reading: ReadingOptions = ReadingOptions()  # how each run is read (its formats, their folders)
    config: Any = None  # a memlog.base.config.Config, already loaded (it is shipped to the workers)
    capacity_gib: float | None = None


def limit_threads() -> None:
    """One engine thread per worker: the workers are already one per core. polars reads its
    variable when it loads, so this runs before the engine is imported in a fresh worker."""
    os.environ["MEMLOG_THREADS"] = "1"
    os.environ.setdefault("POLARS_MAX_THREADS", "1")


def judge(run: Run, options: ScanOptions = ScanOptions()) -> dict[str, Any]:
    """The row of one run. Never raises for a bad run: what stopped it is the row's `error`."""
    try:
        from memlog.engine.api import analyze

        report = analyze([run.path], options=options.reading, config=options.config, capacity_gib=options.capacity_gib)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        from memlog.base.errors import MemlogError

        message = str(exc) if isinstance(exc, MemlogError) else f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return judge_failed(run, message)
    return {"run": run.name, "path": run.path, **row_of(report)}


def judge_failed(run: Run, error: str) -> dict[str, Any]:
    """The row of a run that could not be judged, saying why."""
    return {
        "run": run.name, "path": run.path, "verdict": None, "severity": None, "worst": None, "findings": [], "ranks": 0,
        "steps": None, "growth_gib_per_1k_steps": None, "projected_oom": None, "leaking": [], "error": error,
    }  # fmt: skip


def row_of(report) -> dict[str, Any]:
    """What a scan keeps of a Report: the headline, the worst finding, and the two numbers a fleet
    is sorted and read by (how fast memory grows, when it runs out), from whichever finding
    measured them (its evidence: `observed.slope_gib_per_step`, `projected_capacity_*`)."""
    findings = report.findings  # already in report order: most severe first
    worst = findings[0] if findings else None
    cov = report.coverage
    slope = next((f.evidence["observed"]["slope_gib_per_step"] for f in findings
                  if isinstance(f.evidence.get("observed"), dict) and f.evidence["observed"].get("slope_gib_per_step") is not None), None)  # fmt: skip
    projected = next((f.evidence for f in findings if f.evidence.get("projected_capacity_step") is not None), None)
    return {
        "verdict": report.verdict,
        "severity": report.worst_severity(),
        "worst": {
            "rule": worst.rule, "severity": worst.severity, "message": worst.message,
            "source": worst.lines[0][0] if worst.lines else None, "line": worst.lines[0][1] if worst.lines else None,
        } if worst else None,
        "findings": [{"rule": f.rule, "severity": f.severity} for f in findings],
        # Ranks that logged steps; where the log names no rank, the workers (actors, processes) that did.
        "ranks": len(cov["ranks"]) or len(cov["workers"]),
        "steps": cov["steps"],
        "growth_gib_per_1k_steps": round(slope * 1000, 3) if slope is not None else None,
        "projected_oom": {
            "step": projected["projected_capacity_step"],
            "seconds": projected.get("projected_capacity_seconds"),
            "at": projected.get("projected_capacity_at"),
            "capacity_gib": projected.get("capacity_gib"),
        } if projected else None,
        # Which of the run's workers leak, as its report names them (a file and its rank where the
        # run is several files: tables.series.worker_names), the first MAX_LEAKING.
        "leaking": list(dict.fromkeys(label for f in findings if f.verdict and f.verdict.name == "leak" for label in f.series))[:MAX_LEAKING],
        "error": None,
    }  # fmt: skip
