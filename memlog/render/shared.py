"""What every renderer says or draws the same way: the one-line evidence summary, the workers and
restarts sentences, the severity order and the bucketing of long series for charts. The verdict
sentences are declared by the rules (report.headline).
"""

from __future__ import annotations

import re
from typing import Any

from memlog.report.report import Report

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def buckets(steps: list[float] | None, values: list[float], count: int):
    """The finite points of one series cut into at most `count` runs of consecutive points, for
    display: per bucket the lowest and highest point (with their steps), the mean, the first and
    last value. Vectorised, so a million-step series costs milliseconds. Without `steps`, the
    point's position stands in."""
    import polars as pl

    frame = pl.DataFrame({"value": values}, schema={"value": pl.Float64})
    frame = frame.with_columns(step=pl.Series(steps, dtype=pl.Float64) if steps is not None else pl.int_range(pl.len()).cast(pl.Float64))
    frame = frame.filter(pl.col("value").is_finite())
    size = max(1, -(-frame.height // max(count, 1)))
    return (
        frame.with_row_index("i")
        .group_by((pl.col("i") // size).alias("bucket"), maintain_order=True)
        .agg(
            low_step=pl.col("step").get(pl.col("value").arg_min()),
            low=pl.col("value").min(),
            high_step=pl.col("step").get(pl.col("value").arg_max()),
            high=pl.col("value").max(),
            mean=pl.col("value").mean(),
            first=pl.col("value").first(),
            last=pl.col("value").last(),
        )
        .sort("bucket")
    )


def grid_means(steps: list[float], values: list[float], start: float, width: float, count: int) -> list[float | None]:
    """One series on a common grid of steps, for charts that align several series: per position
    `start + i * width` (i < count), the mean of the series' finite readings nearest to it (within
    half a width; the ends take what lies beyond them), None where it has none."""
    import polars as pl

    frame = pl.DataFrame({"step": steps, "value": values}, schema={"step": pl.Float64, "value": pl.Float64})
    means = (
        frame.filter(pl.col("value").is_finite() & pl.col("step").is_finite())
        .group_by(((pl.col("step") - start) / width).round().clip(0, count - 1).cast(pl.Int64).alias("i"))
        .agg(pl.col("value").mean())
    )
    out: list[float | None] = [None] * count
    for i, mean in means.iter_rows():
        out[i] = mean
    return out


# A chart draws the capacity line when its data reaches this share of it; below, the line would
# flatten the data (the text chart notes it instead).
CAPACITY_IN_VIEW = 0.5


def axis_word(views) -> str:
    """What the x axis counts: readings when every series drawn numbers readings, else steps."""
    return "reading" if views and all(v.unit == "reading" for v in views) else "step"


def panel_capacity(views) -> float | None:
    """The capacity a chart of `views` draws: the one its series run into (each its own, see
    memlog.tables.capacity; the largest when they differ), or None."""
    return max((v.capacity_gib for v in views if v.capacity_gib), default=None)


_RANK_WORKER = re.compile(r"(?:^|[/:])rank\d+$")


def workers_phrase_of(coverage: dict[str, Any]) -> str:
    """How many workers the run had, as every header says it: "64 ranks" (8 nodes x 8 ranks),
    "3 workers" (a driver and two actors). One count per (node, rank/actor) series, as charted."""
    workers = coverage.get("workers") or []
    noun = "rank" if workers and all(_RANK_WORKER.search(w) for w in workers) else "worker"
    return f"{len(workers)} {noun}{'s' if len(workers) != 1 else ''}"


def restarts_sentence(coverage: dict[str, Any]) -> str | None:
    """The run's restarts, said once: "The run restarted twice (steps 4,001 and 8,001); series after
    a restart are labelled (segment N)." Then the streams read once (a console beside the per-rank
    files it repeats), and the steps whose several memory lines were merged. None when it ran
    straight through from files of its own, a line a step."""
    repeated = coverage.get("repeated") or {}
    said = " ".join(
        f"{name} repeats the steps of {len(others)} other file{'s' if len(others) != 1 else ''} (its ranks' own logs): read once, from those."
        for name, others in repeated.items()
    )
    restarts = _restarts(coverage)
    return " ".join(s for s in (restarts, said, _merged(coverage)) if s) or None


def _merged(coverage: dict[str, Any]) -> str | None:
    """Steps that printed memory several times, said once (memlog/tables/records.step_rows)."""
    merged = coverage.get("readings_per_step")
    if not merged:
        return None
    steps, most = merged["steps"], merged["most_in_a_step"]
    return (
        f"{steps:,} step{'s' if steps != 1 else ''} printed memory several times ({merged['lines']:,} lines, up to {most:,} in a step): "
        "each step is judged by its floor and its peak, every memory column's lowest and highest reading in it."
    )


def _restarts(coverage: dict[str, Any]) -> str | None:
    steps = coverage.get("restarts") or []
    if not steps:
        return None
    count = max(len(steps), coverage.get("restart_count") or 0)  # (several restarts may resume at one step)
    times = {1: "once", 2: "twice"}.get(count, f"{count} times")
    if len(steps) >= 100 and count == len(steps):
        times = f"at least {count} times"
    shown = [f"{s:,}" for s in steps[:10]] + (["..."] if len(steps) > 10 else [])
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    if len(steps) == 1 and count > 1:
        listed += " each time"
    said = (
        f"The run restarted {times} (from step{'s' if len(steps) > 1 else ''} {listed}): each worker's memory is judged "
        "per stretch between restarts, labelled (segment 2), (segment 3), ... or by its torchrun attempt_N folder"
    )
    summarised = coverage.get("summarised")
    if summarised:  # memlog/tables/condense.py: older segments counted, not held
        said += (
            f" Only each worker's last {summarised['kept_segments']} segments are judged: {summarised['segments']:,} earlier ones"
            f" ({summarised['steps']:,} steps) were summarised while reading, their steps and restarts counted."
        )
    return said


def capacity_phrase(coverage: dict[str, Any]) -> str:
    """The capacities the run was judged against and where each came from: `device 79.11 GiB
    (capacity line in the log); host 256 GiB (...)`, or `unknown`."""
    capacity = coverage.get("capacity") or {}
    caps = [f"{where} {capacity[f'{where}_gib']:g} GiB ({capacity.get(f'{where}_from')})" for where in ("device", "host") if capacity.get(f"{where}_gib")]
    return "; ".join(caps) or "unknown"


def by_severity(report: Report) -> list:
    return sorted(report.findings, key=lambda f: SEVERITY_ORDER[f.severity])


def evidence_summary(evidence: dict[str, Any]) -> str | None:
    """The observed numbers of a finding, `name=value, ...`, plus the capacity it was judged against."""
    observed = evidence.get("observed") or {}
    parts = [f"{k}={v}" for k, v in observed.items() if v is not None and not isinstance(v, (dict, list))]
    if evidence.get("capacity_gib"):
        parts.append(f"capacity={evidence['capacity_gib']} GiB ({evidence.get('capacity_from')})")
    if evidence.get("guessed"):
        parts.append(f"read by a guess: {evidence['guessed']}")
    return ", ".join(parts) if parts else None
