"""NeMo 2 sample log (more-formats.md §4.1) with ground truth.

NeMo's ProgressPrinter line is written by tests.logwriters.nemo, NeMo's logger header too; the
shapes follow framework-pastes.md §4.9 (a NeMo perf run under `srun -l`: the task label space-padded
to the width of the largest task id, and an empty labelled line after every step line). Lightning's
own start-up lines are quoted from pytorch_lightning (`Initializing distributed: GLOBAL_RANK: ...`
on every rank). The numbers are invented but consistent: the memory metrics are
torch.cuda.max_memory_reserved() / max_memory_allocated() in bytes (a whole number of 2 MiB
segments / 512-byte blocks), passed through a float32 tensor as Lightning logs them.

Ground truth is common.reading / merge_readings: the printing task is srun's label (task 0 = rank
0), the step is `global_step`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tests.logwriters import nemo

from .common import Sample, reading
from .deepspeed import DSLog

GIB = 1024**3
MIB = 1024**2


def srun_label(task: int, ntasks: int) -> str:
    """srun --label: the task id right-aligned to the width of the largest one, then `: `."""
    return f"{task:>{len(str(ntasks - 1))}}: "


def build_llama3_memory_usage() -> Sample:
    log = DSLog("nemo2_llama3_memory_usage", datetime(2025, 7, 14, 3, 21, 40, 118000))
    rng = log.rng
    at = log.clock.at
    ntasks, max_steps, gbs, val_every = 16, 60, 512, 25
    label = lambda task: srun_label(task, ntasks)
    t = 0.0
    log.line(t, label(0) + nemo.log_header(at(t), "I", "nemo_logging:393") + "Experiments will be logged at /results/llama3_8b/default/2025-07-14_03-21-40")
    log.line(t, label(0) + "GPU available: True (cuda), used: True")
    log.line(t, label(0) + "TPU available: False, using: 0 TPU cores")
    log.line(t, label(0) + "HPU available: False, using: 0 HPUs")
    for task in rng.sample(range(ntasks), ntasks):  # Lightning, on every rank
        t += rng.uniform(0.01, 0.3)
        log.line(t, label(task) + f"Initializing distributed: GLOBAL_RANK: {task}, MEMBER: {task + 1}/{ntasks}")
    t += 4.2
    log.line(t, label(0) + "----------------------------------------------------------------------------------------------------")
    log.line(t, label(0) + "distributed_backend=nccl")
    log.line(t, label(0) + f"All distributed processes registered. Starting with {ntasks} processes")
    log.line(t, label(0) + "----------------------------------------------------------------------------------------------------")
    log.line(t, label(0))
    for task in rng.sample(range(ntasks), ntasks):
        log.line(t, label(task) + f"LOCAL_RANK: {task % 8} - CUDA_VISIBLE_DEVICES: [0,1,2,3,4,5,6,7]")
    t += 24.9

    # Process-lifetime peaks (bytes) of rank 0's device: the first step allocates the distributed
    # optimizer's state, the second settles the caching allocator; at step 11 one longer batch makes
    # the allocator reserve one more 2 MiB-multiple segment; nothing grows after that.
    reserved = 54_609_887_232
    allocated = 50_143_248_384
    loss = 12.08
    for step in range(max_steps):
        dt = 21.8 if step == 0 else rng.uniform(10.42, 10.61)
        t += dt
        if step == 1:
            reserved, allocated = 61_828_284_416, 57_366_495_232
        elif step == 2:
            reserved, allocated = 62_193_385_472, 57_368_592_384
        elif step == 11:
            reserved += 209_715_200
        lr = 3e-4 * (step + 1) / 2000
        loss = 12.08 if step == 0 else max(6.9, loss - 0.19 * (0.96**step)) + rng.gauss(0, 0.012)
        metrics = {
            "lr": nemo.f32(lr),
            "global_batch_size": float(gbs),
            "global_step": float(step),
            "max_memory_reserved": nemo.f32(float(reserved)),
            "max_memory_allocated": nemo.f32(float(allocated)),
            "reduced_train_loss": nemo.f32(loss),
            "train_step_timing in s": nemo.f32(dt),
        }
        if step:  # MegatronDataSampler logs consumed_samples from the second step on
            metrics["consumed_samples"] = float((step + 1) * gbs)
        text = nemo.progress_line(epoch=0, iteration=step, total=max_steps - 1, metrics=metrics)
        shown = {k.strip(): v for k, v in (part.split(": ", 1) for part in text.split(" | ")[1:])}
        log.line(
            t,
            label(0) + text,
            reading(
                "rank0",
                int(shown["global_step"]),
                loss=float(shown["reduced_train_loss"]),
                lr=float(shown["lr"]),
                mem_max_reserved_gib=float(shown["max_memory_reserved"]) / GIB,
                mem_max_allocated_gib=float(shown["max_memory_allocated"]) / GIB,
            ),
        )
        log.line(t, label(0))
        if (step + 1) % val_every == 0:
            for n in range(1, 6):
                t += rng.uniform(1.9, 2.2)
                log.line(t, label(0) + nemo.validation_progress(n, 5))
            log.line(
                t,
                label(0) + nemo.log_header(at(t), "I", "model_checkpoint:497") + "Scheduled async checkpoint save for "
                f"/results/llama3_8b/default/checkpoints/model_name=0--val_loss={loss + 0.05:.2f}-step={step}-"
                f"consumed_samples={(step + 1) * gbs}.0-last.ckpt",
            )
    t += 3.0
    log.line(t, label(0) + f"`Trainer.fit` stopped: `max_steps={max_steps}` reached.")
    return log.sample(
        "nemo/llama3_8b_memory_usage.log",
        "NeMo 2 Llama-3 8B pretraining on 2 nodes (16 tasks under srun --label, NEMO_LOG_MEMORY_USAGE=1): "
        "ProgressPrinter lines from rank 0 with the process-lifetime peaks in bytes, which rise over the first two "
        "steps and once more at step 11 (reserved only), then stay flat (healthy).",
        None,
    )


SAMPLES: list[Callable[[], Sample]] = [build_llama3_memory_usage]
