"""Large, realistic training logs for the benchmark, written fast.

    python -m benchmarks.generate dense 1G                # -> /tmp/memlog-bench/dense-1G.log
    python -m benchmarks.generate ranks 16M --files 64    # -> /tmp/memlog-bench/ranks-64x16M/rank00.log ...
    python -m benchmarks.generate sparse 256M --out DIR

Kinds (line formats from /work/shared/reference/log-formats.md):
  dense      torchtitan (2025-09 format) teed by torchrun from 8 ranks: every line a step record,
             ANSI colours behind `[rankN]:[titan] <ts> - root - INFO - `, ranks interleaved.
  sparse     torchtitan (2024-07 format) from 8 ranks at log_freq=10, among NCCL collective debug
             lines, c10 and Python warnings and logged tracebacks: about one record per 50 lines.
  ray        the driver log of an EasyR1 run under Ray: `(Runner pid=N) Step N` and its YAML block of
             metrics with the coloured Ray prefix on every line, vLLM sleep/wake memory lines from
             WorkerDict actors with Ray's `[repeated Nx across cluster]` suffix, `\\r` tqdm bars.
  deepspeed  DeepSpeed 0.14 with memory_breakdown and wall_clock_breakdown: see_memory_usage
             triples, `time (ms)` lines, the `step=` progress and ThroughputTimer lines every 10
             steps, HF Trainer's loss dict.
  ranks      one torchtitan file per rank, as `> logs/rank$RANK.log` leaves them (no torchrun
             prefix), every line a step record. SIZE is per file; --files says how many.
  manyranks  dense, from MANY_RANKS (10,000) ranks teed into one file: a few hundred steps per rank.
  restarts   dense, 8 ranks whose job is resumed from step 1 every RESTART_EVERY (2,500) steps (a
             run appending to one file): memory climbs again in each segment.
  churn      one rank's file (no torchrun prefix, no colours) whose step counter restarts every
             CHURN_EVERY (2) steps: a restart loop, hundreds of thousands of segments.

Every log has a memory shape for the rules to judge: a warm-up knee over the first steps, then a
slow leak under noise (device memory for torchtitan and DeepSpeed, host memory for the Ray run).

Speed: each kind renders one block of a few hundred steps once, with the line writers of
tests.logwriters (shared with the sample-log generator and the tests), into a %-format template
whose only holes are what changes from block to block (step numbers, timestamps, memory readings). A block is then written with one
C-level `template % values`, so a GiB takes seconds. Noise lines repeat from block to block; the
step and memory series do not.

Files go outside the repository (default /tmp/memlog-bench, or $MEMLOG_BENCH_DIR). A `.ok` stamp
beside each file says it was written completely by this generator version, so later runs reuse it.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make this checkout's `memlog` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.logwriters import deepspeed as ds
from tests.logwriters import easyr1, hf_trainer, pytorch, ray
from tests.logwriters import torchtitan as titan
from tests.logwriters.mixing import interleave, interleave_chunks, seeded_rng
from tests.logwriters.python import Frame, asctime, traceback
from tests.logwriters.pytorch import H100, torchrun_prefix
from tests.logwriters.pytorch import H100_GIB as CAPACITY_GIB
from tests.logwriters.torchtitan import COLOR, LLAMA3_8B_FPT, reserved, throughput

GENERATOR_VERSION = "1"
DEFAULT_OUT = Path(os.environ.get("MEMLOG_BENCH_DIR", "/tmp/memlog-bench"))
KINDS = ("dense", "sparse", "ray", "deepspeed", "ranks", "manyranks", "restarts", "churn")
MANY_RANKS = 10_000  # `manyranks`: ranks teed into one file
RESTART_EVERY = 2_500  # `restarts`: steps between two resumes of the 8 ranks
CHURN_EVERY = 2  # `churn`: steps between two restarts of its one rank

# The line writers format their numbers themselves (`{step:2}`, `{mem_gib:5.2f}`), so a hole goes in
# as a marker value and its printed text is swapped for the %-conversion afterwards.
STEP_MARK, STEP_MARK_2 = 987654321, 987654322
GIB_MARK = 7777.77
PCT_MARK = 8888.88
MARKS = (1111.11, 2222.22, 3333.33)  # further float holes (DeepSpeed's memory, EasyR1's YAML values)
TS_MARK = "@TS@"  # a timestamp hole
TITAN_SWAPS = ((str(STEP_MARK), "%2d"), (f"{GIB_MARK:5.2f}", "%5.2f"), (f"{PCT_MARK:.2f}", "%.2f"))
PCT_PER_GIB = 100 / CAPACITY_GIB


def holes(text: str, *swaps: tuple[str, str]) -> str:
    """Escape `%` in a rendered line, then turn each marker into its %-conversion."""
    text = text.replace("%", "%%")
    for marker, conversion in swaps:
        if marker not in text:
            raise ValueError(f"marker {marker!r} not in {text!r}")
        text = text.replace(marker, conversion, 1)
    return text


def parse_size(text: str) -> int:
    """`1G`, `256M`, `16MiB`, `64k` or a byte count; binary units."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?B)?", text.strip())
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 1G, 256M, 64k)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


def size_label(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


@dataclass(frozen=True)
class Leak:
    """Memory in GiB at a step: a warm-up knee from `start` to `plateau`, then a straight climb of
    `leak` GiB over the whole run (so the slope does not depend on the file size)."""

    start: float
    plateau: float
    leak: float
    warmup_steps: float = 3.0

    def at(self, step: int, total_steps: int) -> float:
        knee = self.plateau - (self.plateau - self.start) * math.exp(-(step - 1) / self.warmup_steps)
        return knee + self.leak * step / total_steps


class Stamps:
    """Python logging's `%(asctime)s` of `start` + t seconds (rounded to the ms) for many instants,
    several times faster than `logwriters.python.asctime`: integer arithmetic on milliseconds, one
    strftime per day."""

    def __init__(self, start: datetime):
        self.start = start
        self.start_ms = ((start.hour * 60 + start.minute) * 60 + start.second) * 1000 + start.microsecond // 1000
        self.days: dict[int, str] = {}

    def __call__(self, t: float) -> str:
        day, ms = divmod(self.start_ms + round(t * 1000), 86_400_000)
        date = self.days.get(day)
        if date is None:
            midnight = self.start.replace(hour=0, minute=0, second=0, microsecond=0)
            date = self.days[day] = asctime(midnight + timedelta(days=day))[:10]
        seconds, ms = divmod(ms, 1000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        return f"{date} {hours:02d}:{minutes:02d}:{seconds:02d},{ms:03d}"


@dataclass
class LogKind:
    """How to write one kind of log: startup lines once, then the block template again and again."""

    header: str
    template: str  # `steps_per_block` steps of lines, holes as %-conversions
    steps_per_block: int
    values: Callable[[int, int], tuple]  # (block index, total steps of the run) -> the holes' values


# --------------------------------------------------------------------------------------------
# torchtitan: dense, sparse and per-rank files share the template and its filling
# --------------------------------------------------------------------------------------------

TITAN_START = datetime(2025, 9, 12, 2, 11, 47, 208000)
TITAN_STEP_SECONDS = 6.1
TS_HOLE, RECORD_HOLE = 0, 1  # a logger line's timestamp; a step line's (ts, step, gib, pct)


@dataclass
class TitanHole:
    step_offset: int  # step within the block whose timestamp / memory this line shows
    kind: int
    noise: float = 0.0  # this line's memory deviation from the run's curve, GiB


@dataclass
class Line:
    """One template line: its time (orders the ranks' lines when interleaved) and its hole, if any."""

    t: float
    text: str
    hole: TitanHole | None = None


def titan_prefix(rank: int | None, level: str, titan_tag: bool) -> str:
    """torchrun's tee prefix and the torchtitan logger prefix, timestamp as a hole."""
    return titan.log_line("", ts="%s", level=level, rank=rank, titan=titan_tag)


def titan_values(holes_: list[TitanHole], steps_per_block: int, leak: Leak, start: datetime, restart_every: int | None = None) -> Callable[[int, int], tuple]:
    """`restart_every`: the step counter goes back to 1 after this many steps (a resumed job), and
    memory starts its warm-up and leak again with it."""
    stamp = Stamps(start)

    def values(block: int, total_steps: int) -> tuple:
        first = block * steps_per_block + 1
        stamps = [stamp((first + k) * TITAN_STEP_SECONDS) for k in range(steps_per_block)]
        if restart_every:
            steps = [(first + k - 1) % restart_every + 1 for k in range(steps_per_block)]
            levels = [leak.at(step, restart_every) for step in steps]
        else:
            steps = [first + k for k in range(steps_per_block)]
            levels = [leak.at(step, total_steps) for step in steps]
        out: list = []
        for hole in holes_:
            k = hole.step_offset
            if hole.kind == TS_HOLE:
                out.append(stamps[k])
            else:
                gib = levels[k] + hole.noise
                out += (stamps[k], steps[k], gib, gib * PCT_PER_GIB)
        return tuple(out)

    return values


def titan_template(lines: list[Line]) -> tuple[str, list[TitanHole]]:
    """Join template lines; each carries its TitanHole (or none)."""
    text = "".join(item.text + "\n" for item in lines)
    return text, [item.hole for item in lines if item.hole]


def titan_header(ranks: list[int | None], start: datetime, *, titan_tag: bool, legacy: bool) -> str:
    lines = []
    for rank in ranks:
        gib, pct = reserved(3.85)
        for level, msg in (
            ("INFO", "Starting job: Llama 3 8B training"),
            ("WARNING", titan.NCCL_ENV_WARNING),
            ("INFO", titan.capacity_2024(H100, rank or 0) if legacy else titan.capacity(H100)),
            ("INFO", titan.model_memory("GPU" if legacy else "CUDA", gib, pct)),
            ("INFO", "Training starts at step 1."),
        ):
            lines.append(titan.log_line(msg, ts=asctime(start), level=level, rank=rank, titan=titan_tag))
    return "".join(line + "\n" for line in lines)


def make_dense(
    name: str = "dense", ranks: tuple[int | None, ...] = tuple(range(8)), steps_per_block: int = 256, restart_every: int | None = None, color: bool = True
) -> LogKind:
    """Every line a 2025-09 torchtitan step line; the ranks' lines of a step arrive in jittered order."""
    rng = seeded_rng(f"bench-{name}")
    offsets = {r: rng.uniform(-0.05, 0.05) for r in ranks}
    lines: list[Line] = []
    for k in range(steps_per_block):
        loss = 3.2 + rng.gauss(0, 0.05)
        tps = rng.gauss(5350, 40)
        streams = []
        for rank in ranks:
            tflops, mfu = throughput(tps, LLAMA3_8B_FPT)
            msg = titan.step_line_2025_09(
                step=STEP_MARK,
                loss=loss,
                grad_norm=abs(rng.gauss(0.9, 0.1)),
                mem_gib=GIB_MARK,
                mem_pct=PCT_MARK,
                tps=tps,
                tflops=tflops,
                mfu=mfu,
                color=COLOR if color else titan.NO_COLOR,
            )
            text = titan_prefix(rank, "INFO", True) + holes(msg, *TITAN_SWAPS)
            hole = TitanHole(k, RECORD_HOLE, offsets[rank] + rng.gauss(0, 0.03))
            streams.append([Line(k + rng.uniform(0, 0.004), text, hole)])
        lines += interleave(rng, streams)
    template, holes_ = titan_template(lines)
    leak = Leak(start=18.2, plateau=31.6, leak=6.0)
    header = titan_header(list(ranks), TITAN_START, titan_tag=True, legacy=False)
    return LogKind(header, template, steps_per_block, titan_values(holes_, steps_per_block, leak, TITAN_START, restart_every))


def make_many_ranks() -> LogKind:
    return make_dense(name="manyranks", ranks=tuple(range(MANY_RANKS)), steps_per_block=1)


def make_restarts() -> LogKind:
    return make_dense(name="restarts", restart_every=RESTART_EVERY)


def make_churn() -> LogKind:
    return make_dense(name="churn", ranks=(None,), steps_per_block=CHURN_EVERY * 64, restart_every=CHURN_EVERY, color=False)


def make_rank_file(rank: int) -> LogKind:
    """One rank's own file: the dense lines without torchrun's tee prefix."""
    return make_dense(name=f"rank{rank}", ranks=(None,), steps_per_block=1024)


LOG_FREQ = 10
HOST, PID = "h100-node-07", 2903
NCCL_COLLECTIVES = (
    # NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL: one line per collective, FSDP issues many per step.
    "NCCL INFO AllGather: opCount {op:x} sendbuff 0x7f2c3a{buf:06x} recvbuff 0x7f2c3e000000 count 16777216 "
    "datatype 9 op 0 root 0 comm 0x55d4c2a1e6b0 [nranks=8] stream 0x55d4c29f1e40",
    "NCCL INFO ReduceScatter: opCount {op:x} sendbuff 0x7f2c42000000 recvbuff 0x7f2c3a{buf:06x} count 2097152 "
    "datatype 9 op 0 root 0 comm 0x55d4c2a1e6b0 [nranks=8] stream 0x55d4c29f1e40",
    "NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f2c4c{buf:06x} recvbuff 0x7f2c4c{buf:06x} count 1 "
    "datatype 7 op 0 root 0 comm 0x55d4c2a1e6b0 [nranks=8] stream 0x55d4c29f1e40",
)
STREAMING_FRAMES = [
    Frame("/home/dev/torchtitan/torchtitan/datasets/hf_datasets.py", 131, "__iter__", "for sample in self._get_data_iter():"),
    Frame("/home/dev/.venv/lib/python3.10/site-packages/datasets/iterable_dataset.py", 1388, "__iter__", "for key, example in ex_iterable:", "ex_iterable"),
    Frame(
        "/home/dev/.venv/lib/python3.10/site-packages/datasets/utils/file_utils.py",
        827,
        "read_with_retries",
        "out = read(*args, **kwargs)",
        "read(*args, **kwargs)",
    ),
    Frame("/home/dev/.venv/lib/python3.10/site-packages/fsspec/implementations/http.py", 602, "read", "return super().read(length)", "super().read(length)"),
]


def _sparse_rank_window(rank: int, w: int, rng, steps_per_window: int) -> list[Line]:
    """One rank's lines over one log_freq window: NCCL collectives, now and then a warning, a
    logged traceback or a GC line, and at the end the step line (about one record per 50 lines)."""
    info, warning = titan_prefix(rank, "INFO", False), titan_prefix(rank, "WARNING", False)
    tee = torchrun_prefix(rank)
    last = (w + 1) * steps_per_window - 1  # the step offset the window's step line reports
    stamp = TitanHole(last, TS_HOLE)
    out: list[Line] = []
    for i in range(38):
        coll = NCCL_COLLECTIVES[i % 3].format(op=w * 38 + i, buf=rng.randrange(1 << 24))
        out.append(Line(0, holes(tee + pytorch.nccl_line(HOST, PID + rank, PID + rank + 131, rank, coll))))
    second, nanos = rng.randrange(60), rng.randrange(10**9)
    when = datetime(2025, 9, 12, 2, 14 + w % 40, second, nanos // 10**6 * 1000)
    out.append(
        Line(
            0,
            holes(
                tee
                + pytorch.c10_warning(
                    when,
                    nanos,
                    "ProcessGroupNCCL.cpp:1168",
                    "Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives. (function operator())",
                )
            ),
        )
    )
    out += [Line(0, holes(tee + line)) for line in pytorch.autocast_warning("/home/dev/.venv/lib/python3.10/site-packages")]
    if (w + rank) % 2 == 0:
        out.append(Line(0, warning + holes("Dataset c4 streaming read failed, retrying in 1 s (attempt 1/20)"), stamp))
        tb = traceback(STREAMING_FRAMES, "aiohttp.client_exceptions.ClientPayloadError: Response payload is not completed")
        out += [Line(0, holes(tee + line)) for line in tb]
    if w % 5 == 4:
        out.append(Line(0, info + holes(f"[GC] Peforming periodical GC collection. {rng.uniform(0.04, 0.07):.2f} seconds."), stamp))
    loss = 3.42 + rng.gauss(0, 0.07)
    wps = rng.gauss(5800, 45)
    _tflops, mfu = throughput(wps, LLAMA3_8B_FPT)
    msg = titan.step_line_2024_07(step=STEP_MARK, loss=loss, mem_gib=GIB_MARK, mem_pct=PCT_MARK, wps=wps, mfu=mfu, color=COLOR)
    out.append(Line(0, info + holes(msg, *TITAN_SWAPS), TitanHole(last, RECORD_HOLE, rng.gauss(0, 0.04))))
    return out


def make_sparse(windows_per_block: int = 8) -> LogKind:
    rng = seeded_rng("bench-sparse")
    ranks = list(range(8))
    lines: list[Line] = []
    for w in range(windows_per_block):
        lines += interleave_chunks(rng, [_sparse_rank_window(r, w, rng, LOG_FREQ) for r in ranks])
    template, holes_ = titan_template(lines)
    steps = windows_per_block * LOG_FREQ
    header = titan_header(ranks, TITAN_START, titan_tag=False, legacy=True)
    for rank in ranks:
        for i, line in enumerate(pytorch.NCCL_INIT):
            text = pytorch.NCCL_VERSION if line is None else pytorch.nccl_line(HOST, PID + rank, PID + rank + (131 if i >= 3 else 0), rank, line)
            header += torchrun_prefix(rank) + text + "\n"
    return LogKind(header, template, steps, titan_values(holes_, steps, Leak(start=34.1, plateau=41.8, leak=5.0), TITAN_START))


# --------------------------------------------------------------------------------------------
# Ray + EasyR1 driver log (log-formats.md §3.1, §3.2, §4.2)
# --------------------------------------------------------------------------------------------

RUNNER = ("Runner", 5121, None)  # (actor, pid, ip) of Ray's prefix; ip for another node than the driver's
WORKERS = [("WorkerDict", 5388, None)] + [("WorkerDict", 5388 + i, f"10.0.0.{2 + i // 4}") for i in range(1, 8)]
SLEEP_WAKE = (
    # (message, GiB used after it) around vLLM's wake-up and offload, every step, on every worker
    ("Before vllm wake up in sharding manager", 18.07),
    ("After vllm wake up in sharding manager", 61.42),
    ("Before vllm offload in sharding manager", 61.58),
    ("After vllm offload in sharding manager", 18.11),
)
# The config block this generator writes: its list is in Python's flow style, not the YAML block
# list `easyr1.config_block` writes (kept as it is so the benchmark logs stay byte-identical).
RAY_CONFIG = [
    "data:",
    "  max_prompt_length: 2048",
    "  train_files: hiyouga/math12k@train",
    "trainer:",
    "  logger: ['console', 'wandb']",
    "  n_gpus_per_node: 8",
    "  total_epochs: 15",
]


def ray_line(proc: tuple[str, int, str | None], message: str) -> str:
    actor, pid, ip = proc
    return ray.actor_prefix(pid, actor, ip) + message


def easyr1_metrics(rng) -> dict:
    """The metrics EasyR1's ConsoleLogger prints each step, unflattened; memory values are MARKS."""
    stats = lambda centre, spread: {"max": round(centre + spread, 3), "mean": round(centre + rng.gauss(0, spread / 10), 3), "min": round(centre - spread, 3)}
    return {
        "actor": {
            "entropy_loss": round(rng.uniform(0.45, 0.6), 3),
            "grad_norm": round(rng.uniform(0.15, 0.3), 3),
            "kl_loss": round(rng.uniform(0.0005, 0.002), 3),
            "lr": 1e-06,
            "pg_clipfrac_higher": round(rng.uniform(0, 0.004), 3),
            "pg_clipfrac_lower": 0.0,
            "pg_loss": round(rng.gauss(-0.01, 0.01), 3),
            "ppo_kl": 1.2e-05,
        },
        "critic": {"advantages": stats(0.0, 2.5), "returns": stats(0.0, 2.5), "rewards": stats(0.44, 0.56), "score": stats(0.44, 0.56)},
        "perf": {
            "cpu_memory_used_gb": MARKS[0],
            "max_memory_allocated_gb": MARKS[1],
            "max_memory_reserved_gb": MARKS[2],
            "mfu_actor": round(rng.uniform(0.28, 0.32), 3),
            "throughput": round(rng.gauss(1534, 20), 3),
            "time_per_step": round(rng.gauss(140, 3), 3),
            "total_num_tokens": 215040 + rng.randrange(4096),
        },
        "prompt_length": {"clip_ratio": 0.0, **stats(300.0, 210.0)},
        "response_length": {"clip_ratio": round(rng.uniform(0, 0.02), 3), **stats(620.0, 400.0)},
        "timing_s": {
            "adv": 0.051,
            "gen": round(rng.gauss(61, 2), 3),
            "old": round(rng.gauss(5.1, 0.2), 3),
            "ref": round(rng.gauss(6.2, 0.2), 3),
            "reward": round(rng.gauss(3.1, 0.2), 3),
            "step": round(rng.gauss(140, 3), 3),
            "update_actor": round(rng.gauss(60, 2), 3),
        },
    }


def make_ray(steps_per_block: int = 64) -> LogKind:
    rng = seeded_rng("bench-ray")
    parts: list[str] = []
    mem = f"{GIB_MARK:.2f}"
    for k in range(steps_per_block):
        for message, _gib in SLEEP_WAKE:
            # Ray dedup: the first worker's line, later the others folded into one with the count.
            parts.append(holes(ray_line(WORKERS[0], easyr1.gpu_memory(message, GIB_MARK)), (mem, "%.2f")))
            parts.append(holes(ray_line(WORKERS[rng.randrange(1, 8)], easyr1.gpu_memory(message, GIB_MARK)) + ray.repeated(7), (mem, "%.2f")))
        parts.append(
            holes(
                ray_line(
                    WORKERS[0],
                    f"INFO 03-01 12:{k % 60:02d}:{rng.randrange(60):02d} [executor_base.py:208] "
                    f"It took {rng.uniform(1.2, 2.4):.6f} seconds to wake up tags ['weights', 'kv_cache'].",
                )
            )
        )
        parts.append(
            holes(
                ray_line(
                    WORKERS[rng.randrange(1, 8)], "INFO 03-01 12:00:00 [executor_base.py:208] It took 1.8 seconds to wake up tags ['weights', 'kv_cache']."
                )
                + ray.repeated(7)
            )
        )
        bar = "".join(f"\rProcessed prompts: {p:3d}%|{'█' * (p // 10)}{' ' * (10 - p // 10)}| {p * 5}/500" for p in (0, 30, 70, 100))
        parts.append(holes(ray_line(WORKERS[0], bar)))
        step_line, *block = easyr1.step_block(STEP_MARK, easyr1_metrics(rng))
        parts.append(holes(ray_line(RUNNER, step_line), (str(STEP_MARK), "%d")))
        for line in block:
            marks = [(str(m), "%s") for m in MARKS if str(m) in line]
            parts.append(holes(ray_line(RUNNER, line), *marks))
        pct = rng.randrange(100)
        parts.append(holes(ray_line(RUNNER, f"\rRunning step: {pct:3d}%|{'█' * (pct // 10)}{' ' * (10 - pct // 10)}| {pct}/100 [1:02:11<2:41:04, 140.33s/it]")))
    template = "".join(p + "\n" for p in parts)
    host = Leak(start=180.0, plateau=212.0, leak=120.0, warmup_steps=5.0)  # host RAM creeping up
    device = [round(rng.gauss(0, 0.4), 3) for _ in range(steps_per_block)]

    def values(block: int, total_steps: int) -> tuple:
        first = block * steps_per_block + 1
        out: list = []
        for k in range(steps_per_block):
            step = first + k
            out += [gib + device[k] for _m, gib in SLEEP_WAKE for _ in (0, 1)]
            out += (step, str(round(host.at(step, total_steps), 3)), str(round(41.2 + device[k], 3)), str(round(48.5 + device[k], 3)))
        return tuple(out)

    init = easyr1.gpu_memory("After vllm init", 17.95)
    header = "".join(
        line + "\n"
        for line in [
            ray.driver_log("2025-08-31 15:45:59,633", "worker.py:1927", ray.started_local()),
            ray_line(RUNNER, "Config"),
            *(ray_line(RUNNER, line) for line in RAY_CONFIG),
            ray_line(WORKERS[0], init),
            # The first folded line carries Ray's one-time notice (log-formats.md §3.2).
            ray_line(WORKERS[5], init) + ray.repeated(7, notice=True),
        ]
    )
    return LogKind(header, template, steps_per_block, values)


# --------------------------------------------------------------------------------------------
# DeepSpeed (log-formats.md §2)
# --------------------------------------------------------------------------------------------

DS_PHASES = ("Engine before forward", "Engine after forward", "Engine before backward", "Engine after backward", "Engine before step", "Engine after step")
DS_ACTIVATIONS = (0.0, 9.4, 9.4, 1.1, 1.1, 0.0)  # GiB on top of weights+optimizer state at each phase


def ds_line(msg: str, where: str, *swaps: tuple[str, str]) -> str:
    """A DeepSpeed INFO line with its timestamp and the markers in `msg` as holes."""
    return holes(ds.log_line(msg, ts=TS_MARK, where=where), (TS_MARK, "%s"), *swaps)


def make_deepspeed(steps_per_block: int = 100) -> LogKind:
    rng = seeded_rng("bench-deepspeed")
    stamp = Stamps(datetime(2024, 7, 10, 14, 14, 51, 13000))
    ma, max_ma, ca = (str(m) for m in MARKS)
    memory = ds.see_memory_usage(ma=MARKS[0], max_ma=MARKS[1], ca=MARKS[2], max_ca=STEP_MARK)
    cpu = ds.cpu_virtual_memory(used_gib=GIB_MARK, percent=PCT_MARK)
    parts: list[str] = []
    for k in range(steps_per_block):
        for phase in DS_PHASES:
            parts.append(ds_line(phase, "utils.py:781:see_memory_usage"))
            parts.append(ds_line(memory, "utils.py:782:see_memory_usage", (ma, "%s"), (max_ma, "%s"), (ca, "%s"), (str(STEP_MARK), "%d")))
            parts.append(ds_line(cpu, "utils.py:789:see_memory_usage", (str(GIB_MARK), "%s"), (str(PCT_MARK), "%s")))
        timings = {
            "fwd_microstep": rng.gauss(120, 3),
            "bwd_microstep": rng.gauss(250, 5),
            "bwd_inner_microstep": rng.gauss(240, 5),
            "bwd_allreduce_microstep": rng.gauss(9.9, 0.3),
            "step_microstep": rng.gauss(30, 1),
        }
        parts.append(ds_line(ds.wall_clock(timings), "logging.py:96:log_dist"))
        if k % 10 == 9:
            lr = 4.99804827338393e-05 * (1 - k / 1e5)
            progress = ds.progress(step=STEP_MARK, skipped=0, lr=[lr, lr], mom=[(0.9, 0.95), (0.9, 0.95)])
            parts.append(ds_line(progress, "logging.py:96:log_dist", (str(STEP_MARK), "%d")))
            timer = ds.throughput(
                epoch=0, micro_step=STEP_MARK, step=STEP_MARK_2, avg=rng.gauss(25, 0.2), cur=rng.gauss(25.5, 0.5), alloc=MARKS[0], max_alloc=MARKS[1]
            )
            parts.append(ds_line(timer, "timer.py:260:stop", (str(STEP_MARK), "%d"), (str(STEP_MARK_2), "%d"), (ma, "%s"), (max_ma, "%s")))
            logs = hf_trainer.log_dict({"loss": round(rng.gauss(1.23, 0.05), 4), "grad_norm": rng.uniform(0.6, 1.1), "learning_rate": lr, "epoch": GIB_MARK})
            parts.append(holes(logs, (str(GIB_MARK), "%s")))
    template = "".join(p + "\n" for p in parts)
    allocated = Leak(start=2.1, plateau=14.2, leak=6.0)
    noise = [rng.gauss(0, 0.02) for _ in range(steps_per_block)]

    def values(block: int, total_steps: int) -> tuple:
        first = block * steps_per_block + 1
        out: list = []
        for k in range(steps_per_block):
            step = first + k
            ts = stamp(step * 1.4)
            ma = allocated.at(step, total_steps) + noise[k]
            peak = ma + max(DS_ACTIVATIONS)
            cpu = 36.79 + 0.2 * noise[k]
            for activations in DS_ACTIVATIONS:
                now = ma + activations
                out += (
                    ts,
                    ts,
                    str(round(now, 2)),
                    str(round(peak, 2)),
                    str(round(now + 2.3, 2)),
                    round(peak + 2.3),
                    ts,
                    str(round(cpu, 2)),
                    str(round(cpu / 10.01, 1)),
                )
            out.append(ts)
            if k % 10 == 9:
                out += (ts, step, ts, step * 4, step, str(round(ma, 2)), str(round(peak, 2)), str(round(step / 5000, 2)))
        return tuple(out)

    header = "".join(
        line + "\n"
        for line in [
            ds.log_line("Setting ds_accelerator to cuda (auto detect)", ts="2024-07-10 14:14:40,101", where="real_accelerator.py:203:get_accelerator"),
            ds.log_line("cdb=None", ts="2024-07-10 14:14:44,551", where="comm.py:637:init_distributed"),
            ds.log_line("Before initializing optimizer states", ts="2024-07-10 14:14:51,013", where="utils.py:781:see_memory_usage"),
            ds.log_line(ds.see_memory_usage(ma=0.32, max_ma=0.32, ca=0.32, max_ca=0), ts="2024-07-10 14:14:51,014", where="utils.py:782:see_memory_usage"),
            ds.log_line(ds.cpu_virtual_memory(used_gib=36.79, percent=3.7), ts="2024-07-10 14:14:51,015", where="utils.py:789:see_memory_usage"),
        ]
    )
    return LogKind(header, template, steps_per_block, values)


MAKERS: dict[str, Callable[[], LogKind]] = {
    "dense": make_dense,
    "sparse": make_sparse,
    "ray": make_ray,
    "deepspeed": make_deepspeed,
    "manyranks": make_many_ranks,
    "restarts": make_restarts,
    "churn": make_churn,
}


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_log(path: Path, kind: LogKind, size: int) -> None:
    """Write about `size` bytes (whole lines, never more) of `kind` to `path`."""
    header = kind.header.encode()
    block_bytes = len((kind.template % kind.values(0, kind.steps_per_block)).encode())
    n_blocks = max(1, math.ceil((size - len(header)) / block_bytes))
    total_steps = n_blocks * kind.steps_per_block
    partial = path.with_name(path.name + ".partial")
    written = 0
    with open(partial, "wb") as out:
        for block in range(-1, n_blocks):
            data = header if block < 0 else (kind.template % kind.values(block, total_steps)).encode()
            room = size - written
            if len(data) > room:
                data = data[: data.rfind(b"\n", 0, room) + 1]
            written += out.write(data)
            if written >= size or not data:
                break
    os.replace(partial, path)


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".ok")


def _fresh(path: Path) -> bool:
    stamp = _stamp(path)
    return path.exists() and stamp.exists() and stamp.read_text() == GENERATOR_VERSION


def generate(kind: str, size: int, out: Path = DEFAULT_OUT, *, files: int = 64, force: bool = False) -> list[Path]:
    """Write (or reuse) one log of `kind`; for `ranks`, `files` logs of `size` each. Returns the paths."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    out.mkdir(parents=True, exist_ok=True)
    if kind == "ranks":
        folder = out / f"ranks-{files}x{size_label(size)}"
        folder.mkdir(exist_ok=True)
        targets = [(folder / f"rank{r:02d}.log", lambda r=r: make_rank_file(r)) for r in range(files)]
    else:
        targets = [(out / f"{kind}-{size_label(size)}.log", MAKERS[kind])]
    for path, make in targets:
        if force or not _fresh(path):
            _stamp(path).unlink(missing_ok=True)
            write_log(path, make(), size)
            _stamp(path).write_text(GENERATOR_VERSION)
    return [path for path, _ in targets]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("size", help="bytes per file: 1G, 256M, 16M, 64k ...")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    parser.add_argument("--files", type=int, default=64, help="number of per-rank files for `ranks` (default 64)")
    parser.add_argument("--force", action="store_true", help="rewrite even if a complete file exists")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    paths = generate(args.kind, parse_size(args.size), args.out, files=args.files, force=args.force)
    total = sum(p.stat().st_size for p in paths)
    where = paths[0] if len(paths) == 1 else f"{paths[0].parent}/ ({len(paths)} files)"
    print(f"{where}: {total / 2**20:,.1f} MiB in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
