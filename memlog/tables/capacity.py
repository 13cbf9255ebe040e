"""Capacity in scope: what each number the log prints about a device's or a node's total memory is
about, and which of them a series may be judged against.

A device's capacity is about that device (the worker that printed it, or its machine); a node's
memory total is about that node (the IP or host name the line names). A series is judged against
its own capacity only: readings above it are impossible (dropped, corrupt-readings) unless most of
the series' readings are above it, in which case the number is what is wrong (a unit, a wrong
--capacity) and the readings are kept. A capacity printed for another node never drops a reading;
readings above it are kept and the conflict is stated (rule capacity-conflict). Devices of one job
are nearly always one model, so a device capacity from elsewhere in the log still projects when a
series will run out, as long as no reading contradicts it; a node's total never stands in for
another node's.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from memlog.base.events import EVENT_KINDS, Event
from memlog.base.limits import MAX_DEVICE_GIB, MAX_HOST_GIB

# Of a series' readings, more than this share above its own capacity means the capacity is wrong
# for it (a unit, a mistyped --capacity), not the readings.
WRONG_CAPACITY_SHARE = 0.5
# Device capacities printed in different places agree when within this fraction: one model.
SAME_MODEL = 0.02

# Where a device capacity can come from, most direct first: a series uses the first kind it has.
DEVICE_ORIGINS = (
    "--capacity",
    "capacity line in the log",
    "memory percentage in the step lines",
    "device total in the memory lines",
    "device total in the CUDA out-of-memory message",
)


@dataclass(frozen=True)
class Known:
    """One capacity the log states, and what it is about."""

    gib: float
    origin: str  # one of DEVICE_ORIGINS, or how a node's total was printed
    source: str | None = None
    worker: str | None = None  # the device's worker, for a device capacity printed by (or about) one
    machine: str | None = None  # the node it is about (IP or host name), when the line says

    @property
    def about(self) -> str:
        """Whose number it is, for messages: `rank0 on 10.0.0.2`, `node 10.0.0.2`."""
        if self.worker and self.machine and self.machine not in self.worker:
            return f"{self.worker} on {self.machine}"
        return self.worker or (f"node {self.machine}" if self.machine else "the log")


@dataclass(frozen=True)
class Limit:
    """The capacity one series is judged against. `own`: measured for its device or node (or given
    with --capacity); otherwise learned elsewhere in the log (`known` says where)."""

    gib: float
    origin: str
    own: bool
    known: Known | None = None


@dataclass
class Capacities:
    device: list[Known]
    host: list[Known]
    override_gib: float | None = None

    def limit(self, *, host: bool, source: str, worker: str, machine: str | None) -> Limit | None:
        """The capacity for a series of `worker` (on `machine`) in `source`: its own, else one
        from elsewhere, else None."""
        if not host and self.override_gib:
            return Limit(self.override_gib, "--capacity", own=True)
        known = self.host if host else self.device
        for origin in dict.fromkeys(k.origin for k in known):
            own = [k for k in known if k.origin == origin and _is_own(k, host, source, worker, machine)]
            if own:
                best = max(own, key=lambda k: k.gib)
                return Limit(best.gib, origin, own=True, known=best)
        if not known:
            return None
        best = max(known, key=lambda k: k.gib)
        return Limit(best.gib, best.origin, own=False, known=best)

    def summary(self, host: bool) -> tuple[float | None, str | None]:
        """One capacity for the run's overview (the report's coverage): the override, else the
        first origin's largest number."""
        if not host and self.override_gib:
            return self.override_gib, "--capacity"
        known = self.host if host else self.device
        if not known:
            return None, None
        first = [k for k in known if k.origin == known[0].origin]
        best = max(first, key=lambda k: k.gib)
        return best.gib, best.origin

    def agree(self) -> bool:
        """Do all device capacities name one model (within SAME_MODEL)?"""
        values = [k.gib for k in self.device]
        return not values or max(values) <= min(values) * (1 + SAME_MODEL)


def _is_own(k: Known, host: bool, source: str, worker: str, machine: str | None) -> bool:
    if k.machine is not None and machine is not None:
        return k.machine == machine  # one node: its devices and its memory
    if k.machine is not None or machine is not None:
        return not host and k.source == source and k.worker == worker  # a device names itself
    # Neither line names a node: one file is one machine (or the same device, printed by itself).
    return k.source == source


def find_capacities(records: pl.DataFrame, events: list[Event], override_gib: float | None = None) -> Capacities:
    """Every capacity the log states, each with what it is about (Known), in DEVICE_ORIGINS order."""
    device: list[Known] = []
    for e in events:
        if "mem_capacity_gib" in e.detail:
            device.append(Known(float(e.detail["mem_capacity_gib"]), DEVICE_ORIGINS[1], e.source, e.worker, e.machine))
    if {"mem_peak_reserved_gib", "mem_peak_reserved_pct"} <= set(records.columns):
        ratio = pl.when(pl.col("mem_peak_reserved_pct") > 0).then(pl.col("mem_peak_reserved_gib") * 100 / pl.col("mem_peak_reserved_pct"))
        device += _per_worker(records, ratio.median().round(2), DEVICE_ORIGINS[2])
    if "mem_capacity_gib" in records.columns:
        device += _per_worker(records, pl.col("mem_capacity_gib").max(), DEVICE_ORIGINS[3])
    for e in events:
        if e.detail.get("capacity"):
            device.append(Known(float(e.detail["capacity"]), DEVICE_ORIGINS[4], e.source, e.worker, e.machine))
    host = []
    for e in events:
        if "host_total_gib" in e.detail:
            fatal = e.kind in EVENT_KINDS and EVENT_KINDS[e.kind].fatal
            origin = "node memory total in the out-of-memory message" if fatal else "node memory total in the log"
            host.append(Known(float(e.detail["host_total_gib"]), origin, e.source, None, e.detail.get("node_ip") or e.machine))
    # A number beyond any device or node (1e21 GiB from an absurd reading and its percentage) is no capacity.
    device = [k for k in device if 0 < k.gib <= MAX_DEVICE_GIB]
    host = [k for k in host if 0 < k.gib <= MAX_HOST_GIB]
    return Capacities(device, host, override_gib)


def _per_worker(records: pl.DataFrame, value: pl.Expr, origin: str) -> list[Known]:
    machine = [c for c in ("ip", "node") if c in records.columns]
    rows = (
        records.lazy()
        .group_by("source", "worker")
        .agg(value.alias("_gib"), *(pl.col(c).drop_nulls().first() for c in machine))
        .filter(pl.col("_gib").is_not_null() & (pl.col("_gib") > 0))
        .sort("source", "worker")
        .collect()
    )
    return [
        Known(float(row["_gib"]), origin, str(row["source"]), str(row["worker"]), next((row[c] for c in machine if row[c]), None))
        for row in rows.iter_rows(named=True)
    ]
