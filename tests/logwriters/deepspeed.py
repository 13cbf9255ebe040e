"""DeepSpeed's lines (parsers/deepspeed.yaml), with the format strings of DeepSpeed's source.

A logged line is ``[2024-07-10 14:14:51,014] [INFO] [utils.py:781:see_memory_usage] `` + message
(``log_line``); see_memory_usage prints bare from v0.18.3. Messages through ``log_dist(ranks=[0])``
start with ``[Rank 0] ``.
"""

from __future__ import annotations


def r2(x: float) -> str:
    """DeepSpeed's ``round(x, 2)`` as an f-string prints it: ``0.32``, ``18.9``, ``0.0``."""
    return str(round(x, 2))


def logger_prefix(ts: str, level: str, where: str) -> str:
    """deepspeed/utils/logging.py's head: ``[ts] [INFO] [file.py:line:function] ``."""
    return f"[{ts}] [{level}] [{where}] "


def log_line(msg: str, *, ts: str, level: str = "INFO", where: str) -> str:
    return logger_prefix(ts, level, where) + msg


def log_dist(msg: str, rank: int = 0) -> str:
    """utils/logging.py log_dist's rank tag."""
    return f"[Rank {rank}] {msg}"


def see_memory_usage(*, ma: float, max_ma: float, ca: float, max_ca: float) -> str:
    """runtime/utils.py see_memory_usage, second print (GiB): backslash continuations keep 8 spaces of
    indentation, so fields are 9 spaces apart; Max_CA is ``round()`` without ndigits (an int)."""
    return f"MA {r2(ma)} GB         Max_MA {r2(max_ma)} GB         CA {r2(ca)} GB         Max_CA {round(max_ca)} GB "


def cpu_virtual_memory(*, used_gib: float, percent: float) -> str:
    """see_memory_usage, third print: psutil's used (total - available) rounded to 0.01 GiB, and percent."""
    return f"CPU Virtual Memory:  used = {round(used_gib, 2)} GB, percent = {percent}%"


def version(version: str) -> str:
    """runtime/engine.py via log_dist(ranks=[0])."""
    return log_dist(f"DeepSpeed info: version={version}, git-hash=unknown, git-branch=unknown")


def progress(*, step: int, skipped: int, lr: list[float], mom: list) -> str:
    """engine._report_progress via log_dist: lr and mom are lists, one entry per param group."""
    return log_dist(f"step={step}, skipped={skipped}, lr={lr!r}, mom={mom!r}")


def throughput(*, epoch: int, micro_step: int, step: int, avg: float, cur: float, alloc: float, max_alloc: float) -> str:
    """utils/timer.py ThroughputTimer.stop (v0.8.0 .. HEAD); rates as repr, memory in GiB."""
    return (
        f"epoch={epoch}/micro_step={micro_step}/global_step={step}, RunningAvgSamplesPerSec={avg!r}, "
        f"CurrSamplesPerSec={cur!r}, MemAllocated={r2(alloc)}GB, MaxMemAllocated={r2(max_alloc)}GB"
    )


def wall_clock(timings: dict[str, float]) -> str:
    """wall_clock_breakdown's ``time (ms)`` line via log_dist, milliseconds to two decimals."""
    return log_dist("time (ms) | " + " | ".join(f"{name}: {ms:.2f}" for name, ms in timings.items()))


def overflow(scale: int) -> str:
    """runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale on an fp16 overflow."""
    return f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, reducing to {scale // 2}"


def cache_flushes(n: int) -> str:
    """ZeRO-3's warning: new cudaMalloc retries since the previous step."""
    return (
        f"{n} pytorch allocator cache flushes since last step. this happens when there is high memory pressure "
        "and is detrimental to performance. if this is happening frequently consider adjusting settings to "
        "reduce memory consumption. If you are unable to make the cache flushes go away consider adding "
        "get_accelerator().empty_cache() calls in your training loop to ensure that all ranks flush their "
        "caches at the same time"
    )


def config_entry(key: str, value: str) -> str:
    """runtime/config.py DeepSpeedConfig.print: one ``  key.......... value`` line."""
    return f"  {key:.<30} {value}"


def launcher_exit(pid: int) -> str:
    """launcher/launch.py once a rank ended well."""
    return f"Process {pid} exits successfully."
