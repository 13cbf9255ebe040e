"""axolotl sample log (Hugging Face Trainer dicts with axolotl's memory keys, more-formats.md §5.1) with
ground truth.

A QLoRA fine-tune with axolotl v0.13 (transformers 4.57): the console of `axolotl train` on one GPU.
axolotl's own lines are written by tests.logwriters.hf_trainer.axolotl_log, the Trainer's dicts by
log_dict with axolotl's memory keys (axolotl_memory: peaks since the previous log call, GiB,
`round(x, 2)`), tqdm bars as the DeepSpeed samples draw them (tqdm.write clears the bar first). The
numbers are invented but consistent (a cosine learning rate, the peaks of each logging step's
longest batch).

Ground truth is common.reading / merge_readings: the dicts carry no step, no line of the log does,
so the train dicts are numbered 1, 2, 3... (ordinal) and each eval dict takes the number of the
train dict before it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime

from tests.logwriters import hf_trainer as hf
from tests.logwriters.torchtune import item

from .common import Sample, reading
from .deepspeed import DSLog, tqdm_bar

GIB = 1024**3


def build_axolotl_v013_qlora() -> Sample:
    log = DSLog("axolotl_v013_qlora", datetime(2025, 10, 6, 16, 40, 12, 508000))
    rng = log.rng
    at = log.clock.at
    pid = 48211
    t = 0.0
    for name, func, line, msg in (
        ("axolotl.cli.config", "load_cfg", 272, "config:"),
        ("axolotl.loaders.tokenizer", "load_tokenizer", 307, "EOS: 128009 / <|eot_id|>"),
        (
            "axolotl.utils.data.sft",
            "_prepare_standard_dataset",
            127,
            "Loading prepared dataset from disk at last_run_prepared/8c1e5b0f3a6d1f2e9b7c4a1d0e3f5a7b...",
        ),
        ("axolotl.utils.trainer", "calculate_total_num_steps", 406, "total_num_steps: 150"),
        ("axolotl.loaders.model", "_configure_embedding_dtypes", 328, "Converting modules to torch.bfloat16"),
        ("axolotl.train", "save_initial_configs", 222, "Pre-saving adapter config to ./outputs/qlora-out..."),
        ("axolotl.train", "execute_training", 186, "Starting trainer..."),
    ):
        t += rng.uniform(0.2, 9.0)
        log.line(t, hf.axolotl_log(at(t), "INFO", name, func, line, pid, msg))
    total, eval_every, eval_batches = 150, 50, 12
    bar_width = len(tqdm_bar("", 0, total, 0.0))
    log.bar(tqdm_bar("", 0, total, 0.0))
    elapsed, loss, n_logged = 0.0, 1.58, 0
    for step in range(1, total + 1):
        dt = rng.uniform(3.9, 5.6)
        t += dt
        elapsed += dt
        log.bar(tqdm_bar("", step, total, elapsed))
        # Peaks since the previous log: weights (4-bit) + LoRA state + this step's activations.
        allocated = 9.14 + rng.uniform(1.1, 3.9)
        reserved = 14.58 if step > 2 else 12.96 + 0.8 * step
        lr = 2e-4 * step / 10 if step <= 10 else 2e-4 * 0.5 * (1 + math.cos(math.pi * (step - 10) / (total - 10)))
        loss = max(0.92, loss - 0.006) + rng.gauss(0, 0.04)
        logs = {
            "loss": round(loss, 4),
            "grad_norm": item(abs(rng.gauss(0.31, 0.07))),
            "learning_rate": lr,
            **hf.axolotl_memory(active=allocated + 0.004, allocated=allocated, reserved=reserved, keys="v0.13"),
            "tokens_per_second_per_gpu": round(rng.uniform(1890.0, 2230.0), 2),
            "epoch": round(step / total * 3, 4),
        }
        log.clear_bar(bar_width)
        n_logged += 1
        log.line(
            t,
            hf.log_dict(logs),
            reading(
                "main",
                None,
                ordinal=True,
                loss=logs["loss"],
                grad_norm=logs["grad_norm"],
                lr=lr,
                mem_peak_allocated_gib=logs["memory/max_allocated (GiB)"],
                mem_peak_reserved_gib=logs["memory/device_reserved (GiB)"],
            ),
        )
        log.bar(tqdm_bar("", step, total, elapsed))
        if step % eval_every == 0:
            for n in range(0, eval_batches + 1, 4):
                log.bar(tqdm_bar("", n, eval_batches, n * 1.31))
            # Reset after the train log: the eval dict's peaks cover the evaluation only (no gradients).
            eval_alloc = 7.86 + rng.uniform(0.3, 1.2)
            metrics = {
                "eval_loss": round(loss + 0.07 + rng.gauss(0, 0.01), 4),
                "eval_runtime": round(eval_batches * 1.31 + 0.4, 4),
                "eval_samples_per_second": 6.122,
                "eval_steps_per_second": 0.765,
                **hf.axolotl_memory(active=eval_alloc, allocated=eval_alloc, reserved=14.58, keys="v0.13"),
                "epoch": round(step / total * 3, 4),
            }
            log.clear_bar(bar_width)
            log.line(
                t + 16.1,
                hf.log_dict(metrics),
                reading(
                    "main",
                    None,
                    "validate",
                    loss=metrics["eval_loss"],
                    mem_peak_allocated_gib=metrics["memory/max_allocated (GiB)"],
                    mem_peak_reserved_gib=metrics["memory/device_reserved (GiB)"],
                ),
            )
            t += 16.1
            elapsed += 16.1
            log.bar(tqdm_bar("", step, total, elapsed))
    log.clear_bar(bar_width)
    summary = {
        "train_runtime": round(elapsed, 4),
        "train_samples_per_second": round(total * 8 / elapsed, 3),
        "train_steps_per_second": round(total / elapsed, 3),
        "train_loss": 1.0412,
        "epoch": 3.0,
    }
    log.line(t, hf.log_dict(summary))
    log.bar(tqdm_bar("", total, total, elapsed))
    log.bar(tqdm_bar("", total, total, elapsed))
    log.flush()
    t += 2.4
    log.line(
        t, hf.axolotl_log(at(t), "INFO", "axolotl.train", "save_trained_model", 228, pid, "Training completed! Saving trained model to ./outputs/qlora-out.")
    )
    return log.sample(
        "hf_trainer/axolotl_v013_qlora.log",
        "axolotl v0.13 QLoRA of Llama-3.1 8B on one GPU (transformers 4.57, logging_steps 1, eval every 50 steps): "
        "the Trainer's dicts carry axolotl's memory keys, peaks since the previous log that follow each step's "
        "batch without a trend; the eval dicts' peaks cover the evaluation only (healthy).",
        None,
    )


SAMPLES: list[Callable[[], Sample]] = [build_axolotl_v013_qlora]
