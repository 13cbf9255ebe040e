"""Judging what is held: the seam `watch` shares with the guard (memlog/guard), which judges the
readings it takes inside a training run with the same rules and thresholds as watch judges logs.

Watch's reading (following files) stays in watch.py; what is judged, and what a judgement says of
the capacity ahead, is here, so that both judge alike and neither depends on how the other reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from memlog.base.config import Config
from memlog.read.source import Source
from memlog.report.report import Report

if TYPE_CHECKING:
    from memlog.parse.generic.guessed import Guessed
    from memlog.tables.condense import Summarised


def judge_held(
    record_frames: list[pl.DataFrame],
    event_frames: list[pl.DataFrame],
    summarised: Sequence[Summarised],
    sources: list[Source],
    *,
    config: Config,
    capacity_gib: float | None = None,
    guessed: Sequence[Guessed] = (),
) -> Report | None:
    """The verdict on the records and events held so far (each frame one source's compact or
    condensed records, or its events), by every rule with the config's thresholds (engine.api.judge),
    as `analyze` judges a finished log; None while nothing can be judged (no record, no fatal
    event). Watch judges the logs it follows with this, and the guard the readings it takes inside
    the run: one judgement for both. `record_frames` is emptied (engine.reader.tables_from).
    `guessed`: what the generic reader guessed of the sources (analyze's coverage says it too)."""
    from memlog.engine.api import judge
    from memlog.engine.reader import judgeable, tables_from

    tables = tables_from(record_frames, event_frames, list(guessed), summarised, per_step=True)
    if not judgeable(tables):
        return None
    return judge(tables, sources, config=config, capacity_gib=capacity_gib)


def leak_found(report: Report) -> bool:
    """Whether a finding implies the leak verdict (the headline may still rank another above it)."""
    return any(f.verdict is not None and f.verdict.name == "leak" for f in report.findings)


def capacity_projections(report: Report) -> list[dict]:
    """Per leaking series (findings implying the leak verdict): the step at which its trend reaches
    its capacity, and in how many seconds by the run's own timestamps when it has them (else None).
    Series with no known capacity are left out."""
    projections = []
    for f in report.findings:
        if f.verdict is None or f.verdict.name != "leak":
            continue  # (leak_found's test, per finding)
        for s in f.evidence.get("series") or []:
            if s.get("projected_capacity_step") is not None:
                projections.append(
                    {
                        "series": s.get("series"),
                        "rank": s.get("rank"),
                        "metric": s.get("metric"),
                        "subject": f.subject,
                        "capacity_step": s["projected_capacity_step"],
                        "capacity_seconds": s.get("projected_capacity_seconds"),
                        "capacity_gib": f.evidence.get("capacity_gib"),
                    }
                )
    return projections
