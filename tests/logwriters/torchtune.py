"""torchtune lines (parsers/torchtune.yaml), with the format strings of torchtune's source
(more-formats.md §6: ``torchtune/training/metric_logging.py`` DiskLogger / StdoutLogger,
``torchtune/training/memory.py``)."""

from __future__ import annotations

_BYTES_IN_GIB = 1024**3


def item(value: float) -> float:
    """A 0-dim float32 tensor's ``item()``: the float32 value as a Python float (its repr is what
    the logger prints, e.g. ``1.0743215084075928``)."""
    import struct

    return struct.unpack("f", struct.pack("f", value))[0]


def log_line(step: int, payload: dict[str, object]) -> str:
    """DiskLogger.log_dict (StdoutLogger prints the same): ``Step {step} | `` then ``{name}:{data} ``
    per metric, values as Python formats them (0-dim tensors through ``item()``)."""
    return f"Step {step} | " + "".join(f"{name}:{data} " for name, data in payload.items())


def memory_stats(*, active_bytes: int, allocated_bytes: int, reserved_bytes: int) -> dict[str, float]:
    """training.get_memory_stats (v0.3+): the peaks in GiB, full float repr (reset after each call)."""
    return {
        "peak_memory_active": active_bytes / _BYTES_IN_GIB,
        "peak_memory_alloc": allocated_bytes / _BYTES_IN_GIB,
        "peak_memory_reserved": reserved_bytes / _BYTES_IN_GIB,
    }


def mps_memory_stats(*, current_allocated_bytes: int, driver_allocated_bytes: int) -> dict[str, float]:
    """training.get_memory_stats on Apple MPS (main since 2025-02): the same two first keys, but
    current values: torch.mps.current_allocated_memory (live tensors) and driver_allocated_memory
    (the Metal pool, cached blocks included); no `peak_memory_reserved`."""
    return {
        "peak_memory_active": current_allocated_bytes / _BYTES_IN_GIB,
        "peak_memory_alloc": driver_allocated_bytes / _BYTES_IN_GIB,
    }


def model_init_summary(*, allocated: float, reserved: float, active: float, device_name: str = "GPU") -> list[str]:
    """training.log_memory_stats after model init (v0.3 .. v0.6.1): the message, then a tab-indented line per peak."""
    return [
        "Memory stats after model init:",
        f"\t{device_name} peak memory allocation: {allocated:.2f} GiB",
        f"\t{device_name} peak memory reserved: {reserved:.2f} GiB",
        f"\t{device_name} peak memory active: {active:.2f} GiB",
    ]
