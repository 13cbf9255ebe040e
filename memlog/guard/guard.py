"""The guard: memlog's judgement inside the training process, one call per step.

    guard = Guard(report_dir=run_dir)
    for step in ...:
        train_step()
        decision = guard.step(step)
        if decision.should_save: save_checkpoint(step)
        if decision.should_stop: break
    guard.close()

Each step costs a reading (readings.py: the allocator's counters, the resident set) and some
bookkeeping. The readings are judged by the same rules and thresholds as `watch` judges a log
(memlog/watch/judging.py), as records of a source of their own, condensed as they come
(memlog/tables/condense.py), so that a judgement's cost grows slowly with the readings held (0.07 s
at 1,000, 0.13 s at 100,000, ~1 s at 1,000,000: benchmarks/README.md). It is not made every step:
every `every` readings from the first `every` on, and sooner (but not within `every // 5` of the
last) when a reading sets a new high above every reading judged so far, which is how a leak shows
between judgements. It runs on a thread of its own (`background=True`), so no step waits for one;
and a judgement waits REST times its own duration after the last, so judging takes at most a tenth
of a core however fast the steps come.

What the guard decides comes from the last judgement and the step: a leak found (`on_leak`), or
a leaking series projected to reach its capacity within `within_steps` steps (`on_oom`; a
projection counts once it holds from one judgement to the next: projection_holds), asks for an
action: `warn` (a log line), `checkpoint` (save now), `stop` (save, then stop cleanly; every
later step says stop too). Each trigger acts once. Saving and stopping are agreed across
ranks (agree.py) every `agree_every` steps, so that all ranks save and stop at the same step; a
warning is the rank's own. Every action, every change of verdict and the end of the run rewrite
`memlog-guard-rank<R>.json` in `report_dir`: the decision and its numbers, the memlog report on
this rank's readings (analyze's JSON), and, once a leak was found and snapshots are on (CUDA),
the allocation sites that grew (capture.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from memlog import __version__
from memlog.base.config import Config, load_config
from memlog.guard.agree import Agreement, default_agreement
from memlog.guard.capture import CudaSnapshots, Hunt, Pair, Snapshotter
from memlog.guard.document import write_document, write_pickle
from memlog.guard.readings import CudaReader, Reading, StatsReader, default_reader
from memlog.guard.snapshot import diff_snapshots
from memlog.read.source import Source
from memlog.report.document import report_document
from memlog.report.report import Report
from memlog.tables.condense import Condenser
from memlog.watch.judging import capacity_projections, judge_held

ACTIONS = ("continue", "warn", "checkpoint", "stop")  # rising: the highest asked for wins
LEVEL = {action: level for level, action in enumerate(ACTIONS)}
AGREED_FROM = LEVEL["checkpoint"]  # actions from here up are agreed across ranks
REST = 9  # a judgement waits this many times its own duration after the last one ends
RECEDE = 0.5  # a projected OOM step that moves further off than this per step judged does not hold (projection_holds)
FORMAT = "memlog-guard"  # the records' format name in the report's coverage
# Reading fields and the canonical columns they are judged as (memlog/base/columns.py).
COLUMNS = (
    ("allocated_gib", "mem_allocated_gib"),
    ("reserved_gib", "mem_reserved_gib"),
    ("max_allocated_gib", "mem_max_allocated_gib"),
    ("host_rss_gib", "host_mem_used_gib"),
    ("capacity_gib", "mem_capacity_gib"),
    ("host_total_gib", "host_mem_total_gib"),
)
HIGHS = ("allocated_gib", "reserved_gib", "host_rss_gib")  # the readings whose new highs bring a judgement forward
Row = tuple[int, int, float, Reading]  # (reading number: its line, step, clock time, reading)

log = logging.getLogger("memlog.guard")


@dataclass(frozen=True)
class Decision:
    """What the loop should do after this step, and why."""

    step: int
    action: str = "continue"
    reason: str | None = None
    by_rank: int | None = None  # the rank whose judgement asked for it
    verdict: str | None = None  # this rank's last verdict
    projected_oom_step: float | None = None  # the nearest projected OOM step (of any rank, once agreed)

    @property
    def should_save(self) -> bool:
        return self.action in ("checkpoint", "stop")

    @property
    def should_stop(self) -> bool:
        return self.action == "stop"

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "action": self.action,
            "reason": self.reason,
            "by_rank": self.by_rank,
            "verdict": self.verdict,
            "projected_oom_step": self.projected_oom_step,
        }


@dataclass(frozen=True)
class Judgement:
    """One judgement of the readings up to `step` (made on the judging thread)."""

    report: Report | None
    step: int
    seconds: float
    leak: str | None = None  # the leak finding's message
    projection: dict | None = None  # the nearest capacity projection (watch.judging.capacity_projections)


class Guard:
    """See the module docstring. `reader`: readings.default_reader() unless given (a test reader,
    ReplayReader). `config`: a Config or the path of memlog's YAML config (thresholds, capacity).
    `snapshots`: steps between the two allocator snapshots taken once a leak is found (0: none;
    only with a CUDA reader, or a `snapshotter` given). `rank`: this process's rank where no
    process group says it. `agreement`: agree.default_agreement() unless given. `clock`: seconds,
    for the readings' times and the judgements' durations (tests pass a fake one)."""

    def __init__(
        self,
        reader: StatsReader | None = None,
        *,
        on_leak: str = "warn",
        on_oom: str = "stop",
        within_steps: int = 200,
        every: int = 50,
        agree_every: int = 10,
        report_dir: str | os.PathLike | None = ".",
        config: Config | str | os.PathLike | None = None,
        capacity_gib: float | None = None,
        snapshots: int = 20,
        snapshotter: Snapshotter | None = None,
        rank: int | None = None,
        agreement: Agreement | None = None,
        background: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        for name, action in (("on_leak", on_leak), ("on_oom", on_oom)):
            if action not in LEVEL:
                raise ValueError(f"{name} must be one of {', '.join(ACTIONS)}, not {action!r}")
        for name, value, least in (("within_steps", within_steps, 0), ("every", every, 1), ("agree_every", agree_every, 1), ("snapshots", snapshots, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be a whole number of steps, at least {least}, not {value!r}")
        self.reader, self.agreement, self.snapshotter = reader, agreement, snapshotter
        self.on_leak, self.on_oom, self.within_steps = on_leak, on_oom, within_steps
        self.every, self.agree_every, self.snapshots = every, agree_every, snapshots
        self.report_dir = Path(report_dir) if report_dir is not None else None
        self.config = config if isinstance(config, Config) else load_config(None if config is None else os.fspath(config))
        self.capacity_gib, self.background, self.clock = capacity_gib, background, clock
        self.rank = rank
        self.report: Report | None = None  # this rank's last judgement
        self.judgement: Judgement | None = None
        self.decision: Decision | None = None  # the last step's
        self.actions: list[Decision] = []  # every decision that was not "continue"
        self.culprits: dict | None = None
        self.readings = self.judgements = 0
        self._rows: list[Row] = []  # readings not yet handed to a judgement
        self._condenser = Condenser()  # touched by the judging thread only
        self._in_flight: Future | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._submitted_at = 0  # readings when the last judgement was asked for
        self._rested_until = float("-inf")
        self._high = self._judged_high = float("-inf")
        self._projection_holds = False
        self._fired: set[str] = set()
        self._stopped: Decision | None = None
        self._agreed_step: int | None = None
        self._hunt: Hunt | None = None
        self._started = self._closed = False

    # -- the loop's side -------------------------------------------------------------------------

    def step(self, step: int) -> Decision:
        """Read this step's memory, take up a finished judgement, start one when due, and say what to do."""
        if self._closed:
            raise RuntimeError("Guard.step() after close()")
        if not self._started:
            self._start()
        assert self.reader is not None  # set by _start
        reading = self.reader.read(step)
        self.readings += 1
        self._rows.append((self.readings, step, self.clock(), reading))
        for name in HIGHS:
            value = getattr(reading, name)
            if value is not None and value > self._high:
                self._high = value
        self._take_up()
        if self._due():
            self._submit()
        if self._hunt is not None and (pair := self._hunt.step(step)) is not None:
            self._later(self._name_culprits, pair)
        self.decision = self._decide(step)
        return self.decision

    def close(self) -> None:
        """Judge what is left, stop any snapshot recording, write the report; idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        self.settle()
        if self._rows:
            rows, self._rows = self._rows, []
            job = self._executor.submit(self._judge, rows) if self._executor else None
            self._apply(job.result() if job else self._judge(rows))
        if self._hunt is not None:
            self._hunt.stop()
        self._later(self._write)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def settle(self) -> None:
        """Wait for the judgement in flight, if any, and take it up: the next decision then rests
        on every reading handed to it (tests; a loop about to checkpoint anyway)."""
        if self._in_flight is not None:
            judgement, self._in_flight = self._in_flight.result(), None
            self._apply(judgement)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path | None:
        """Where this rank's report is written (None: not written)."""
        return self.report_dir / f"memlog-guard-rank{self.rank}.json" if self.report_dir is not None else None

    def _start(self) -> None:
        """At the first step, when the script has set up its device and process group."""
        self._started = True
        self.reader = self.reader or default_reader()
        self.agreement = self.agreement or default_agreement(self.rank)
        self.rank = self.agreement.rank
        if self.snapshotter is None and isinstance(self.reader, CudaReader):
            self.snapshotter = CudaSnapshots()
        if self.snapshots and self.snapshotter is not None:
            self._hunt = Hunt(self.snapshotter, self.snapshots)
        if self.background:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlog-guard")
        self._source = Source(f"memlog guard, rank {self.rank}")

    # -- judging -----------------------------------------------------------------------------------

    def _due(self) -> bool:
        if self._in_flight is not None or self.clock() < self._rested_until:
            return False
        since = self.readings - self._submitted_at
        early = self._submitted_at > 0 and self._high > self._judged_high  # a new high, once the first `every` are judged
        return since >= self.every or (early and since >= max(1, self.every // 5))

    def _submit(self) -> None:
        rows, self._rows = self._rows, []
        self._submitted_at, self._judged_high = self.readings, self._high
        if self._executor is not None:
            self._in_flight = self._executor.submit(self._judge, rows)
        else:
            self._apply(self._judge(rows))

    def _take_up(self) -> None:
        if self._in_flight is not None and self._in_flight.done():
            self.settle()

    def _judge(self, rows: list[Row]) -> Judgement:
        """The readings so far judged as watch judges a log (on the judging thread). A judgement that
        fails is logged and counts as none: the guard never raises into training."""
        started = self.clock()
        try:
            assert self.rank is not None  # the agreement's, set by _start
            self._condenser.add(readings_frame(rows, self.rank, self._source.name), [], None)
            summarised = [self._condenser.summarised] if self._condenser.summarised else []
            report = judge_held(self._condenser.held(), [], summarised, [self._source], config=self.config, capacity_gib=self.capacity_gib)
        except Exception:  # logged, never raised into training
            log.exception("memlog guard, rank %s: judging the readings failed", self.rank)
            return Judgement(None, rows[-1][1], self.clock() - started)
        leak = next((f.message for f in report.findings if f.verdict is not None and f.verdict.name == "leak"), None) if report else None
        projections = sorted(capacity_projections(report), key=lambda p: p["capacity_step"]) if leak and report is not None else []
        return Judgement(report, rows[-1][1], self.clock() - started, leak, projections[0] if projections else None)

    def _apply(self, judgement: Judgement) -> None:
        previous, before = self.report, self.judgement
        self.judgement, self.judgements = judgement, self.judgements + 1
        self._rested_until = self.clock() + REST * judgement.seconds
        self._projection_holds = projection_holds(before, judgement)
        if judgement.report is None:
            return
        self.report = judgement.report
        if previous is None or previous.verdict != self.report.verdict:
            log.info("memlog guard, rank %s: verdict %s at step %s", self.rank, self.report.verdict, judgement.step)
            self._later(self._write)
        if not judgement.leak and "on_leak" in self._fired:  # a rise that bent after all (a long warm-up): said, and re-armed
            log.warning(
                "memlog guard, rank %s: the leak found before is no longer found at step %s (verdict %s)", self.rank, judgement.step, self.report.verdict
            )
        if not judgement.leak:
            self._fired -= {"on_leak", "on_oom"}
        if judgement.leak and self._hunt is not None:
            self._hunt.begin(judgement.step)

    # -- deciding ----------------------------------------------------------------------------------

    def _triggers(self, step: int) -> list[tuple[str, int, str]]:
        """(trigger: the option naming its action, action level, reason) of each trigger that the last
        judgement sets off and that has not acted."""
        j = self.judgement
        found: list[tuple[str, int, str]] = []
        if j is None:
            return found
        if j.leak:
            found.append(("on_leak", LEVEL[self.on_leak], f"memory leak found (rank {self.rank}): {j.leak}"))
        p = j.projection
        if p is not None and self._projection_holds and p["capacity_step"] - step <= self.within_steps:
            assert self.rank is not None  # the agreement's, set by _start
            found.append(("on_oom", LEVEL[self.on_oom], oom_reason(p, step, self.within_steps, self.rank)))
        return [t for t in found if t[1] > 0 and t[0] not in self._fired]

    def _decide(self, step: int) -> Decision:
        if self._stopped is not None:
            return replace(self._stopped, step=step)
        projected = self.judgement.projection["capacity_step"] if self.judgement and self.judgement.projection else None
        decision = Decision(step, verdict=self.report.verdict if self.report is not None else None, projected_oom_step=projected)
        triggers = self._triggers(step)
        warned = [t for t in triggers if t[1] < AGREED_FROM]
        if warned:  # a warning is this rank's own: at once
            self._fired.update(t[0] for t in warned)
            decision = self._acted(replace(decision, action="warn", reason=warned[0][2], by_rank=self.rank))
        if self._agreement_due(step):
            assert self.agreement is not None  # set by _start
            asked = max((t for t in triggers if t[1] >= AGREED_FROM), key=lambda t: t[1], default=None)
            agreed = self.agreement.agree(asked[1] if asked else 0, projected)
            if agreed.level >= AGREED_FROM:
                self._fired.update(t[0] for t in triggers if AGREED_FROM <= t[1] <= agreed.level)
                reason = (
                    asked[2]
                    if asked is not None and agreed.by_rank == self.rank  # this rank's own trigger
                    else f"rank {agreed.by_rank} asked to {ACTIONS[agreed.level]}"
                    + (f" (nearest projected OOM at step {agreed.projected_oom_step:.0f})" if agreed.projected_oom_step is not None else "")
                )
                decision = self._acted(
                    replace(decision, action=ACTIONS[agreed.level], reason=reason, by_rank=agreed.by_rank, projected_oom_step=agreed.projected_oom_step)
                )
        return decision

    def _acted(self, decision: Decision) -> Decision:
        """An action decided: said, kept, written; a stop stays the answer from now on."""
        log.warning("memlog guard, rank %s, step %s: %s: %s", self.rank, decision.step, decision.action, decision.reason)
        self.actions.append(decision)
        if decision.should_stop:
            self._stopped = decision
        self._later(self._write)
        return decision

    def _agreement_due(self, step: int) -> bool:
        assert self.agreement is not None  # set by _start
        if self.agreement.world_size == 1:
            return True
        if step % self.agree_every or step == self._agreed_step:
            return False
        self._agreed_step = step
        return True

    # -- culprits and the report file ---------------------------------------------------------------

    def _later(self, job: Callable, *args: Any) -> None:
        """Run `job` on the judging thread (in order with judgements), or now without one."""
        if self._executor is not None:
            self._executor.submit(_logged(job), *args)
        else:
            _logged(job)(*args)

    def _name_culprits(self, pair: Pair) -> None:
        names = (f"memlog-guard-rank{self.rank}-step{pair.first_step}.pickle", f"memlog-guard-rank{self.rank}-step{pair.second_step}.pickle")
        paths = [str(self.report_dir / n) for n in names] if self.report_dir is not None else []
        diff = diff_snapshots(pair.first, pair.second, names)
        for path, snapshot in zip(paths, (pair.first, pair.second)):
            write_pickle(Path(path), snapshot)
        self.culprits = {"from_step": pair.first_step, "to_step": pair.second_step, "snapshots": paths} | diff.to_json()
        for site in diff.grown[:3]:
            log.warning(
                "memlog guard, rank %s: live bytes grew by %.1f MiB from step %s to %s at %s",
                self.rank,
                site.growth / 2**20,
                pair.first_step,
                pair.second_step,
                site.where,
            )
        self._write()

    def document(self) -> dict:
        return {
            "schema_version": 1,
            "memlog_version": __version__,
            "guard": {
                "rank": self.rank,
                "world_size": self.agreement.world_size if self.agreement else 1,
                "readings": self.readings,
                "judgements": self.judgements,
                "judged_step": self.judgement.step if self.judgement else None,
                "judge_seconds": round(self.judgement.seconds, 4) if self.judgement else None,
                "decision": self.decision.to_json() if self.decision else None,
                "actions": [d.to_json() for d in self.actions],
                "policy": {
                    "on_leak": self.on_leak,
                    "on_oom": self.on_oom,
                    "within_steps": self.within_steps,
                    "every": self.every,
                    "agree_every": self.agree_every,
                    "snapshots": self.snapshots,
                },
            },
            "report": report_document(self.report) if self.report is not None else None,
            "culprits": self.culprits,
        }

    def _write(self) -> None:
        if self.path is not None:
            write_document(self.path, self.document())


def projection_holds(before: Judgement | None, now: Judgement) -> bool:
    """A projected OOM counts once two judgements in a row project one and the later is no further
    off than RECEDE times the steps between them: as a warm-up's rise bends, its projection recedes
    at each judgement; a leak's holds, or comes nearer."""
    if before is None or before.projection is None or now.projection is None or now.step <= before.step:
        return False
    return now.projection["capacity_step"] - before.projection["capacity_step"] <= RECEDE * (now.step - before.step)


def oom_reason(p: dict, step: int, within: int, rank: int) -> str:
    where = "host memory" if p.get("subject") == "host" else "device memory"
    capacity = f" its {p['capacity_gib']:.2f} GiB capacity" if p.get("capacity_gib") else " its capacity"
    return (
        f"projected OOM at step {p['capacity_step']:.0f}, {max(0.0, p['capacity_step'] - step):.0f} steps ahead "
        f"(within {within}): {where} ({p.get('metric')}) on rank {rank} reaches{capacity}"
    )


def readings_frame(rows: list[Row], rank: int, source: str) -> pl.DataFrame:
    """Readings as a source's compact records (memlog/tables/records.py): one line per reading."""
    columns: dict[str, Any] = {
        "line_no": pl.Series([r[0] for r in rows], dtype=pl.Int64),
        "rank": pl.Series([rank] * len(rows), dtype=pl.Int64),
        "step": pl.Series([r[1] for r in rows], dtype=pl.Int64),
        "_seconds": pl.Series([r[2] for r in rows], dtype=pl.Float64),
    }
    for field, column in COLUMNS:
        values = [getattr(r[3], field) for r in rows]
        if any(v is not None for v in values):  # a column no reading fills is left out, as compact_records leaves it
            columns[column] = pl.Series(values, dtype=pl.Float64)
    labels = {"format": FORMAT, "kind": "train", "pattern": "reading", "source": source, "worker": f"rank{rank}"}
    return pl.DataFrame(columns).with_columns(pl.lit(value).cast(pl.Categorical).alias(name) for name, value in labels.items())


def _logged(job: Callable) -> Callable:
    """`job`, whose failure is logged, never raised into training (a report not written is not worth a run)."""

    def run(*args: Any) -> None:
        try:
            job(*args)
        except Exception:  # logged, never raised into training
            log.exception("memlog guard: %s failed", getattr(job, "__name__", job))

    return run
