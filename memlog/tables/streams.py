"""Streams read twice: a launcher's console beside the per-rank files it tees.

torchrun `--tee 3 --log-dir logs` writes each rank's lines to `logs/attempt_0/<rank>/stdout.log`
and the same lines, prefixed `[rank<r>]:` / `[default<r>]:`, to the console, which users keep
beside them (`console.log`, a Slurm `.out`). Read as a folder, both count: every rank twice, one
more "worker" per console. A source repeats the others when it holds several ranks and nearly all
its steps (rank, step, the logger's timestamp and the readings) are also in the other sources; it
is then read once, from the per-rank files, and the report says so. The timestamp keeps two nodes
apart whose local ranks print the same flat readings at the same steps. The console's events (the
launcher's failure summary) still count: only its step records are left out.

Ray's job driver log (`job-driver-<submission id>.log`, Ray Jobs) holds the driver's output, which
relays the actors' lines behind `(TaskRunner pid=N)`: read beside the session's worker files, every
actor twice. Its lines name actors, not ranks, so it repeats the others when nearly all its steps
(step, timestamp and readings) are in them, whoever printed them.
"""

from __future__ import annotations

import re

import polars as pl

from memlog.base.columns import MEMORY_COLUMNS

# A console repeats the per-rank files when at least this share of its steps is in them (a few
# lines may be cut or interleaved differently at the end of a crash).
REPEATED_SHARE = 0.9
MIN_STEPS = 3  # fewer steps prove nothing


def repeated_sources(records: pl.DataFrame) -> dict[str, list[str]]:
    """Each source whose steps repeat other sources' (module docstring), with the sources it repeats."""
    if records.is_empty() or records["source"].n_unique() < 2 or "rank" not in records.columns:
        return {}
    values = [c for c in (*MEMORY_COLUMNS, "loss") if c in records.columns]
    keyed = records.filter(pl.col("rank").is_not_null() & pl.col("step").is_not_null()).select(
        pl.col("source").cast(pl.String), "rank", "step", *(["_seconds"] if "_seconds" in records.columns else []), *(pl.col(c).round(4) for c in values)
    )
    ranks = keyed.group_by("source").agg(pl.col("rank").n_unique().alias("ranks"), pl.len().alias("steps"))
    consoles = ranks.filter((pl.col("ranks") >= 2) & (pl.col("steps") >= MIN_STEPS))["source"].to_list()
    found: dict[str, list[str]] = {}
    for console in consoles:
        if (repeats := _repeats(keyed, console, found)) is not None:
            found[console] = repeats
    # Ray's job driver: actors, not ranks; matched on step, timestamp and readings alone.
    drivers = sorted(s for s in records["source"].cast(pl.String).unique().to_list() if RAY_JOB_DRIVER.search(s) and s not in found)
    if drivers:
        actors = records.filter(pl.col("step").is_not_null()).select(
            pl.col("source").cast(pl.String), "step", *(["_seconds"] if "_seconds" in records.columns else []), *(pl.col(c).round(4) for c in values)
        )
        for driver in drivers:
            if (repeats := _repeats(actors, driver, found)) is not None:
                found[driver] = repeats
    return found


RAY_JOB_DRIVER = re.compile(r"(?:^|/)job-driver-[^/]*\.log$")


def _repeats(keyed: pl.DataFrame, source: str, found: dict[str, list[str]]) -> list[str] | None:
    """The sources `source`'s steps (rows of `keyed`) repeat, when nearly all of them are there."""
    mine = keyed.filter(pl.col("source") == source).drop("source").unique()
    others = keyed.filter((pl.col("source") != source) & ~pl.col("source").is_in(list(found)))
    if others.is_empty() or mine.height < MIN_STEPS:
        return None
    matched = mine.join(others, on=mine.columns, how="inner", nulls_equal=True)
    if matched.select(pl.struct(mine.columns).n_unique()).item() >= REPEATED_SHARE * mine.height:
        return sorted(matched["source"].unique().to_list())
    return None
