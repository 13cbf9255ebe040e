"""DeepSpeed sample logs (bare, under the HF Trainer, and inside Open-Reasoner-Zero's Ray actors)
with ground truth.

Every DeepSpeed, transformers, Ray and loguru line is written by tests.logwriters (deepspeed,
hf_trainer, ray, openrlhf, pytorch), which quote the format strings of
/work/shared/reference/log-formats.md (§2 DeepSpeed + HF Trainer, §3 Ray, §4.3-4.4 OpenRLHF and
Open-Reasoner-Zero) for the version being imitated; tqdm bars are drawn here (`tqdm_bar`). The
numbers are invented but consistent
(see_memory_usage rounds like DeepSpeed: `round(x, 2)` and an integer Max_CA; psutil's percent is
used / total; tqdm bars follow the elapsed time).

Ground truth is what memlog's records table must hold, one record per reading of a (worker, kind,
step):
- each line a parser reads carries a *reading* (its worker, step or None, kind and values);
- in a worker that prints no step at all, the readings marked `ordinal` (HF Trainer / ORZ status
  dicts) are numbered 1, 2, 3... first;
- a reading without a step takes the step of the worker's nearest earlier step-bearing reading,
  or of its first one when it comes before all of them; a worker with no step at all takes the
  source's (any worker's) steps the same way;
- every line is a record of its own: within a (worker, kind, step), the k-th line of one kind (a
  see_memory_usage MA line, a CPU line, a step line...) is that kind's reading k; a source with no
  step at all numbers each worker's lines of a kind 1, 2, 3... as its steps.
``merge_readings`` implements exactly that, independently of memlog, and the test compares.
Events: one per line that carries one, with the fields the specs extract (strings as printed).
"""

from __future__ import annotations

import ast
import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tests.logwriters import deepspeed as ds
from tests.logwriters import hf_trainer as hf
from tests.logwriters import openrlhf, pytorch, ray
from tests.logwriters.python import frame_lines
from tests.logwriters.pytorch import H100_GIB as H100_CAPACITY_GIB

from .common import Clock, Emit, LogDoc, Sample, clamp, merge_readings, reading, seeded_rng

GIB = 1024**3
MEMORY_PHASES = ("Engine before forward", "Engine after forward", "Engine before backward", "Engine after backward", "Engine before step", "Engine after step")


# --------------------------------------------------------------------------
# Lines written by tests.logwriters, with the values they print
# --------------------------------------------------------------------------

_SEE_MEMORY = re.compile(r"MA (\S+) GB +Max_MA (\S+) GB +CA (\S+) GB +Max_CA (\S+) GB")
_SEE_MEMORY_COLUMNS = ("mem_allocated_gib", "mem_peak_allocated_gib", "mem_reserved_gib", "mem_peak_reserved_gib")


def memory_line(ma: float, max_ma: float, ca: float, max_ca: float) -> tuple[str, dict]:
    """see_memory_usage's MA/CA line and its values, read back from the text."""
    text = ds.see_memory_usage(ma=ma, max_ma=max_ma, ca=ca, max_ca=max_ca)
    return text, dict(zip(_SEE_MEMORY_COLUMNS, map(float, _SEE_MEMORY.match(text).groups())))


@dataclass(frozen=True)
class HostMemory:
    """psutil.virtual_memory() of the node, for the `CPU Virtual Memory:` line."""

    total_bytes: int

    def line(self, used_gib: float) -> tuple[str, dict]:
        used_bytes = round(used_gib * GIB)
        used = round(used_bytes / GIB, 2)
        percent = round(100 * used_bytes / self.total_bytes, 1)
        return ds.cpu_virtual_memory(used_gib=used, percent=percent), {"host_mem_used_gib": used}


def format_interval(seconds: float) -> str:
    """tqdm.format_interval."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def tqdm_bar(desc: str, n: int, total: int, elapsed: float) -> str:
    """tqdm's default bar on a non-tty (ncols unknown: a 10-character bar)."""
    frac = n / total
    eighths = int(frac * 10 * 8)
    full, part = divmod(eighths, 8)
    bar = ("█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")).ljust(10)[:10]
    if n == 0 or elapsed <= 0:
        timing = f"{format_interval(elapsed)}<?, ?it/s"
    else:
        per_item = elapsed / n
        rate = f"{per_item:5.2f}s/it" if per_item > 1 else f"{n / elapsed:5.2f}it/s"
        timing = f"{format_interval(elapsed)}<{format_interval(per_item * (total - n))}, {rate}"
    head = f"{desc}: " if desc else ""
    return f"{head}{frac * 100:3.0f}%|{bar}| {n}/{total} [{timing}]"


# --------------------------------------------------------------------------
# The log being written (ground truth: common.reading / merge_readings)
# --------------------------------------------------------------------------


class DSLog:
    """Lines of one log file in order; each physical line an Emit whose `record` is a reading.

    tqdm bars write `\\r` + bar without a newline, so whatever is printed next continues the same
    physical line: `pending` holds that unterminated text.
    """

    def __init__(self, name: str, start: datetime):
        self.rng = seeded_rng(name)
        self.clock = Clock(start)
        self.doc = LogDoc()
        self.pending = ""

    def line(self, t: float, text: str, rec: dict | None = None, events: list[dict] | None = None) -> None:
        self.doc.add(Emit(t, None, self.pending + text, rec, list(events or [])))
        self.pending = ""

    def bar(self, text: str) -> None:
        self.pending += "\r" + text

    def clear_bar(self, width: int) -> None:
        """tqdm.write first clears the bars: `\\r`, spaces over the last bar, `\\r`."""
        self.pending += "\r" + " " * width + "\r"

    def flush(self) -> None:
        """tqdm.close on a bar left on screen ends its line."""
        if self.pending:
            self.doc.add(Emit(0.0, None, self.pending))
            self.pending = ""

    def ds(self, t: float, level: str, where: str, message: str) -> str:
        """DeepSpeed's logger: `[2024-07-10 14:14:51,014] [INFO] [utils.py:801:see_memory_usage] `."""
        return ds.log_line(message, ts=self.clock.asctime(t), level=level, where=where)

    def sample(self, path: str, description: str, capacity_gib: float | None) -> Sample:
        self.flush()
        sample = self.doc.to_sample(path, description, capacity_gib)
        sample.truth.records = merge_readings(sample.truth.records)
        return sample


def ev(kind: str, **fields) -> list[dict]:
    return [{"kind": kind, **fields}]


def throughput_line(epoch: int, micro: int, step: int, avg: float, cur: float, alloc: float, max_alloc: float) -> tuple[str, dict]:
    """ThroughputTimer's line and the memory it prints."""
    text = ds.throughput(epoch=epoch, micro_step=micro, step=step, avg=avg, cur=cur, alloc=alloc, max_alloc=max_alloc)
    return text, {"mem_allocated_gib": float(ds.r2(alloc)), "mem_max_allocated_gib": float(ds.r2(max_alloc))}


def see_memory_usage(
    log: DSLog,
    t: float,
    worker: str,
    label: str,
    mem: tuple[float, float, float, float],
    host: HostMemory,
    used_gib: float,
    *,
    prefix: str = "",
    where: tuple[int, int, int] | None,
    step_rec: bool = True,
) -> None:
    """The three prints of runtime/utils.py see_memory_usage: through the logger (`where` = the
    three line numbers of utils.py) or, from v0.18.3, bare prints (`where` None)."""
    mem_text, mem_values = memory_line(*mem)
    cpu_text, cpu_values = host.line(used_gib)
    texts = (label, mem_text, cpu_text)
    if where is not None:
        texts = tuple(log.ds(t + 0.001 * i, "INFO", f"utils.py:{n}:see_memory_usage", text) for i, (n, text) in enumerate(zip(where, texts)))
    log.line(t, prefix + texts[0])
    log.line(t, prefix + texts[1], reading(worker, **mem_values) if step_rec else None)
    log.line(t, prefix + texts[2], reading(worker, **cpu_values) if step_rec else None)


# ==========================================================================
# (a) Field report 4: Open-Reasoner-Zero, DeepSpeed 0.16.0 ZeRO-3 in Ray actors,
#     allocated memory creeping every 100 optimizer steps until a CUDA OOM
# ==========================================================================

ORZ = "/root/Open-Reasoner-Zero"
SITE = "/usr/local/lib/python3.10/dist-packages"


def ray_prefix(actor: str, pid: int) -> str:
    return ray.actor_prefix(pid, actor)


class OrzRun(DSLog):
    """The Ray driver's output: its own loguru lines plus every actor's lines, Ray-prefixed."""

    def loguru(self, t: float, where: str, message: str, level: str = "INFO") -> str:
        return openrlhf.loguru_line(self.clock.at(t), where, message, level)

    def deduped(self, t: float, actor: str, pids: list[int], text: str, notice: bool = False) -> None:
        """A line every rank prints at once: Ray shows the first copy, then (after its 5 s window)
        the latest copy with `[repeated Nx across cluster]` in green."""
        self.line(t, ray_prefix(actor, pids[0]) + text)
        self.line(t + 5.0, ray_prefix(actor, pids[-1]) + text + ray.repeated(len(pids) - 1, notice))


def _orz_engine_init(run: OrzRun, t: float, actor: str, pids: list[int], host: HostMemory, *, trains: bool, first_notice: bool, lr0: float) -> float:
    """deepspeed.initialize in one model group (rank 0 prints; a few lines from every rank)."""
    rng = run.rng
    worker = f"{actor} pid={pids[0]}"
    p = ray_prefix(actor, pids[0])
    run.deduped(
        t, actor, pids, run.ds(t, "INFO", "real_accelerator.py:219:get_accelerator", "Setting ds_accelerator to cuda (auto detect)"), notice=first_notice
    )
    t += 6.2
    run.deduped(t, actor, pids, run.ds(t, "INFO", "comm.py:652:init_distributed", "cdb=None"))
    t += 5.4
    run.line(
        t,
        p + run.ds(t, "INFO", "logging.py:128:log_dist", ds.version("0.16.0")),
        events=ev("version", framework="DeepSpeed", version="0.16.0", git_hash="unknown", git_branch="unknown"),
    )
    run.line(t + 0.001, p + run.ds(t + 0.001, "INFO", "config.py:733:__init__", "Config mesh_device None world_size = 8"))
    t += 0.4
    if trains:
        for msg in (
            "DeepSpeed Flops Profiler Enabled: False",
            "Using client Optimizer as basic optimizer",
            "Removing param_group that has no 'params' in the basic Optimizer",
            "DeepSpeed Basic Optimizer = DeepSpeedCPUAdam",
            "Creating fp16 ZeRO stage 3 optimizer, MiCS is enabled False, Hierarchical params gather False",
            "Creating torch.bfloat16 ZeRO stage 3 optimizer",
        ):
            t += rng.uniform(0.001, 0.02)
            run.line(t, p + run.ds(t, "INFO", "logging.py:128:log_dist", ds.log_dist(msg)))
    # Device memory grows through the init phases; the host holds the CPU Adam state.
    base = 0.0
    phases = [
        ("Stage 3 initialize beginning", 0.0, 0.0),
        ("DeepSpeedZeRoOffload initialize [begin]", 0.0, 0.0),
        ("DeepSpeedZeRoOffload initialize [end]", 1.74, 1.74),
    ]
    if trains:
        phases += [
            ("Before creating fp16 partitions", 1.74, 0.0),
            ("After creating fp16 partitions: 2", 1.79, 0.05),
            ("Before creating fp32 partitions", 1.79, 0.0),
            ("After creating fp32 partitions", 1.79, 0.0),
            ("Before initializing optimizer states", 1.79, 0.0),
            ("After initializing optimizer states", 1.79, 0.0),
            ("After initializing ZeRO optimizer", 1.81, 0.54),
        ]
    used = {"RefRayActorBase": 151.3, "PolicyRayActorBase": 233.6, "CriticRayActorBase": 312.9}[actor]
    for label, ma, bump in phases:
        t += rng.uniform(0.05, 2.5)
        if label == "Before creating fp16 partitions":
            run.line(t, p + run.ds(t, "INFO", "stage3.py:166:__init__", "Reduce bucket size 500000000"))
            run.line(t, p + run.ds(t, "INFO", "stage3.py:167:__init__", "Prefetch bucket size 50000000"))
        if label == "Before initializing optimizer states":
            used += 83.2  # DeepSpeedCPUAdam: fp32 master + moments of this rank's shard, pinned
        base = max(base, ma)
        ca = ma + (0.56 if ma else 0.0)
        see_memory_usage(run, t, worker, label, (ma, ma + bump, ca, ca + bump * 0.5), host, used + rng.uniform(-0.3, 0.3), prefix=p, where=(781, 782, 789))
    if trains:
        t += 0.8
        for msg in (
            "DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer_Stage3",
            "DeepSpeed using client LR scheduler",
            "DeepSpeed LR Scheduler = <torch.optim.lr_scheduler.LambdaLR object at 0x7f3c2c0b1d50>",
        ):
            run.line(t, p + run.ds(t, "INFO", "logging.py:128:log_dist", ds.log_dist(msg)))
        run.line(
            t,
            p + run.ds(t, "INFO", "logging.py:128:log_dist", ds.progress(step=0, skipped=0, lr=[lr0, lr0], mom=[(0.9, 0.95), (0.9, 0.95)])),
            reading(worker, 0, lr=lr0),
        )
        run.line(t + 0.002, p + run.ds(t + 0.002, "INFO", "config.py:997:print", "DeepSpeedEngine configuration:"))
        for key, value in (
            ("bfloat16_enabled", "True"),
            ("gradient_accumulation_steps", "1"),
            ("gradient_clipping", "1.0"),
            ("memory_breakdown", "False"),
            ("steps_per_print", "100"),
            ("train_batch_size", "8"),
            ("train_micro_batch_size_per_gpu", "1"),
            ("wall_clock_breakdown", "False"),
            ("zero_enabled", "True"),
            ("zero_optimization_stage", "3"),
        ):
            run.line(t + 0.003, p + run.ds(t + 0.003, "INFO", "config.py:1001:print", ds.config_entry(key, value)))
    return t + 3.0


def build_fr4_orz_offload_leak() -> Sample:
    run = OrzRun("fr4_orz_offload_leak", datetime(2025, 2, 27, 8, 10, 41, 227000))
    rng = run.rng
    host = HostMemory(total_bytes=2_015 * GIB + 612_345_678)  # 2 TiB node
    policy_pids = [2841 + i for i in range(8)]
    critic_pids = [2912 + i for i in range(8)]
    ref_pids = [2770 + i for i in range(8)]
    vllm_pids = [2690 + i for i in range(8)]
    policy, critic = f"PolicyRayActorBase pid={policy_pids[0]}", f"CriticRayActorBase pid={critic_pids[0]}"

    # ---- driver start, config dump, Ray and vLLM start-up ------------------
    run.line(0.0, ray.driver_log("2025-02-27 08:10:41,227", "worker.py:1821", ray.started_local()))
    config = (
        "PPOExpConfig(total_num_nodes=8, ref_num_nodes=8, actor_num_nodes=8, critic_num_nodes=8, "
        "colocate_all=True, vllm_num_engines=8, zero_stage=3, adam_offload=True, "
        "pretrain='/models/Qwen2.5-7B', actor_learning_rate=1e-06, critic_learning_rate=5e-06, "
        "num_warmup_steps=50, rollout_batch_size=128, n_samples_per_prompt=16, "
        "policy_update_steps=12, critic_update_steps=12, micro_train_batch_size=1, "
        "packing_max_len=16384, generate_max_len=8000, num_episodes=10)"
    )
    run.line(1.2, run.loguru(1.2, "__main__:<module>:229", config))
    t = 14.0
    run.line(
        t,
        ray_prefix("LLMActor", vllm_pids[0]) + "INFO 02-27 08:10:55 config.py:510] This model supports multiple "
        "tasks: {'generate', 'embed', 'reward', 'score', 'classify'}. Defaulting to 'generate'.",
    )
    run.deduped(
        t + 0.4,
        "LLMActor",
        vllm_pids,
        "INFO 02-27 08:10:55 llm_engine.py:234] Initializing an LLM engine "
        "(v0.6.5) with config: model='/models/Qwen2.5-7B', dtype=torch.bfloat16, max_seq_len=16384, "
        "tensor_parallel_size=1, enable_prefix_caching=True",
        notice=False,
    )
    t += 40.0
    run.line(
        t,
        ray_prefix("LLMActor", vllm_pids[3]) + "INFO 02-27 08:11:35 worker.py:266] Memory profiling takes 3.12 "
        "seconds; the current vLLM instance can use total_gpu_memory (79.11GiB) x "
        "gpu_memory_utilization (0.35) = 27.69GiB",
    )

    # ---- model groups: ref, policy, critic (colocate_all: one after another) ----
    t = _orz_engine_init(run, t + 20.0, "RefRayActorBase", ref_pids, host, trains=False, first_notice=True, lr0=0.0)
    t = _orz_engine_init(run, t + 30.0, "PolicyRayActorBase", policy_pids, host, trains=True, first_notice=False, lr0=0.0)
    t = _orz_engine_init(run, t + 30.0, "CriticRayActorBase", critic_pids, host, trains=True, first_notice=False, lr0=0.0)
    run.line(t, run.loguru(t, "orz.ppo.trainer:build_models:429", "init policy/ref/critic/reward models done"))
    t += 8.0
    run.line(t, run.loguru(t, "orz.ppo.trainer:train:64", "Create vllm engine gourps done."))
    t += 21.3
    run.line(t, run.loguru(t, "orz.ppo.trainer:train:66", "Sync actor weights to vllm engines, time cost: 21.31s"))
    t += 3.1
    run.line(t, run.loguru(t, "orz.ppo.trainer:train:70", "Offload policy model to cpu, time cost: 3.08s"))

    # ---- PPO iterations -----------------------------------------------------
    updates_per_iteration = 12
    iterations_per_episode = 120
    iterations = 200  # the 201st dies
    steps_per_print = 100
    warmup = 50
    lr_policy, lr_critic = 1e-06, 5e-06
    # The leak: each print of the policy's ThroughputTimer shows more allocated memory; the
    # running peak (MaxMemAllocated) rides on top of it. The critic creeps more slowly.
    policy_alloc = lambda step: 6.12 + 1.35 * (step / 100 - 1) + rng.gauss(0, 0.04)
    critic_alloc = lambda step: 5.40 + 0.62 * (step / 100 - 1) + rng.gauss(0, 0.03)
    peaks = {policy: 0.0, critic: 0.0}
    episode_start, ep = t, 0
    policy_step = critic_step = 0

    def lr_at(base: float, step: int) -> float:
        return base * min(1.0, step / warmup)  # constant_with_warmup (LambdaLR)

    def train_group(t: float, actor: str, pids: list[int], worker: str, step0: int, base_lr: float, alloc: Callable[[int], float], activations: float) -> float:
        p = ray_prefix(actor, pids[0])
        for step in range(step0 + 1, step0 + updates_per_iteration + 1):
            t += rng.uniform(3.5, 4.6)
            if step % steps_per_print:
                continue
            lr = lr_at(base_lr, step)
            run.line(
                t,
                p + run.ds(t, "INFO", "logging.py:128:log_dist", ds.progress(step=step, skipped=0, lr=[lr, lr], mom=[(0.9, 0.95), (0.9, 0.95)])),
                reading(worker, step, lr=lr),
            )
            now = alloc(step)
            peaks[worker] = max(peaks[worker], now + activations + rng.uniform(0, 0.6))
            avg = 8 / rng.uniform(3.9, 4.2)
            text, values = throughput_line(0, step, step, avg, 8 / rng.uniform(3.6, 4.7), now, peaks[worker])
            run.line(t + 0.003, p + run.ds(t + 0.003, "INFO", "timer.py:264:stop", text), reading(worker, step, **values))
            if actor == "PolicyRayActorBase" and step >= 2200 and rng.random() < 0.7:
                n = rng.randint(1, 4)
                run.line(
                    t + 0.004, p + run.ds(t + 0.004, "WARNING", "stage3.py:2114:step", ds.cache_flushes(n)), events=ev("alloc_retries", new_retries=str(n))
                )
        return t

    for it in range(1, iterations + 2):
        if (it - 1) % iterations_per_episode == 0:
            ep += 1
            episode_start = t
            run.bar(tqdm_bar(f"Episode [{ep}/10]", 0, iterations_per_episode, 0.0))
        t += rng.uniform(88, 104)
        run.line(t, run.loguru(t, "orz.ppo.trainer:make_experience:214", f"Generate sequences via vllm engines, time cost: {rng.uniform(88, 104):.2f}s"))
        rewards = clamp(0.12 + 0.0011 * it + rng.gauss(0, 0.03), 0.0, 1.0)
        kl = abs(rng.gauss(0.0004 + 0.000004 * it, 0.0002))
        length = 1150 + 2.1 * it + rng.gauss(0, 40)
        t += rng.uniform(40, 48)
        run.line(
            t,
            run.loguru(
                t,
                "orz.ppo.trainer:make_experience:330",
                f"avg_raw_rewards: {rewards!r}, avg_kl: {kl!r}, avg_response_length: {length!r}, avg_orm_score: 0.0, avg_custom_rewards: {rewards!r}",
            ),
        )
        t0 = t
        t = train_group(t + 6.0, "CriticRayActorBase", critic_pids, critic, critic_step, lr_critic, critic_alloc, 14.8)
        critic_step += updates_per_iteration
        t += 4.0
        run.line(t, run.loguru(t, "orz.ppo.trainer:train:132", f"Critic model training, time cost: {t - t0:.2f}s"))
        t0 = t
        if it == iterations + 1:
            break
        t = train_group(t + 6.0, "PolicyRayActorBase", policy_pids, policy, policy_step, lr_policy, policy_alloc, 21.7)
        policy_step += updates_per_iteration
        t += 9.0
        run.line(t, run.loguru(t, "orz.ppo.trainer:train:136", f"Actor model training, time cost: {t - t0:.2f}s"))
        status = {
            "policy_loss": rng.gauss(-0.002, 0.009),
            "actor_lr": lr_at(lr_policy, policy_step),
            "clip_ratio": abs(rng.gauss(0.0012, 0.0004)),
            "entropy": 0.62 - 0.0004 * it + rng.gauss(0, 0.01),
            "kl": kl,
            "response_length": length,
            "total_length": length + 188.5 + rng.gauss(0, 5),
            "return": rewards,
            "policy_update_steps": float(updates_per_iteration),
        }
        run.line(
            t + 0.01,
            run.loguru(t + 0.01, "orz.ppo.trainer:train:150", repr(status)),
            reading("main", ordinal=True, loss=status["policy_loss"], lr=status["actor_lr"]),
        )
        done = (it - 1) % iterations_per_episode + 1
        run.bar(tqdm_bar(f"Episode [{ep}/10]", done, iterations_per_episode, t - episode_start))

    # ---- iteration 201: the policy's backward runs out of device memory -------
    t += 40.0
    frames = [
        (f"{ORZ}/playground/orz_7b_ppo.py", 245, "<module>", "asyncio.run(exp.run())"),
        ("/usr/lib/python3.10/asyncio/runners.py", 44, "run", "return loop.run_until_complete(main)"),
        ("/usr/lib/python3.10/asyncio/base_events.py", 649, "run_until_complete", "return future.result()"),
        (f"{ORZ}/orz/exps/examples/ppo/ppo_base_exp.py", 211, "run", "await self.trainer.train()"),
        (f"{ORZ}/orz/ppo/trainer.py", 136, "train", "status = await self.ppo_local_train_policy(policy_buffers, self.global_step)"),
        (f"{ORZ}/orz/ppo/trainer.py", 486, "ppo_local_train_policy", "status = await self.policy_model.async_ppo_train(global_steps, replay_buffers)"),
        (f"{ORZ}/orz/ppo/actors.py", 96, "async_ppo_train", "return await asyncio.gather("),
    ]
    remote = [
        (f"{ORZ}/orz/ppo/actors.py", 401, "ppo_train", "status = self.training_step(experience, global_steps, local_step, accumulation_steps)"),
        (f"{ORZ}/orz/ppo/actors.py", 510, "training_step", "self.strategy.backward(loss, self.model, self.optimizer)"),
        (f"{ORZ}/orz/ppo/openrlhf_deepspeed.py", 128, "backward", "model.backward(loss)"),
        (f"{SITE}/deepspeed/utils/nvtx.py", 18, "wrapped_fn", "ret_val = func(*args, **kwargs)"),
        (f"{SITE}/deepspeed/runtime/engine.py", 2020, "backward", "self.optimizer.backward(loss, retain_graph=retain_graph)"),
        (f"{SITE}/deepspeed/utils/nvtx.py", 18, "wrapped_fn", "ret_val = func(*args, **kwargs)"),
        (f"{SITE}/deepspeed/runtime/zero/stage3.py", 2259, "backward", "self.loss_scaler.backward(loss.float(), retain_graph=retain_graph)"),
        (f"{SITE}/deepspeed/runtime/fp16/loss_scaler.py", 63, "backward", "scaled_loss.backward(retain_graph=retain_graph)"),
        (f"{SITE}/torch/_tensor.py", 581, "backward", "torch.autograd.backward("),
        (f"{SITE}/torch/autograd/__init__.py", 347, "backward", "_engine_run_backward("),
        (
            f"{SITE}/torch/autograd/graph.py",
            825,
            "_engine_run_backward",
            "return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
        ),
    ]
    oom = pytorch.cuda_oom(
        tried="4.63 GiB",
        gpu=0,
        capacity_gib=H100_CAPACITY_GIB,
        free="2.85 GiB",
        processes=[(2771, "9.42 GiB"), (2690, "1.12 GiB")],
        in_use="65.61 GiB",
        allocated="39.52 GiB",
        unallocated="23.71 GiB",
    )
    run.line(t, "Traceback (most recent call last):")
    for line in frame_lines(frames):
        run.line(t, line)
    raised = ray.task_error(
        "OutOfMemoryError",
        ray.task_ref(
            "PolicyRayActorBase.ppo_train",
            pid=policy_pids[0],
            ip="10.0.0.12",
            actor_id="8b1f0e2c9a6d4e1f7c3b5a0d01000000",
            repr_="orz.ppo.actors.PolicyRayActorBase object at 0x7f3c2c1e5f90",
        ),
    )
    run.line(t, raised)  # the local traceback's final line; the remote one Ray chains below it (headless) ends the process
    for line in frame_lines(remote):
        run.line(t, line)
    run.line(t, oom, events=ev("exception", exception=oom) + ev("oom", tried="4.63 GiB", capacity=f"{H100_CAPACITY_GIB:.2f} GiB", free="2.85 GiB"))
    return run.sample(
        "deepspeed/fr4_orz_offload_leak.log",
        "Open-Reasoner-Zero (Qwen2.5-7B PPO, colocate_all) on DeepSpeed 0.16.0 ZeRO-3 with CPU Adam inside Ray "
        "actors: the policy's ThroughputTimer MemAllocated rises ~1.35 GiB every 100 optimizer steps for 24 prints "
        "(the critic's ~0.6 GiB), allocator cache-flush warnings appear near the end, and iteration 201 dies with "
        "a CUDA OOM in the policy's backward (23.71 GiB reserved but unallocated).",
        H100_CAPACITY_GIB,
    )


# ==========================================================================
# Plain `deepspeed` launcher runs (one stream, every rank unprefixed)
# ==========================================================================


def _launcher(log: DSLog, t: float, n_gpus: int, python: str, script: list[str], first_pid: int) -> float:
    """deepspeed/launcher/runner.py and launch.py start-up lines (INFO, DeepSpeed <= 0.17.5)."""
    ranks = list(range(n_gpus))
    world = base64.urlsafe_b64encode(json.dumps({"localhost": ranks}).encode()).decode()
    log.line(t, log.ds(t, "INFO", "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)"))
    t += 2.8
    log.line(t, log.ds(t, "WARNING", "runner.py:212:fetch_hostfile", "Unable to find hostfile, will proceed with training with local resources only."))
    log.line(
        t,
        log.ds(
            t,
            "INFO",
            "runner.py:585:main",
            f"cmd = {python} -u -m deepspeed.launcher.launch --world_info={world} --master_addr=127.0.0.1 "
            f"--master_port=29500 --enable_each_rank_log=None {' '.join(script)}",
        ),
    )
    t += 2.1
    log.line(t, log.ds(t, "INFO", "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)"))
    t += 2.0
    for where, msg in (
        ("launch.py:146:main", f"WORLD INFO DICT: {{'localhost': {ranks}}}"),
        ("launch.py:152:main", f"nnodes=1, num_local_procs={n_gpus}, node_rank=0"),
        ("launch.py:163:main", f"global_rank_mapping=defaultdict(<class 'list'>, {{'localhost': {ranks}}})"),
        ("launch.py:164:main", f"dist_world_size={n_gpus}"),
        ("launch.py:168:main", f"Setting CUDA_VISIBLE_DEVICES={','.join(map(str, ranks))}"),
        ("launch.py:256:main", None),
    ):
        if msg is not None:
            log.line(t, log.ds(t, "INFO", where, msg))
            continue
        for rank in ranks:
            argv = [python, "-u", script[0], f"--local_rank={rank}", *script[1:]]
            log.line(t, log.ds(t, "INFO", where, f"process {first_pid + rank} spawned with command: {argv}"))
    t += 4.5
    for _ in ranks:
        t += log.rng.uniform(0.01, 0.3)
        log.line(t, log.ds(t, "INFO", "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)"))
    t += 3.0
    for _ in ranks:
        t += log.rng.uniform(0.001, 0.05)
        log.line(t, log.ds(t, "INFO", "comm.py:637:init_distributed", "cdb=None"))
    log.line(t, log.ds(t, "INFO", "comm.py:668:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl"))
    return t + 1.0


def _zero2_init(
    log: DSLog,
    t: float,
    version: str,
    dtype: str,
    states: list[tuple[float, float, float, float]],
    host: HostMemory,
    used: float,
    *,
    logged: bool,
    basic: str,
    lr0: float,
    moms: list,
) -> float:
    """deepspeed.initialize with ZeRO stage 1/2: log_dist lines and the three forced see_memory_usage calls.

    `logged` False: DeepSpeed >= 0.17.6 (INFO silent) and >= 0.18.3 (see_memory_usage printed bare)."""
    info = lambda where, msg: log.line(t, log.ds(t, "INFO", where, msg)) if logged else None
    if logged:
        log.line(
            t,
            log.ds(t, "INFO", "logging.py:96:log_dist", ds.version(version)),
            events=ev("version", framework="DeepSpeed", version=version, git_hash="unknown", git_branch="unknown"),
        )
    info("logging.py:96:log_dist", ds.log_dist("DeepSpeed Flops Profiler Enabled: False"))
    info("logging.py:96:log_dist", ds.log_dist("Using DeepSpeed Optimizer param name adamw as basic optimizer"))
    info("logging.py:96:log_dist", ds.log_dist("Removing param_group that has no 'params' in the basic Optimizer"))
    info("logging.py:96:log_dist", ds.log_dist(f"DeepSpeed Basic Optimizer = {basic}"))
    info("logging.py:96:log_dist", ds.log_dist(f"Creating {dtype} ZeRO stage 2 optimizer"))
    for n, msg in (
        (148, "Reduce bucket size 200000000"),
        (149, "Allgather bucket size 200000000"),
        (150, "CPU Offload: False"),
        (151, "Round robin gradient partitioning: False"),
    ):
        info(f"stage_1_and_2.py:{n}:__init__", msg)
    where = (781, 782, 789) if logged else None
    for label, mem in zip(("Before initializing optimizer states", "After initializing optimizer states", "After initializing ZeRO optimizer"), states):
        t += log.rng.uniform(0.2, 1.5)
        see_memory_usage(log, t, "main", label, mem, host, used + log.rng.uniform(-0.2, 0.2), where=where)
        if label == "After initializing optimizer states":
            info("stage_1_and_2.py:543:__init__", "optimizer state initialized")
    t += 0.3
    info("logging.py:96:log_dist", ds.log_dist("DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer"))
    info("logging.py:96:log_dist", ds.log_dist("DeepSpeed using client LR scheduler"))
    info("logging.py:96:log_dist", ds.log_dist("DeepSpeed LR Scheduler = <torch.optim.lr_scheduler.LambdaLR object at 0x7f6e1c2b7a90>"))
    if logged:
        log.line(t, log.ds(t, "INFO", "logging.py:96:log_dist", ds.progress(step=0, skipped=0, lr=[lr0, lr0], mom=moms)), reading("main", 0, lr=lr0))
        info("config.py:997:print", "DeepSpeedEngine configuration:")
    return t + 0.5


# ==========================================================================
# (b) memory_breakdown: reserved (CA) climbs while allocated (MA) is flat
# ==========================================================================


def build_memory_breakdown_fragmentation() -> Sample:
    log = DSLog("memory_breakdown_fragmentation", datetime(2024, 8, 14, 9, 12, 3, 118000))
    rng = log.rng
    host = HostMemory(total_bytes=1_007 * GIB + 812_000_000)
    t = _launcher(log, 0.0, 8, "/usr/bin/python3", ["train.py", "--deepspeed", "ds_config.json"], 41201)
    used = 96.2
    base, grads = 23.53, 0.78  # bf16 params + fp32 master/Adam shard; this rank's gradient partition
    t = _zero2_init(
        log,
        t + 6.0,
        "0.14.4",
        "torch.bfloat16",
        [(12.57, 12.57, 12.79, 13.0), (21.99, 22.41, 22.26, 22.0), (21.99, 21.99, 22.26, 22.0)],
        host,
        used,
        logged=True,
        basic="FusedAdam",
        lr0=0.0,
        moms=[(0.9, 0.999), (0.9, 0.999)],
    )
    for key, value in (
        ("memory_breakdown", "True"),
        ("steps_per_print", "1"),
        ("train_batch_size", "64"),
        ("zero_optimization_stage", "2"),
        ("wall_clock_breakdown", "False"),
    ):
        log.line(t, log.ds(t, "INFO", "config.py:1001:print", ds.config_entry(key, value)))

    # Reserved memory only grows: batches of varying sequence length leave the caching allocator's
    # segments fragmented, so a longer batch later needs new segments although live memory is the same.
    reserved = 37.96
    steps, warmup, peak_lr = 70, 10, 2e-05
    elapsed = 0.0
    for step in range(1, steps + 1):
        activations = rng.uniform(6.0, 13.6)
        grown = reserved + (rng.uniform(0.2, 0.9) if step > 1 and rng.random() < 0.42 else 0.0)
        calls = [  # (MA, Max_MA, CA, peak CA) per phase, GiB
            (base, base + 0.41, reserved, reserved),
            (base + activations, base + activations + 0.93, grown, grown),
            (base + activations, base + activations, grown, grown),
            (base + grads, base + activations + grads + 3.1, grown, grown),
            (base + grads, base + grads, grown, grown),
            (base, base + grads + 0.42, grown, grown),
        ]
        reserved = grown
        dt = 4.2 + activations * 0.09 + rng.uniform(-0.1, 0.1)
        for i, (label, mem) in enumerate(zip(MEMORY_PHASES, calls)):
            tc = t + dt * (0.0, 0.35, 0.36, 0.9, 0.91, 0.99)[i]
            if label == "Engine after step":
                lr = peak_lr * min(1.0, step / warmup)
                log.line(
                    tc,
                    log.ds(tc, "INFO", "logging.py:96:log_dist", ds.progress(step=step, skipped=0, lr=[lr, lr], mom=[(0.9, 0.999), (0.9, 0.999)])),
                    reading("main", step, lr=lr),
                )
                if step >= 3:  # ThroughputTimer starts timing at its third step
                    elapsed += dt
                    text, values = throughput_line(0, step, step, 64 * (step - 2) / elapsed, 64 / dt, base, base + grads + 0.42)
                    log.line(tc + 0.002, log.ds(tc + 0.002, "INFO", "timer.py:259:stop", text), reading("main", step, **values))
            see_memory_usage(log, tc + 0.004, "main", label, mem, host, used + rng.uniform(-0.35, 0.35), where=(781, 782, 789))
        t += dt
    for rank in range(8):
        t += rng.uniform(0.5, 3.0)
        log.line(t, log.ds(t, "INFO", "launch.py:351:main", ds.launcher_exit(41201 + rank)))
    return log.sample(
        "deepspeed/memory_breakdown_fragmentation.log",
        'DeepSpeed 0.14.4 ZeRO-2 bf16 on 8 GPUs with "memory_breakdown": true and steps_per_print 1: '
        "see_memory_usage six times per step plus `[Rank 0] step=N` and ThroughputTimer lines; allocated "
        "memory (MA, MemAllocated) is the same every step while reserved memory (CA) climbs in jumps from "
        "38 to over 50 GiB: the caching allocator fragments under variable-length batches, no tensor leaks.",
        None,
    )


# ==========================================================================
# (c) HF Trainer (transformers 4.x) + DeepSpeed 0.14.4 ZeRO-2 fp16: healthy
# ==========================================================================


def hf_logger(log: DSLog, t: float, level: str, where: str, msg: str) -> str:
    """transformers' own handler in the example scripts: `[INFO|trainer.py:2243] 2024-10-02 14:01:41,220 >> `."""
    return hf.logger_line(log.clock.asctime(t), level, where, msg)


def build_healthy_hf_trainer() -> Sample:
    log = DSLog("healthy_hf_trainer", datetime(2024, 10, 2, 14, 1, 12, 331000))
    rng = log.rng
    host = HostMemory(total_bytes=503 * GIB + 214_000_000)
    script = [
        "run_clm.py",
        "--model_name_or_path",
        "Qwen/Qwen2.5-1.5B",
        "--dataset_name",
        "wikitext",
        "--dataset_config_name",
        "wikitext-2-raw-v1",
        "--per_device_train_batch_size",
        "4",
        "--do_train",
        "--do_eval",
        "--fp16",
        "--logging_steps",
        "10",
        "--eval_strategy",
        "epoch",
        "--num_train_epochs",
        "2",
        "--output_dir",
        "/tmp/test-clm",
        "--deepspeed",
        "ds_config_zero2.json",
    ]
    t = _launcher(log, 0.0, 4, "/opt/conda/bin/python", script, 5123)
    for rank in range(4):
        log.line(
            t,
            hf.script_line(
                log.clock.at(t + 0.01 * rank),
                "WARNING",
                "__main__",
                f"Process rank: {rank}, device: cuda:{rank}, n_gpu: 1, distributed training: True, 16-bits training: True",
            ),
        )
    log.line(
        t,
        hf.script_line(
            log.clock.at(t),
            "INFO",
            "__main__",
            "Training/evaluation parameters TrainingArguments(_n_gpu=1, "
            "deepspeed=ds_config_zero2.json, eval_strategy=IntervalStrategy.EPOCH, fp16=True, learning_rate=2e-05, "
            "logging_steps=10, lr_scheduler_type=SchedulerType.LINEAR, num_train_epochs=2.0, "
            "per_device_train_batch_size=4, warmup_steps=30, ...)",
        ),
    )
    t += 14.2
    log.line(
        t,
        hf_logger(
            log,
            t,
            "INFO",
            "modeling_utils.py:3678",
            "loading weights file model.safetensors from cache at "
            "/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-1.5B/snapshots/8faed761d45a263340a0528343f099c05c9a4323/model.safetensors",
        ),
    )
    t += 9.6
    used = 61.4
    t = _zero2_init(
        log,
        t,
        "0.14.4",
        "torch.float16",
        [(2.88, 2.88, 3.04, 3.0), (7.2, 7.53, 7.43, 7.0), (7.21, 7.21, 7.43, 7.0)],
        host,
        used,
        logged=True,
        basic="FusedAdam",
        lr0=0.0,
        moms=[[0.9, 0.999], [0.9, 0.999]],
    )
    steps_per_epoch, epochs, logging_steps, spp, warmup, peak_lr = 145, 2, 10, 10, 30, 2e-05
    total = steps_per_epoch * epochs
    for n, msg in (
        (2243, "***** Running training *****"),
        (2244, "  Num examples = 2,318"),
        (2245, "  Num Epochs = 2"),
        (2246, "  Instantaneous batch size per device = 4"),
        (2249, "  Total train batch size (w. parallel, distributed & accumulation) = 16"),
        (2250, "  Gradient Accumulation steps = 1"),
        (2251, f"  Total optimization steps = {total}"),
        (2252, "  Number of trainable parameters = 1,543,714,304"),
    ):
        log.line(t, hf_logger(log, t, "INFO", f"trainer.py:{n}", msg))
    bar_width = len(tqdm_bar("", 0, total, 0.0))
    log.bar(tqdm_bar("", 0, total, 0.0))

    skipped, scale, elapsed, timed = 0, 65536, 0.0, 0.0
    overflow_steps = {1, 2, 3, 5}
    loss = 2.61
    peak_alloc, alloc = 0.0, 7.22
    for step in range(1, total + 1):
        dt = rng.uniform(2.9, 3.3)
        t += dt
        elapsed += dt
        if step in overflow_steps:
            log.line(
                t,
                log.ds(t, "INFO", "loss_scaler.py:183:update_scale", ds.overflow(scale)),
                events=ev("overflow", loss_scale=str(scale), new_loss_scale=str(scale // 2)),
            )
            scale //= 2
            skipped += 1
        applied = step - skipped
        lr = peak_lr * applied / warmup if applied <= warmup else peak_lr * (total - applied) / (total - warmup)
        peak_alloc = max(peak_alloc, alloc + 11.9 + (rng.uniform(0.0, 0.8) if step < 40 else 0.0))
        if step % spp == 0:
            log.line(
                t,
                log.ds(t, "INFO", "logging.py:96:log_dist", ds.progress(step=step, skipped=skipped, lr=[lr, lr], mom=[[0.9, 0.999], [0.9, 0.999]])),
                reading("main", step, lr=lr),
            )
            # epoch stays 0: the Trainer feeds its own dataloader, not DeepSpeed's (which counts epochs).
            text, values = throughput_line(0, step, step, 16 * (step - 2) / (timed or dt), 16 / dt, alloc, peak_alloc)
            log.line(t + 0.002, log.ds(t + 0.002, "INFO", "timer.py:259:stop", text), reading("main", step, **values))
        if step >= 3:
            timed += dt
        log.bar(tqdm_bar("", step, total, elapsed))
        loss = max(1.55, loss - 0.011) + rng.gauss(0, 0.01)
        if step % logging_steps == 0:
            logged = {
                "loss": round(loss + rng.gauss(0, 0.03), 4),
                "grad_norm": abs(rng.gauss(1.1, 0.35)),
                "learning_rate": lr,
                "epoch": round(step / steps_per_epoch, 2),
            }
            log.clear_bar(bar_width)
            log.line(
                t, hf.log_dict(logged), reading("main", None, ordinal=True, loss=logged["loss"], grad_norm=logged["grad_norm"], lr=logged["learning_rate"])
            )
            log.bar(tqdm_bar("", step, total, elapsed))
        if step % steps_per_epoch == 0:
            for n in (0, 10, 20, 37):
                log.bar(tqdm_bar("", n, 37, n * 0.14))
            metrics = {
                "eval_loss": round(loss + 0.21 + rng.gauss(0, 0.01), 4),
                "eval_runtime": round(37 * 0.14 + 0.31, 4),
                "eval_samples_per_second": 25.52,
                "eval_steps_per_second": 6.38,
                "epoch": float(step // steps_per_epoch),
            }
            log.clear_bar(bar_width)
            log.line(t + 5.5, hf.log_dict(metrics), reading("main", None, "validate", loss=metrics["eval_loss"]))
            t += 5.5
            elapsed += 5.5
            log.bar(tqdm_bar("", step, total, elapsed))
    log.clear_bar(bar_width)
    summary = {
        "train_runtime": round(elapsed, 4),
        "train_samples_per_second": round(total * 16 / elapsed, 3),
        "train_steps_per_second": round(total / elapsed, 3),
        "train_loss": 1.8312,
        "epoch": 2.0,
    }
    log.line(t, hf.log_dict(summary))
    # tqdm.write redraws the bar, then on_train_end closes it: one more draw and a newline.
    log.bar(tqdm_bar("", total, total, elapsed))
    log.bar(tqdm_bar("", total, total, elapsed))
    log.flush()
    log.line(t, "***** train metrics *****")
    for key, value in (("epoch", "2.0"), ("total_flos", "25956771GF"), ("train_loss", "1.8312"), ("train_runtime", format_interval(elapsed) + ".31")):
        log.line(t, hf.metrics_line(key, value))
    for rank in range(4):
        t += rng.uniform(0.5, 2.0)
        log.line(t, log.ds(t, "INFO", "launch.py:351:main", ds.launcher_exit(5123 + rank)))
    return log.sample(
        "deepspeed/healthy_hf_trainer.log",
        "transformers 4.x run_clm.py with DeepSpeed 0.14.4 ZeRO-2 fp16 on 4 GPUs (steps_per_print 10, logging_steps "
        "10): four fp16 overflows at the start, then ThroughputTimer MemAllocated flat at 7.22 GiB for 290 steps, "
        "loss dicts after tqdm carriage returns and DeepSpeed lines glued to the progress bar.",
        None,
    )


# ==========================================================================
# (d) transformers 5.x + DeepSpeed 0.18.4: quoted dicts, bare see_memory_usage
# ==========================================================================


def build_healthy_hf5_bare_memory() -> Sample:
    log = DSLog("healthy_hf5_bare_memory", datetime(2026, 1, 20, 10, 11, 9, 512000))
    rng = log.rng
    host = HostMemory(total_bytes=1_511 * GIB + 77_000_000)
    # DeepSpeed >= 0.17.6 logs at WARNING by default: the launcher, version, progress and
    # ThroughputTimer lines are silent; only warnings and the bare see_memory_usage prints remain.
    t = 0.0
    log.line(t, log.ds(t, "WARNING", "runner.py:234:fetch_hostfile", "Unable to find hostfile, will proceed with training with local resources only."))
    t += 21.0
    log.line(t, "`torch_dtype` is deprecated! Use `dtype` instead!")
    used = 88.3
    t = _zero2_init(
        log,
        t + 12.0,
        "0.18.4",
        "torch.bfloat16",
        [(2.32, 2.32, 2.46, 2.0), (4.61, 4.94, 4.71, 5.0), (4.61, 4.61, 4.71, 5.0)],
        host,
        used,
        logged=False,
        basic="FusedAdam",
        lr0=0.0,
        moms=[],
    )
    total, warmup, peak_lr = 60, 6, 1e-05
    bar_width = len(tqdm_bar("", 0, total, 0.0))
    log.bar(tqdm_bar("", 0, total, 0.0))
    base, grads, reserved = 5.87, 0.29, 8.12
    loss, elapsed = 1.93, 0.0
    for step in range(1, total + 1):
        activations = rng.uniform(2.6, 3.4)
        if step == 2:
            reserved = 9.44  # the allocator settles after the first two steps
        calls = [
            (base, base + 0.12, reserved, reserved),
            (base + activations, base + activations + 0.31, reserved, reserved),
            (base + activations, base + activations, reserved, reserved),
            (base + grads, base + activations + grads + 0.84, reserved, reserved),
            (base + grads, base + grads, reserved, reserved),
            (base, base + grads + 0.11, reserved, reserved),
        ]
        dt = rng.uniform(9.6, 10.6)
        for i, (label, mem) in enumerate(zip(MEMORY_PHASES, calls)):
            see_memory_usage(log, t + dt * i / 6, "main", label, mem, host, used + rng.uniform(-0.3, 0.3), where=None)
        t += dt
        elapsed += dt
        log.bar(tqdm_bar("", step, total, elapsed))
        lr = peak_lr * step / warmup if step <= warmup else peak_lr * (total - step) / (total - warmup)
        loss = max(1.05, loss - 0.015) + rng.gauss(0, 0.02)
        # transformers 5.x: every float of the logs formatted f"{v:.4g}" (and quoted by the dict repr).
        text = hf.log_dict_v5({"loss": loss, "grad_norm": abs(rng.gauss(0.9, 0.2)), "learning_rate": lr, "epoch": step / total})
        shown = ast.literal_eval(text)  # the values as printed
        log.clear_bar(bar_width)
        log.line(t, text, reading("main", None, ordinal=True, loss=float(shown["loss"]), grad_norm=float(shown["grad_norm"]), lr=float(shown["learning_rate"])))
        log.bar(tqdm_bar("", step, total, elapsed))
    log.clear_bar(bar_width)
    summary = {
        "train_runtime": elapsed,
        "train_samples_per_second": total * 64 / elapsed,
        "train_steps_per_second": total / elapsed,
        "train_loss": 1.214,
        "epoch": 1.0,
    }
    log.line(t, hf.log_dict_v5(summary))
    # tqdm.write redraws the bar, then on_train_end closes it: one more draw and a newline.
    log.bar(tqdm_bar("", total, total, elapsed))
    log.bar(tqdm_bar("", total, total, elapsed))
    log.flush()
    return log.sample(
        "deepspeed/healthy_hf5_bare_memory.log",
        "transformers 5.x Trainer (logging_steps 1, dict values quoted `.4g` strings) with DeepSpeed 0.18.4 ZeRO-2 "
        "and memory_breakdown: DeepSpeed's INFO lines are silent, see_memory_usage prints bare six times per step, "
        "so the loss dicts number the steps; allocated and reserved memory are flat.",
        None,
    )


SAMPLES: list[Callable[[], Sample]] = [
    build_fr4_orz_offload_leak,
    build_memory_breakdown_fragmentation,
    build_healthy_hf_trainer,
    build_healthy_hf5_bare_memory,
]
