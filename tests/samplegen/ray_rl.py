"""Ray-hosted RL sample logs (EasyR1 and verl, log-formats.md §3 and §4.1-4.2) with ground truth.

Every line is written by tests.logwriters (ray, verl, easyr1), which quote the format strings of
log-formats.md for the version imitated; tqdm bars are drawn here (`tqdm_bar`). The numbers are
invented but consistent (EasyR1's YAML floats go through its own float representer, verl's values
through `pprint.pformat`, memory through the same GiB arithmetic the frameworks use).

The driver output is simulated the way Ray produces it (python/ray/_private/worker.py and
ray_logging): each actor line gets a coloured `(Name pid=N[, ip=A])` prefix (`, ip=` only for
other nodes than the driver's), raylet lines a yellow `(raylet[, ip=A])`, and every worker line
goes through Ray's log deduplicator (`Deduplicator` below: the same line from another process
within 5 s is held back and later printed once, as the latest instance with
` [repeated Nx across cluster]`). Error-channel messages (the raylet's "A worker died") are one
print whose continuation lines carry no prefix; the driver's own traceback has none either.

Ground truth (the parser-test contract), computed here independently of memlog:
- a *reading* is what one printed line says: its worker (memlog's label, e.g.
  `WorkerDict pid=4121, ip=10.0.0.3`), its step or None, and canonical values as printed;
- a reading without a step takes the step its worker logged last before it (the first one if it
  comes before all of them); a worker that never logs a step (a WorkerDict: the Runner/TaskRunner
  logs the steps) takes the step the whole log logged last before it, from any worker;
- every line is a record of its own: within a (worker, kind, step), the k-th line of one kind is
  that kind's reading k. Every record lists every canonical value it has (others are null).
Events: one per line that carries one, with the detail fields the specs extract (strings as
printed) and the worker memlog attributes it to.
"""

from __future__ import annotations

import pprint
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from tests.logwriters import easyr1, ray, verl
from tests.logwriters.python import frame_lines
from tests.logwriters.pytorch import H100_GIB

from .common import Clock, Emit, LogDoc, Sample, Truth, seeded_rng

GIB = 1024**3

# memlog's canonical columns the readings below may carry (memlog/base/columns.py).
VALUE_COLUMNS = (
    "loss",
    "grad_norm",
    "lr",
    "tps",
    "mem_max_allocated_gib",
    "mem_max_reserved_gib",
    "host_mem_used_gib",
    "mem_allocated_gib",
    "mem_reserved_gib",
    "device_mem_used_gib",
    "mem_capacity_gib",
)
EASYR1_METRICS = {  # parsers/easyr1.yaml block_parser metrics
    "actor/pg_loss": "loss",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "lr",
    "perf/throughput": "tps",
    "perf/max_memory_allocated_gb": "mem_max_allocated_gib",
    "perf/max_memory_reserved_gb": "mem_max_reserved_gib",
    "perf/cpu_memory_used_gb": "host_mem_used_gib",
}
VERL_METRICS = EASYR1_METRICS  # same keys in parsers/verl.yaml (perf/mfu/actor is not mapped)


# --------------------------------------------------------------------------
# Ray's driver output: prefixes, deduplication, error messages
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    """A Ray worker process: its actor class (None for a nameless task), pid and node."""

    actor: str | None
    pid: int
    ip: str


NUMBERS = re.compile(r"(\d+|0x[0-9a-fA-F]+)")


def canonical(line: str) -> str:
    """ray_logging._canonicalise_log_line: words holding a digit or hex number dropped."""
    return " ".join(x for x in line.split() if not NUMBERS.search(x))


@dataclass
class Out:
    """One line a worker, the raylet or the driver writes, before Ray prints it."""

    t: float
    seq: int
    origin: str  # "worker" | "raylet" | "driver" | "error"
    text: str
    proc: Proc | None = None
    ip: str | None = None  # raylet lines: the node
    reading: dict | None = None
    events: list[dict] = field(default_factory=list)
    batch: object = None  # lines Ray's log monitor read together from one file (one print)

    @property
    def source(self) -> tuple:
        return (self.proc.ip, self.proc.pid) if self.proc else (self.ip, "raylet")


@dataclass
class _Held:
    timestamp: float
    count: int
    latest: Out
    sources: set


class Deduplicator:
    """ray_logging.LogDeduplicator with its defaults (RAY_DEDUP_LOGS=1, 5 s window)."""

    WINDOW_S = 5.0

    def __init__(self) -> None:
        self.recent: dict[str, _Held] = {}

    def process(self, batch: list[Out]) -> list[tuple[Out, int]]:
        """One batch of lines from one source -> lines to print now: (line, repeated count or 0).
        The batch's own lines come first, then the summaries of what was held back long enough."""
        printed: list[tuple[Out, int]] = []
        now = batch[0].t
        for out in batch:
            key = canonical(out.text)
            if key == "":
                printed.append((out, 0))
            elif key in self.recent:
                held = self.recent[key]
                held.sources.add(out.source)
                if len(held.sources) > 1 or out.origin == "raylet":
                    self.recent[key] = _Held(held.timestamp, held.count + 1, out, held.sources)
                else:
                    printed.append((out, 0))
            else:
                self.recent[key] = _Held(now, 0, out, {out.source})
                printed.append((out, 0))
        while self.recent:
            first = next(iter(self.recent))
            held = self.recent[first]
            if now - held.timestamp < self.WINDOW_S:
                break
            del self.recent[first]
            if held.count > 1:
                printed.append((held.latest, held.count))
                self.recent[first] = _Held(now, 0, held.latest, held.sources)
            elif held.count > 0:
                printed.append((held.latest, 0))
        return printed

    def flush(self) -> list[tuple[Out, int]]:
        printed = [(h.latest, h.count if h.count > 1 else 0) for h in self.recent.values() if h.count > 0]
        self.recent.clear()
        return printed


class RayLog:
    """The lines of one Ray driver's output, in the order Ray prints them."""

    def __init__(self, name: str, start: datetime, driver_ip: str):
        self.rng = seeded_rng(name)
        self.clock = Clock(start)
        self.driver_ip = driver_ip
        self.outs: list[Out] = []
        self.warned = False  # Ray appends its dedup notice to the first summary only

    # ---- writing ------------------------------------------------------------

    def _add(self, out: Out) -> Out:
        out.seq = len(self.outs)
        self.outs.append(out)
        return out

    def worker(self, t: float, proc: Proc, text: str, reading: dict | None = None, events: list[dict] | None = None, batch: object = None) -> None:
        self._add(Out(t, 0, "worker", text, proc=proc, reading=reading, events=list(events or []), batch=batch))

    def raylet(self, t: float, ip: str, text: str, events: list[dict] | None = None) -> None:
        self._add(Out(t, 0, "raylet", text, ip=ip, events=list(events or [])))

    def driver(self, t: float, text: str, events: list[dict] | None = None) -> None:
        """The driver's own stdout/stderr: no prefix, never deduplicated."""
        self._add(Out(t, 0, "driver", text, events=list(events or [])))

    def error(self, t: float, ip: str, lines: list[str], events: list[list[dict]]) -> None:
        """An error-channel message (`print_to_stdstream` with pid "raylet"): one print, only its
        first line prefixed; events[i] belong to lines[i]."""
        for i, line in enumerate(lines):
            self._add(Out(t + i * 1e-6, 0, "error" if i == 0 else "driver", line, ip=ip, events=events[i]))

    def asctime(self, t: float) -> str:
        return self.clock.asctime(t)

    # ---- printing -------------------------------------------------------------

    def label(self, proc: Proc) -> str:
        """memlog's worker label for a process (tables.worker_expr)."""
        name = f"{proc.actor} pid={proc.pid}" if proc.actor else f"pid={proc.pid}"
        return name if proc.ip == self.driver_ip else f"{name}, ip={proc.ip}"

    def _prefix(self, out: Out) -> str:
        if out.proc is not None:
            return ray.actor_prefix(out.proc.pid, out.proc.actor, None if out.proc.ip == self.driver_ip else out.proc.ip)
        return ray.raylet_prefix(None if out.ip == self.driver_ip else out.ip)

    def _emit(self, out: Out, repeated: int) -> Emit:
        text = out.text
        if out.origin in ("worker", "raylet", "error"):
            text = self._prefix(out) + text
        if repeated:
            text += ray.repeated(repeated, notice=not self.warned)
            self.warned = True
        record = None
        if out.reading is not None:
            record = {"worker": self.label(out.proc), **out.reading}
        return Emit(out.t, None, text, record, [dict(e) for e in out.events])

    def render(self) -> LogDoc:
        doc = LogDoc()
        dedup = Deduplicator()
        pending: list[Out] = []  # the batch being collected

        def flush_batch() -> None:
            if pending:
                for line, repeated in dedup.process(pending):
                    doc.add(self._emit(line, repeated))
                pending.clear()

        for out in sorted(self.outs, key=lambda o: (o.t, o.seq)):
            if pending and (out.batch is None or out.batch != pending[-1].batch):
                flush_batch()
            if out.origin in ("worker", "raylet"):
                pending.append(out)
                if out.batch is None:
                    flush_batch()
            else:
                doc.add(self._emit(out, 0))
        flush_batch()
        for line, repeated in dedup.flush():
            doc.add(self._emit(line, repeated))
        return doc

    def sample(self, path: str, description: str, capacity_gib: float | None) -> Sample:
        return to_sample(self.render(), path, description, capacity_gib)


def to_sample(doc: LogDoc, path: str, description: str, capacity_gib: float | None) -> Sample:
    """Like LogDoc.to_sample, but records are the merged readings (see the module docstring)."""
    readings = [(n, item.record) for n, item in enumerate(doc.lines, start=1) if item.record is not None]
    events = []
    for n, item in enumerate(doc.lines, start=1):
        for ev in item.events:
            events.append({"kind": ev["kind"], "rank": None, "line_no": n, **{k: v for k, v in ev.items() if k != "kind"}})
    text = "".join(item.text + "\n" for item in doc.lines)
    return Sample(path, text, Truth(merge_readings(readings), events, capacity_gib), description)


def merge_readings(readings: list[tuple[int, dict]]) -> list[dict]:
    """Readings (line_no, reading) in file order -> records; see the module docstring."""
    own_steps: dict[str, list[tuple[int, int]]] = {}
    all_steps: list[tuple[int, int]] = []
    for line_no, r in readings:
        if r.get("step") is not None:
            own_steps.setdefault(r["worker"], []).append((line_no, r["step"]))
            all_steps.append((line_no, r["step"]))

    def inherited(line_no: int, steps: list[tuple[int, int]]) -> int | None:
        before = [s for n, s in steps if n <= line_no]
        return before[-1] if before else (steps[0][1] if steps else None)

    merged: dict[tuple, dict] = {}
    nth: dict[tuple, int] = {}  # (worker, kind, step, kind of line) -> lines so far
    for line_no, r in readings:
        step = r.get("step")
        line_kind = (step is not None, r.get("line", frozenset(k for k in r if k in VALUE_COLUMNS)))
        if step is None:
            step = inherited(line_no, own_steps.get(r["worker"]) or all_steps)
        if step is None:
            continue
        at = (r["worker"], r.get("kind", "train"), step)
        index = nth.get((*at, line_kind), 0)
        nth[(*at, line_kind)] = index + 1
        merged[(*at, line_kind, index)] = {
            "worker": r["worker"],
            "rank": None,
            "kind": at[1],
            "step": step,
            "reading": index,
            "line_no": line_no,
            **{k: v for k, v in r.items() if k in VALUE_COLUMNS and v is not None},
        }
    return sorted(merged.values(), key=lambda rec: (rec["worker"], rec["kind"], rec["step"], rec["reading"]))


# --------------------------------------------------------------------------
# The values as printed (the lines themselves come from tests.logwriters)
# --------------------------------------------------------------------------


def printed_number(value: float, style: Callable[[float], str]) -> float:
    """The value memlog reads back from the printed text."""
    return float(value) if isinstance(value, int) else float(style(value))


def mapped(metrics: dict[str, object], mapping: dict[str, str], style: Callable[[float], str]) -> dict:
    return {col: printed_number(metrics[key], style) for key, col in mapping.items() if key in metrics}


def tqdm_bar(desc: str, n: int, total: int, elapsed: float, rate: float | None) -> str:
    """tqdm's default bar: `desc:  12%|█▏        | 7/60 [17:31<2:12:51, 150.41s/it]`."""
    frac = n / total
    width = 10
    full = int(frac * width)
    partial = " ▏▎▍▌▋▊▉"[int((frac * width - full) * 8)] if full < width else ""
    bar = ("█" * full + partial).ljust(width)
    remaining = "?" if not rate else _interval((total - n) * rate)
    speed = "?it/s" if not rate else (f"{rate:.2f}s/it" if rate >= 1 else f"{1 / rate:.2f}it/s")
    return f"{desc}: {int(100 * frac):3d}%|{bar}| {n}/{total} [{_interval(elapsed)}<{remaining}, {speed}]"


def _interval(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def hexid(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def ev(kind: str, worker: str | None = None, **detail: object) -> dict:
    return {"kind": kind, **({"worker": worker} if worker is not None else {}), **detail}


# --------------------------------------------------------------------------
# EasyR1 (hiyouga/EasyR1 v0.3.x): config, per-step metrics, per-phase memory prints
# --------------------------------------------------------------------------

PHASES_GENERATE = (
    "Before vllm wake up in sharding manager",
    "After vllm wake up in sharding manager",
    "Before vllm offload in sharding manager",
    "After vllm offload in sharding manager",
)


def easyr1_config(
    *, model: str, train_files: str, val_files: str, n_gpus: int, nnodes: int, offload: bool, experiment: str, save_freq: int, logger: list[str]
) -> dict:
    """PPOConfig.to_dict() of an EasyR1 v0.3 run (the fields that matter plus the usual noise)."""
    return {
        "data": {
            "train_files": train_files,
            "val_files": val_files,
            "prompt_key": "problem",
            "answer_key": "answer",
            "image_key": "images",
            "max_prompt_length": 2048,
            "max_response_length": 2048,
            "rollout_batch_size": 512,
            "val_batch_size": 1024,
            "format_prompt": "./examples/format_prompt/math_format.jinja",
            "shuffle": True,
            "seed": 1,
            "max_pixels": 4194304,
            "min_pixels": 262144,
            "filter_overlong_prompts": True,
        },
        "algorithm": {
            "adv_estimator": "grpo",
            "disable_kl": False,
            "use_kl_loss": True,
            "kl_penalty": "low_var_kl",
            "kl_coef": 1.0e-2,
            "kl_type": "fixed",
            "kl_horizon": 0.0,
            "kl_target": 0.0,
            "gamma": 1.0,
            "lam": 1.0,
        },
        "worker": {
            "hybrid_engine": True,
            "actor": {
                "strategy": "fsdp",
                "global_batch_size": 128,
                "micro_batch_size_per_device_for_update": 4,
                "micro_batch_size_per_device_for_experience": 16,
                "max_grad_norm": 1.0,
                "clip_ratio_low": 0.2,
                "clip_ratio_high": 0.3,
                "clip_ratio_dual": 3.0,
                "ppo_epochs": 1,
                "padding_free": True,
                "ulysses_sequence_parallel_size": 1,
                "use_torch_compile": True,
                "model": {
                    "model_path": model,
                    "tokenizer_path": model,
                    "override_config": {},
                    "enable_gradient_checkpointing": True,
                    "trust_remote_code": False,
                    "freeze_vision_tower": False,
                },
                "optim": {
                    "lr": 1.0e-6,
                    "betas": [0.9, 0.999],
                    "weight_decay": 1.0e-2,
                    "strategy": "adamw",
                    "lr_warmup_ratio": 0.0,
                    "min_lr_ratio": None,
                    "warmup_style": "constant",
                    "training_steps": -1,
                },
                "fsdp": {
                    "enable_full_shard": True,
                    "enable_cpu_offload": False,
                    "enable_rank0_init": True,
                    "use_orig_params": False,
                    "torch_dtype": None,
                    "fsdp_size": -1,
                    "mp_param_dtype": "bf16",
                    "mp_reduce_dtype": "fp32",
                    "mp_buffer_dtype": "fp32",
                },
                "offload": {"offload_params": offload, "offload_optimizer": offload},
            },
            "rollout": {
                "name": "vllm",
                "n": 5,
                "temperature": 1.0,
                "top_p": 0.99,
                "top_k": -1,
                "seed": 1,
                "limit_images": 0,
                "dtype": "bf16",
                "gpu_memory_utilization": 0.6,
                "ignore_eos": False,
                "enforce_eager": False,
                "enable_chunked_prefill": False,
                "tensor_parallel_size": 2,
                "max_model_len": None,
                "max_num_batched_tokens": 8192,
                "disable_log_stats": True,
                "val_override_config": {"temperature": 0.5, "n": 1},
            },
            "ref": {
                "strategy": "fsdp",
                "fsdp": {"enable_full_shard": True, "enable_cpu_offload": True, "enable_rank0_init": True},
                "offload": {"offload_params": False, "offload_optimizer": False},
            },
            "reward": {
                "reward_type": "function",
                "score_function": "./examples/score_function/r1v.py:compute_score",
                "skip_special_tokens": True,
                "num_cpus": 1,
            },
        },
        "trainer": {
            "total_episodes": 15,
            "max_steps": None,
            "project_name": "easy_r1",
            "experiment_name": experiment,
            "logger": logger,
            "nnodes": nnodes,
            "n_gpus_per_node": n_gpus,
            "critic_warmup": 0,
            "val_freq": 5,
            "val_before_train": True,
            "val_only": False,
            "val_generations_to_log": 3,
            "save_freq": save_freq,
            "save_limit": 3,
            "save_checkpoint_path": f"/root/EasyR1/checkpoints/easy_r1/{experiment}",
            "load_checkpoint_path": None,
        },
    }


def easyr1_step_metrics(
    rng: random.Random, step: int, *, cpu_gb: float, max_alloc_gb: float, max_res_gb: float, step_s: float, n_gpus: int
) -> dict[str, object]:
    """One step's metrics dict as EasyR1 v0.3 logs it (flat keys; the logger unflattens)."""
    tokens = int(rng.gauss(2.93e6, 4e4))
    gen, old, ref = step_s * 0.41, step_s * 0.09, step_s * 0.08
    upd = step_s - gen - old - ref - 6.5
    resp = rng.gauss(412 - 3 * step, 9)
    score = min(0.95, 0.31 + 0.013 * step + rng.gauss(0, 0.012))
    return {
        "reward/overall": score,
        "reward/format": min(1.0, 0.86 + 0.01 * step + rng.gauss(0, 0.01)),
        "reward/accuracy": score - 0.04,
        "global_seqlen/min": tokens // n_gpus - int(rng.uniform(9000, 15000)),
        "global_seqlen/max": tokens // n_gpus + int(rng.uniform(9000, 15000)),
        "global_seqlen/minmax_diff": int(rng.uniform(18000, 30000)),
        "global_seqlen/balanced_min": tokens // n_gpus - 1,
        "global_seqlen/balanced_max": tokens // n_gpus + 1,
        "global_seqlen/mean": tokens / n_gpus,
        "actor/entropy_loss": 0.56 - 0.004 * step + rng.gauss(0, 0.01),
        "actor/pg_loss": rng.gauss(-0.004, 0.011),
        "actor/kl_loss": 0.0004 * step + abs(rng.gauss(0, 0.0002)),
        "actor/kl_coef": 0.01,
        "actor/pg_clipfrac_higher": abs(rng.gauss(0.0021, 0.0006)),
        "actor/pg_clipfrac_lower": 0.0,
        "actor/ppo_kl": abs(rng.gauss(1.3e-05, 4e-06)),
        "actor/grad_norm": abs(rng.gauss(0.21, 0.04)),
        "actor/lr": 1e-06,
        "perf/mfu_actor": rng.gauss(0.302, 0.006),
        "perf/max_memory_allocated_gb": max_alloc_gb,
        "perf/max_memory_reserved_gb": max_res_gb,
        "perf/cpu_memory_used_gb": cpu_gb,
        "critic/score/mean": score,
        "critic/score/max": 1.0,
        "critic/score/min": 0.0,
        "critic/rewards/mean": score,
        "critic/rewards/max": 1.0,
        "critic/rewards/min": 0.0,
        "critic/advantages/mean": rng.gauss(0, 0.002),
        "critic/advantages/max": 1.788854718208313,
        "critic/advantages/min": -1.788854718208313,
        "critic/returns/mean": rng.gauss(0, 0.002),
        "critic/returns/max": 1.788854718208313,
        "critic/returns/min": -1.788854718208313,
        "response_length/mean": resp,
        "response_length/max": 2048.0,
        "response_length/min": float(int(rng.uniform(60, 110))),
        "response_length/clip_ratio": abs(rng.gauss(0.006, 0.002)),
        "prompt_length/mean": rng.gauss(1071, 6),
        "prompt_length/max": 1876.0,
        "prompt_length/min": 391.0,
        "prompt_length/clip_ratio": 0.0,
        "timing_s/gen": gen,
        "timing_s/reward": 2.1 + rng.uniform(0, 0.4),
        "timing_s/old": old,
        "timing_s/ref": ref,
        "timing_s/adv": 0.31 + rng.uniform(0, 0.05),
        "timing_s/update_actor": upd,
        "timing_s/step": step_s,
        "timing_per_token_ms/gen": gen * 1000 / (resp * 2560),
        "timing_per_token_ms/reward": 2.3 * 1000 / (resp * 2560),
        "timing_per_token_ms/old": old * 1000 / tokens,
        "timing_per_token_ms/ref": ref * 1000 / tokens,
        "timing_per_token_ms/adv": 0.33 * 1000 / tokens,
        "timing_per_token_ms/update_actor": upd * 1000 / tokens,
        "perf/total_num_tokens": tokens,
        "perf/time_per_step": step_s,
        "perf/throughput": tokens / (step_s * n_gpus),
    }


def easyr1_val_metrics(rng: random.Random, score: float) -> dict[str, object]:
    return {
        "val/reward_score": score,
        "val/overall_reward": score,
        "val/format_reward": min(1.0, score + 0.52),
        "val/accuracy_reward": score - 0.03 + rng.gauss(0, 0.003),
    }


def runner_block(
    log: RayLog, t: float, proc: Proc, step: int, metrics: dict[str, object], *, batches: int = 1, between: Callable[[float], None] | None = None
) -> None:
    """ConsoleLogger.log: `Step N` + the YAML block, every line with the Runner's prefix. With
    batches > 1 Ray's log monitor read the block in pieces and `between(t)` writes other lines
    in the gaps."""
    lines = easyr1.step_block(step, metrics)
    reading = {"step": step, "kind": "train", **mapped(metrics, EASYR1_METRICS, easyr1.float_repr)}
    cuts = sorted(log.rng.sample(range(8, len(lines) - 4), batches - 1)) if batches > 1 else []
    part = 0
    for i, line in enumerate(lines):
        if i in cuts:
            part += 1
            if between is not None:
                between(t + part * 0.05 - 0.01)
        log.worker(t + part * 0.05 + i * 1e-6, proc, line, reading if i == 0 else None, batch=("block", step, part))


def phase_line(log: RayLog, t: float, proc: Proc, phase: str, used_gib: float, total_gib: float = H100_GIB) -> None:
    """print_gpu_memory_usage (verl/utils/model_utils.py), rank 0 only."""
    text = easyr1.gpu_memory(phase, used_gib, total_gib)
    log.worker(t, proc, text, {"step": None, "kind": "train", "device_mem_used_gib": float(f"{used_gib:.2f}"), "mem_capacity_gib": float(f"{total_gib:.2f}")})


def worker_noise(log: RayLog, t: float, procs: list[Proc], text: Callable[[Proc], str], spread: float = 0.8) -> None:
    """The same message from every worker within a second (Ray folds them into one summary)."""
    for p in procs:
        log.worker(t + log.rng.uniform(0, spread), p, text(p))


def ray_start(log: RayLog, t: float, *, head: bool, version_line: int) -> None:
    if head:
        log.driver(t, ray.driver_log(log.asctime(t), f"worker.py:{version_line}", ray.started_local()))
    else:
        log.driver(t, ray.driver_log(log.asctime(t), "worker.py:1616", ray.connecting(f"{log.driver_ip}:6379")))
        log.driver(t + 0.02, ray.driver_log(log.asctime(t + 0.02), f"worker.py:{version_line}", ray.connected()))


# --------------------------------------------------------------------------
# Ray's memory-monitor messages
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    """One memory-monitor kill: the node, the killed worker and the top memory users."""

    node_ip: str
    node_id: str
    lease_id: str
    worker_id: str
    worker_name: str  # as the message names it: `kQx3vBWorkerDict_0:0:WorkerDict.__init__`
    victim: Proc
    victim_gib: float
    used_gib: float
    total_gib: float
    threshold: float
    top: list[tuple[int, float, str]]  # (pid, GB, command)

    @property
    def fraction(self) -> str:
        return ray.used_fraction(self.used_gib, self.total_gib)

    def memory_line(self) -> str:
        """Ray ~2.4x lease wording (log-formats.md §3.4 b) up to `Top 10 memory users:`."""
        return ray.memory_monitor_kill(
            node_ip=self.node_ip,
            node_id=self.node_id,
            lease_id=self.lease_id,
            worker_name=self.worker_name,
            pid=self.victim.pid,
            worker_gib=self.victim_gib,
            used_gib=self.used_gib,
            total_gib=self.total_gib,
            threshold=self.threshold,
            worker_id=self.worker_id,
        )

    def table(self) -> list[str]:
        return ray.top_memory_users(self.top)

    def event(self, worker: str) -> dict:
        return ev(
            "oom",
            worker,
            node_ip=self.node_ip,
            node_id=self.node_id,
            worker_name=self.worker_name,
            worker_pid=str(self.victim.pid),
            worker_used_gib=f"{self.victim_gib:.2f}",
            host_used_gib=f"{self.used_gib:.2f}",
            host_total_gib=f"{self.total_gib:.2f}",
            used_fraction=self.fraction,
            threshold=f"{self.threshold:g}",
            top_memory_users=[{"pid": str(pid), "mem_gib": f"{gb:.2f}", "command": cmd} for pid, gb, cmd in self.top],
        )

    def summary(self, log: RayLog, t: float, raylet_pid: int, line: int, worker: str) -> None:
        """The raylet's OOM-killer summary (node_manager.cc), forwarded from raylet.err."""
        head = ray.raylet_log_head(log.asctime(t), raylet_pid, f"node_manager.cc:{line}")
        text = ray.oom_killer_summary(self.node_id, self.node_ip)
        log.raylet(t, self.node_ip, head + text, [ev("oom_summary", worker, count="1", crashed="0", node_id=self.node_id, node_ip=self.node_ip)])
        log.raylet(t + 1e-4, self.node_ip, "")
        log.raylet(t + 2e-4, self.node_ip, ray.RAYLET_OOM_DOCS, [ev("oom_hint", worker)])


def top_users(rng: random.Random, procs: list[tuple[Proc, float, str]], extra: list[tuple[int, float, str]]) -> list[tuple[int, float, str]]:
    rows = [(p.pid, round(gb, 2), cmd) for p, gb, cmd in procs] + extra
    return sorted(rows, key=lambda r: -r[1])[:10]


DRIVER_FRAMES = [
    ("/usr/lib/python3.10/runpy.py", 196, "_run_module_as_main", "return _run_code(code, main_globals, None,"),
    ("/usr/lib/python3.10/runpy.py", 86, "_run_code", "exec(code, run_globals)"),
]
RAY_GET_FRAMES = [
    ("/usr/local/lib/python3.10/dist-packages/ray/_private/auto_init_hook.py", 21, "auto_init_wrapper", "return fn(*args, **kwargs)"),
    ("/usr/local/lib/python3.10/dist-packages/ray/_private/client_mode_hook.py", 103, "wrapper", "return func(*args, **kwargs)"),
    (
        "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py",
        2772,
        "get",
        "values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)",
    ),
    ("/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", 919, "get_objects", "raise value.as_instanceof_cause()"),
]


def easyr1_oom_traceback(log: RayLog, t: float, kill: Kill, runner: Proc, method: str, victim_label: str) -> None:
    """The driver's traceback when the Runner's `trainer.fit()` dies with the killed worker's error."""
    rng = log.rng
    lines = [
        "Traceback (most recent call last):",
        *frame_lines(
            DRIVER_FRAMES
            + [
                ("/root/EasyR1/verl/trainer/main.py", 128, "<module>", "main()"),
                ("/root/EasyR1/verl/trainer/main.py", 124, "main", "ray.get(runner.run.remote(ppo_config))"),
            ]
            + RAY_GET_FRAMES
        ),
    ]
    lines.append(
        ray.task_error(
            "OutOfMemoryError",
            ray.task_ref("Runner.run", pid=runner.pid, ip=runner.ip, actor_id=hexid(rng, 32), repr_=f"verl.trainer.main.Runner object at 0x7f{hexid(rng, 10)}"),
        )
    )
    lines += frame_lines(
        [
            ("/root/EasyR1/verl/trainer/main.py", 94, "run", "trainer.fit()"),
            ("/root/EasyR1/verl/trainer/ray_trainer.py", 657, "fit", f"actor_output = self.actor_rollout_wg.{method}(batch)"),
            ("/root/EasyR1/verl/single_controller/ray/base.py", 47, "func", "output = ray.get(output)"),
        ]
    )
    lines.append(
        ray.task_error(
            "OutOfMemoryError",
            ray.task_ref(
                f"WorkerDict.actor_rollout_{method}",
                pid=kill.victim.pid,
                ip=kill.node_ip,
                actor_id=hexid(rng, 32),
                repr_=f"verl.single_controller.ray.base.WorkerDict object at 0x7f{hexid(rng, 10)}",
            ),
        )
    )
    lines += frame_lines([("/root/EasyR1/verl/single_controller/ray/base.py", 432, "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)")])
    lines.append(ray.OOM_ERROR)
    # The traceback's first unindented line (the re-raised task error) is followed by the remote
    # tracebacks Ray chains below it, without their headers: the process's last word is the last
    # of them, the OOM error the killed worker raised (OOM words of their own too).
    events: list[list[dict]] = [[] for _ in lines]
    events[-1] = [ev("exception", "main"), ev("oom", "main", scope="host")]
    for i, line in enumerate(lines):
        log.driver(t + i * 1e-5, line, events[i])
    t += len(lines) * 1e-5
    log.driver(t, kill.memory_line(), [kill.event(victim_label)])
    for i, line in enumerate(kill.table(), start=1):
        log.driver(t + i * 1e-5, line)
    log.driver(t + 0.001, ray.OOM_DOCS, [ev("oom_hint", "main")])


# ==========================================================================
# (a) Field report 3: EasyR1 geometry3k GRPO, host memory stairs, Ray OOM kill
# ==========================================================================


def build_fr3_geometry3k() -> Sample:
    log = RayLog("easyr1_fr3_geometry3k", datetime(2025, 4, 16, 9, 12, 3, 411000), driver_ip="10.95.143.76")
    rng = log.rng
    node = log.driver_ip
    runner = Proc("Runner", 2911, node)
    workers = [Proc("WorkerDict", 3322 + i, node) for i in range(8)]
    rank0 = workers[0]
    t = 0.0
    ray_start(log, t, head=True, version_line=1843)

    # Tracker(ConsoleLogger) prints the config when fit() starts; every YAML line is prefixed.
    t = 21.4
    config = easyr1_config(
        model="Qwen/Qwen2.5-VL-7B-Instruct",
        train_files="hiyouga/geometry3k@train",
        val_files="hiyouga/geometry3k@test",
        n_gpus=8,
        nnodes=1,
        offload=True,
        experiment="qwen2_5_vl_7b_geo_grpo",
        save_freq=5,
        logger=["console", "wandb"],
    )
    worker_noise(
        log,
        6.2,
        workers,
        lambda p: (
            "Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 "
            "dtypes, but the current dype in Qwen2_5_VLForConditionalGeneration is torch.float32. You should run "
            "training or inference using Automatic Mixed-Precision via the `with torch.autocast(device_type='torch_device'):` decorator, "
            'or load the model with the `torch_dtype` argument. Example: `model = AutoModel.from_pretrained("openai/whisper-tiny", '
            'attn_implementation="flash_attention_2", torch_dtype=torch.float16)`'
        ),
    )
    phase_line(log, 9.8, rank0, "After huggingface model init", 0.92)
    phase_line(log, 13.1, rank0, "After FSDP module init", 2.63)
    phase_line(log, 13.4, rank0, "After optimizer init", 2.63)
    worker_noise(
        log,
        14.0,
        workers,
        lambda p: (
            f"INFO 04-16 09:12:{17 + p.pid % 3:02d} [config.py:549] This model "
            "supports multiple tasks: {'generate', 'embed', 'score', 'classify', 'reward'}. Defaulting to 'generate'."
        ),
    )
    worker_noise(
        log,
        19.5,
        workers,
        lambda p: f"INFO 04-16 09:12:{22 + p.pid % 2:02d} [model_runner.py:1110] Loading model weights took {15.62 + (p.pid % 2) * 0.01:.4f} GB",
    )
    phase_line(log, 20.9, rank0, "After vllm init", 52.31)
    phase_line(log, 21.1, rank0, "After vllm offload in sharding manager", 3.46)
    for i, line in enumerate(easyr1.config_block(config)):
        log.worker(t + i * 1e-5, runner, line)

    # Validation before training (val_before_train): one generation pass, then `Step 0`.
    t += 2.0
    phase_line(log, t, rank0, PHASES_GENERATE[0], 3.46)
    phase_line(log, t + 4.1, rank0, PHASES_GENERATE[1], 54.88)
    phase_line(log, t + 96.0, rank0, PHASES_GENERATE[2], 61.02)
    phase_line(log, t + 96.9, rank0, PHASES_GENERATE[3], 3.51)
    t += 101.3
    val = easyr1_val_metrics(rng, 0.2871)
    for i, line in enumerate(easyr1.step_block(0, val)):
        log.worker(t + i * 1e-5, runner, line, {"step": 0, "kind": "train"} if i == 0 else None)

    # Training: host memory climbs in stairs (+~17.8 GB every second step) while the allocator's
    # peaks stay flat; param_offload/optimizer_offload are on.
    total_steps = 60
    stairs = [835.42, 836.05, 853.71, 854.33, 871.94, 872.61, 890.17]
    max_alloc = [31.822, 31.84, 31.84, 31.846, 31.846, 31.851, 31.851]
    max_res = [44.146, 44.146, 44.168, 44.168, 44.168, 44.174, 44.174]
    elapsed = 0.0
    log.worker(t + 0.3, runner, tqdm_bar("Running step", 0, total_steps, 0, None))
    for step in range(1, 8):
        step_s = rng.gauss(148.0, 3.0)
        t0 = t + 1.0
        # rollout: vLLM wakes up, generates, sleeps again
        phase_line(log, t0, rank0, PHASES_GENERATE[0], 3.46 + rng.uniform(0, 0.05))
        phase_line(log, t0 + 3.9, rank0, PHASES_GENERATE[1], 54.9 + rng.uniform(0, 0.2))
        phase_line(log, t0 + 58.2, rank0, PHASES_GENERATE[2], 60.9 + rng.uniform(0, 0.4))
        phase_line(log, t0 + 59.1, rank0, PHASES_GENERATE[3], 3.49 + rng.uniform(0, 0.05))
        worker_noise(
            log,
            t0 + 95.0,
            workers,
            lambda p: (
                "/usr/local/lib/python3.10/dist-packages/torch/distributed/"
                "fsdp/fully_sharded_data_parallel.py:690: FutureWarning: FSDP.state_dict_type() and "
                "FSDP.set_state_dict_type() are being deprecated. Please use APIs, get_state_dict() and "
                "set_state_dict(), which can support different parallelisms, FSDP1, FSDP2, DDP. API doc: "
                "https://pytorch.org/docs/stable/distributed.checkpoint.html#torch.distributed.checkpoint."
                "state_dict.get_state_dict .Tutorial: https://pytorch.org/tutorials/recipes/distributed_checkpoint_recipe.html ."
            ),
        )
        if step == 5:  # save_freq=5
            worker_noise(
                log,
                t0 + step_s - 9.0,
                workers,
                lambda p: (
                    f"[{log.asctime(t0 + step_s - 9.0)[:19]}] Saved "
                    f"model to /root/EasyR1/checkpoints/easy_r1/qwen2_5_vl_7b_geo_grpo/global_step_5/actor/"
                    f"model_world_size_8_rank_{p.pid - 3322}.pt"
                ),
                spread=1.5,
            )
        t = t0 + step_s
        elapsed += step_s
        metrics = easyr1_step_metrics(
            rng, step, cpu_gb=stairs[step - 1], max_alloc_gb=max_alloc[step - 1], max_res_gb=max_res[step - 1], step_s=step_s, n_gpus=8
        )
        if step % 5 == 0:
            metrics.update(easyr1_val_metrics(rng, 0.33 + 0.01 * step))
        runner_block(log, t, runner, step, metrics)
        # tqdm redraws with a carriage return; Ray prefixes the physical line once.
        rate = elapsed / step
        bars = [tqdm_bar("Running step", n, total_steps, rate * n, rate if n else None) for n in (step - 1, step)]
        log.worker(t + 0.01, runner, "\r".join(bars))
    # Step 8: the rollout runs, then update_actor pushes the node over the kill threshold.
    t0 = t + 1.0
    phase_line(log, t0, rank0, PHASES_GENERATE[0], 3.52)
    phase_line(log, t0 + 3.9, rank0, PHASES_GENERATE[1], 55.04)
    phase_line(log, t0 + 58.4, rank0, PHASES_GENERATE[2], 61.37)
    phase_line(log, t0 + 59.2, rank0, PHASES_GENERATE[3], 3.53)
    t = t0 + 104.6
    extra = [
        (runner.pid, 4.12, "ray::Runner.run"),
        (2764, 1.93, "/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=..."),
    ]
    per_worker = [(p, 108.7 + rng.uniform(-2.5, 2.5) + (3.1 if p is rank0 else 0), "ray::WorkerDict.actor_rollout_update_actor") for p in workers]
    kill = Kill(
        node_ip=node,
        node_id=hexid(rng, 56),
        lease_id=hexid(rng, 40),
        worker_id=hexid(rng, 56),
        worker_name="kQx3vBWorkerDict_0:0:WorkerDict.__init__",
        victim=rank0,
        victim_gib=per_worker[0][1],
        used_gib=891.0553,
        total_gib=937.50,
        threshold=0.95,
        top=top_users(rng, per_worker, extra),
    )
    victim = log.label(rank0)
    kill.summary(log, t + 0.4, 2764, 3069, "raylet")
    easyr1_oom_traceback(log, t + 1.2, kill, runner, "update_actor", victim)
    log.driver(
        t + 2.6,
        ray.driver_log(
            log.asctime(t + 2.6),
            "worker.py:422",
            "Unhandled error (suppress with "
            "'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
            + ray.task_ref("WorkerDict.actor_rollout_compute_log_probs", pid=workers[3].pid, ip=node, actor_id=hexid(rng, 32)),
            level="ERROR",
        ),
    )
    return log.sample(
        "easyr1/fr3_geometry3k_host_stairs_raykill.log",
        "EasyR1 v0.3 GRPO of Qwen2.5-VL-7B on geometry3k (field report 3), one 8-GPU node with FSDP param and "
        "optimizer offload: the Runner's YAML blocks show perf/cpu_memory_used_gb climbing in stairs of ~17.8 GB "
        "every second step while max_memory_allocated/reserved stay flat, and during step 8 Ray's memory monitor "
        "kills a WorkerDict at 891.06GB / 937.50GB (threshold 0.95).",
        H100_GIB,
    )


# ==========================================================================
# verl (volcengine/verl v0.5+, numpy 2): the TaskRunner's `step:N - k:v` line
# ==========================================================================

VAL_KEY = "val-core/openai/gsm8k/reward/mean@1"
VERL_CONFIG = {
    "actor_rollout_ref": {
        "actor": {
            "strategy": "fsdp",
            "ppo_mini_batch_size": 256,
            "ppo_micro_batch_size_per_gpu": 40,
            "use_kl_loss": True,
            "kl_loss_coef": 0.001,
            "kl_loss_type": "low_var_kl",
            "entropy_coeff": 0,
            "optim": {"lr": 1e-06, "lr_warmup_steps_ratio": 0.0},
            "fsdp_config": {"param_offload": False, "optimizer_offload": False},
        },
        "model": {"path": "Qwen/Qwen2.5-7B-Instruct", "enable_gradient_checkpointing": True, "use_remove_padding": True},
        "ref": {"fsdp_config": {"param_offload": True}, "log_prob_micro_batch_size_per_gpu": 40},
        "rollout": {
            "name": "vllm",
            "mode": "sync",
            "n": 5,
            "gpu_memory_utilization": 0.6,
            "tensor_model_parallel_size": 2,
            "log_prob_micro_batch_size_per_gpu": 40,
        },
    },
    "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
    "data": {
        "train_files": "/data/gsm8k/train.parquet",
        "val_files": "/data/gsm8k/test.parquet",
        "train_batch_size": 1024,
        "max_prompt_length": 512,
        "max_response_length": 1024,
    },
    "trainer": {
        "critic_warmup": 0,
        "logger": ["console", "wandb"],
        "project_name": "verl_grpo_example_gsm8k",
        "experiment_name": "qwen2_7b_function_rm",
        "n_gpus_per_node": 8,
        "nnodes": 2,
        "save_freq": 20,
        "test_freq": 5,
        "total_epochs": 15,
    },
}


def verl_step_metrics(
    rng: random.Random, step: int, *, max_alloc: float, max_res: float, cpu: float, epoch: int, step_s: float, n_gpus: int
) -> list[tuple[str, object, bool]]:
    """(key, value, is numpy scalar) in the order verl's trainer fills its metrics dict."""
    tokens = int(rng.gauss(2.61e6, 3e4))
    per = tokens // n_gpus
    resp = rng.gauss(231 - step, 6)
    score = min(0.95, 0.58 + 0.009 * step + rng.gauss(0, 0.01))
    gen, old, ref = step_s * 0.38, step_s * 0.08, step_s * 0.07
    upd = step_s - gen - old - ref - 3.2
    items: list[tuple[str, object, bool]] = [
        ("global_seqlen/min", per - int(rng.uniform(4000, 9000)), False),
        ("global_seqlen/max", per + int(rng.uniform(4000, 9000)), False),
        ("global_seqlen/minmax_diff", int(rng.uniform(8000, 18000)), False),
        ("global_seqlen/balanced_min", per, False),
        ("global_seqlen/balanced_max", per + 1, False),
        ("global_seqlen/mean", tokens / n_gpus, True),
        ("actor/entropy", 0.41 - 0.002 * step + rng.gauss(0, 0.01), True),
        ("actor/kl_loss", 0.0009 * step + abs(rng.gauss(0, 0.0003)), True),
        ("actor/kl_coef", 0.001, True),
        ("actor/pg_loss", rng.gauss(0.0, 0.006), True),
        ("actor/pg_clipfrac", abs(rng.gauss(0.0013, 0.0003)), True),
        ("actor/ppo_kl", rng.gauss(0.00012, 0.00005), True),
        ("actor/pg_clipfrac_lower", 0.0, True),
        ("actor/grad_norm", abs(rng.gauss(0.19, 0.03)), True),
        ("perf/mfu/actor", rng.gauss(0.219, 0.004), True),
        ("perf/max_memory_allocated_gb", max_alloc, True),
        ("perf/max_memory_reserved_gb", max_res, True),
        ("perf/cpu_memory_used_gb", cpu, True),
        ("actor/lr", 1e-06, True),
        ("training/global_step", step, False),
        ("training/epoch", epoch, False),
        ("critic/score/mean", score, False),
        ("critic/score/max", 1.0, False),
        ("critic/score/min", 0.0, False),
        ("critic/rewards/mean", score, False),
        ("critic/rewards/max", 1.0, False),
        ("critic/rewards/min", 0.0, False),
        ("critic/advantages/mean", rng.gauss(0, 0.003), False),
        ("critic/advantages/max", 1.7888534069061279, False),
        ("critic/advantages/min", -1.7888534069061279, False),
        ("critic/returns/mean", rng.gauss(0, 0.003), False),
        ("critic/returns/max", 1.7888534069061279, False),
        ("critic/returns/min", -1.7888534069061279, False),
        ("response_length/mean", resp, False),
        ("response_length/max", 1024.0, False),
        ("response_length/min", float(int(rng.uniform(70, 110))), False),
        ("response_length/clip_ratio", abs(rng.gauss(0.002, 0.001)), False),
        ("prompt_length/mean", rng.gauss(104.6, 0.8), False),
        ("prompt_length/max", 223.0, False),
        ("prompt_length/min", 66.0, False),
        ("prompt_length/clip_ratio", 0.0, False),
        ("timing_s/generate_sequences", gen - 1.1, False),
        ("timing_s/reshard", 1.1 + rng.uniform(0, 0.1), False),
        ("timing_s/gen", gen, False),
        ("timing_s/reward", 0.9 + rng.uniform(0, 0.2), False),
        ("timing_s/old_log_prob", old, False),
        ("timing_s/ref", ref, False),
        ("timing_s/adv", 0.21 + rng.uniform(0, 0.04), False),
        ("timing_s/update_actor", upd, False),
        ("timing_s/step", step_s, False),
        ("timing_per_token_ms/gen", gen * 1000 / (resp * 5120), False),
        ("timing_per_token_ms/ref", ref * 1000 / tokens, False),
        ("timing_per_token_ms/update_actor", upd * 1000 / tokens, False),
        ("timing_per_token_ms/adv", 0.23 * 1000 / tokens, False),
        ("perf/total_num_tokens", tokens, False),
        ("perf/time_per_step", step_s, False),
        ("perf/throughput", tokens / (step_s * n_gpus), False),
    ]
    return items


def verl_line(step: int, items: list[tuple[str, object, bool]]) -> tuple[str, dict]:
    """verl's step line for (key, value, is numpy scalar) items, and the canonical values it carries."""
    metrics = {k: v for k, v, _ in items}
    assert len(metrics) == len(items), "duplicate metric key"
    text = verl.step_line(step, metrics, np_float64={k for k, _, np_ in items if np_})
    values = {col: float(v) for k, v, _ in items for key, col in VERL_METRICS.items() if k == key}
    return text, values


_GPU_MEMORY = re.compile(
    r"memory allocated \(GB\): (\S+), memory reserved \(GB\): (\S+), "
    r"device memory used/total \(GB\): (\S+)/(\S+)$"
)


def gpu_memory_line(head: str, alloc: float, res: float, used: float, total: float = H100_GIB) -> tuple[str, dict]:
    """log_gpu_memory_usage's line and its values as printed, read back from the text."""
    text = verl.gpu_memory_usage(head, allocated=alloc, reserved=res, used=used, total=total)
    columns = ("mem_allocated_gib", "mem_reserved_gib", "device_mem_used_gib", "mem_capacity_gib")
    return text, dict(zip(columns, map(float, _GPU_MEMORY.search(text).groups())))


def build_verl_healthy() -> Sample:
    log = RayLog("verl_healthy_np_float64", datetime(2025, 8, 11, 14, 2, 11, 842000), driver_ip="10.0.0.2")
    rng = log.rng
    runner = Proc("TaskRunner", 247607, "10.0.0.2")
    node_a = [Proc("WorkerDict", 248811 + i * 7, "10.0.0.2") for i in range(8)]
    node_b = [Proc("WorkerDict", 31204 + i * 5, "10.0.0.3") for i in range(8)]
    workers = node_a + node_b
    rank0 = node_a[0]
    ray_start(log, 0.0, head=False, version_line=1942)
    t = 3.1
    log.worker(t, runner, "TaskRunner hostname: gpu-a01, PID: 247607")
    for i, line in enumerate(pprint.pformat(VERL_CONFIG).split("\n")):
        log.worker(t + 0.01 + i * 1e-5, runner, line, batch="config")
    log.worker(t + 0.4, runner, "Using dataset class: RLHFDataset")
    log.worker(t + 1.2, runner, "dataset len: 7473")
    log.worker(t + 1.3, runner, "filter dataset len: 7473")
    log.worker(t + 1.5, runner, "Size of train dataloader: 7, Size of val dataloader: 1")
    log.worker(t + 1.51, runner, "Total training steps: 30")
    t += 9.0
    worker_noise(
        log,
        t,
        workers,
        lambda p: (
            "[W811 14:02:24.118034 ProcessGroupNCCL.cpp:4718] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS "
            "is the default now, this environment variable is thus deprecated. (function operator())"
        ),
        spread=1.2,
    )
    for head, alloc, res, dev in (("Before FSDP", 0.0, 0.0, 0.87), ("After FSDP", 14.22, 14.56, 15.93)):
        text, values = gpu_memory_line(head, alloc, res, dev)
        log.worker(t + 6.0 + alloc, rank0, text, {"step": None, "kind": "train", **values})
    t += 31.0
    worker_noise(
        log,
        t,
        workers,
        lambda p: f"INFO 08-11 14:02:{44 + p.pid % 3:02d} [gpu_worker.py:232] Available KV cache memory: {13.48 + (p.pid % 2) * 0.01:.2f} GiB",
        spread=2.0,
    )
    worker_noise(
        log,
        t + 3.0,
        workers,
        lambda p: f"INFO 08-11 14:02:{47 + p.pid % 2:02d} [kv_cache_utils.py:716] GPU KV cache size: {252_336 + (p.pid % 3) * 16:,} tokens",
        spread=1.5,
    )
    t += 48.0
    val = rng.uniform(0.77, 0.78)
    log.worker(t, runner, f"Initial validation metrics: {{'{VAL_KEY}': np.float64({val!r})}}")
    log.worker(t + 0.001, runner, verl.step_line(0, {VAL_KEY: val}, np_float64={VAL_KEY}), {"step": 0, "kind": "train"})
    total = 30
    log.worker(t + 0.4, runner, tqdm_bar("Training Progress", 0, total, 0, None))
    elapsed = 0.0
    cpu_level = 40.61
    for step in range(1, total + 1):
        step_s = rng.gauss(49.1, 0.8)
        elapsed += step_s
        t += step_s
        max_alloc = 18.921902179718018 if step == 1 else 20.764535427093506
        max_res = 23.166015625 if step == 1 else 25.763671875
        cpu = 38.94 + rng.uniform(-0.2, 0.2) if step == 1 else cpu_level + rng.gauss(0, 0.18)
        epoch = (step - 1) // 7
        items = verl_step_metrics(rng, step, max_alloc=max_alloc, max_res=max_res, cpu=cpu, epoch=epoch, step_s=step_s, n_gpus=16)
        if step % 5 == 0:
            items.append((VAL_KEY, rng.uniform(0.8, 0.86) + 0.002 * step, True))
        text, values = verl_line(step, items)
        rate = elapsed / step
        bar = tqdm_bar("Training Progress", step, total, elapsed, rate)
        # tqdm's redraw and the metrics print end up on one physical line, the print after a `\r`.
        prefix = ray.actor_prefix(runner.pid, runner.actor)
        log.worker(t, runner, f"{bar}\r{prefix}{text}", {"step": step, "kind": "train", **values})
        if step in (7, 14, 21, 28):  # epoch boundary: workers warn about the dataloader again
            worker_noise(
                log,
                t + 1.5,
                workers,
                lambda p: (
                    "/usr/local/lib/python3.10/dist-packages/torch/utils/data/"
                    "dataloader.py:617: UserWarning: This DataLoader will create 8 worker processes in total. "
                    "Our suggested max number of worker in current system is 4, which is smaller than what this "
                    "DataLoader is going to create."
                ),
                spread=2.0,
            )
    return log.sample(
        "verl/healthy_grpo_np_float64.log",
        "verl v0.5 GRPO of Qwen2.5-7B on gsm8k over two 8-GPU nodes with numpy 2 (values print as "
        "np.float64(...)): the TaskRunner's step lines follow a tqdm carriage return, the allocator peaks "
        "settle after step 2 and host memory stays flat for 30 steps; WorkerDict lines from the second node "
        "carry ip= and are folded by Ray's deduplication.",
        H100_GIB,
    )


# ==========================================================================
# (c) A mixed Ray driver log: EasyR1 blocks, helper lines from 16 workers on
#     two nodes, dedup summaries, raylet lines and a memory-monitor kill
# ==========================================================================


def build_ray_driver_mixed() -> Sample:
    log = RayLog("ray_driver_mixed", datetime(2025, 6, 3, 7, 41, 5, 120000), driver_ip="10.0.0.2")
    rng = log.rng
    runner = Proc("Runner", 5121, "10.0.0.2")
    node_a = [Proc("WorkerDict", 5388 + i, "10.0.0.2") for i in range(8)]
    node_b = [Proc("WorkerDict", 4121 + i, "10.0.0.3") for i in range(8)]
    workers = node_a + node_b
    rank0, victim = node_a[0], node_b[4]
    ray_start(log, 0.0, head=False, version_line=1832)
    log.driver(2.2, f"{ray.autoscaler_prefix(3)}Tip: use `ray status` to view detailed cluster status. To disable these messages, set RAY_SCHEDULER_EVENTS=0.")
    config = easyr1_config(
        model="Qwen/Qwen2.5-VL-7B-Instruct",
        train_files="hiyouga/geometry3k@train",
        val_files="hiyouga/geometry3k@test",
        n_gpus=8,
        nnodes=2,
        offload=False,
        experiment="qwen2_5_vl_7b_geo_grpo_2node",
        save_freq=10,
        logger=["console", "wandb"],
    )
    config["trainer"]["val_before_train"] = False
    t = 18.0
    for i, line in enumerate(easyr1.config_block(config)):
        log.worker(t + i * 1e-6, runner, line, batch="config")
    phase_line(log, 24.0, rank0, "After vllm init", 49.87)
    phase_line(log, 24.2, rank0, "After vllm offload in sharding manager", 21.93)

    def helper(t0: float, head: str, levels: dict[Proc, tuple[float, float, float]], order: list[Proc]) -> None:
        """verl's log_gpu_memory_usage(..., rank=None) at DEBUG through the logging module: every rank prints."""
        for i, p in enumerate(order):
            tp = t0 + 0.02 + i * rng.uniform(0.04, 0.09)
            alloc, res, used = levels[p]
            text, values = gpu_memory_line(head, alloc, res, used)
            log.worker(tp, p, verl.logger_prefix(log.asctime(tp), "DEBUG") + text, {"step": None, "kind": "train", **values})

    steps = 10
    host = [455.12, 455.83, 455.41, 456.02, 455.67, 455.24, 455.96, 455.58, 455.31, 455.77]
    max_alloc = [38.512] + [38.54] * 9  # the allocator's peaks settle at step 2
    max_res = [47.91] + [47.93] * 9
    base = {p: (21.4 + rng.uniform(-0.3, 0.3), 23.8 + rng.uniform(-0.3, 0.3)) for p in workers}
    t = 40.0
    for step in range(1, steps + 1):
        step_s = rng.gauss(131.0, 2.5)
        t0 = t + 1.0
        for phase, used in zip(PHASES_GENERATE, (21.93, 63.1, 69.4, 21.95)):
            phase_line(log, t0, rank0, phase, used + rng.uniform(0, 0.08))
            t0 += 0.7 if "wake" in phase else 48.0
        order = rng.sample(workers, len(workers))
        if step == 3:  # the worker that will be killed is the last to report here
            order.remove(victim)
            order.append(victim)
        before = {p: (base[p][0] + rng.uniform(-0.05, 0.05), base[p][1], base[p][1] + 8.9) for p in workers}
        after = {p: (base[p][0] + 0.31 + rng.uniform(-0.05, 0.05), base[p][1] + 7.2, base[p][1] + 16.1) for p in workers}
        helper(t + 70.0, "dp actor Before update_policy", before, order)
        helper(t + 118.0, "dp actor After update_policy", after, rng.sample(workers, len(workers)))
        t += step_s
        metrics = easyr1_step_metrics(
            rng, step, cpu_gb=host[step - 1], max_alloc_gb=max_alloc[step - 1], max_res_gb=max_res[step - 1], step_s=step_s, n_gpus=16
        )
        if step == steps:
            break
        # Ray's log monitor picks the Runner's block up in two reads; a node-B line lands in between.
        noisy = rng.choice(node_b)

        def between(tb: float, p: Proc = noisy) -> None:
            log.worker(
                tb,
                p,
                "/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/"
                "_state_dict_utils.py:773: UserWarning: When using ``NO_SHARD`` for ``ShardingStrategy``, "
                "full_state_dict will be returned.",
            )

        runner_block(log, t, runner, step, metrics, batches=2, between=between)
        bars = [tqdm_bar("Running step", n, 60, 131.0 * n, 131.0 if n else None) for n in (step - 1, step)]
        log.worker(t + 0.2, runner, "\r".join(bars))
    # Step 10 ends in the checkpoint save (save_freq=10); node B's memory monitor kills a worker.
    t_kill = t - 4.0
    log.raylet(
        t_kill - 30.0,
        "10.0.0.3",
        ray.raylet_log_head(log.asctime(t_kill - 30.0), 3121, "worker_pool.cc:581")
        + "Some workers of the worker process(4219) have not registered within the timeout. The process is still "
        "alive, probably it's hanging during start.",
    )
    log.raylet(
        t_kill - 27.5,
        "10.0.0.3",
        ray.raylet_log_head(log.asctime(t_kill - 27.5), 3121, "worker_pool.cc:581")
        + "Some workers of the worker process(4223) have not registered within the timeout. The process is still "
        "alive, probably it's hanging during start.",
    )
    per_worker = [(p, rng.uniform(58.0, 66.0) + (9.0 if p is victim else 0.0), "ray::WorkerDict.actor_rollout_save_checkpoint") for p in node_b]
    kill = Kill(
        node_ip="10.0.0.3",
        node_id=hexid(rng, 56),
        lease_id=hexid(rng, 40),
        worker_id=hexid(rng, 56),
        worker_name="pD2uXrWorkerDict_0:12:WorkerDict.__init__",
        victim=victim,
        victim_gib=per_worker[4][1],
        used_gib=478.6238,
        total_gib=503.52,
        threshold=0.95,
        top=top_users(rng, per_worker, [(3121, 1.71, "/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=...")]),
    )
    victim_label = log.label(victim)
    died = ray.worker_died(
        task_id=hexid(rng, 48),
        worker_id=kill.worker_id,
        node_id=kill.node_id,
        ip=kill.node_ip,
        port=10019,
        pid=victim.pid,
        exit_type="SYSTEM_ERROR",
        exit_detail="Task was killed due to the node running low on memory.",
    )
    lines = [died, kill.memory_line(), *kill.table(), ray.OOM_DOCS]
    events: list[list[dict]] = (
        [
            [
                ev(
                    "worker_died",
                    victim_label,
                    worker_ip=kill.node_ip,
                    worker_pid=str(victim.pid),
                    exit_type="SYSTEM_ERROR",
                    exit_detail="Task was killed due to the node running low on memory.",
                )
            ],
            [kill.event(victim_label)],
        ]
        + [[] for _ in lines[2:-1]]
        + [[ev("oom_hint", "main")]]
    )
    log.error(t_kill, log.driver_ip, lines, events)
    # Node A keeps printing while the error is reported.
    helper(t_kill + 0.3, "dp actor Before save_checkpoint", {p: (base[p][0], base[p][1], base[p][1] + 8.9) for p in node_a}, node_a)
    kill.summary(log, t_kill + 1.8, 3121, 3096, "raylet, ip=10.0.0.3")
    easyr1_oom_traceback(log, t_kill + 3.1, kill, runner, "save_checkpoint", victim_label)
    return log.sample(
        "verl/ray_driver_mixed.log",
        "A two-node Ray driver log of an EasyR1 run whose fork logs verl's GPU-memory helper on every rank at DEBUG: "
        "the Runner's YAML blocks (read by Ray in two pieces, a node-B line in between), helper lines from 16 "
        "WorkerDicts folded by Ray's deduplication into `[repeated 15x across cluster]` summaries, raylet lines "
        "with and without ip=, an autoscaler tip, and during the step-10 checkpoint a memory-monitor kill on node "
        "B reported three ways (worker death, raylet summary, driver traceback) while host and device memory stay flat.",
        H100_GIB,
    )


# ==========================================================================
# (d) EasyR1's FileLogger: experiment_log.jsonl of a healthy run
# ==========================================================================


def build_easyr1_jsonl() -> Sample:
    rng = seeded_rng("easyr1_experiment_log_jsonl")
    doc = LogDoc()
    val = easyr1_val_metrics(rng, 0.3012)
    doc.add(Emit(0.0, None, easyr1.jsonl_line(0, val), None))
    readings = []
    for step in range(1, 51):
        step_s = rng.gauss(139.0, 2.0)
        host = 211.93 + rng.gauss(0, 0.35) if step > 1 else 208.117
        max_alloc = 41.23496 if step > 1 else 39.80112
        max_res = 48.5 if step > 1 else 46.876953125
        metrics = easyr1_step_metrics(rng, step, cpu_gb=host, max_alloc_gb=max_alloc, max_res_gb=max_res, step_s=step_s, n_gpus=8)
        if step % 5 == 0:
            metrics.update(easyr1_val_metrics(rng, 0.33 + 0.004 * step))
        values = {col: float(metrics[key]) for key, col in EASYR1_METRICS.items()}
        doc.add(Emit(float(step), None, easyr1.jsonl_line(step, metrics), None))
        readings.append({"worker": "main", "rank": None, "kind": "train", "step": step, "reading": 0, "line_no": step + 1, **values})
    text = "".join(item.text + "\n" for item in doc.lines)
    records = [{"worker": "main", "rank": None, "kind": "train", "step": 0, "reading": 0, "line_no": 1}, *readings]
    return Sample(
        "easyr1/experiment_log.jsonl",
        text,
        Truth(records, [], None),
        "EasyR1's file logger (the default since 2025-10): experiment_log.jsonl of a healthy 50-step GRPO run, "
        "one nested JSON object per step with un-rounded floats; the allocator peaks settle after step 1 and host "
        "memory stays flat.",
    )


SAMPLES: list[Callable[[], Sample]] = [
    build_fr3_geometry3k,
    build_verl_healthy,
    build_ray_driver_mixed,
    build_easyr1_jsonl,
]
