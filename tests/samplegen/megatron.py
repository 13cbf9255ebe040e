"""Megatron-family sample logs (Megatron-LM, Megatron-DeepSpeed) with ground truth.

Every Megatron line is written by tests.logwriters.megatron (format strings of more-formats.md
§1-§2, read from Megatron-LM core_v0.11 / core_v0.16 and Megatron-DeepSpeed), DeepSpeed's by
tests.logwriters.deepspeed, torchrun's and PyTorch's by tests.logwriters.pytorch. The shapes
(what each rank prints, in which order, with which noise) follow framework-pastes.md §4; the numbers
are invented but consistent: memory is a whole number of bytes printed as report_memory divides it
(MiB), losses and norms go through the frameworks' own format specs before they become truth.

Who prints what (more-formats.md §1.1): the iteration line and the validation block come from the
LAST global rank (print_rank_last), the memory report from every rank whose data-parallel rank is 0
(`[Rank N]`, N its global rank), setup lines, theoretical memory and datetimes from rank 0. Output is
one stdout for all ranks (torchrun without --tee), so only report_memory's `[Rank N]` names a rank:
memlog's worker is `rankN` for those lines and `main` for everything else.

Ground truth is common.reading / merge_readings (one record per line read).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime

from tests.logwriters import deepspeed as ds
from tests.logwriters import megatron as mg
from tests.logwriters import pytorch
from tests.logwriters.python import frame_lines

from .common import Sample, reading
from .deepspeed import DSLog, HostMemory, _launcher, _zero2_init, ev, see_memory_usage, throughput_line

MIB = 1024 * 1024
GIB = 1024**3


def six_e(x: float) -> float:
    """A value as `{:.6E}` prints it."""
    return float(f"{x:.6E}")


def iteration_truth(text: str, worker: str = "main") -> dict:
    """The values an iteration line prints, read back from its fields (the writer formatted them)."""
    fields = {}
    for part in text.split(" |"):
        key, _, value = part.strip().partition(": ")
        fields[key] = value.strip()
    values = {}
    loss = fields.get("lm loss", fields.get("lm_loss", fields.get("loss")))
    if loss is not None:
        values["loss"] = float(loss)
    if "grad norm" in fields:
        values["grad_norm"] = float(fields["grad norm"])
    if "learning rate" in fields:
        values["lr"] = float(fields["learning rate"])
    if "throughput per GPU (TFLOP/s/GPU)" in fields:
        values["tflops"] = float(fields["throughput per GPU (TFLOP/s/GPU)"])
    if "TFLOPs" in fields:
        values["tflops"] = float(fields["TFLOPs"])
    if "tokens per gpu per second (tgs)" in fields:
        values["tps"] = float(fields["tokens per gpu per second (tgs)"])
    values["skipped_iterations"] = float(fields["number of skipped iterations"])
    values["nan_iterations"] = float(fields["number of nan iterations"])
    step = int(text.split("iteration", 1)[1].split("/", 1)[0])
    return reading(worker, step, **values)


def memory_report(name: str, step: int, rank: int, state: dict[str, int], *, two_decimals: bool) -> tuple[str, dict]:
    """report_memory's line of one rank and its reading: bytes as MiB, read back as printed, in GiB."""
    mibs = {k: mg.mib(v) for k, v in state.items()}
    text = mg.report_memory(
        name,
        allocated=mibs["allocated"],
        max_allocated=mibs["max_allocated"],
        reserved=mibs["reserved"],
        max_reserved=mibs["max_reserved"],
        device_used=mibs.get("device_used"),
        rank=rank,
        two_decimals=two_decimals,
    )
    printed = {k: (float(f"{v:.2f}") if two_decimals else v) / 1024 for k, v in mibs.items()}
    columns = {
        "allocated": "mem_allocated_gib",
        "max_allocated": "mem_max_allocated_gib",
        "reserved": "mem_reserved_gib",
        "max_reserved": "mem_max_reserved_gib",
        "device_used": "device_mem_used_gib",
    }
    return text, reading(f"rank{rank}", step, **{columns[k]: v for k, v in printed.items()})


def torchrun_banner(log: DSLog, t: float, pid: int) -> None:
    """torchrun's OMP_NUM_THREADS warning, every line with torchrun's logger head."""
    for line in pytorch.OMP_BANNER:
        log.line(t, pytorch.torchrun_log(log.clock.at(t), "W", pid, "torch/distributed/run.py:793", line))


# ==========================================================================
# (a) Megatron-LM core_v0.16: Llama-3 8B, TP2 x PP2 x DP2 on 8 GPUs, healthy
# ==========================================================================

TP, PP, DP = 2, 2, 2
# Rank order tp-cp-ep-dp-pp: tensor-parallel rank fastest, then data-parallel, then pipeline.
DP0_RANKS = [pp * TP * DP + tp for pp in range(PP) for tp in range(TP)]  # 0, 1, 4, 5
LAST_RANK = TP * PP * DP - 1


def _stage_memory(stage: int) -> dict[str, int]:
    """One rank's memory after an optimizer step (bytes): bf16 weights, fp32 grad buffer and its half
    of the distributed optimizer's fp32 state; the first stage holds the embedding and two
    microbatches' activations in flight, the last the output layer and the logits."""
    if stage == 0:
        return {"allocated": 24_443_862_016, "max_allocated": 54_649_585_664, "reserved": 61_203_283_968, "max_reserved": 61_203_283_968}
    return {"allocated": 25_037_828_096, "max_allocated": 48_130_703_360, "reserved": 53_687_091_200, "max_reserved": 53_687_091_200}


def build_core_v016_pp_healthy() -> Sample:
    log = DSLog("megatron_core_v016_pp_healthy", datetime(2026, 3, 9, 14, 2, 11, 530000))
    rng = log.rng
    at = log.clock.at
    t = 0.0
    torchrun_banner(log, t, 2219804)
    t += 9.4
    log.line(
        t,
        "using world size: 8, data-parallel size: 2, context-parallel size: 1, hierarchical context-parallel "
        "sizes: None, tensor-model-parallel size: 2, pipeline-model-parallel size: 2",
    )
    log.line(t, "------------------------ arguments ------------------------")
    for name, value in (
        ("bf16", True),
        ("eval_interval", 100),
        ("eval_iters", 10),
        ("global_batch_size", 128),
        ("log_device_memory_used", True),
        ("log_interval", 10),
        ("log_memory_interval", 50),
        ("log_throughput", True),
        ("lr", 0.0003),
        ("micro_batch_size", 1),
        ("pipeline_model_parallel_size", PP),
        ("save", "/checkpoints/llama3-8b-tp2pp2"),
        ("save_interval", 100),
        ("seq_length", 4096),
        ("tensor_model_parallel_size", TP),
        ("timing_log_level", 0),
        ("train_iters", 300),
        ("use_distributed_optimizer", True),
    ):
        log.line(t, mg.argument(name, value))
    log.line(t, "-------------------- end of arguments ---------------------")
    t += 31.2
    log.line(t, mg.print_datetime("after megatron is initialized", at(t), micro=True))
    log.line(t, "> building GPT model ...")
    counts = {(0, 0): 2_275_573_760, (1, 0): 2_275_573_760, (0, 1): 2_290_245_632, (1, 1): 2_290_245_632}
    for rank in rng.sample(DP0_RANKS, len(DP0_RANKS)):
        tp, pp = rank % TP, rank // (TP * DP)
        log.line(t + rng.uniform(0, 0.3), mg.parameters_on_rank(tp, pp, counts[(tp, pp)]))
    t += 14.8
    log.line(t, mg.print_datetime("after model, optimizer, and learning rate scheduler are built", at(t), micro=True))
    log.line(t, "> building train, validation, and test datasets ...")
    log.line(t, " > datasets target sizes (minimum size):")
    for split, size in (("train", 38400), ("validation", 5120), ("test", 1280)):
        log.line(t, f"    {split + ':':<11} {size}")
    t += 6.1
    log.line(t, mg.print_datetime("after dataloaders are built", at(t), micro=True))
    log.line(t, "done with setup ...")
    for line in mg.timers_minmax({"model-and-optimizer-setup": (14702.31, 14811.06), "train/valid/test-data-iterators-setup": (5903.12, 6088.47)}, logger=True):
        log.line(t, line)
    log.line(t, "training ...")
    log.line(t, mg.print_datetime("before the start of training step", at(t), micro=True))

    train_iters, gbs, save_dir = 300, 128, "/checkpoints/llama3-8b-tp2pp2"
    memory = {r: _stage_memory(r // (TP * DP)) for r in DP0_RANKS}
    first = {r: dict(m) for r, m in memory.items()}
    for r, m in first.items():  # the first iteration's peaks are a little below the steady ones
        m["max_allocated"] -= 327_155_712
        m["reserved"] = m["max_reserved"] = m["reserved"] - 314_572_800
    context = 1_732_247_552  # CUDA context, NCCL and cuBLAS workspaces outside the caching allocator

    def report(name: str, step: int, states: dict[int, dict[str, int]], start: float) -> float:
        for rank in rng.sample(DP0_RANKS, len(DP0_RANKS)):
            state = {**states[rank], "device_used": states[rank]["reserved"] + context + rng.randrange(0, 4) * 2 * MIB}
            text, rec = memory_report(name, step, rank, state, two_decimals=True)
            start += rng.uniform(0.001, 0.02)
            log.line(start, text, rec)
        return start

    def theoretical(start: float) -> None:
        log.line(start, "compute_activation_memory_without_sp")
        for line in mg.parameter_counts(6.98, 1.05, 2.2902, 1.7452):
            log.line(start, line)
        for line in mg.theoretical_memory(23353.43, 26876.07):
            log.line(start, line)

    loss = 11.93
    for it in [1, *range(10, train_iters + 1, 10)]:
        dt = 21.3456 if it == 1 else rng.uniform(8.82, 8.97) * 10
        t += dt
        lr = 3e-4 * min(1.0, it / 100) if it <= 100 else 3e-5 + 0.5 * (3e-4 - 3e-5) * (1 + math.cos(math.pi * (it - 100) / 200))
        loss = 11.93 if it == 1 else 5.0 + 6.9 * math.exp(-it / 60) + rng.gauss(0, 0.02)
        grad = 17.36 if it == 1 else max(0.6, 6.0 / (1 + it / 40)) + abs(rng.gauss(0, 0.05))
        text = mg.iteration_line(
            iteration=it,
            train_iters=train_iters,
            elapsed_ms=(dt if it == 1 else dt / 10) * 1000,
            throughput=168.2 if it == 1 else rng.uniform(401.0, 409.5),
            lr=lr,
            global_batch_size=gbs,
            consumed_samples=it * gbs,
            losses={"lm loss": loss},
            loss_scale=1.0,
            grad_norm=grad,
            skipped=0,
            nan=0,
            time=at(t),
            micro=True,
        )
        log.line(t, text, iteration_truth(text))
        if it in (1, 10):  # report_memory_flag: the first iteration and the next log interval
            theoretical(t + 0.01)
            report(f"(after {it} iterations)", it, first if it == 1 else memory, t + 0.02)
        elif it % 50 == 0:  # --log-memory-interval 50
            report(f"(after {it} iterations)", it, memory, t + 0.02)
        if it % 100 == 0:  # --eval-interval 100 (last rank), then --save-interval 100
            t += 41.7
            for line in mg.validation_lines(it, {"lm loss": loss + 0.06 + rng.gauss(0, 0.01)}):
                log.line(t, line, reading("main", it, "validate", loss=six_e(float(line.split("value: ")[1].split(" ")[0]))) if "value: " in line else None)
            t = report(f"(before save_checkpoint for iteration {it})", it, memory, t + 0.5)
            log.line(t, mg.saving_checkpoint(at(t), it, save_dir))
            t += rng.uniform(38.0, 44.0)
            log.line(t, mg.saved_checkpoint(at(t), it, save_dir, (1, TP), (1, PP)))
            if it == 100:  # the distributed checkpoint's staging buffers stay in the allocator's cache
                for r in DP0_RANKS:
                    memory[r]["reserved"] += 536_870_912
                    memory[r]["max_reserved"] = max(memory[r]["max_reserved"], memory[r]["reserved"])
            t = report(f"(after save_checkpoint for iteration {it})", it, memory, t + 0.2)
            for line in mg.timers_minmax({"save-checkpoint": (40113.52, 40127.90)}, logger=True):
                log.line(t, line)
    t += 2.0
    log.line(t, mg.print_datetime("after training is done", at(t), micro=True))
    t += 38.0
    val = loss + 0.05
    for prefix, kind in (("on validation set", "validate"), ("on test set", None)):
        text = f" validation loss at iteration {train_iters} {prefix} | lm loss value: {val:.6E} | lm loss PPL: {math.exp(val):.6E} | "
        log.line(t, "-" * (len(text) + 1))
        log.line(t, text, reading("main", train_iters, kind, loss=six_e(val)) if kind else None)
        log.line(t, "-" * (len(text) + 1))
        t += 37.5
    return log.sample(
        "megatron/core_v016_tp2_pp2_healthy.log",
        "Megatron-LM core_v0.16 Llama-3 8B pretraining on 8 GPUs (TP2 PP2 DP2, bf16, distributed optimizer, "
        "--log-memory-interval 50, --log-device-memory-used): the last rank prints the iteration lines, the four "
        "data-parallel-rank-0 ranks print report_memory at iterations 1 and 10, every 50 and around three "
        "checkpoint saves; allocated memory is the same at every report (healthy).",
        None,
    )


# ==========================================================================
# (b) Megatron-DeepSpeed + DeepSpeed 0.15.4 ZeRO-2 (no pipeline): a leak until CUDA OOM
# ==========================================================================

MDS = "/workspace/Megatron-DeepSpeed"
SITE = "/usr/local/lib/python3.10/dist-packages"
A100_40_GIB = 39.39  # torch.cuda.get_device_properties().total_memory of an A100-SXM4-40GB, in GiB


def build_mds_zero2_leak_oom() -> Sample:
    log = DSLog("megatron_deepspeed_zero2_leak_oom", datetime(2024, 12, 3, 21, 40, 7, 214000))
    rng = log.rng
    at = log.clock.at
    host = HostMemory(total_bytes=1_007 * GIB + 812_000_000)
    script = [
        "pretrain_gpt.py",
        "--tensor-model-parallel-size",
        "1",
        "--pipeline-model-parallel-size",
        "1",
        "--no-pipeline-parallel",
        "--num-layers",
        "24",
        "--hidden-size",
        "2048",
        "--seq-length",
        "2048",
        "--micro-batch-size",
        "4",
        "--global-batch-size",
        "256",
        "--train-iters",
        "2000",
        "--log-interval",
        "10",
        "--bf16",
        "--deepspeed",
        "--deepspeed_config",
        "ds_config_zero2.json",
        "--zero-stage",
        "2",
    ]
    t = _launcher(log, 0.0, 8, "/usr/bin/python", script, 31400)
    log.line(t, "using world size: 8, data-parallel-size: 8, sequence-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1 ")
    t += 8.2
    log.line(t, mg.print_datetime("after megatron is initialized", at(t), micro=False))
    log.line(t, "building GPT model ...")
    used = 61.3
    see_memory_usage(log, t, "main", "Before Building Model", (0.0, 0.0, 0.0, 0.0), host, used, where=(781, 782, 789))
    t += 3.9
    see_memory_usage(log, t, "main", "After Building Model", (2.46, 2.46, 2.59, 3.0), host, used + 4.1, where=(781, 782, 789))
    log.line(t, mg.parameters_on_rank(0, 0, 1_315_577_856))
    t = _zero2_init(
        log,
        t + 2.0,
        "0.15.4",
        "torch.bfloat16",
        [(2.46, 2.46, 2.59, 3.0), (7.37, 7.37, 7.58, 8.0), (7.37, 7.37, 7.58, 8.0)],
        host,
        used + 4.3,
        logged=True,
        basic="FusedAdam",
        lr0=0.0,
        moms=[(0.9, 0.95), (0.9, 0.95)],
    )
    log.line(t, mg.print_datetime("after model, optimizer, and learning rate scheduler are built", at(t), micro=False))
    log.line(t, "> building train, validation, and test datasets ...")
    t += 12.6
    log.line(t, mg.print_datetime("after dataloaders are built", at(t), micro=False))
    log.line(t, "done with setup ...")
    log.line(t, "training ...")
    log.line(t, mg.print_datetime("before the start of training step", at(t), micro=False))

    # Something keeps ~54 MiB of activations alive per iteration: allocated memory grows in a
    # straight line on every rank until one runs out of its 40 GB at iteration 433.
    train_iters, gbs, mbs, seq = 2000, 256, 4, 2048
    gas = gbs // (mbs * 8)
    base, leak, activations = 12.28, 0.0531, 5.52
    peak, loss, timed, elapsed = 0.0, 10.98, 0.0, 0.0
    oom_at = 433
    for it in range(1, oom_at):
        dt = rng.uniform(2.91, 3.02)
        t += dt
        elapsed += dt
        if it >= 3:
            timed += dt
        alloc = base + leak * it + rng.uniform(0.0, 0.004)
        peak = max(peak, alloc + activations + rng.uniform(0.0, 0.08))
        loss = max(2.9, loss - 0.021) + rng.gauss(0, 0.015)
        if it % 10:
            continue
        lr = 1.5e-4 * min(1.0, it / 200)
        log.line(
            t,
            log.ds(t, "INFO", "logging.py:96:log_dist", ds.progress(step=it, skipped=0, lr=[lr], mom=[(0.9, 0.95)])),
            reading("main", it, lr=float(f"{lr!r}")),
        )
        text, values = throughput_line(0, it * gas, it, gbs * (it - 2) / timed, gbs / dt, alloc, peak)
        log.line(t + 0.002, log.ds(t + 0.002, "INFO", "timer.py:264:stop", text), reading("main", it, **values))
        samples_per_sec = gbs * 10 / elapsed
        text = mg.mds_iteration_line(
            iteration=it,
            train_iters=train_iters,
            consumed_samples=it * gbs,
            consumed_tokens=it * gbs * seq,
            elapsed_ms=elapsed * 100,
            lr=lr,
            global_batch_size=gbs,
            losses={"lm loss": loss},
            loss_scale=None,
            grad_norm=None,
            num_zeros=None,
            seq_len=seq,
            skipped=0,
            nan=0,
            samples_per_sec=samples_per_sec,
            tgs=samples_per_sec * seq / 8,
            tflops=samples_per_sec * seq * 6 * 1.316e9 * 1.27 / 8 / 1e12,
        )
        log.line(t + 0.01, text, iteration_truth(text))
        elapsed = 0.0
        if it == 10:  # report_memory once, at the first log interval with lr > 0 (data-parallel rank 0 only)
            state = {
                "allocated": round(alloc * GIB / 512) * 512,
                "max_allocated": round(peak * GIB / 512) * 512,
                "reserved": round((peak + 0.42) * GIB / 2 / MIB) * 2 * MIB,
            }
            state["max_reserved"] = state["reserved"]
            text, rec = memory_report("(after 10 iterations)", 10, 0, state, two_decimals=False)
            log.line(t + 0.02, text, rec)
    # Iteration 433: the forward pass of one rank needs 1.5 GiB more than its device has left.
    t += 1.9
    oom_rank = 5
    frames = [
        (f"{MDS}/pretrain_gpt.py", 356, "<module>", "pretrain("),
        (f"{MDS}/megatron/training.py", 227, "pretrain", "iteration = train(forward_step_func,"),
        (f"{MDS}/megatron/training.py", 1281, "train", "train_step(forward_step_func,"),
        (f"{MDS}/megatron/training.py", 716, "train_step", "losses_reduced = forward_backward_func("),
        (f"{MDS}/megatron/core/pipeline_parallel/schedules.py", 391, "forward_backward_no_pipelining", "output_tensor = forward_step("),
        (f"{MDS}/megatron/core/pipeline_parallel/schedules.py", 217, "forward_step", "output_tensor, loss_func = forward_step_func(data_iterator, model)"),
        (f"{MDS}/pretrain_gpt.py", 263, "forward_step", "output_tensor, other_losses = model(tokens, position_ids, attention_mask,"),
        (f"{SITE}/torch/nn/modules/module.py", 1747, "_call_impl", "return forward_call(*args, **kwargs)"),
        (f"{SITE}/deepspeed/runtime/engine.py", 1899, "forward", "loss = self.module(*inputs, **kwargs)"),
        (f"{MDS}/megatron/model/gpt_model.py", 143, "forward", "lm_output = self.language_model("),
        (f"{MDS}/megatron/model/transformer.py", 1022, "forward", "attention_probs = self.scale_mask_softmax(attention_scores,"),
    ]
    log.line(t, "Traceback (most recent call last):")
    for line in frame_lines(frames):
        log.line(t, line)
    oom = pytorch.cuda_oom(
        tried="1.50 GiB", gpu=oom_rank, capacity_gib=A100_40_GIB, free="1.07 GiB", in_use="38.31 GiB", allocated="36.62 GiB", unallocated="1.18 GiB"
    )
    # The error is also the traceback's final line, and the launcher's kills are crash notices.
    log.line(t, oom, events=ev("oom", tried=1.5, capacity=A100_40_GIB, free=1.07) + ev("exception"))
    t += 1.4
    log.line(t, log.ds(t, "INFO", "launch.py:319:sigkill_handler", f"Killing subprocess {31400 + oom_rank}"), events=ev("crash"))
    for rank in range(8):
        if rank != oom_rank:
            log.line(t, log.ds(t, "INFO", "launch.py:319:sigkill_handler", f"Killing subprocess {31400 + rank}"), events=ev("crash"))
    argv = ["/usr/bin/python", "-u", script[0], f"--local_rank={oom_rank}", *script[1:]]
    log.line(t + 0.3, log.ds(t + 0.3, "ERROR", "launch.py:325:sigkill_handler", f"{argv} exits with return code = 1"), events=ev("process_exit", return_code=1))
    return log.sample(
        "megatron/mds_zero2_leak_oom.log",
        "Megatron-DeepSpeed GPT 1.3B with DeepSpeed 0.15.4 ZeRO-2 (--no-pipeline-parallel, bf16, 8x A100 40GB): "
        "DeepSpeed's ThroughputTimer shows allocated memory growing ~0.53 GiB every 10 iterations, Megatron's "
        "report_memory is printed once (rank 0, iteration 10), and a rank runs out of memory at iteration 433.",
        A100_40_GIB,
    )


# ==========================================================================
# (c) Megatron-LM core_v0.11 bf16: the loss turns NaN and vanishes from the line
# ==========================================================================


def build_core_v011_bf16_nan() -> Sample:
    log = DSLog("megatron_core_v011_bf16_nan", datetime(2025, 3, 21, 6, 14, 52, 901000))
    rng = log.rng
    at = log.clock.at
    t = 0.0
    torchrun_banner(log, t, 88412)
    t += 7.7
    log.line(
        t,
        "using world size: 8, data-parallel size: 2, context-parallel size: 1, hierarchical context-parallel "
        "sizes: None, tensor-model-parallel size: 4, pipeline-model-parallel size: 1",
    )
    t += 28.0
    log.line(t, mg.print_datetime("after megatron is initialized", at(t), micro=False))
    log.line(t, "> building GPT model ...")
    for rank in rng.sample(range(4), 4):  # data-parallel rank 0: the four tensor-parallel ranks of replica 0
        log.line(t + rng.uniform(0, 0.2), mg.parameters_on_rank(rank, 0, 1_873_387_520))
    t += 11.3
    log.line(t, mg.print_datetime("after model, optimizer, and learning rate scheduler are built", at(t), micro=False))
    t += 4.0
    log.line(t, mg.print_datetime("after dataloaders are built", at(t), micro=False))
    log.line(t, "done with setup ...")
    log.line(t, "training ...")
    log.line(t, mg.print_datetime("before the start of training step", at(t), micro=False))
    train_iters, gbs, diverge = 20000, 512, 470
    loss, grad = 10.88, 9.0
    for it in range(10, 701, 10):
        dt = rng.uniform(4.31, 4.42)
        t += dt * 10
        lr = 2.5e-4 * min(1.0, it / 500)
        if it < diverge:
            loss = max(3.6, loss - 0.16 * math.exp(-it / 200)) + rng.gauss(0, 0.01)
            grad = max(0.9, grad * 0.96) + abs(rng.gauss(0, 0.08))
            if it >= diverge - 40:  # the spikes before the blow-up (the learning rate nears its peak)
                grad *= rng.uniform(3.5, 8.0)
                loss += rng.uniform(0.05, 0.3)
        shown_loss = loss if it < diverge else float("nan")
        text = mg.iteration_line(
            iteration=it,
            train_iters=train_iters,
            elapsed_ms=dt * 1000,
            lr=lr,
            global_batch_size=gbs,
            consumed_samples=it * gbs,
            losses={"lm loss": shown_loss},
            loss_scale=1.0,
            grad_norm=grad if it < diverge else float("nan"),
            num_zeros=0,
            throughput=rng.uniform(361.0, 366.0),
            skipped=0,
            nan=0,
            time=at(t),
            micro=False,
            keep="gt",
        )
        log.line(t, text, iteration_truth(text))
        if it == 10:  # report_memory once, at the first log interval (core_v0.11: no lr condition)
            # report_theoretical_memory, core_v0.7 .. v0.14 wording (no activation estimate without SP + selective recompute).
            for line in (
                "Number of parameters in transformer layers in billions:  6.98",
                "Number of parameters in embedding layers in billions: 1.05",
                "Total number of parameters in billions: 8.03",
                "Number of parameters in most loaded shard in billions: 2.0073",
                "Theoretical memory footprints: weight and optimizer=22970.51 MB",
            ):
                log.line(t, line)
            for rank in rng.sample(range(4), 4):
                state = {
                    "allocated": 23_731_109_376 + rank * 512,
                    "max_allocated": 61_899_902_464 + rank * 1024,
                    "reserved": 69_047_975_936,
                    "max_reserved": 69_047_975_936,
                }
                text, rec = memory_report("(after 10 iterations)", 10, rank, state, two_decimals=False)
                log.line(t + 0.01, text, rec)
    return log.sample(
        "megatron/core_v011_bf16_nan.log",
        "Megatron-LM core_v0.11 Llama-3 8B pretraining (TP4 DP2, bf16; the rerun state machine's NaN check does not "
        "stop the run in its default disabled mode): grad-norm spikes, then from "
        "iteration 470 on the lm loss vanishes from every iteration line (Megatron prints a loss only when it is "
        "above zero) and the grad norm is nan; report_memory is printed once, at iteration 10.",
        None,
    )


SAMPLES: list[Callable[[], Sample]] = [
    build_core_v016_pp_healthy,
    build_mds_zero2_leak_oom,
    build_core_v011_bf16_nan,
]
