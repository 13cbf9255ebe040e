"""torchtune sample log (more-formats.md §6) with ground truth.

The file DiskLogger writes (`${output_dir}/logs/log_<unix_ts>.txt`, the shipped configs' metric
logger), every line written by tests.logwriters.torchtune. The numbers are invented but consistent:
the loss, tokens per second and grad norm are 0-dim float32 tensors printed through `item()` (the
float32 value's Python repr), the learning rate a Python float, the peaks whole numbers of bytes
(512-byte blocks, 2 MiB segments) divided by 1024**3.

Ground truth is common.reading / merge_readings: rank 0 writes the file without any prefix, so the
worker is `main`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime

from tests.logwriters import torchtune as tt
from tests.logwriters.torchtune import item as f32

from .common import Sample, reading
from .deepspeed import DSLog

MIB = 1024**2


def build_full_finetune_stable() -> Sample:
    log = DSLog("torchtune_full_finetune_llama3_1_8b", datetime(2025, 4, 2, 9, 0, 0))
    rng = log.rng
    # full_finetune_distributed, Llama-3.1 8B on 8 GPUs (FSDP2), batch_size 2, gradient accumulation 4,
    # log_every_n_steps 1, 2 epochs of 110 steps, packed dataset (max_seq_len 4096): every step has the
    # same shapes, so its peaks differ only by the allocator's rounding and the number of padding
    # tokens. The caching allocator grows its pool over the first steps, then keeps it.
    reserved = 37_312_200_704
    steps_per_epoch, epochs, lr = 110, 2, 2e-05
    for step in range(1, steps_per_epoch * epochs + 1):
        alloc = 34_359_738_368 + rng.randrange(0, 24_576) * 512
        active = alloc + rng.randrange(0, 64) * 512
        if step in (2, 3):
            reserved += 536_870_912
        loss = f32(1.62 * math.exp(-step / 90) + 0.78 + rng.gauss(0, 0.035) + (0.09 if step == steps_per_epoch + 1 else 0.0))
        tokens = f32(2 * 4 * 4096 * rng.uniform(0.94, 0.99) / rng.uniform(3.12, 3.31))  # non-padding tokens / s
        grad = f32(abs(rng.gauss(0.42, 0.08)) + (1.8 if step == 1 else 0.0))
        payload = {
            "loss": loss,
            "lr": lr,
            "tokens_per_second_per_gpu": tokens,
            **tt.memory_stats(active_bytes=active, allocated_bytes=alloc, reserved_bytes=reserved),
            "grad_norm": grad,
        }
        text = tt.log_line(step, payload)
        log.line(
            float(step),
            text,
            reading(
                "main",
                step,
                loss=loss,
                lr=lr,
                tps=tokens,
                grad_norm=grad,
                mem_peak_allocated_gib=payload["peak_memory_alloc"],
                mem_peak_reserved_gib=payload["peak_memory_reserved"],
            ),
        )
    return log.sample(
        "torchtune/log_1743584400.txt",
        "torchtune full_finetune_distributed Llama-3.1 8B on 8 GPUs, the DiskLogger file (log_every_n_steps 1, "
        "2 epochs, packed sequences): peak allocated is the same every step to within 12 MiB, peak reserved grows "
        "over the first three steps and then stays (healthy).",
        None,
    )


def build_mps_pool_growth() -> Sample:
    log = DSLog("torchtune_full_finetune_single_device_mps", datetime(2025, 5, 1, 8, 45, 12))
    rng = log.rng
    # full_finetune_single_device, Llama-3.1 8B in bf16 on an Apple M2 Ultra (MPS), optimizer_in_bwd
    # (AdamW states in bf16: weights and two states ~45 GiB), alpaca without packing: every batch has
    # a new sequence length. The live set after each step is the same to within a few MiB; the Metal
    # pool keeps blocks of every size it has seen and grows in stairs (fragmentation, not a leak).
    live, pool = 50_809_651_200, 55_297_359_872
    for step in range(1, 61):
        current = live + rng.randint(-3, 3) * MIB + rng.randrange(0, 1024) * 1024
        if rng.random() < 0.45:
            pool += rng.choice((128, 256, 256, 512)) * MIB
        driver = pool + rng.randrange(0, 8) * MIB
        loss = f32(1.92 - 0.45 * (1 - math.exp(-step / 18)) + rng.gauss(0, 0.05))
        tokens = f32(rng.uniform(228, 262))
        payload = {
            "loss": loss,
            "lr": 0.0003,
            "tokens_per_second_per_gpu": tokens,
            **tt.mps_memory_stats(current_allocated_bytes=current, driver_allocated_bytes=driver),
        }
        log.line(
            float(step),
            tt.log_line(step, payload),
            reading(
                "main",
                step,
                loss=loss,
                lr=0.0003,
                tps=tokens,
                mem_allocated_gib=payload["peak_memory_active"],
                mem_reserved_gib=payload["peak_memory_alloc"],
            ),
        )
    return log.sample(
        "torchtune/mps/log_1746089112.txt",
        "torchtune full_finetune_single_device Llama-3.1 8B on Apple MPS, the DiskLogger file: `peak_memory_active` "
        "(live tensors now) flat at 47.32 GiB, `peak_memory_alloc` (the Metal pool now) growing in stairs by 6.5 GiB "
        "(fragmentation: the pool, not a leak).",
        None,
    )


SAMPLES: list[Callable[[], Sample]] = [build_full_finetune_stable, build_mps_pool_growth]
