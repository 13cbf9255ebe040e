"""Key families: what a printed key most likely measures, as a canonical column (memlog/base/columns.py).

A key is split into lower-case words (`MaxMemAllocated` -> max mem allocated, `perf/max_memory_
reserved_gb` -> perf max memory reserved gb), and the words decide:
- memory or not: a memory word (`memory`, `mem`, `allocated`, `reserved`, `rss`, ...), a memory
  unit printed with a usage word (`1454.57 GB used`), or a size under a header line that says
  memory (`in_memory_block`); a key ending in `rank`, `pid`, `id`... is who printed it, not a value;
- where: host when a host word is there (`host`, `cpu`, `ram`, `rss`, `process`) or the line also
  reports swap (`on_host_line`), else the device;
- what: reserved (`reserved`, `cached`, an allocator's `driver` or `pool`), allocated (`allocated`, `active`), else "used";
- when: a peak (`max`, `peak`) is a running maximum when its readings never go down and a window
  peak when they do (decided on the values, `window_of`), else the current value.
Loss keys (`loss`, `train loss`, `cross-entropy-loss`, `Loss`) map to `loss`; among several on one
line the plainest wins (`loss` over `loss_cls`). Everything else is not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from memlog.base.columns import MEMORY_COLUMNS, unit_gib

MEMORY_WORDS = {
    "memory",
    "mem",
    "allocated",
    "alloc",
    "reserved",
    "cached",
    "rss",
    "ram",
    "vram",
    "ma",
    "ca",
    "memallocated",
    "maxmemallocated",
    "occupied",
    "anon",
    "usage",
}
PROCESS_WORDS = {"process", "proc", "rss", "pid"}
# A number right after these names who printed the line, not a value (`[Profiled memory for rank 0]:`).
IDENTITY_WORDS = {"rank", "pid", "tid", "id", "idx", "index", "worker"}
# Units that only sizes have: a value printed in them is a size even when its key says nothing.
SIZE_UNIT = re.compile(r"(?:[KMGTP]i?B|bytes)", re.I)
HOST_WORDS = {"host", "cpu", "ram", "rss", "process", "system", "sys", "virtual", "anon", "vms", "node"}
DEVICE_WORDS = {"gpu", "cuda", "device", "vram", "npu", "xpu", "mps", "hbm", "accelerator"}
# `driver` and `pool`: what a backend's allocator holds (MPS's `driver_allocated_memory` is the Metal
# driver's pool, its cache included), as CUDA's reserved is.
RESERVED_WORDS = {"reserved", "cached", "cache", "reserve", "ca", "driver", "pool"}
ALLOCATED_WORDS = {"allocated", "alloc", "active", "ma", "occupied"}
PEAK_WORDS = {"max", "peak", "maximum", "highest"}
CURRENT_WORDS = {"current", "cur", "now"}
# Memory words that do not make a memory reading: what is left, a rate, a share, a count, and the
# size of a request (`trying to allocate 128.0KiB`, `Tried to allocate`, `rounded to`): what a
# process asked for, printed in an error or a warning, is never memory it holds.
NOT_MEMORY = {
    "free",
    "available",
    "avail",
    "bandwidth",
    "time",
    "throughput",
    "tokens",
    "flops",
    "tflops",
    "gflops",
    "util",
    "utilization",
    "percent",
    "pct",
    "ratio",
    "fraction",
    "speed",
    "efficiency",
    "lr",
    "iters",
    "steps",
    "allocate",
    "allocating",
    "tried",
    "trying",
    "request",
    "requested",
    "rounded",
    "num",
    "retries",
}
SWAP = {"swap"}
CAPACITY_WORDS = {"total", "capacity"}
LOSS_WORDS = {"loss", "xent", "nll"}
# A loss of another split is not the training loss.
NOT_TRAIN = {"val", "valid", "validation", "eval", "test", "dev"}
GRAD_NORM = ("grad norm", "grad_norm", "gradient norm", "gnorm")
# Units spelled inside a key: `memory (MB)`, `memory(GiB)`, `max_memory_allocated_gb`, `mem_bytes`.
KEY_UNIT = re.compile(r"(?:^|[\s_(\[/-])(?P<unit>[kmgtp]i?b|bytes)\)?\]?$", re.I)


def words(key: str) -> list[str]:
    """A key as lower-case words: camelCase and every separator split."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key)
    spaced = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", " ", spaced)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def unit_in_key(key: str) -> str | None:
    match = KEY_UNIT.search(key.strip())
    return match["unit"] if match else None


@dataclass(frozen=True)
class Meaning:
    """What a key is read as: a canonical column (a peak's window decided later, `window_of`)."""

    role: str  # "memory", "loss", "grad_norm", "capacity"
    host: bool = False
    measure: str = "used"  # allocated | reserved | used
    peak: bool = False

    def column(self, running_max: bool) -> str:
        """The canonical column; `running_max`: the peak's readings never went down."""
        if self.role in ("loss", "grad_norm"):
            return self.role
        if self.role == "capacity":
            return "host_mem_total_gib" if self.host else "mem_capacity_gib"
        if self.host:
            return "host_mem_used_gib"
        if self.measure == "used" and not self.peak:
            return "device_mem_used_gib"
        # A device peak of "memory" is, in every framework we read, torch's max_memory_allocated.
        measure = "reserved" if self.measure == "reserved" else "allocated"
        if not self.peak:
            return f"mem_{measure}_gib"
        return f"mem_{'max' if running_max else 'peak'}_{measure}_gib"

    def describe(self, key: str, unit: str | None, unit_guessed: bool, running_max: bool) -> str:
        if self.role == "loss":
            return f"loss from `{key}`"
        if self.role == "grad_norm":
            return f"grad norm from `{key}`"
        where = "host memory" if self.host else "device memory"
        if self.role == "capacity":
            where = f"{where} capacity"
        column = self.column(running_max)
        what = ""
        if self.role == "memory" and not self.host:
            m = MEMORY_COLUMNS[column]
            what = {"allocated": " (allocated)", "reserved": " (reserved)"}.get(m.measure.value, "")
        if self.role == "memory" and self.peak:
            window = " as a running maximum" if running_max else " as a peak per log line"
        elif self.role == "memory":
            window = " as the current value"
        else:
            window = ""
        units = f" in {unit}" + (" (unit guessed from the values' size)" if unit_guessed else "") if unit else ""
        return f"{where}{what} from `{key}`{units}{window}"


# A key of torch.cuda.memory_stats() as Lightning's DeviceStatsMonitor logs it (`DeviceStatsMonitor.
# on_train_batch_end/allocated_bytes.all.current`): `<stat>.<pool>.<metric>`, where only the bytes
# stats are sizes and only `current` and `peak` are levels (`allocated`, `freed` count since the start).
TORCH_STAT = re.compile(
    r"(?:^|[/.])(?:(?P<stat>[a-z_]+)\.(?P<pool>all|large_pool|small_pool)|oversize_(?:allocations|segments))\.(?P<metric>current|peak|allocated|freed)$"
)
TORCH_STAT_MEASURE = {"allocated_bytes": "allocated", "reserved_bytes": "reserved"}


def _torch_stat(match: re.Match) -> Meaning | None:
    """A memory_stats key's meaning (None: not a reading)."""
    measure = TORCH_STAT_MEASURE.get(match["stat"] or "")  # (oversize_*: counts)
    if measure is None or match["pool"] != "all" or match["metric"] not in ("current", "peak"):
        return None
    return Meaning("memory", measure=measure, peak=match["metric"] == "peak")


def meaning_of(key: str, unit: str | None) -> Meaning | None:
    """The family a key belongs to, or None when it is not read. `unit`: the unit printed after the
    value (or spelled in the key), which makes a bare `used` a memory reading."""
    if (torch_key := TORCH_STAT.search(key)) is not None:
        return _torch_stat(torch_key)
    ws = words(key)
    if not ws or ws[-1] in IDENTITY_WORDS:
        return None
    wset = set(ws)
    has_memory_unit = (
        unit is not None
        and unit_gib(unit) is not None
        and unit.upper() not in ("K", "M", "G")
        or (unit is not None and unit.upper() in ("K", "M", "G") and bool(wset & (MEMORY_WORDS | DEVICE_WORDS)))
    )
    if any(g in " ".join(ws) or g in key.lower() for g in GRAD_NORM):
        return Meaning("grad_norm")
    if wset & LOSS_WORDS and not wset & NOT_TRAIN and not wset & MEMORY_WORDS:
        return Meaning("loss")
    if wset & NOT_MEMORY or wset & SWAP or unit == "%":
        return None
    memoryish = bool(wset & MEMORY_WORDS) or (has_memory_unit and bool(wset & ({"used", "use", "using", "peak"} | DEVICE_WORDS)))
    if not memoryish:
        return None
    host = bool(wset & HOST_WORDS) and not wset & DEVICE_WORDS
    if wset & CAPACITY_WORDS:
        return Meaning("capacity", host=host)
    measure = "reserved" if wset & RESERVED_WORDS else "allocated" if wset & ALLOCATED_WORDS else "used"
    peak = bool(wset & PEAK_WORDS) and not wset & CURRENT_WORDS
    return Meaning("memory", host=host, measure=measure, peak=peak)


def loss_rank(key: str) -> tuple:
    """Which of several loss keys is the training loss: `loss` itself, then the shortest."""
    ws = words(key)
    plain = [w for w in ws if w not in ("train", "training", "total", "reduced", "lm", "avg", "mean")]
    return (plain != ["loss"], len(ws), key)


def memory_rank(meaning: Meaning, key: str) -> tuple:
    """Which of several keys that map to one column is read: for host memory the process's own
    (`current_process_memory`, `rss`) over the whole machine's (`used_memory`), since a leak is the
    process's; then the shortest spelling, so that a framework's own key (`memory`) wins over a
    derived one."""
    machine_wide = meaning.host and not set(words(key)) & PROCESS_WORDS
    return (machine_wide, len(words(key)), key)


def in_memory_block(key: str, unit: str | None, header: str | None) -> Meaning | None:
    """A size printed under a header line that says what the block measures (`[Profiled memory for
    rank 0]:` above `iter_1_after_backward: 729.48 MB`): the key read with the header's words."""
    if header is None or unit is None or not SIZE_UNIT.fullmatch(unit) or not set(words(header)) & MEMORY_WORDS:
        return None
    return meaning_of(f"{header} {key}", unit)


def on_host_line(meaning: Meaning, key: str, line_keys: set[str]) -> Meaning:
    """A memory key that names no device, printed on a line that also reports swap, is host
    memory: devices have no swap (mmengine's `Memory information ... used_memory: ..., swap_...`)."""
    if meaning.role != "memory" or meaning.host or set(words(key)) & DEVICE_WORDS:
        return meaning
    if any(SWAP & set(words(other)) for other in line_keys if other != key):
        return replace(meaning, host=True)
    return meaning
