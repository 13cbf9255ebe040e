"""The event vocabulary: what happened besides steps (an OOM, a kill, a capacity line, a restart),
and the detail each kind carries, declared once beside the column vocabulary (memlog/columns.py).

Format specs name an event kind per event pattern and capture its detail keys as regex groups; a
spec that names an undeclared kind or key is refused when it loads (memlog/formats.py). The text a
group captured is turned into a value of the declared type here, once: sizes with their unit
(`79.11 GiB`, `896.00 MiB`) become GiB, counts integers. Rules read `event.detail[...]` as typed
values and never parse text again.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

# How a captured detail value is read.
TEXT, INT, FLOAT, GIB, ROWS = "text", "int", "float", "gib", "rows"

_SIZE = re.compile(r"^\s*(?P<number>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(?P<unit>[KMGTPE]?i?B|bytes|[KMGT])?\s*$")
_UNIT_GIB = {
    None: 1.0, "B": 1 / 1024**3, "bytes": 1 / 1024**3,
    "KiB": 1 / 1024**2, "KB": 1 / 1024**2, "K": 1 / 1024**2,
    "MiB": 1 / 1024, "MB": 1 / 1024, "M": 1 / 1024,
    "GiB": 1.0, "GB": 1.0, "G": 1.0,
    "TiB": 1024.0, "TB": 1024.0, "T": 1024.0,
    "PiB": 1024.0**2, "PB": 1024.0**2, "EiB": 1024.0**3, "EB": 1024.0**3,
}  # fmt: skip


@dataclass(frozen=True)
class EventKind:
    name: str
    meaning: str
    detail: dict[str, str]  # key -> TEXT, INT, FLOAT, GIB (a size: GiB unless a unit says otherwise) or ROWS
    memory: bool = False  # the event says memory ran out (or may have)


def _kind(name: str, meaning: str, memory: bool = False, **detail: str) -> EventKind:
    return EventKind(name, meaning, detail, memory)


EVENT_KINDS: dict[str, EventKind] = {
    k.name: k
    for k in (
        _kind(
            "oom", "a process ran out of memory: CUDA out-of-memory error, Ray memory-monitor kill", memory=True,
            tried=GIB, gpu=INT, capacity=GIB, free=GIB,
            node_ip=TEXT, node_id=TEXT, worker_name=TEXT, worker_pid=INT, worker_used_gib=GIB,
            host_used_gib=GIB, host_total_gib=GIB, used_fraction=FLOAT, threshold=FLOAT, workers_killed=INT,
            top_memory_users=ROWS,
        ),
        _kind("oom_summary", "the raylet's count of workers it killed for memory", memory=True,
              count=INT, crashed=INT, node_id=TEXT, node_ip=TEXT),
        _kind("worker_died", "a Ray worker died (its exit detail says whether memory killed it)",
              worker_ip=TEXT, worker_pid=INT, exit_type=TEXT, exit_detail=TEXT),
        _kind("capacity", "the device's memory capacity, as the framework prints it", device=TEXT, mem_capacity_gib=GIB),
        _kind("node_memory", "a node's host memory in use and its total, from a memory monitor",
              host_used_gib=GIB, host_total_gib=GIB, node_ip=TEXT),
        _kind("model_memory", "device memory taken by the model after it was built", mem_gib=GIB, pct=FLOAT),
        _kind("alloc_retries", "the caching allocator freed its cache and retried (cumulative `count`, or `new_retries` since the last step)",
              count=INT, new_retries=INT),
        _kind("oom_count", "out-of-memory errors the allocator counted (cumulative)", count=INT),
        _kind("pp_loss_not_visible", "the framework says which rank holds the pipeline-parallel loss", loss_rank=INT),
        _kind("overflow", "an fp16 loss-scale overflow: the step was skipped",
              loss_scale=FLOAT, new_loss_scale=FLOAT, hysteresis=INT, iteration=INT),
        _kind("version", "a framework version the log names", framework=TEXT, version=TEXT, git_hash=TEXT, git_branch=TEXT),
        _kind("process_exit", "a launcher reports a process's exit code (-9: killed, often by the OOM killer)", return_code=INT),
        _kind("child_failed", "torchrun reports a failed worker process"),
        _kind("restart", "the step counter went back: a resume from a checkpoint or a restarted job"),
    )
}  # fmt: skip


def size_gib(text: str) -> float | None:
    """'79.11 GiB' -> 79.11, '896.00 MiB' -> 0.875, '48112044kB'-style units too; a bare number is GiB."""
    match = _SIZE.match(text)
    if not match:
        return None
    unit = match["unit"]
    if unit is not None and unit.endswith("B") and unit not in _UNIT_GIB:
        unit = unit.upper()
    scale = _UNIT_GIB.get(unit)
    value = float(match["number"]) * scale if scale is not None else None
    return value if value is not None and math.isfinite(value) else None


def typed_detail(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A kind's captured detail with each value read as its declared type; a value that does not
    read (an empty group, garbage) is left out rather than guessed."""
    declared = EVENT_KINDS[kind].detail
    detail: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        how = declared.get(key, TEXT)
        if how == ROWS:
            detail[key] = value
            continue
        text = str(value).strip()
        try:
            if how == INT:
                detail[key] = int(float(text))
            elif how == FLOAT:
                number = float(text)
                if math.isfinite(number):
                    detail[key] = number
            elif how == GIB:
                gib = size_gib(text)
                if gib is not None:
                    detail[key] = gib
            elif text:
                detail[key] = text
        except (ValueError, OverflowError):
            continue
    return detail


def unknown_detail_keys(kind: str, keys: list[str] | tuple[str, ...]) -> list[str]:
    return [k for k in keys if k not in EVENT_KINDS[kind].detail]


@dataclass
class Event:
    kind: str
    source: str
    line_no: int
    worker: str
    rank: int | None
    format: str
    text: str
    ts: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    after_step: int | None = None  # the last step this worker logged before the event

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "line": self.line_no,
            "worker": self.worker,
            "rank": self.rank,
            "after_step": self.after_step,
            "text": self.text,
            "detail": self.detail,
        }
