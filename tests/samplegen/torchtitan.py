"""torchtitan sample logs (as teed by torchrun) with ground truth.

Every torchtitan, torchrun and PyTorch line is written by tests.logwriters
(torchtitan, pytorch, python), which quote the f-strings of the version being
imitated (see /work/shared/reference/log-formats.md section 1); the numbers are
invented but consistent: memory percent = 100 * reserved / capacity, tflops and
mfu derive from tps and the model's FLOPs per token, timestamps follow the step
times.

Layout of a line:  ``[rankN]:`` (torchrun tee, no space) + ``[titan] `` (2025+)
+ ``YYYY-MM-DD HH:MM:SS,mmm - root - LEVEL - `` + message.
Python tracebacks raised under torch.distributed carry their own
``[rankN]: `` prefix, so under the tee they read ``[rank0]:[rank0]: ...``.

Ground-truth conventions (shared with the parser tests):
- a record per printed step / validate-step line, values as printed (read back
  from the written line by ``printed_fields``);
- an ``oom`` event per rank-prefixed ``torch.OutOfMemoryError`` line. The copy
  of each traceback that torchrun repeats inside its ``ChildFailedError``
  summary (unprefixed, indented) is not an event.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from tests.logwriters import python, pytorch
from tests.logwriters import torchtitan as titan
from tests.logwriters.python import Frame
from tests.logwriters.pytorch import H100
from tests.logwriters.pytorch import H100_GIB as CAPACITY_GIB
from tests.logwriters.torchtitan import DSV2_LITE_FPT, LLAMA3_8B_FPT, QWEN3_1_7B_FPT, reserved, throughput

from .common import (
    COLOR,
    Clock,
    Emit,
    LogDoc,
    Palette,
    Sample,
    clamp,
    excepthook_prefix,
    interleave,
    interleave_chunks,
    seeded_rng,
    torchrun_prefix,
)

# --------------------------------------------------------------------------
# Model constants (the printed numbers come from tests.logwriters.torchtitan)
# --------------------------------------------------------------------------

LLAMA3_8B_PARAMS = 8_030_261_248
DSV2_LITE_PARAMS = 15_706_484_224
QWEN3_1_7B_PARAMS = 2_031_739_904


# --------------------------------------------------------------------------
# Step lines: written by tests.logwriters.torchtitan, truth read back from the text
# --------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FIELD = re.compile(r"(\w+): +(\S+)")
_MEMORY = re.compile(r"(\d+\.\d+)GiB\((\d+\.\d+)%\)")


def printed_fields(msg: str) -> dict:
    """The truth fields of a (validate) step line: each value as printed, read back from the text."""
    fields: dict = {}
    for key, text in _FIELD.findall(_ANSI.sub("", msg)):
        if key == "memory":
            gib, pct = _MEMORY.fullmatch(text).groups()
            fields["mem_peak_reserved_gib"], fields["mem_peak_reserved_pct"] = float(gib), float(pct)
        elif key in ("wps", "tps"):
            fields["tps"] = int(text.replace(",", ""))
        elif key == "mfu":
            fields["mfu_pct"] = None if text == "N/A" else float(text.rstrip("%"))
        elif key in ("loss", "grad_norm", "tflops"):
            fields[key] = float(text.replace(",", ""))
    return fields


def step_line(writer: Callable[..., str], **values) -> tuple[str, dict]:
    """A step line from one of the torchtitan writers, and its truth fields."""
    msg = writer(**values)
    return msg, printed_fields(msg)


LLAMA3_8B_ARGS_2024 = (
    "ModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, "
    "multiple_of=1024, ffn_dim_multiplier=1.3, norm_eps=1e-05, rope_theta=500000, "
    "max_batch_size=32, max_seq_len=8192, depth_init=True, norm_type='rmsnorm')"
)
LLAMA3_8B_ARGS_2025 = (
    "TransformerModelArgs(_enforced='This field is used to enforce all fields have defaults.', "
    "dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, "
    "ffn_dim_multiplier=1.3, norm_eps=1e-05, rope_theta=500000, max_seq_len=8192, "
    "depth_init=True, use_flex_attn=False, attn_mask_type='causal', eos_id=0)"
)
DSV2_LITE_ARGS = (
    "DeepSeekV2ModelArgs(_enforced='This field is used to enforce all fields have defaults.', "
    "vocab_size=102400, dim=2048, inter_dim=10944, moe_inter_dim=1408, n_layers=27, "
    "n_dense_layers=1, n_heads=16, n_routed_experts=64, n_shared_experts=2, "
    "n_activated_experts=6, n_expert_groups=1, n_limited_groups=1, score_func='softmax', "
    "route_scale=1.0, q_lora_rank=0, kv_lora_rank=512, qk_nope_head_dim=128, "
    "qk_rope_head_dim=64, v_head_dim=128, use_flex_attn=False, attn_mask_type='causal', "
    "max_seq_len=4096, rope_theta=10000.0, rope_factor=40, beta_fast=32, beta_slow=1, mscale=0.707)"
)
# HEAD prints the model config as indented JSON: one logger line, many physical lines.
QWEN3_1_7B_JSON = """{
  "dim": 2048,
  "n_layers": 28,
  "n_heads": 16,
  "n_kv_heads": 8,
  "head_dim": 128,
  "hidden_dim": 6144,
  "vocab_size": 151936,
  "norm_eps": 1e-06,
  "rope_theta": 1000000,
  "qk_norm": true,
  "max_seq_len": 4096,
  "depth_init": true,
  "attn_backend": "sdpa",
  "attn_mask_type": "causal",
  "enable_weight_tying": false
}"""


def _llama3_stage_modules(stage: int) -> list[str]:
    if stage == 0:
        return ["tok_embeddings"] + [f"layers.{i}" for i in range(16)]
    return [f"layers.{i}" for i in range(16, 32)] + ["norm", "output"]


# --------------------------------------------------------------------------
# Run helper: prefixes, timestamps and interleaving for one torchrun job
# --------------------------------------------------------------------------


class TitanRun:
    """Builds the lines of one ``torchrun --tee 3 --local-ranks-filter ...`` job."""

    def __init__(self, *, name: str, start: datetime, titan_tag: bool, color: Palette, launcher_pid: int, launcher_tid: int | None = None):
        self.rng = seeded_rng(name)
        self.clock = Clock(start)
        self.doc = LogDoc()
        self.titan_tag = titan_tag
        self.c = color
        self.launcher_pid = launcher_pid
        # torch <= 2.4 printed the thread id where newer torch prints the pid.
        self.launcher_id = launcher_tid if launcher_tid is not None else launcher_pid

    # ---- single-line builders ---------------------------------------------

    def log(self, rank: int, t: float, level: str, msg: str, *, record: dict | None = None, events: list[dict] | None = None) -> Emit:
        """A torchtitan logger line, teed by torchrun."""
        text = titan.log_line(msg, ts=self.clock.asctime(t), level=level, rank=rank, titan=self.titan_tag)
        return Emit(t, rank, text, record, list(events or []))

    def log_multiline(self, rank: int, t: float, level: str, msg: str) -> list[Emit]:
        """A logger message containing newlines: only the first line gets the
        logging prefix, every physical line still gets the tee prefix."""
        first, *rest = msg.split("\n")
        out = [self.log(rank, t, level, first)]
        out += [Emit(t, rank, torchrun_prefix(rank) + line) for line in rest]
        return out

    def raw(self, rank: int, t: float, text: str, *, events: list[dict] | None = None) -> Emit:
        """Child output not produced by torchtitan's logger (prints, NCCL, warnings)."""
        return Emit(t, rank, torchrun_prefix(rank) + text, None, list(events or []))

    def torch_log(self, t: float, level: str, where: str, msg: str) -> Emit:
        """torchrun's own logger (glog-like head), not rank-prefixed."""
        return Emit(t, None, pytorch.torchrun_log(self.clock.at(t), level, self.launcher_id, where, msg))

    def plain(self, t: float, text: str) -> Emit:
        """torchrun's own stderr (its traceback, the ChildFailedError summary)."""
        return Emit(t, None, text)

    def c10_warning(self, rank: int, t: float, where: str, msg: str) -> Emit:
        nanos = self.rng.randrange(1_000_000)
        return self.raw(rank, t, pytorch.c10_warning(self.clock.at(t), nanos, where, msg))

    # ---- output ------------------------------------------------------------

    def emit(self, items: list[Emit]) -> None:
        self.doc.extend(items)

    def emit_ranks(self, streams: list[list[Emit]]) -> None:
        self.doc.extend(interleave(self.rng, streams))

    def emit_chunked(self, streams: list[list[Emit]]) -> None:
        self.doc.extend(interleave_chunks(self.rng, streams))

    # ---- common blocks -----------------------------------------------------

    def torchrun_banner(self, t: float, where: str) -> None:
        self.emit([self.torch_log(t, "W", where, m) for m in pytorch.OMP_BANNER])

    def startup(self, ranks: list[int], t0: float, entries_for: Callable[[int], list[tuple]]) -> float:
        """Emit each rank's startup messages, interleaved; return the end time.

        ``entries_for(rank)`` yields ``(gap_s, level_or_None, text, events)``;
        level None means a raw (non-logger) line, whose text may be a callable
        of the line's time; a text with newlines is a multi-line logger message.
        """
        streams = []
        end = t0
        for rank in ranks:
            t = t0 + self.rng.uniform(0.0, 0.06)
            stream: list[Emit] = []
            for gap, level, text, events in entries_for(rank):
                t += gap * self.rng.uniform(0.95, 1.05)
                if level is None:
                    raw_text = text(t) if callable(text) else text
                    stream.append(self.raw(rank, t, raw_text, events=events))
                elif "\n" in text:
                    stream.extend(self.log_multiline(rank, t, level, text))
                else:
                    stream.append(self.log(rank, t, level, text, events=events))
            streams.append(stream)
            end = max(end, t)
        self.emit_ranks(streams)
        return end


def emit_training_completed(run: TitanRun, ranks: list[int], t: float) -> None:
    """End of a successful run: rank 0 sleeps 2 s, the others finish at once."""
    rng = run.rng
    run.emit([run.log(0, t + 0.1, "INFO", "Sleeping 2 seconds for other ranks to complete")])
    done = {r: t + (2.1 if r == 0 else 0.12) + rng.uniform(0, 0.01) for r in ranks}
    run.emit_ranks([[run.log(r, done[r], "INFO", "Training completed")] for r in ranks])
    run.emit_ranks([[run.log(r, max(done.values()) + 0.5 + rng.uniform(0, 0.05), "INFO", "Process group destroyed.")] for r in ranks])


def _ev(kind: str, **fields) -> list[dict]:
    return [{"kind": kind, **fields}]


# --------------------------------------------------------------------------
# Shared traceback frames
# --------------------------------------------------------------------------

VENV = "/home/dev/.venv/lib/python3.12/site-packages"
TITAN = "/home/dev/torchtitan"

RUNPY = [
    Frame("<frozen runpy>", 198, "_run_module_as_main"),
    Frame("<frozen runpy>", 88, "_run_code"),
]


def record_wrapper(line: int) -> Frame:
    return Frame(f"{VENV}/torch/distributed/elastic/multiprocessing/errors/__init__.py", line, "wrapper", "return f(*args, **kwargs)", "f(*args, **kwargs)")


def module_call_frames() -> list[Frame]:
    return [
        Frame(f"{VENV}/torch/nn/modules/module.py", 1751, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)", "self._call_impl(*args, **kwargs)"),
        Frame(f"{VENV}/torch/nn/modules/module.py", 1762, "_call_impl", "return forward_call(*args, **kwargs)", "forward_call(*args, **kwargs)"),
    ]


def torchrun_main_frames(run_line: int, main_line: int, call_line: int, launch_line: int, wrapper_line: int) -> list[Frame]:
    return [
        Frame("/home/dev/.venv/bin/torchrun", 10, "<module>", "sys.exit(main())", "main()"),
        Frame(
            f"{VENV}/torch/distributed/elastic/multiprocessing/errors/__init__.py", wrapper_line, "wrapper", "return f(*args, **kwargs)", "f(*args, **kwargs)"
        ),
        Frame(f"{VENV}/torch/distributed/run.py", main_line, "main", "run(args)"),
        Frame(f"{VENV}/torch/distributed/run.py", run_line, "run", "elastic_launch("),
        Frame(
            f"{VENV}/torch/distributed/launcher/api.py",
            call_line,
            "__call__",
            "return launch_agent(self._config, self._entrypoint, list(args))",
            "launch_agent(self._config, self._entrypoint, list(args))",
        ),
        Frame(f"{VENV}/torch/distributed/launcher/api.py", launch_line, "launch_agent", "raise ChildFailedError("),
    ]


# ==========================================================================
# Scenario 1: field report 1 -- DeepSeek-V2-Lite pp=2 ep=2, linear leak, OOM
# ==========================================================================


def _fr1_oom_frames(stage: int) -> tuple[list[Frame], str]:
    """Frames of the step-7 OOM: first stage dies in an MoE expert matmul,
    the last stage in the output projection (vocab-sized logits)."""
    head = (
        RUNPY
        + [
            Frame(f"{TITAN}/torchtitan/train.py", 486, "<module>", "trainer.train()"),
            record_wrapper(355),
            Frame(f"{TITAN}/torchtitan/train.py", 402, "train", "self.train_step(inputs, labels)"),
            Frame(
                f"{TITAN}/torchtitan/train.py",
                318,
                "train_step",
                "self.pp_schedule.step(inputs, target=targets, losses=losses)" if stage == 0 else "self.pp_schedule.step(target=targets, losses=losses)",
            ),
            Frame(f"{VENV}/torch/distributed/pipelining/schedules.py", 625, "step", "self._step_microbatches(args_split, kwargs_split, targets_split, losses)"),
            Frame(
                f"{VENV}/torch/distributed/pipelining/schedules.py",
                717,
                "_step_microbatches",
                "output = self._stage.forward_one_chunk(fwd_mb_index, arg_mbs[fwd_mb_index], kwarg_mbs[fwd_mb_index])  # type: ignore[index]",
                "self._stage.forward_one_chunk(fwd_mb_index, arg_mbs[fwd_mb_index], kwarg_mbs[fwd_mb_index])",
            ),
            Frame(
                f"{VENV}/torch/distributed/pipelining/stage.py",
                641,
                "forward_one_chunk",
                "output = self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)",
                "self.forward_maybe_with_nosync(*composite_args, **composite_kwargs)",
            ),
            Frame(
                f"{VENV}/torch/distributed/pipelining/stage.py",
                476,
                "forward_maybe_with_nosync",
                "out_val = self.submod(*args, **kwargs)",
                "self.submod(*args, **kwargs)",
            ),
        ]
        + module_call_frames()
    )
    model = f"{TITAN}/torchtitan/models/deepseek_v2/model.py"
    moe = f"{TITAN}/torchtitan/models/deepseek_v2/moe.py"
    if stage == 0:
        tail = (
            [
                Frame(model, 388, "forward", "h = layer(h, self.freqs_cis)", "layer(h, self.freqs_cis)"),
            ]
            + module_call_frames()
            + [
                Frame(model, 311, "forward", "x = x + self.moe(self.ffn_norm(x))", "self.moe(self.ffn_norm(x))"),
            ]
            + module_call_frames()
            + [
                Frame(
                    moe,
                    262,
                    "forward",
                    "routed_output = self.experts(routed_input, num_tokens_per_expert)",
                    "self.experts(routed_input, num_tokens_per_expert)",
                ),
            ]
            + module_call_frames()
            + [
                Frame(
                    moe,
                    118,
                    "forward",
                    "h = F.silu(torch._grouped_mm(x, self.w1.transpose(-2, -1), offs=offsets))",
                    "torch._grouped_mm(x, self.w1.transpose(-2, -1), offs=offsets)",
                ),
            ]
        )
    else:
        tail = (
            [
                Frame(model, 394, "forward", "output = self.output(h) if self.output else h", "self.output(h)"),
            ]
            + module_call_frames()
            + [
                Frame(
                    f"{VENV}/torch/nn/modules/linear.py",
                    125,
                    "forward",
                    "return F.linear(input, self.weight, self.bias)",
                    "F.linear(input, self.weight, self.bias)",
                ),
            ]
        )
    return head + tail, ("2.00 GiB" if stage == 0 else "3.13 GiB")


def build_fr1_pp2_ep2_leak_oom() -> Sample:
    c = COLOR
    run = TitanRun(name="fr1_pp2_ep2_leak_oom", start=datetime(2025, 3, 18, 10, 2, 11, 530000), titan_tag=True, color=c, launcher_pid=1843021)
    rng = run.rng
    ranks = [0, 1, 2, 3]
    stage_of = {0: 0, 1: 0, 2: 1, 3: 1}  # pp is the outer mesh dim: ranks 0,1 | 2,3
    pids = {r: 1843087 + r for r in ranks}
    model_mem = {0: 7.62, 1: 7.62, 2: 7.18, 3: 7.18}

    run.torchrun_banner(0.0, "torch/distributed/run.py:792")

    def entries(rank: int) -> list[tuple]:
        stage = stage_of[rank]
        gib, pct = reserved(model_mem[rank])
        start_layer, stop_layer = ("None", "layers.14") if stage == 0 else ("layers.14", "None")
        return [
            (3.4, "INFO", "Starting job: DeepSeek-V2-Lite pp2 ep2 training", None),
            (0.28, "WARNING", titan.NCCL_ENV_WARNING, None),
            (0.006, "INFO", titan.mesh(["pp", "dp_shard"], [2, 2]), None),
            (0.02, "INFO", "[GC] Initial GC collection. 0.00 seconds.", None),
            (
                0.21,
                None,
                lambda t: pytorch.c10_warning(
                    run.clock.at(t),
                    318722 + rank * 1117,
                    "ProcessGroupNCCL.cpp:4561",
                    f"[PG ID 0 PG GUID 0 Rank {rank}]  using GPU {rank} to perform barrier as "
                    "devices used by this process are currently unknown. This can potentially "
                    "cause a hang if this rank to GPU mapping is incorrect. Specify device_ids "
                    "in barrier() to force use of a particular device, or call "
                    "init_process_group() with a device_id.",
                ),
                None,
            ),
            (0.31, "INFO", "Loading tokenizer from tokenizer.json", None),
            (0.72, "INFO", "Preparing c4 dataset from allenai/c4", None),
            (4.1, "INFO", f"Building deepseek_v2 16B with {DSV2_LITE_ARGS}", None),
            (0.002, "INFO", titan.capacity(H100), _ev("capacity", capacity_gib=CAPACITY_GIB)),
            (0.19, "INFO", titan.model_size("deepseek_v2", "16B", DSV2_LITE_PARAMS, c), None),
            (0.03, "INFO", f"PP rank {stage} is building stage_idx {stage} with start_layer {start_layer}, stop_layer {stop_layer}", None),
            (0.08, "INFO", "Applied full activation checkpointing to the model", None),
            (0.05, "INFO", "Applied FSDP to the model", None),
            (0.01, "INFO", "Using pipeline schedule 1F1B with 8 microbatches and 2 stages.", None),
            # printed (not logged) by the symmetric-memory all-to-all path
            (0.6, None, f"EP rank [{rank % 2}]: Created Symmetric Memory for MoE", None),
            (0.9, "INFO", "Peak FLOPS used for computing MFU: 9.890e+14", None),
            (0.001, "INFO", titan.model_memory("CUDA", gib, pct), _ev("model_memory", mem_gib=float(f"{gib:.2f}"))),
            (0.35, "INFO", "Training starts at step 1.", None),
            (0.001, "INFO", "Profiling active. Traces will be saved at ./outputs/profile_trace", None),
        ]

    t = run.startup(ranks, 0.0, entries)

    # Memory: a straight line from ~21 GiB, +9.5 GiB per step, on every rank.
    base = {0: 21.06, 1: 21.02, 2: 20.71, 3: 20.74}
    slope = {0: 9.52, 1: 9.52, 2: 9.47, 3: 9.47}
    losses = [11.9163, 11.7208, 11.4127, 11.0735, 10.8164, 10.5321]
    step_times = [31.8] + [rng.uniform(2.45, 2.75) for _ in range(5)]
    for step in range(1, 7):
        t += step_times[step - 1]
        streams = []
        for rank in ranks:
            tr = t + rng.uniform(0.0, 0.004)
            mem = base[rank] + slope[rank] * (step - 1) + clamp(rng.gauss(0, 0.02), -0.05, 0.05)
            gib, pct = reserved(mem)
            tps = 181 * rng.uniform(0.97, 1.03) if step == 1 else rng.gauss(2965, 35)
            tflops, mfu = throughput(tps, DSV2_LITE_FPT)
            loss = -1.0 if stage_of[rank] == 0 else losses[step - 1]
            msg, fields = step_line(titan.step_line_2025_03, step=step, loss=loss, mem_gib=gib, mem_pct=pct, tps=tps, tflops=tflops, mfu=mfu, color=c)
            record = {"rank": rank, "step": step, "kind": "train", **fields}
            stream = [run.log(rank, tr, "INFO", msg, record=record)]
            if step == 1:
                stream.append(run.log(rank, tr + 0.001, "INFO", titan.SYNC_TIMEOUT))
            streams.append(stream)
        run.emit_ranks(streams)

    # Step 7 never logs: every rank hits the CUDA OOM mid-forward.
    t += rng.uniform(1.7, 2.0)
    free = {0: "1.02 GiB", 1: "1.07 GiB", 2: "1.15 GiB", 3: "1.11 GiB"}
    in_use = {0: "78.08 GiB", 1: "78.03 GiB", 2: "77.95 GiB", 3: "77.99 GiB"}
    alloc = {0: "75.41 GiB", 1: "75.37 GiB", 2: "74.86 GiB", 3: "74.92 GiB"}
    unalloc = {0: "1.13 GiB", 1: "1.12 GiB", 2: "1.54 GiB", 3: "1.51 GiB"}
    death_time = {}
    tracebacks = {}
    streams = []
    for rank in ranks:
        tr = t + rng.uniform(0.0, 0.35)
        death_time[rank] = tr
        frames, tried = _fr1_oom_frames(stage_of[rank])
        exc = pytorch.cuda_oom(
            tried=tried, gpu=rank, capacity_gib=CAPACITY_GIB, free=free[rank], in_use=in_use[rank], allocated=alloc[rank], unallocated=unalloc[rank]
        )
        lines = python.traceback(frames, exc)
        tracebacks[rank] = lines
        stream = []
        for line in lines:
            events = _ev("oom") if line.startswith("torch.OutOfMemoryError") else None
            stream.append(run.raw(rank, tr, excepthook_prefix(rank) + line, events=events))
        stream.append(
            run.c10_warning(
                rank,
                tr + 0.4,
                "ProcessGroupNCCL.cpp:1496",
                "Warning: WARNING: destroy_process_group() was not called before program exit, which can "
                "leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown "
                "(function operator())",
            )
        )
        streams.append(stream)
    run.emit_chunked(streams)

    t = max(death_time.values()) + 1.3
    root = min(ranks, key=lambda r: death_time[r])
    run.emit(
        [
            run.torch_log(
                t,
                "E",
                "torch/distributed/elastic/multiprocessing/api.py:874",
                f"failed (exitcode: 1) local_rank: {root} (pid: {pids[root]}) of binary: /home/dev/.venv/bin/python3",
            )
        ]
    )
    _emit_child_failed(
        run,
        t + 0.05,
        "torchtitan.train",
        host="gpu-h100-03",
        ranks=ranks,
        root=root,
        pids=pids,
        death_time=death_time,
        tracebacks=tracebacks,
        error_dir="/tmp/torchelastic_7bq1x0ke/none_4k2z9m1c",
    )

    return run.doc.to_sample(
        "torchtitan/fr1_pp2_ep2_leak_oom.log",
        "DeepSeek-V2-Lite with pp=2 ep=2 on 4 GPUs (all ranks logged, 2025-03 format): peak reserved "
        "memory climbs ~9.5 GiB per step in a straight line on every rank until all four ranks die with "
        "a CUDA OOM during step 7, while the first-stage ranks print the pipeline sentinel loss -1.0000.",
        CAPACITY_GIB,
    )


def _emit_child_failed(
    run: TitanRun,
    t: float,
    name: str,
    *,
    host: str,
    ranks: list[int],
    root: int,
    pids: dict[int, int],
    death_time: dict[int, float],
    tracebacks: dict[int, list[str]],
    error_dir: str,
) -> None:
    """torchrun's own traceback plus the ChildFailedError summary (tests.logwriters.pytorch)."""
    lines = python.traceback(
        torchrun_main_frames(run_line=909, main_line=918, call_line=138, launch_line=269, wrapper_line=355),
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    )

    def failure(rank: int) -> list[str]:
        return pytorch.failure_lines(
            ranks.index(rank),
            time=run.clock.elastic(death_time[rank]),
            host=host,
            rank=rank,
            pid=pids[rank],
            error_file=f"{error_dir}/attempt_0/{rank}/error.json",
            traceback=tracebacks[rank],
        )

    lines += pytorch.child_failed_summary(name, [failure(r) for r in ranks if r != root], failure(root))
    run.emit([run.plain(t, line) for line in lines])


# ==========================================================================
# Scenario 2: field report 2 -- llama3 8B FSDP, log_freq=10, slow creep
# ==========================================================================


def build_fr2_logfreq_creep() -> Sample:
    c = COLOR
    run = TitanRun(
        name="fr2_logfreq_creep", start=datetime(2024, 7, 15, 9, 41, 3, 114000), titan_tag=False, color=c, launcher_pid=2871, launcher_tid=140234567891200
    )
    rng = run.rng
    rank = 0
    host, pid = "h100-node-07", 2903

    run.torchrun_banner(0.0, "torch/distributed/run.py:779")

    model_gib, model_pct = reserved(3.78)
    progress = (
        "\rGenerating train split: 0 examples [00:00, ? examples/s]"
        "\rGenerating train split: 45000 examples [00:00, 187012.44 examples/s]"
        "\rGenerating train split: 45000 examples [00:00, 185519.06 examples/s]"
    )

    def entries(_rank: int) -> list[tuple]:
        return [
            (2.6, "INFO", "Starting job: Llama 3 8B training", None),
            (0.29, "WARNING", titan.NCCL_ENV_WARNING, None),
            (0.004, "INFO", titan.capacity_2024(H100, 0), _ev("capacity", capacity_gib=CAPACITY_GIB)),
            (0.003, "INFO", titan.mesh(["dp"], [8]), None),
            (0.012, "INFO", "[GC] Initial GC collection. 0.00 seconds.", None),
            (0.25, "INFO", "Building tiktoken tokenizer locally from ./torchtitan/datasets/tokenizer/original/tokenizer.model", None),
            (0.41, "INFO", "TikTokenizer built: #words 128256, BOS ID 128000, EOS ID 128001", None),
            (0.002, "INFO", "Preparing c4_mini dataset from ./torchtitan/datasets/c4_mini", None),
            # HF datasets' tqdm bar: '\r'-separated refreshes on one physical line
            (0.15, None, progress, None),
            (0.4, "INFO", f"Building llama3 8B with {LLAMA3_8B_ARGS_2024}", None),
            (0.21, "INFO", titan.model_size("llama3", "8B", LLAMA3_8B_PARAMS, c), None),
            (0.05, "INFO", "Applied selective activation checkpointing to the model", None),
            (0.09, "INFO", "Applied FSDP to the model", None),
            (1.2, "INFO", titan.model_memory("GPU", model_gib, model_pct), _ev("model_memory", mem_gib=float(f"{model_gib:.2f}"))),
            (0.02, "INFO", "Profiling active. Traces will be saved at ./outputs/profile_trace", None),
            (
                0.01,
                "INFO",
                "Training starts at step 1, with local batch size 1, global batch size 8, sequence length 8192, total steps 1000 (warmup 200)",
                None,
            ),
        ]

    t = run.startup([rank], 0.0, entries)

    # NCCL (NCCL_DEBUG=INFO) initialises lazily at the first collective.
    t += 0.8
    tid = pid + 131
    nccl = []
    for i, line in enumerate(pytorch.NCCL_INIT):
        text = pytorch.NCCL_VERSION if line is None else pytorch.nccl_line(host, pid, pid if i < 3 else tid, 0, line)
        nccl.append(run.raw(rank, t + 0.01 * i, text))
    run.emit(nccl)
    run.emit([run.raw(rank, t + 2.0, line) for line in pytorch.autocast_warning("/home/dev/.venv/lib/python3.10/site-packages")])

    # Memory: warm-up 34.1 -> 41.8 GiB by step 10, then a creep of ~3 MiB/step
    # (0.0293 GiB per 10-step log line) under noise of sd 0.04 GiB.
    reloop_steps = {274, 549, 823}
    prev_step = 0
    pending_dump = 0.0  # a profiler trace dump after a log line slows the next window
    for step in [1] + list(range(10, 1001, 10)):
        window = step - prev_step
        if step == 1:
            elapsed = 26.4 * rng.uniform(0.98, 1.02)
            mem = 34.1 + rng.gauss(0, 0.01)
            loss = 10.8 + rng.gauss(0, 0.03)
        else:
            elapsed = window * 8192 / rng.gauss(5800, 45) + pending_dump
            mem = 41.8 + 0.0293 * (step - 10) / 10 + rng.gauss(0, 0.04)
            loss = 3.42 + 7.1 * 2.718281828 ** (-(step - 1) / 165) + rng.gauss(0, 0.07)
        # GC and dataset re-loop messages come from inside the window.
        pre: list[Emit] = []
        for s in range(prev_step + 1, step + 1):
            ts = t + pending_dump + (s - prev_step - 0.5) * (elapsed - pending_dump) / window
            if s > 1 and s % 50 == 0:
                pre.append(run.log(rank, ts, "INFO", f"[GC] Peforming periodical GC collection. {rng.uniform(0.04, 0.07):.2f} seconds."))
            if s in reloop_steps:
                pre.append(run.log(rank, ts, "WARNING", "Dataset c4_mini is being re-looped"))
        run.emit(pre)
        t += elapsed
        wps = window * 8192 / elapsed
        gib, pct = reserved(mem)
        _tflops, mfu = throughput(wps, LLAMA3_8B_FPT)
        msg, fields = step_line(titan.step_line_2024_07, step=step, loss=loss, mem_gib=gib, mem_pct=pct, wps=wps, mfu=mfu, color=c)
        items = [run.log(rank, t, "INFO", msg, record={"rank": rank, "step": step, "kind": "train", **fields})]
        if step == 1:
            items.append(run.log(rank, t + 0.001, "INFO", titan.SYNC_TIMEOUT))
        pending_dump = 0.0
        if step % 100 == 0:
            pending_dump = rng.uniform(0.9, 1.3)
            items.append(run.log(rank, t + 0.002, "INFO", f"Dumping traces at step {step}"))
            items.append(run.log(rank, t + 0.002 + pending_dump, "INFO", f"Finished dumping traces in {pending_dump:.2f} seconds"))
        run.emit(items)
        prev_step = step

    t += pending_dump
    run.emit(
        [
            run.log(rank, t + 0.05, "INFO", "Sleeping 2 seconds for other ranks to complete"),
            run.log(rank, t + 2.06, "INFO", "Training completed"),
        ]
    )
    return run.doc.to_sample(
        "torchtitan/fr2_logfreq_creep.log",
        "llama3 8B FSDP on 8 GPUs, rank 0 only, log_freq=10 (2024-07 format, wps, colour): after the "
        "step-1 to step-10 warm-up, peak reserved memory creeps ~3 MiB/step (0.03 GiB per log line) "
        "under larger per-line noise for 1000 steps, a slow leak that is invisible line to line.",
        CAPACITY_GIB,
    )


# ==========================================================================
# Scenario 3: field report 5 -- llama3 8B pp=2, all 8 ranks, warm-up plateau
# ==========================================================================


def _llama3_pp_entries(run: TitanRun, rank: int, stage: int, *, model_mem: float, steps: int, pp_warning_rank: int | None, validation: bool) -> list[tuple]:
    """Startup of a 2025-09 torchtitan llama3 8B run with pp=2 on 8 GPUs."""
    c = run.c
    gib, pct = reserved(model_mem)
    entries = [
        (3.1, "INFO", "Starting job: Llama 3 8B training", None),
        (0.3, "WARNING", titan.NCCL_ENV_WARNING, None),
        (0.005, "INFO", titan.mesh(["pp", "dp_shard"], [2, 4]), None),
        (0.02, "INFO", "[GC] Initial GC collection. 0.00 seconds.", None),
        (0.2, "INFO", "Loading tokenizer from tokenizer.json", None),
        (0.65, "INFO", "Preparing c4 dataset from allenai/c4", None),
        (3.8, "INFO", f"Building llama3 8B with {LLAMA3_8B_ARGS_2025}", None),
        (0.002, "INFO", titan.capacity(H100), _ev("capacity", capacity_gib=CAPACITY_GIB)),
        (0.2, "INFO", titan.model_size("llama3", "8B", LLAMA3_8B_PARAMS, c), None),
        (0.03, "INFO", f"PP rank {stage} is building stage_idx {stage} with modules {_llama3_stage_modules(stage)}", None),
        (0.06, "INFO", "Applied selective activation checkpointing to the model", None),
        (0.05, "INFO", "Applied FSDP to the model", None),
        (0.01, "INFO", "Using pipeline schedule 1F1B with 8 microbatches and 2 stages.", None),
    ]
    if pp_warning_rank is not None:
        entries.append((0.4, "WARNING", titan.pp_loss_not_visible(pp_warning_rank, c), _ev("pp_loss_not_visible", loss_rank=pp_warning_rank)))
    entries += [
        (0.5, "INFO", "Peak FLOPS used for computing MFU: 9.890e+14", None),
        (0.001, "INFO", titan.model_memory("CUDA", gib, pct), _ev("model_memory", mem_gib=float(f"{gib:.2f}"))),
        (0.002, "INFO", "Mixed precision training is handled by fully_shard", None),
    ]
    if validation:
        entries.append((0.7, "INFO", "Preparing c4_validation dataset from allenai/c4", None))
    entries += [
        (
            0.05,
            "INFO",
            "Trainer is initialized with local batch size 8, global batch size 32, gradient "
            f"accumulation steps 1, sequence length 8192, total steps {steps} (warmup 200).",
            None,
        ),
        (0.3, "INFO", "Training starts at step 1.", None),
        (0.001, "INFO", "Profiling active. Traces will be saved at ./outputs/profile_trace", None),
    ]
    return entries


def build_fr5_pp8_warmup_plateau() -> Sample:
    c = COLOR
    run = TitanRun(name="fr5_pp8_warmup_plateau", start=datetime(2025, 9, 12, 2, 11, 47, 208000), titan_tag=True, color=c, launcher_pid=2210987)
    rng = run.rng
    ranks = list(range(8))
    stage_of = {r: 0 if r < 4 else 1 for r in ranks}  # ranks 0-3 first stage, 4-7 last

    run.torchrun_banner(0.0, "torch/distributed/run.py:811")
    t = run.startup(
        ranks,
        0.0,
        lambda r: _llama3_pp_entries(run, r, stage_of[r], model_mem=2.38 if stage_of[r] == 0 else 2.21, steps=30, pp_warning_rank=None, validation=True),
    )

    # Memory: step 1 (no optimizer state yet), step 2 jumps (Adam state), step
    # 3 settles +0.3, then flat with noise sd 0.03; each stage keeps its level.
    levels = {0: (18.2, 31.6, 31.9), 1: (16.9, 27.3, 27.6)}
    offset = {r: rng.uniform(-0.02, 0.02) for r in ranks}

    def memory(rank: int, step: int) -> float:
        s1, s2, flat = levels[stage_of[rank]]
        if step == 1:
            return s1 + offset[rank] + rng.gauss(0, 0.01)
        if step == 2:
            return s2 + offset[rank] + rng.gauss(0, 0.01)
        return flat + offset[rank] + rng.gauss(0, 0.03)

    loss_curve = [12.2465]
    for _ in range(29):
        loss_curve.append(loss_curve[-1] - max(0.02, 0.19 * (loss_curve[-1] - 7.2) / 4.9) + rng.gauss(0, 0.04))
    grad_norms = [10.4127] + [2.9 + 9.0 * 2.718281828 ** (-s / 4) + rng.gauss(0, 0.3) for s in range(2, 31)]

    for step in range(1, 31):
        t += 41.3 if step == 1 else rng.uniform(6.0, 6.3)
        tps_base = 800 if step == 1 else rng.gauss(5350, 40)
        streams = []
        for rank in ranks:
            tr = t + rng.uniform(0.0, 0.005)
            gib, pct = reserved(memory(rank, step))
            tps = tps_base * rng.uniform(0.995, 1.005)
            tflops, mfu = throughput(tps, LLAMA3_8B_FPT)
            loss = -1.0 if stage_of[rank] == 0 else loss_curve[step - 1]
            msg, fields = step_line(
                titan.step_line_2025_09,
                step=step,
                loss=loss,
                grad_norm=grad_norms[step - 1],
                mem_gib=gib,
                mem_pct=pct,
                tps=tps,
                tflops=tflops,
                mfu=mfu,
                color=c,
            )
            stream = [run.log(rank, tr, "INFO", msg, record={"rank": rank, "step": step, "kind": "train", **fields})]
            if step == 1:
                stream.append(run.log(rank, tr + 0.001, "INFO", titan.SYNC_TIMEOUT))
            streams.append(stream)
        run.emit_ranks(streams)

        if step == 25:  # validation.freq = 25, runs right after the train step
            t += rng.uniform(3.1, 3.4)
            streams = []
            for rank in ranks:
                tr = t + rng.uniform(0.0, 0.005)
                gib, pct = reserved(memory(rank, step))
                loss = -1.0 if stage_of[rank] == 0 else loss_curve[24] + 0.137
                msg, fields = step_line(titan.validate_line, step=step, loss=loss, mem_gib=gib, mem_pct=pct, tps=rng.gauss(15800, 60), color=c)
                rec = {"rank": rank, "step": step, "kind": "validate", **fields}
                streams.append([run.log(rank, tr, "INFO", msg, record=rec)])
            run.emit_ranks(streams)

    emit_training_completed(run, ranks, t)
    return run.doc.to_sample(
        "torchtitan/fr5_pp8_warmup_plateau.log",
        "llama3 8B with pp=2 on 8 GPUs, every rank logged at log_freq=1 (2025-09 format): memory rises at "
        "steps 1-3 (optimizer state) and then stays flat at a different level per stage, ranks 0-3 print "
        "the sentinel loss -1.0000 and ranks 4-7 the real loss, with a validation line at step 25.",
        CAPACITY_GIB,
    )


# ==========================================================================
# Scenario 4: torchtitan #547 -- pp=2, LOG_RANK=0, log_freq=10, two points
# ==========================================================================


def build_fr5_two_points() -> Sample:
    c = COLOR
    run = TitanRun(name="fr5_two_points", start=datetime(2025, 9, 15, 16, 40, 2, 671000), titan_tag=True, color=c, launcher_pid=3316402)
    rng = run.rng
    rank = 0

    run.torchrun_banner(0.0, "torch/distributed/run.py:811")
    # Rank 4 (first rank of the last stage) holds the loss but is not teed.
    t = run.startup([rank], 0.0, lambda r: _llama3_pp_entries(run, r, 0, model_mem=2.38, steps=1000, pp_warning_rank=4, validation=False))

    points = [(1, 19.5, 39.7, 812, 11.8342), (10, 33.8, 6.2 * 9, 5310, 5.9127)]
    for step, mem, dt, tps, grad_norm in points:
        t += dt
        gib, pct = reserved(mem)
        tps *= rng.uniform(0.99, 1.01)
        tflops, mfu = throughput(tps, LLAMA3_8B_FPT)
        msg, fields = step_line(
            titan.step_line_2025_09, step=step, loss=-1.0, grad_norm=grad_norm, mem_gib=gib, mem_pct=pct, tps=tps, tflops=tflops, mfu=mfu, color=c
        )
        items = [run.log(rank, t, "INFO", msg, record={"rank": rank, "step": step, "kind": "train", **fields})]
        if step == 1:
            items.append(run.log(rank, t + 0.001, "INFO", titan.SYNC_TIMEOUT))
        run.emit(items)

    # The user stops the run with Ctrl-C during step 17 (the terminal's "^C"
    # echo is not part of a piped log).
    t += 7 * 6.2 + 2.4
    launcher_pid = run.launcher_pid
    run.emit([run.torch_log(t, "W", "torch/distributed/elastic/agent/server/api.py:719", "Received Signals.SIGINT death signal, shutting down workers")])
    run.emit(
        [
            run.torch_log(
                t + 0.001 * (i + 1),
                "W",
                "torch/distributed/elastic/multiprocessing/api.py:900",
                f"Sending process {launcher_pid + 66 + i} closing signal SIGINT",
            )
            for i in range(8)
        ]
    )
    frames = RUNPY + [
        Frame(f"{TITAN}/torchtitan/train.py", 628, "<module>", "trainer.train()"),
        record_wrapper(357),
        Frame(f"{TITAN}/torchtitan/train.py", 541, "train", "self.train_step(data_iterator)"),
        Frame(
            f"{TITAN}/torchtitan/train.py",
            463,
            "train_step",
            "loss = self.forward_backward_step(input_dict, labels)",
            "self.forward_backward_step(input_dict, labels)",
        ),
        Frame(f"{TITAN}/torchtitan/train.py", 401, "forward_backward_step", "self.pp_schedule.step("),
        Frame(f"{VENV}/torch/distributed/pipelining/schedules.py", 692, "step", "self._step_microbatches(args_split, kwargs_split, targets_split, losses)"),
        Frame(f"{VENV}/torch/distributed/pipelining/schedules.py", 812, "_step_microbatches", "_wait_batch_p2p(fwd_sends_to_wait)"),
        Frame(f"{VENV}/torch/distributed/pipelining/schedules.py", 566, "_wait_batch_p2p", "work.wait()"),
    ]
    tb = python.traceback(frames, "KeyboardInterrupt")
    run.emit([run.raw(rank, t + 0.02, excepthook_prefix(rank) + line) for line in tb])
    t += 0.9
    main = python.traceback(
        [
            Frame("/home/dev/.venv/bin/torchrun", 10, "<module>", "sys.exit(main())", "main()"),
            record_wrapper(357),
            Frame(f"{VENV}/torch/distributed/run.py", 936, "main", "run(args)"),
            Frame(f"{VENV}/torch/distributed/run.py", 927, "run", "elastic_launch("),
            Frame(
                f"{VENV}/torch/distributed/launcher/api.py",
                156,
                "__call__",
                "return launch_agent(self._config, self._entrypoint, list(args))",
                "launch_agent(self._config, self._entrypoint, list(args))",
            ),
            Frame(f"{VENV}/torch/distributed/launcher/api.py", 284, "launch_agent", "result = agent.run()", "agent.run()"),
            Frame(f"{VENV}/torch/distributed/elastic/metrics/api.py", 138, "wrapper", "result = f(*args, **kwargs)", "f(*args, **kwargs)"),
            Frame(f"{VENV}/torch/distributed/elastic/agent/server/api.py", 711, "run", "result = self._invoke_run(role)", "self._invoke_run(role)"),
            Frame(f"{VENV}/torch/distributed/elastic/agent/server/api.py", 870, "_invoke_run", "time.sleep(monitor_interval)"),
            Frame(
                f"{VENV}/torch/distributed/elastic/multiprocessing/api.py",
                84,
                "_terminate_process_handler",
                'raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)',
            ),
        ],
        f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {launcher_pid} got signal: 2",
    )
    run.emit([run.plain(t, line) for line in main])
    return run.doc.to_sample(
        "torchtitan/fr5_two_points.log",
        "llama3 8B with pp=2 on 8 GPUs at the default LOG_RANK=0 and log_freq=10 (torchtitan #547): only "
        "steps 1 and 10 are logged before a Ctrl-C, memory 19.5 -> 33.8 GiB is too little evidence for a "
        "leak, loss is the -1.0000 sentinel and torchtitan warns to add rank 4 to LOG_RANK.",
        CAPACITY_GIB,
    )


# ==========================================================================
# Scenario 5: newest format, 2 GPUs FSDP + FP8, flat memory, alloc retries
# ==========================================================================


def build_stable_newest() -> Sample:
    c = COLOR
    run = TitanRun(name="stable_newest", start=datetime(2026, 3, 10, 10, 58, 44, 905000), titan_tag=True, color=c, launcher_pid=771204)
    rng = run.rng
    ranks = [0, 1]

    run.torchrun_banner(0.0, "torch/distributed/run.py:851")

    def entries(rank: int) -> list[tuple]:
        gib, pct = reserved(4.27 if rank == 0 else 4.25)
        return [
            (2.9, "INFO", "Starting job: Qwen3 1.7B FP8 training", None),
            (0.27, "WARNING", titan.NCCL_ENV_WARNING, None),
            (0.004, "INFO", titan.mesh(["dp_shard"], [2]), None),
            (0.02, "INFO", "[GC] Initial GC collection. 0.00 seconds.", None),
            (0.18, "INFO", "Loading tokenizer from tokenizer.json", None),
            (0.6, "INFO", "Preparing c4 dataset from allenai/c4", None),
            (1.9, "INFO", f"Building qwen3 1.7B with {QWEN3_1_7B_JSON}", None),
            (0.03, "INFO", "Float8 training active with recipe rowwise", None),
            (0.002, "INFO", titan.capacity(H100), _ev("capacity", capacity_gib=CAPACITY_GIB)),
            (0.12, "INFO", titan.model_size("qwen3", "1.7B", QWEN3_1_7B_PARAMS, c), None),
            (0.04, "INFO", "Applied selective activation checkpointing to the model", None),
            (0.04, "INFO", "Applied FSDP to the model", None),
            (0.4, "INFO", "Peak FLOPS used for computing MFU: 9.890e+14", None),
            (0.001, "INFO", titan.model_memory("CUDA", gib, pct), _ev("model_memory", mem_gib=float(f"{gib:.2f}"))),
            (0.002, "INFO", "Mixed precision training is handled by fully_shard", None),
            (
                0.05,
                "INFO",
                "Trainer is initialized with local batch size 4, global batch size 8, gradient "
                "accumulation steps 1, sequence length 4096, total steps 200 (warmup 20)",
                None,
            ),
            (0.25, "INFO", "Training starts at step 1.", None),
        ]

    t = run.startup(ranks, 0.0, entries)

    level = {0: 23.41, 1: 23.38}
    loss, prev = 11.93127, 0
    for step in [1] + list(range(5, 201, 5)):
        window = step - prev
        if step == 1:
            t += 24.7
            tps_base = 1330.0
        else:
            tps_base = rng.gauss(24100, 150)
            t += window * 4 * 4096 / tps_base
            loss = 4.35 + (loss - 4.35) * 0.975**window + rng.gauss(0, 0.05)
        grad_norm = 0.55 + 14.0 * 2.718281828 ** (-step / 12) + abs(rng.gauss(0, 0.08))
        streams = []
        for rank in ranks:
            tr = t + rng.uniform(0.0, 0.004)
            gib, pct = reserved(level[rank] + clamp(rng.gauss(0, 0.01), -0.02, 0.02))
            tps = tps_base * rng.uniform(0.996, 1.004)
            tflops, _mfu = throughput(tps, QWEN3_1_7B_FPT)
            msg, fields = step_line(
                titan.step_line_newest, step=step, loss=loss, grad_norm=grad_norm, mem_gib=gib, mem_pct=pct, tps=tps, tflops=tflops, mfu=None, color=c
            )
            stream = []
            # Retry counters are cumulative: once a retry happens the warning
            # precedes every later step line on that rank.
            if rank == 1 and step >= 150:
                stream.append(run.log(rank, tr, "WARNING", titan.alloc_retries(2), events=_ev("alloc_retries", count=2)))
            stream.append(run.log(rank, tr, "INFO", msg, record={"rank": rank, "step": step, "kind": "train", **fields}))
            if step == 1:
                stream.append(run.log(rank, tr + 0.001, "INFO", titan.SYNC_TIMEOUT))
            streams.append(stream)
        run.emit_ranks(streams)
        prev = step

    emit_training_completed(run, ranks, t)
    return run.doc.to_sample(
        "torchtitan/stable_newest.log",
        "qwen3 1.7B with FSDP and FP8 on 2 GPUs, both ranks logged at log_freq=5 (newest format: loss 8.5f, "
        "grad_norm, mfu: N/A): peak reserved memory is flat from step 1, and rank 1 repeats a cumulative "
        "'2 CUDA memory allocation retries.' warning from step 150 on.",
        CAPACITY_GIB,
    )


SAMPLES: list[Callable[[], Sample]] = [
    build_fr1_pp2_ep2_leak_oom,
    build_fr2_logfreq_creep,
    build_fr5_pp8_warmup_plateau,
    build_fr5_two_points,
    build_stable_newest,
]
