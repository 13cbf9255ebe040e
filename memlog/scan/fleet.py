"""`memlog scan`: judge every run under some paths with the engine of `memlog analyze`, one row per run.

A row is plain data (JSON-able, the same whoever computed it): the run, its verdict, its worst
finding, ranks, steps, the growth rate and projected out-of-memory a finding measured, and the error
that kept it from being judged. Rows (memlog/scan/run.py) are computed in worker processes (one per
core, each judging one run at a time: memory stays a few runs' worth) or as Ray tasks
(memlog/scan/on_ray.py), and come back in whatever order they finish; `sort_rows` puts them worst
first.

This module imports neither polars nor the engine at load: a worker process sets its thread
counts before the engine (and polars) load.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memlog.scan.run import ScanOptions, judge, limit_threads
from memlog.scan.runs import Run

# Scan JSON (`memlog scan -o json`): 1 = first version.
SCAN_SCHEMA_VERSION = 1
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}  # as memlog.judge.rulekit.SEVERITIES, without importing the engine
# Worst first: a run with an error finding, then warnings, then runs that could not be read, then the rest.
UNREADABLE_RANK = 0.5
# A worker process is replaced after this many runs: memory the allocator keeps after a large run
# is given back, so a long scan's footprint stays that of a few runs.
RUNS_PER_WORKER = 64


def severity_rank(row: dict[str, Any]) -> float:
    if row["error"]:
        return UNREADABLE_RANK
    return SEVERITY_RANK[row["severity"]] if row["severity"] else -1


def sort_rows(rows: Iterable[dict[str, Any]], verdict_ranks: dict[str, int]) -> list[dict[str, Any]]:
    """Worst first: by worst severity (runs that could not be read between warnings and the rest),
    then by the rank of the verdict, then the fastest growth, then the soonest projected OOM, then
    by name (so that the order never depends on which worker finished first)."""

    def key(row):
        growth = row["growth_gib_per_1k_steps"]
        oom = row["projected_oom"]["step"] if row["projected_oom"] else None
        return (
            -severity_rank(row),
            -verdict_ranks.get(row["verdict"], 0),
            -(growth if growth is not None else float("-inf")),
            oom if oom is not None else float("inf"),
            row["run"],
            row["path"],
        )

    return sorted(rows, key=key)


def fails(row: dict[str, Any], fail_on: str) -> bool:
    """A finding at or above `fail_on` (as `Report.fails`)."""
    if fail_on == "never":
        return False
    return any(SEVERITY_RANK[f["severity"]] >= SEVERITY_RANK[fail_on] for f in row["findings"])


@dataclass
class Fleet:
    """A scan's result: the rows worst first, and what the summary says of them."""

    rows: list[dict[str, Any]]
    fail_on: str = "error"
    command: str | None = None
    verdict_order: list[str] = field(default_factory=list)  # verdict names, highest rank first

    @property
    def readable(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r["error"]]

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for row in self.readable:
            counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
        ordered = {v: counts[v] for v in [*self.verdict_order, *sorted(counts)] if v in counts}
        return {
            "runs": len(self.rows),
            "judged": len(self.readable),
            "unreadable": len(self.rows) - len(self.readable),
            "verdicts": ordered,
            "failing": sum(fails(r, self.fail_on) for r in self.rows),
            "fail_on": self.fail_on,
            "leaking": [r["run"] for r in self.rows if r["verdict"] == "leak"],
        }

    def to_json(self) -> dict[str, Any]:
        from memlog import __version__

        return {"schema_version": SCAN_SCHEMA_VERSION, "memlog_version": __version__, "summary": self.summary(), "runs": self.rows}


def verdict_ranks() -> dict[str, int]:
    """Each verdict's rank, as the rules declare them (the same order as analyze's headline)."""
    from memlog.judge.rulekit import INCONCLUSIVE, load_rules

    ranks = {INCONCLUSIVE.name: INCONCLUSIVE.rank}
    for rule in load_rules():
        if rule.verdict is not None:
            ranks[rule.verdict.name] = rule.verdict.rank
    return ranks


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def judge_locally(runs: list[Run], options: ScanOptions, jobs: int) -> Iterator[dict[str, Any]]:
    """Rows as the runs finish, on `jobs` worker processes (1: in this process, one run after
    another). At most two runs per worker are queued, so a scan of 100,000 runs holds a few rows'
    worth of work in flight, not 100,000 futures."""
    if jobs <= 1 or len(runs) <= 1:
        for run in runs:
            yield judge(run, options)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    # spawn: the engine's threads (polars) must not be forked, and a fresh worker sets its thread
    # counts before polars loads (limit_threads).
    context = multiprocessing.get_context("spawn")
    workers = min(jobs, len(runs))
    # A worker is replaced after RUNS_PER_WORKER runs (its memory returned); Python 3.10 cannot.
    recycle: dict = {"max_tasks_per_child": RUNS_PER_WORKER} if sys.version_info >= (3, 11) else {}
    with ProcessPoolExecutor(workers, mp_context=context, initializer=limit_threads, **recycle) as pool:
        queue = iter(runs)
        pending = set()
        for run in queue:
            pending.add(pool.submit(judge, run, options))
            if len(pending) >= 2 * workers:
                break
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                following = next(queue, None)
                if following is not None:
                    pending.add(pool.submit(judge, following, options))


def scan(
    runs: list[Run],
    options: ScanOptions = ScanOptions(),
    *,
    jobs: int | None = None,
    ray_address: str | None = None,
    on_row: Callable[[dict[str, Any], int, int], None] | None = None,
    fail_on: str = "error",
) -> Fleet:
    """Judge `runs` locally (`jobs` processes, default one per core) or on Ray (`ray_address`:
    "" for ray.init()'s default, or an address). `on_row(row, done, total)` sees each row as it
    comes back."""
    if ray_address is not None:
        from memlog.scan.on_ray import judge_on_ray

        stream = judge_on_ray(runs, options, ray_address)
    else:
        stream = judge_locally(runs, options, jobs or default_jobs())
    rows = []
    for row in stream:
        rows.append(row)
        if on_row is not None:
            on_row(row, len(rows), len(runs))
    ranks = verdict_ranks()
    return Fleet(sort_rows(rows, ranks), fail_on, verdict_order=sorted(ranks, key=ranks.__getitem__, reverse=True))
