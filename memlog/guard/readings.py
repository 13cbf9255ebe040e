"""Readings: what the guard reads of this process's memory at each step, and the readers it takes
them from.

A reader is anything with `read(step) -> Reading`:
- CudaReader: the local device's caching allocator, one `torch.cuda.memory_stats_as_nested_dict`
  call per step (the allocator's counters copied under its lock; no device synchronisation, and
  none of `memory_stats`' flattening and sorting), and the process's resident set;
- HostReader: the resident set only (a run without CUDA);
- ReplayReader: what a function gives for each step (tests, or a policy rehearsed on readings of
  one's own).
torch is imported by nobody here: CudaReader uses the torch the training script imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

GIB = 1024**3


@dataclass(frozen=True)
class Reading:
    """One step's memory, GiB; None where the reader cannot tell."""

    allocated_gib: float | None = None  # live tensors now (allocated_bytes.all.current)
    reserved_gib: float | None = None  # held by the caching allocator now (reserved_bytes.all.current)
    max_allocated_gib: float | None = None  # the highest allocated seen since the guard started (running maximum)
    host_rss_gib: float | None = None  # the process's resident set on the host
    capacity_gib: float | None = None  # the device's total memory
    host_total_gib: float | None = None  # the host memory the process may use: the node's, or its cgroup's limit


class StatsReader(Protocol):
    def read(self, step: int) -> Reading: ...


class HostReader:
    """The process's resident set from /proc/self/statm (one pread, under a microsecond), and the
    host memory it may use: the node's total, or its memory cgroup's limit when lower (a container's
    OOM kill comes at that limit). Where /proc is missing (not Linux), nothing."""

    def __init__(self) -> None:
        try:
            self._statm: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            self._statm = None
        self.total_gib = host_total_gib()

    def rss_gib(self) -> float | None:
        if self._statm is None:
            return None
        try:
            resident_pages = int(os.pread(self._statm, 128, 0).split()[1])
        except (OSError, IndexError, ValueError):
            return None
        return resident_pages * PAGE_BYTES / GIB

    def read(self, step: int) -> Reading:
        return Reading(host_rss_gib=self.rss_gib(), host_total_gib=self.total_gib)


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # v2, v1


def host_total_gib() -> float | None:
    """The node's memory (MemTotal), or a lower memory cgroup limit; None where neither is readable."""
    limits = []
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    limits.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError, IndexError):
        pass
    for path in CGROUP_LIMITS:
        try:
            with open(path, encoding="ascii") as limit:
                text = limit.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) is no limit; v1 writes a huge number, above MemTotal
            limits.append(int(text))
    return min(limits) / GIB if limits else None


class CudaReader:
    """The local CUDA device's allocator (allocated, reserved, the peak of allocated) and the host
    readings of HostReader. `device`: an index or torch.device, by default the current device when
    first read. `stats` and `total_bytes` stand in for torch's (tests, other accelerators with the
    same nested statistics). The peak is kept as a running maximum of the allocator's own peak, so
    a loop that resets peak statistics (torchtitan does at every log) does not make it fall."""

    def __init__(self, device: Any = None, *, stats: Callable[[Any], dict] | None = None, total_bytes: int | None = None) -> None:
        self.device, self._stats, self._total_bytes = device, stats, total_bytes
        self.host = HostReader()
        self.max_allocated = 0

    def _resolve(self) -> Callable[[Any], dict]:
        torch = sys.modules.get("torch")
        if torch is None:
            raise RuntimeError("CudaReader reads the allocator of the torch the training script imported, and torch is not imported")
        if self.device is None:
            self.device = torch.cuda.current_device()
        if self._stats is None:
            self._stats = torch.cuda.memory_stats_as_nested_dict
        if self._total_bytes is None:
            self._total_bytes = torch.cuda.get_device_properties(self.device).total_memory
        return self._stats

    def read(self, step: int) -> Reading:
        stats_of = self._resolve() if self._stats is None or self._total_bytes is None else self._stats
        stats = stats_of(self.device)
        allocated, reserved, peak = (
            _counter(stats, name, metric) for name, metric in (("allocated_bytes", "current"), ("reserved_bytes", "current"), ("allocated_bytes", "peak"))
        )
        if peak is not None:
            self.max_allocated = max(self.max_allocated, peak)
        host = self.host.read(step)
        return Reading(
            allocated_gib=_gib(allocated),
            reserved_gib=_gib(reserved),
            max_allocated_gib=_gib(self.max_allocated) if peak is not None else None,
            host_rss_gib=host.host_rss_gib,
            capacity_gib=_gib(self._total_bytes),
            host_total_gib=host.host_total_gib,
        )


def _counter(stats: dict, name: str, metric: str) -> int | None:
    """One counter of the nested statistics (`stats[name]["all"][metric]`), None before CUDA is
    initialised (torch then returns an empty dict)."""
    try:
        return int(stats[name]["all"][metric])
    except (KeyError, TypeError, ValueError):
        return None


def _gib(value: int | None) -> float | None:
    return None if value is None else value / GIB


class ReplayReader:
    """The readings `readings(step)` gives: injected readings for tests and rehearsals."""

    def __init__(self, readings: Callable[[int], Reading]) -> None:
        self.readings = readings

    def read(self, step: int) -> Reading:
        return self.readings(step)


def default_reader() -> StatsReader:
    """CudaReader when the training script's torch has CUDA, else HostReader. Never imports torch:
    a script that did not import it trains without it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return CudaReader()
    return HostReader()
