"""The canonical column vocabulary: every metric a parser may emit, with its unit and meaning.

Format specs map their fields onto these names; rules only ever see these names. A memory column
says *what* it measures, because the rules depend on it: a running maximum can only go up, so a
ratchet in it is not a leak; a window peak resets at every log line; reserved memory grows with
caching and fragmentation even when live tensors do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Scope(str, Enum):
    DEVICE = "device"  # accelerator memory of one process (torch caching allocator)
    DEVICE_TOTAL = "device-total"  # whole device as the driver sees it (includes vLLM, NCCL, other processes)
    HOST = "host"  # system RAM of the node


# Live set vs pool on every backend: CUDA/ROCm/XPU allocated vs reserved; Apple MPS current_allocated
# vs driver_allocated (torchtune prints them under its CUDA peak keys: parsers/torchtune.yaml). One
# pair of measures, not a column per backend, so fragmentation and leak rules judge them alike.
class Measure(str, Enum):
    ALLOCATED = "allocated"  # bytes held by live tensors
    RESERVED = "reserved"  # bytes the caching allocator holds from the device (allocated + cache; MPS: the Metal driver's)
    USED = "used"  # whatever the OS/driver reports as used


class Window(str, Enum):
    CURRENT = "current"  # value at the moment of logging
    WINDOW_PEAK = "window-peak"  # peak since the previous log line (peak stats reset after each log)
    RUNNING_MAX = "running-max"  # peak since process start: never decreases by construction


@dataclass(frozen=True)
class MemoryColumn:
    name: str
    scope: Scope
    measure: Measure
    window: Window
    description: str

    @property
    def is_host(self) -> bool:
        return self.scope is Scope.HOST


def _mem(name: str, scope: Scope, measure: Measure, window: Window, description: str) -> MemoryColumn:
    return MemoryColumn(name, scope, measure, window, description)


D, DT, H = Scope.DEVICE, Scope.DEVICE_TOTAL, Scope.HOST
A, R, U = Measure.ALLOCATED, Measure.RESERVED, Measure.USED
CUR, WIN, RUN = Window.CURRENT, Window.WINDOW_PEAK, Window.RUNNING_MAX

MEMORY_COLUMNS: dict[str, MemoryColumn] = {
    c.name: c
    for c in (
        _mem("mem_allocated_gib", D, A, CUR, "device memory allocated by live tensors now"),
        _mem("mem_reserved_gib", D, R, CUR, "device memory reserved by the caching allocator now"),
        _mem("mem_peak_allocated_gib", D, A, WIN, "peak allocated since the previous log line"),
        _mem("mem_peak_reserved_gib", D, R, WIN, "peak reserved since the previous log line"),
        _mem("mem_max_allocated_gib", D, A, RUN, "peak allocated since the process started"),
        _mem("mem_max_reserved_gib", D, R, RUN, "peak reserved since the process started"),
        _mem("device_mem_used_gib", DT, U, CUR, "whole-device memory in use (driver view, includes non-PyTorch)"),
        _mem("host_mem_used_gib", H, U, CUR, "host (system) memory in use on the node"),
    )
}

# Non-memory metrics. Percentages are 0-100.
METRIC_COLUMNS: dict[str, str] = {
    "loss": "training loss as logged (may be a pipeline-parallel placeholder)",
    "grad_norm": "gradient norm",
    "lr": "learning rate",
    "tps": "tokens per second per device",
    "tflops": "achieved TFLOPS per device",
    "mfu_pct": "model FLOPS utilisation, percent",
    "mem_peak_reserved_pct": "peak reserved as percent of device capacity",
    "mem_capacity_gib": "device memory capacity",
    "host_mem_total_gib": "host memory capacity of the node",
    # Megatron-style counters per log interval (Megatron-LM, Megatron-DeepSpeed, GPT-NeoX): a NaN
    # loss is dropped from Megatron's line, so these counts are what remains of it (rule nan-loss).
    "skipped_iterations": "iterations in the log interval that were skipped (fp16 overflow)",
    "nan_iterations": "iterations in the log interval that had a NaN (or infinite) loss",
}

# Identity columns of every record, in output order.
ID_COLUMNS: tuple[str, ...] = ("source", "worker", "rank", "node", "actor", "pid", "ip", "device", "format", "kind", "step", "line_no", "ts")

ALL_VALUE_COLUMNS: tuple[str, ...] = tuple(MEMORY_COLUMNS) + tuple(METRIC_COLUMNS)

# What `analyze` reads of a record: every memory series, the loss and what else tells a non-finite
# loss (a NaN grad norm on a line whose loss vanished, the counts of NaN and skipped iterations),
# and what tells the device's capacity. Throughput, learning rate and the like are only printed
# (`memlog series`) or charted on request (`memlog plot --metric`).
JUDGED_COLUMNS: tuple[str, ...] = (
    *MEMORY_COLUMNS,
    "loss",
    "grad_norm",
    "nan_iterations",
    "skipped_iterations",
    "mem_peak_reserved_pct",
    "mem_capacity_gib",
)


def is_known_column(name: str) -> bool:
    return name in MEMORY_COLUMNS or name in METRIC_COLUMNS


# Memory sizes are GiB throughout. What a printed unit is worth in GiB, by its spelling in upper
# case: frameworks print GiB as "GB" (torch's format_size, DeepSpeed, verl) and MiB as "MB"
# (Megatron's report_memory divides by 1024 * 1024), so decimal and binary spellings are read alike.
UNIT_GIB: dict[str, float] = {
    "B": 1 / 1024**3, "BYTE": 1 / 1024**3, "BYTES": 1 / 1024**3,
    "K": 1 / 1024**2, "KB": 1 / 1024**2, "KIB": 1 / 1024**2,
    "M": 1 / 1024, "MB": 1 / 1024, "MIB": 1 / 1024,
    "G": 1.0, "GB": 1.0, "GIB": 1.0,
    "T": 1024.0, "TB": 1024.0, "TIB": 1024.0,
    "P": 1024.0**2, "PB": 1024.0**2, "PIB": 1024.0**2,
}  # fmt: skip


def unit_gib(unit: str | None) -> float | None:
    """What one `unit` is worth in GiB ("MiB" -> 1/1024), or None for an unknown unit."""
    return UNIT_GIB.get(unit.strip().upper()) if unit is not None else None
