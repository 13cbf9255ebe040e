"""What rules see: the tables, the device/host capacity the log reveals, and the series to judge."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from memlog.base.columns import MEMORY_COLUMNS
from memlog.judge.rulekit import Finding
from memlog.tables.capacity import Capacities
from memlog.tables.records import with_seconds
from memlog.tables.series import Series, SeriesKey, build_series, step_envelopes, worker_names
from memlog.tables.tables import Tables

# Which device column to judge when a worker logs several: live tensors (allocated) say more about
# a leak than the allocator's cache (reserved); a current reading more than a peak; a running
# maximum least, since it can only go up. Reserved-versus-allocated is the fragmentation rule's job.
DEVICE_PREFERENCE = (
    "mem_allocated_gib",
    "mem_peak_allocated_gib",
    "mem_reserved_gib",
    "mem_peak_reserved_gib",
    "mem_max_allocated_gib",
    "mem_max_reserved_gib",
    "device_mem_used_gib",
)
HOST_COLUMNS = tuple(c for c, m in MEMORY_COLUMNS.items() if m.is_host)


@dataclass
class Context:
    tables: Tables
    capacity: Capacities
    findings: list[Finding] = field(default_factory=list)
    thresholds: dict[str, dict] = field(default_factory=dict)  # each rule's, as resolved, once it has run

    @functools.cached_property
    def _names(self) -> dict[tuple[str, str], str]:
        return worker_names(self.tables.records)

    def label(self, series: Series) -> str:
        """What a series is called in messages and charts: its worker (tables.series.worker_names),
        and its segment after a restart."""
        return self.key_label(series.key)

    def key_label(self, key: SeriesKey) -> str:
        name = self._names.get((key.source, key.worker), key.worker)
        return f"{name} (segment {key.segment + 1})" if key.segment else name

    def series(self, column: str, kind: str = "train") -> list[Series]:
        if (column, kind) not in self._series_built:
            host = column in MEMORY_COLUMNS and MEMORY_COLUMNS[column].is_host

            def limit_of(source: str, worker: str, machine: str | None):
                return self.capacity.limit(host=host, source=source, worker=worker, machine=machine)

            self._series_built[column, kind] = build_series(self._timed_records, column, limit_of, kind)
        return self._series_built[column, kind]

    @functools.cached_property
    def _series_built(self) -> dict[tuple[str, str], list[Series]]:
        """Series by (column, kind), built once: rules and the report ask for the same ones."""
        return {}

    @functools.cached_property
    def _timed_records(self) -> pl.DataFrame:
        """The records with their timestamps parsed once, for every series built from them."""
        return with_seconds(self.tables.records)

    def capacity_of(self, series: Series) -> tuple[float | None, str | None]:
        """The capacity a memory series runs into (device or host), and where the number came from:
        its own, or a device capacity from elsewhere in the log when every device capacity names one
        model and none of its readings contradicts it (capacity.py); else (None, None)."""
        limit = series.limit
        if limit is None or series.conflict:
            return None, None
        if limit.own:
            return limit.gib, limit.origin
        if (series.memory and series.memory.is_host) or not self.capacity.agree():
            return None, None
        assert limit.known is not None  # a capacity learned elsewhere says where (capacity.Limit)
        return limit.gib, f"{limit.origin} ({limit.known.about})"

    @functools.cached_property
    def versions(self) -> dict[str, str]:
        """Framework (lower case) -> version, from `version` events (detail `framework`, `version`)."""
        found: dict[str, str] = {}
        for event in self.tables.events_of("version"):
            framework, version = event.detail.get("framework"), event.detail.get("version")
            if isinstance(framework, str) and isinstance(version, str) and framework and version:
                found.setdefault(framework.lower(), version)
        return found

    @functools.cached_property
    def device_series(self) -> list[Series]:
        """The one device-memory series judged per worker and segment (see DEVICE_PREFERENCE)."""
        chosen: dict = {}
        for column in DEVICE_PREFERENCE:
            for s in self.series(column):
                if s.key not in chosen and len(s):
                    chosen[s.key] = s
        return sorted(_judged(chosen.values()), key=series_order)

    @functools.cached_property
    def host_series(self) -> list[Series]:
        return sorted(_judged(s for c in HOST_COLUMNS for s in self.series(c) if len(s)), key=series_order)

    @functools.cached_property
    def loss_series(self) -> list[Series]:
        return sorted((s for s in self.series("loss") if len(s)), key=series_order)

    def decided(self, series: Series) -> bool:
        """Did an earlier rule that settles memory series (`decides=True`) name this one?"""
        label = self.label(series)
        return any(f.decides and label in f.series for f in self.findings)

    def marked(self, series: Series, mark: str) -> bool:
        """Did an earlier rule name this series with `mark` (e.g. a placeholder loss)?"""
        label = self.label(series)
        return any(f.marks == mark and label in f.series for f in self.findings)

    def during(self, event) -> str:
        """When an event (an OOM, a crash) happened, at the resolution of its worker's log: "during
        step 551", or "during steps 551-560" when that worker logs every 10 steps. "" if unknown."""
        if event.after_step is None:
            return ""
        step = event.after_step + 1
        interval = next(
            (self.log_interval(s) for s in (*self.device_series, *self.loss_series)
             if s.key.worker == event.worker and s.key.source == event.source and len(s) >= 2),
            None,
        )  # fmt: skip
        return f"during step {step}" if not interval or interval <= 1 else f"during steps {step}-{step + interval - 1}"

    def log_interval(self, series: Series) -> int | None:
        """The usual distance between logged steps (torchtitan's log_freq, DeepSpeed's steps_per_print).

        Loggers print step 1 and then every N-th step, so the gap from step 1 is not the interval."""
        steps = series.steps
        if len(steps) == 2 and steps[0] == 1:
            return steps[1]  # step 1 and step N: N is the interval
        if steps[:1] == [1]:
            steps = steps[1:]
        gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
        return int(statistics.median(gaps)) if gaps else None


def _judged(series: Iterable[Series]) -> list[Series]:
    """Each series as it is judged: itself, or its step floors and peaks when its readings cycle
    within every step (series.step_envelopes)."""
    return [view for s in series for view in (step_envelopes(s) or [s])]


def series_order(s: Series) -> tuple:
    return (s.key.source, s.rank if s.rank is not None else 1 << 30, s.key.worker, s.key.segment)
