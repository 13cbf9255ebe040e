"""Megatron-LM, Megatron-DeepSpeed and GPT-NeoX lines (parsers/megatron.yaml), with the format strings of
their sources (more-formats.md §1-§3; Megatron-LM ``megatron/training/training.py`` ``training_log``,
``report_memory`` in ``megatron/training/utils``, ``theoretical_memory_usage.py``, ``core/timers.py``;
Megatron-DeepSpeed ``megatron/training.py``; GPT-NeoX ``megatron/logging.py``).

Every line is a bare ``print`` (``print_rank_0`` on global rank 0, ``print_rank_last`` on the last
rank); only the timers go through Python logging from Megatron-LM core_v0.16 on.
"""

from __future__ import annotations

import math
from datetime import datetime


def stamp(dt: datetime, *, micro: bool) -> str:
    """``datetime.now().strftime('%Y-%m-%d %H:%M:%S')`` (``.%f`` from core_v0.16)."""
    return dt.strftime("%Y-%m-%d %H:%M:%S.%f" if micro else "%Y-%m-%d %H:%M:%S")


def _losses(losses: dict[str, float], keep: str | None) -> str:
    """The loss keys, ``{:.6E}``: Megatron-LM prints a loss only ``if avg > 0.0`` (``keep="gt"``,
    2020-11 .. core_v0.16; a NaN never passes) or ``>= 0.0`` (``"ge"``, core_v0.17+); GPT-NeoX and
    Megatron-LM v1.0 print every one (None)."""
    out = ""
    for key, avg in losses.items():
        if keep == "gt" and not avg > 0.0 or keep == "ge" and not avg >= 0.0:
            continue
        out += f" {key}: {avg:.6E} |"
    return out


def iteration_line(
    *,
    iteration: int,
    train_iters: int,
    elapsed_ms: float,
    lr: float | None,
    global_batch_size: int,
    consumed_samples: int,
    losses: dict[str, float],
    loss_scale: float,
    skipped: int,
    nan: int,
    grad_norm: float | None = None,
    num_zeros: int | None = None,
    throughput: float | None = None,
    time: datetime | None = None,
    micro: bool = True,
    keep: str = "gt",
) -> str:
    """Megatron-LM's training_log line (core_v0.6 .. core_v0.19 layout; ``time`` None before core_v0.6):
    ``lr`` ``.6E`` (omitted when None from core_v0.17), ``grad norm`` ``.3f`` and ``num zeros`` only
    when not None, ``throughput`` only with --log-throughput."""
    text = f" [{stamp(time, micro=micro)}]" if time is not None else ""
    text += f" iteration {iteration:8d}/{train_iters:8d} |"
    text += f" consumed samples: {consumed_samples:12d} |"
    text += f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
    if throughput is not None:
        text += f" throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |"
    if lr is not None:
        text += f" learning rate: {lr:.6E} |"
    text += f" global batch size: {global_batch_size:5d} |"
    text += _losses(losses, keep)
    text += f" loss scale: {loss_scale:.1f} |"
    if grad_norm is not None:
        text += f" grad norm: {grad_norm:.3f} |"
    if num_zeros is not None:
        text += f" num zeros: {num_zeros} |"
    text += f" number of skipped iterations: {skipped:3d} |"
    text += f" number of nan iterations: {nan:3d} |"
    return text


def mds_iteration_line(
    *,
    iteration: int,
    train_iters: int,
    consumed_samples: int,
    consumed_tokens: int,
    elapsed_ms: float,
    lr: float,
    global_batch_size: int,
    losses: dict[str, float],
    loss_scale: float | None,
    grad_norm: float | None,
    num_zeros: float | None,
    seq_len: int,
    skipped: int,
    nan: int,
    samples_per_sec: float,
    tgs: float,
    tflops: float,
) -> str:
    """Megatron-DeepSpeed's training_log line (2023-11 .. 2025-07): lr ``.3E``, losses only ``> 0.0``,
    no ``loss scale`` under bf16 (the DeepSpeed optimizer has no ``cur_scale``), no grad norm on the
    ZeRO (non-pipeline) path."""
    text = f" iteration {iteration:8d}/{train_iters:8d} |"
    text += f" consumed samples: {consumed_samples:12d} |"
    text += f" consumed tokens: {consumed_tokens:12d} |"
    text += f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
    text += f" learning rate: {lr:.3E} |"
    text += f" global batch size: {global_batch_size:5d} |"
    text += _losses(losses, "gt")
    if loss_scale is not None:
        text += f" loss scale: {loss_scale:.1f} |"
    if grad_norm is not None:
        text += f" grad norm: {grad_norm:.3f} |"
    if num_zeros is not None:
        text += f" num zeros: {num_zeros:.1f} |"
    text += f" actual seqlen: {seq_len:5d} |"
    text += f" number of skipped iterations: {skipped:3d} |"
    text += f" number of nan iterations: {nan:3d} |"
    text += f" samples per second: {samples_per_sec:.3f} |"
    text += f" tokens per gpu per second (tgs): {tgs:.3f} |"
    text += f" TFLOPs: {tflops:.2f} |"
    return text


def human_readable_flops(num: float) -> str:
    """GPT-NeoX's ``human_readable_flops``: ``"%3.1f%s" % (num, unit)``, no space."""
    for unit in ["", "KFLOPS", "MFLOPS", "GFLOPS", "TFLOPS", "PFLOPS", "EFLOPS", "ZFLOPS"]:
        if abs(num) < 1000.0:
            return f"{num:3.1f}{unit}"
        num /= 1000.0
    return "{:.1f}{}".format(num, "Yi")


def neox_iteration_line(
    *,
    iteration: int,
    train_iters: int,
    samples_per_sec: float,
    elapsed_ms: float,
    lr: float,
    flops_per_gpu: float,
    losses: dict[str, float],
    loss_scale: float | None,
    skipped: int,
    nan: int,
    mfu: float | None = None,
    hfu: float | None = None,
) -> str:
    """GPT-NeoX's training_log line: ``samples/sec`` first, every loss key (``lm_loss``) whatever its
    value, ``loss scale`` only under fp16, MFU/HFU only with peak_theoretical_tflops."""
    text = f" samples/sec: {samples_per_sec:.3f} |"
    text += f" iteration {iteration:8d}/{train_iters:8d} |"
    text += f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
    text += f" learning rate: {lr:.3E} |"
    text += f" approx flops per GPU: {human_readable_flops(flops_per_gpu)} |"
    if mfu is not None:
        text += f" MFU: {mfu:.2f}% | HFU: {hfu:.2f}% |"
    text += _losses(losses, None)
    if loss_scale is not None:
        text += f" loss scale: {loss_scale:.1f} |"
    text += f" number of skipped iterations: {skipped:3d} |"
    text += f" number of nan iterations: {nan:3d} |"
    return text


def report_memory(
    name: str,
    *,
    allocated: float,
    max_allocated: float,
    reserved: float,
    max_reserved: float,
    device_used: float | None = None,
    rank: int | None = None,
    two_decimals: bool = True,
) -> str:
    """report_memory: MiB (bytes / 1024 / 1024) labelled MB; ``.2f`` from core_v0.16, the raw float
    before; ``rank`` is the global rank of the ``[Rank N] `` tag (None: before 2020-12 and GPT-NeoX,
    where rank 0 prints without it). The values are MiB as floats (a whole number of bytes / 2**20)."""

    def number(mib: float) -> str:
        return f"{mib:.2f}" if two_decimals else str(mib)

    text = name + " memory (MB)"
    text += f" | allocated: {number(allocated)}"
    text += f" | max allocated: {number(max_allocated)}"
    text += f" | reserved: {number(reserved)}"
    text += f" | max reserved: {number(max_reserved)}"
    if device_used is not None:
        text += f" | total device memory used: {number(device_used)}"
    return text if rank is None else f"[Rank {rank}] {text}"


def mib(nbytes: int) -> float:
    """``torch.cuda.memory_allocated() / (1024.0 * 1024.0)``: bytes as report_memory divides them."""
    return nbytes / (1024.0 * 1024.0)


def theoretical_memory(weight_and_optimizer_mib: float, activation_mib: float) -> list[str]:
    """report_theoretical_memory's line (core_v0.15+ full form); its trailing ``\\n`` prints a blank line."""
    total = weight_and_optimizer_mib + activation_mib
    return [
        f"Theoretical memory footprints: weight and optimizer={weight_and_optimizer_mib:.2f} MB, activation={activation_mib:.2f} MB, total={total:.2f} MB",
        "",
    ]


def parameter_counts(block: float, embedding: float, most_loaded: float, others: float | None) -> list[str]:
    """compute_weight_and_optimizer_memory(verbose=True): parameters in billions (the block's with a
    space flag, so two spaces before it)."""
    lines = [
        f"Number of parameters in transformer block in billions: {block: .2f}",
        f"Number of parameters in embedding layers in billions: {embedding:.2f}",
        f"Total number of parameters in billions: {block + embedding:.2f}",
        f"Number of parameters in most loaded shard in billions: {most_loaded:.4f}",
    ]
    if others is not None:
        lines.append(f"Number of parameters in other shards in billions: {others:.4f}")
    return lines


def print_datetime(string: str, dt: datetime, *, micro: bool) -> str:
    """print_datetime via print_rank_0: ``[string] datetime: ... `` with its trailing space."""
    return f"[{string}] datetime: {stamp(dt, micro=micro)} "


def timers_minmax(timers: dict[str, tuple[float, float]], *, logger: bool) -> list[str]:
    """Timers.log with --timing-log-option minmax on the last rank; through ``logger.info`` (under
    ``logging.basicConfig``'s default format) from core_v0.16, a plain print before."""
    text = "(min, max) time across ranks (ms):"
    for name, (lo, hi) in timers.items():
        text += "\n    {}: ({:.2f}, {:.2f})".format((name + " ").ljust(48, "."), lo, hi)
    lines = text.split("\n")
    if logger:
        lines[0] = "INFO:megatron.core.timers:" + lines[0]
    return lines


def validation_lines(iteration: int, losses: dict[str, float]) -> list[str]:
    """evaluate_and_print_results (Megatron-LM): the line framed by dash lines of its length + 1."""
    text = f" validation loss at iteration {iteration} | "
    for key, value in losses.items():
        text += f"{key} value: {value:.6E} | "
        text += f"{key} PPL: {math.exp(min(20, value)):.6E} | "
    dashes = "-" * (len(text) + 1)
    return [dashes, text, dashes]


def argument(name: str, value: object) -> str:
    """_print_args: ``  name ........ value`` (dots fill to 48)."""
    return "  {} {} {}".format(name, "." * (48 - len(name)), value)


def parameters_on_rank(tp: int, pp: int, count: int) -> str:
    """get_model: printed by every rank whose data- and context-parallel ranks are 0."""
    return f" > number of parameters on (tensor, pipeline) model parallel rank ({tp}, {pp}): {count}"


def saving_checkpoint(dt: datetime, iteration: int, save_dir: str, ckpt_format: str = "torch_dist") -> str:
    """checkpointing.save_checkpoint via print_rank_0 (core_v0.16)."""
    return f"[{stamp(dt, micro=True)}] saving checkpoint at iteration {iteration:7d} to {save_dir} in {ckpt_format} format"


def saved_checkpoint(dt: datetime, iteration: int, save_dir: str, tp: tuple[int, int], pp: tuple[int, int]) -> str:
    """The finalize step's print_rank_0 (core_v0.16): two leading spaces."""
    return f"  [{stamp(dt, micro=True)}] successfully saved checkpoint from iteration {iteration:7d} to {save_dir} [ t {tp[0]}/{tp[1]}, p {pp[0]}/{pp[1]} ]"
