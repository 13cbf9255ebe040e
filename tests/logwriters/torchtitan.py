"""torchtitan's lines (parsers/torchtitan.yaml), each message with the f-string of the torchtitan
version named, numbers formatted the way torchtitan formats them.

A full line is ``[rankN]:`` (torchrun's tee, ``pytorch.torchrun_prefix``) + ``[titan] `` (since
2025-02-19) + ``YYYY-MM-DD HH:MM:SS,mmm - root - LEVEL - `` + message: ``log_line``.
Colours are torchtitan's ``Color`` class (``COLOR``) or its ``NoColor`` (``NO_COLOR``, the default).
"""

from __future__ import annotations

from dataclasses import dataclass

from .pytorch import H100_GIB, torchrun_prefix


@dataclass(frozen=True)
class Palette:
    red: str
    green: str
    yellow: str
    blue: str
    magenta: str
    cyan: str
    white: str
    reset: str
    orange: str
    turquoise: str


# torchtitan/tools/utils.py `class Color` (reset is 39, not 0).
COLOR = Palette(
    red="\033[31m",
    green="\033[32m",
    yellow="\033[33m",
    blue="\033[34m",
    magenta="\033[35m",
    cyan="\033[36m",
    white="\033[37m",
    reset="\033[39m",
    orange="\033[38;2;180;60;0m",  # 24-bit, added 2025-06-25
    turquoise="\033[38;2;54;234;195m",  # 24-bit, added 2025-07-15
)
NO_COLOR = Palette(*([""] * 10))  # torchtitan's NoColor: the same attributes, all empty


def logger_prefix(ts: str, level: str = "INFO", *, titan: bool = True) -> str:
    """torchtitan's logger head: ``[titan] 2025-03-18 10:02:15,112 - root - INFO - `` (no tag before 2025-02-19)."""
    return f"{'[titan] ' if titan else ''}{ts} - root - {level} - "


def log_line(msg: str, *, ts: str, level: str = "INFO", rank: int | None = None, titan: bool = True) -> str:
    """A logged message, behind torchrun's ``[rankN]:`` tee prefix when ``rank`` is given."""
    tee = torchrun_prefix(rank) if rank is not None else ""
    return tee + logger_prefix(ts, level, titan=titan) + msg


# --------------------------------------------------------------------------
# The step line, one writer per format version
# --------------------------------------------------------------------------


def step_line_2024_07(*, step: int, loss: float, mem_gib: float, mem_pct: float, wps: float, mfu: float, color: Palette = NO_COLOR) -> str:
    """train.py (2024-03-20 .. 2024-11-25): cyan step, yellow memory, wps, mfu."""
    c = color
    return (
        f"{c.cyan}step: {step:2}  "
        f"{c.green}loss: {loss:7.4f}  "
        f"{c.yellow}memory: {mem_gib:5.2f}GiB({mem_pct:.2f}%)  "
        f"{c.blue}wps: {round(wps):,}  "
        f"{c.magenta}mfu: {mfu:.2f}%{c.reset}"
    )


def step_line_2025_03(
    *, step: int, loss: float, mem_gib: float | None, mem_pct: float | None, tps: float, tflops: float, mfu: float, color: Palette = NO_COLOR
) -> str:
    """components/metrics.py (2025-03 .. 2025-06-25): red step, tps, tflops, no grad_norm.
    ``mem_gib`` None leaves the memory field out (the scenario grid's kinds without a torchtitan field)."""
    c = color
    memory = "" if mem_gib is None else f"{c.yellow}memory: {mem_gib:5.2f}GiB({mem_pct:.2f}%)  "
    return (
        f"{c.red}step: {step:2}  "
        f"{c.green}loss: {loss:7.4f}  "
        f"{memory}"
        f"{c.blue}tps: {round(tps):,}  "
        f"{c.cyan}tflops: {tflops:,.2f}  "
        f"{c.magenta}mfu: {mfu:.2f}%{c.reset}"
    )


def step_line_2025_09(
    *, step: int, loss: float, grad_norm: float, mem_gib: float, mem_pct: float, tps: float, tflops: float, mfu: float, color: Palette = NO_COLOR
) -> str:
    """components/metrics.py (2025-07-15 .. 2026-02-06): + orange grad_norm, turquoise memory, loss 7.4f."""
    c = color
    return (
        f"{c.red}step: {step:2}  "
        f"{c.green}loss: {loss:7.4f}  "
        f"{c.orange}grad_norm: {grad_norm:7.4f}  "
        f"{c.turquoise}memory: {mem_gib:5.2f}GiB({mem_pct:.2f}%)  "
        f"{c.blue}tps: {round(tps):,}  "
        f"{c.cyan}tflops: {tflops:,.2f}  "
        f"{c.magenta}mfu: {mfu:.2f}%{c.reset}"
    )


def step_line_newest(
    *, step: int, loss: float, grad_norm: float, mem_gib: float, mem_pct: float, tps: float, tflops: float, mfu: float | None, color: Palette = NO_COLOR
) -> str:
    """components/metrics.py HEAD: loss 8.5f (2026-02-06); ``mfu: N/A`` (``mfu`` None) under FP8/MX (2026-02-28)."""
    c = color
    mfu_str = f"{mfu:.2f}%" if mfu is not None else "N/A"
    return (
        f"{c.red}step: {step:2}  "
        f"{c.green}loss: {loss:8.5f}  "
        f"{c.orange}grad_norm: {grad_norm:7.4f}  "
        f"{c.turquoise}memory: {mem_gib:5.2f}GiB({mem_pct:.2f}%)  "
        f"{c.blue}tps: {round(tps):,}  "
        f"{c.cyan}tflops: {tflops:,.2f}  "
        f"{c.magenta}mfu: {mfu_str}{c.reset}"
    )


def validate_line(*, step: int, loss: float, mem_gib: float, mem_pct: float, tps: float, color: Palette = NO_COLOR) -> str:
    """MetricsProcessor.log_validation (since 2025-07-15): yellow, loss 7.4f."""
    c = color
    return (
        f"{c.yellow}validate step: {step:2}  "
        f"{c.green}loss: {loss:7.4f}  "
        f"{c.turquoise}memory: {mem_gib:5.2f}GiB({mem_pct:.2f}%)  "
        f"{c.blue}tps: {round(tps):,}{c.reset}"
    )


# --------------------------------------------------------------------------
# Start-up and warning messages
# --------------------------------------------------------------------------


def capacity_2024(device_name: str, index: int, gib: float = H100_GIB) -> str:
    """build_gpu_memory_monitor (2024-03 .. 2024-11-20)."""
    return f"GPU capacity: {device_name} ({index}) with {gib:.2f}GiB memory"


def capacity(device_name: str, gib: float = H100_GIB) -> str:
    """build_device_memory_monitor (2024-12-11 .. HEAD)."""
    return f"CUDA capacity: {device_name} with {gib:.2f}GiB memory"


def model_memory(device_word: str, gib: float, pct: float) -> str:
    """``GPU memory usage for model`` (2024) / ``CUDA memory usage for model`` (2025+)."""
    return f"{device_word} memory usage for model: {gib:.2f}GiB({pct:.2f}%)"


def model_size(name: str, flavor: str, count: int, color: Palette = NO_COLOR) -> str:
    c = color
    return f"{c.blue}Model {name} {flavor} {c.red}size: {count:,} total parameters{c.reset}"


def training_starts(step: int, local_batch_size: int | None = None) -> str:
    """train.py as a process starts to train, from step 1 or a checkpoint's next step (2024: with the
    local batch size after it)."""
    return f"Training starts at step {step}" + (f", with local batch size {local_batch_size}" if local_batch_size else ".")


def alloc_retries(n: int) -> str:
    """DeviceMemoryMonitor's warning; the count is cumulative over the run."""
    return f"{n} CUDA memory allocation retries."


def oom_count(n: int) -> str:
    return f"{n} CUDA OOM errors thrown."


def pp_loss_not_visible(loss_rank: int, color: Palette = NO_COLOR) -> str:
    """components/metrics.py ensure_pp_loss_visible (since 2025-03-18)."""
    c = color
    return (
        f"{c.red}Pipeline Parallel loss is not visible. Please add {c.yellow}rank {loss_rank}{c.red} to LOG_RANK environment variable in run_train.sh.{c.reset}"
    )


def mesh(names: list[str], dims: list[int]) -> str:
    return f"Building {len(dims)}-D device mesh with {names}, {dims}"


NCCL_ENV_WARNING = "ENV[TORCH_NCCL_ASYNC_ERROR_HANDLING] = 1 will be overridden to 3 based on job config"
SYNC_TIMEOUT = "Synchronizing and adjusting timeout for all ProcessGroups to 0:01:40"


# --------------------------------------------------------------------------
# The numbers, as torchtitan computes them
# --------------------------------------------------------------------------

GIB = 1024**3
# total_memory such that the printed capacity is exactly 79.11 GiB and percent == 100 * GiB / 79.11.
H100_BYTES = round(H100_GIB * GIB)
H100_PEAK_FLOPS = 9.89e14  # utils.get_peak_flops("H100"): 989 TFLOPS bf16

# FLOPs per token = 6 * non-embedding params + 12 * layers * heads * head_dim * seq
LLAMA3_8B_FPT = 6 * 7_504_924_672 + 12 * 32 * 32 * 128 * 8192  # seq 8192
DSV2_LITE_FPT = 6 * 2_606_000_000 + 12 * 27 * 16 * 192 * 4096  # ~2.6B active, seq 4096
QWEN3_1_7B_FPT = 6 * 1_720_000_000 + 12 * 28 * 16 * 128 * 4096  # seq 4096


def reserved(gib: float, capacity_bytes: int = H100_BYTES) -> tuple[float, float]:
    """Peak reserved memory as the caching allocator reports it (2 MiB segments): (GiB, % of capacity),
    as DeviceMemoryMonitor computes them."""
    seg = 2 * 1024**2
    nbytes = round(gib * GIB / seg) * seg
    return nbytes / GIB, 100 * nbytes / capacity_bytes


def throughput(tps: float, flops_per_token: float, peak_flops: float = H100_PEAK_FLOPS) -> tuple[float, float]:
    """(tflops, mfu %) for a per-device tokens/s, as MetricsProcessor computes them."""
    return flops_per_token * tps / 1e12, 100 * flops_per_token * tps / peak_flops
