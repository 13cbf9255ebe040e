"""A run that died is never called fine: every framework's out-of-memory error and crash, any fatal
traceback, in any language or layout, and the sizes in error text never taken as readings.

The regression cases are pastes shaped as users post them in public threads (their shapes, our
numbers). The metamorphic tests append a fatal end to every sample log; the property test mixes the
vocabulary's lines into a healthy log and checks that none of them became a reading.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze, parse_sources, select_specs
from memlog.parse.catalog import load_specs
from tests.logwriters.torchtitan import log_line, step_line_2025_03
from tests.samples import sample_logs

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
CALM = {"stable", "warmup-plateau", "pp-sentinel-loss", "periodic-retention", "inconclusive"}
SPECS = load_specs()
CRASHES = SPECS["crashes"]


def step_line(step: int, *, loss: float, reserved_gib: float, allocated_gib: float = 0.0) -> str:
    """A torchtitan step line (2025-03 shape) with its logger head, as torchtitan prints it; its
    throughput varies from step to step, as a real run's does (and so does the line's length)."""
    tps = 3_000 + (step * 7_919) % 11_000
    body = step_line_2025_03(step=step, loss=loss, mem_gib=reserved_gib, mem_pct=100 * reserved_gib / 79.11, tps=tps, tflops=tps / 14.5, mfu=tps / 140)
    return log_line(body, ts=f"2025-03-04 17:{step // 60:02d}:{step % 60:02d},931")


def judge(tmp_path: Path, text: str, name: str = "paste.log") -> tuple[int, dict]:
    log = tmp_path / name
    log.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["analyze", str(log), "-o", "json"])
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout)


def errors(report: dict) -> dict[str, str]:
    return {f["rule"]: f["message"] for f in report["findings"] if f["severity"] == "error"}


# A traceback Python printed at exit and went on from (a DataLoader's __del__ after the run).
IGNORED_AT_EXIT = [
    "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3a2c1e0ca0>",
    "Traceback (most recent call last):",
    '  File "dataloader.py", line 1479, in __del__',
    "    self._shutdown_workers()",
    "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute '_workers_status'",
]

# -- the cases users pasted ------------------------------------------------------------------------

JAX = """I1104 10:21:33.102931 140234 train.py:88] step 0: loss=10.8812
I1104 10:21:41.551004 140234 train.py:88] step 1: loss=10.2219
Traceback (most recent call last):
  File "/home/user/train.py", line 140, in <module>
    main()
  File "/home/user/train.py", line 121, in main
    state, metrics = p_train_step(state, batch)
jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 6442450944 bytes.
"""
TPU = (
    "step 10 loss 2.31\nstep 20 loss 2.20\njax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
    "Ran out of memory in memory space hbm. Used 17.25G of 15.48G hbm. Exceeded hbm capacity by 1.77G.\n"
)
TF = """Epoch 1/10
2021-03-02 11:22:31.444555: I tensorflow/stream_executor/cuda/cuda_driver.cc:789] failed to allocate 517.50MiB (542638080 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory
2021-03-02 11:22:32.444555: I tensorflow/stream_executor/cuda/cuda_driver.cc:789] failed to allocate 465.75MiB (488374272 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory
2021-03-02 11:22:43.440000: W tensorflow/core/common_runtime/bfc_allocator.cc:467] Allocator (GPU_0_bfc) ran out of memory trying to allocate 128.0KiB (rounded to 131072)requested by op Adam/update
2021-03-02 11:22:43.441000: W tensorflow/core/common_runtime/bfc_allocator.cc:467] Allocator (GPU_0_bfc) ran out of memory trying to allocate 32.0KiB (rounded to 32768)requested by op Adam/update
2021-03-02 11:22:43.442000: W tensorflow/core/common_runtime/bfc_allocator.cc:467] Allocator (GPU_0_bfc) ran out of memory trying to allocate 64.0KiB (rounded to 65536)requested by op Adam/update
Traceback (most recent call last):
  File "train.py", line 55, in <module>
    model.fit(x, y, epochs=10)
tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[4096,4096] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc [Op:MatMul]
"""
ALLOCATOR_ABORT = """[rank0] step 100 loss 3.12
[rank1] step 100 loss 3.13
memory allocation of 2147483648 bytes failedmemory allocation of 2147483648 bytes failed
[2024-05-01 10:00:01,000] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 44121
[2024-05-01 10:00:01,000] [INFO] [launch.py:319:sigkill_handler] Killing subprocess 44122
[2024-05-01 10:00:02,000] [ERROR] [launch.py:325:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=1'] exits with return code = -9
"""
RAY_TAIL = """11362\t1.25\tray::allocate_memory
7230\t0.09\tpython test.py --num-tasks 20

Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on this node or reducing task parallelism by requesting more CPUs per task.
2025-08-09 07:12:11,503\tERR cli.py:70 -- ---------------------------------------
2025-08-09 07:12:11,503\tERR cli.py:71 -- Job 'raysubmit_Xk2vR9' failed
2025-08-09 07:12:11,503\tERR cli.py:72 -- ---------------------------------------
"""
RAY_DRIVER = """Traceback (most recent call last):
  File "/tmp/ray/session_latest/runtime_resources/working_dir_files/main.py", line 30, in <module>
    ray.get(refs)
  File "/usr/local/lib/python3.10/site-packages/ray/_private/worker.py", line 2547, in get
    raise value
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
"""

# torch_xla on a TPU (pytorch/xla#3470's shape): the runtime's reserve failure, then the exception.
TORCH_XLA = """| Training Device=xla:0/1 Epoch=1 Step=300 Loss=6.50000 Rate=412.58 GlobalRate=419.21 Time=00:08:12
2022-04-04 00:27:49.642414: E tensorflow/compiler/xla/xla_client/xla_util.cc:88]   OP_REQUIRES failed at tpu_execute_op.cc:266 : RESOURCE_EXHAUSTED: Attempting to reserve 6.48G at the bottom of memory. That was not possible. There are 6.78G free, 0B reserved, and 3.33G reservable.
Exception in device=TPU:4: RESOURCE_EXHAUSTED: From /job:localservice/replica:0/task:0:
Traceback (most recent call last):
  File "/usr/local/lib/python3.8/dist-packages/torch_xla/distributed/xla_multiprocessing.py", line 329, in _mp_start_fn
    _start_fn(index, pf_cfg, fn, args)
RuntimeError: Resource exhausted: From /job:localservice/replica:0/task:0:
"""
CUPY = """epoch 3 iter 1200 loss 0.412
Traceback (most recent call last):
  File "train_cupy.py", line 77, in <module>
    buf = cp.empty((n, n), dtype=cp.float32)
cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes (allocated so far: 22,548,578,304 bytes).
"""
# A tune run's tail, then the job's accounting pasted below it (sacct cuts State to 10 characters).
SACCT = """1|5|Loss: 1.2213
1|6|Loss: 1.2101
$ sacct -j 88121
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode
------------ ---------- ---------- ---------- ---------- ---------- --------
88121             tune        gpu    project         32 OUT_OF_ME+    0:125
88121.batch       batch               project         32 OUT_OF_ME+    0:125
"""


@pytest.mark.parametrize(
    ("paste", "scope"),
    [
        (JAX, "device"),
        (TPU, "device"),
        (TORCH_XLA, "device"),
        (TF, "device"),
        (CUPY, "device"),
        (ALLOCATOR_ABORT, "host"),
        (RAY_TAIL, "host"),
        (RAY_DRIVER, "host"),
        (SACCT, "host"),
    ],
    ids=["jax", "tpu-hbm", "torch-xla-reserve", "tensorflow", "cupy", "allocator-abort", "ray-report-tail", "ray-driver-traceback", "sacct-truncated"],
)
def test_a_run_that_died_of_memory_is_an_oom_in_any_framework(tmp_path, paste, scope):
    code, report = judge(tmp_path, paste)
    assert code == 1 and report["verdict"] == "oom", report["verdict"]
    assert f"Out of {'host (system)' if scope == 'host' else 'device'} memory" in errors(report)["oom"]


def test_sizes_in_error_text_are_never_readings(tmp_path):
    """TensorFlow's `failed to allocate 517.50MiB`, `trying to allocate 128.0KiB`: sizes of requests in
    messages about a failure, not memory a process holds (they were read as 517.5, 128 and 32 GiB)."""
    code, report = judge(tmp_path, TF)
    assert report["coverage"]["records"] == 0
    assert "memory_pressure" in report["coverage"]["event_counts"]


def test_a_size_is_read_in_the_unit_printed_beside_it(tmp_path):
    log = "".join(f"iter {i} loss {2.1 - i / 10:.1f} mem {value}\n" for i, value in enumerate(["517.50MiB", "1.2GiB", "900.0MiB", "1.5GiB"], 1))
    (tmp_path / "units.log").write_text(log)
    tables, _ = parse_sources([str(tmp_path / "units.log")], select_specs(SPECS, None))
    assert tables.records["device_mem_used_gib"].round(4).to_list() == [round(517.5 / 1024, 4), 1.2, round(900 / 1024, 4), 1.5]


@pytest.mark.parametrize("killed", ["已杀死", "Getötet", "Убито", "強制終了"])
def test_a_shell_saying_killed_in_its_language_is_a_kill(tmp_path, killed):
    paste = "".join(f"step {i} loss {4.2 - i / 10:.1f} mem {10.1 + i % 2 / 10:.1f}GB\n" for i in range(1, 4))
    paste += f"run.sh: line 12: 18894 {killed}               python train.py\n"
    code, report = judge(tmp_path, paste)
    assert code == 1 and report["verdict"] == "crash"
    message = errors(report)["crash"]
    assert killed in message and "SIGKILL" in message and "Memory is probably involved" in message


def test_an_unknown_exception_ending_the_log_is_a_crash_quoted(tmp_path):
    healthy = "".join(step_line(step, loss=9 - step / 10, reserved_gib=40.0, allocated_gib=30.0) + "\n" for step in range(1, 40))
    tail = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\nValueError: shard 17 of the dataset is empty\n'
    code, report = judge(tmp_path, healthy + tail)
    assert code == 1 and report["verdict"] == "crash"
    assert "`ValueError: shard 17 of the dataset is empty`" in errors(report)["crash"]


def test_a_traceback_the_run_went_on_from_is_no_crash(tmp_path):
    """A logger's traceback mid-run (training went on) and Python's `Exception ignored in` at exit."""
    steps = [step_line(step, loss=9 - step / 10, reserved_gib=40.0, allocated_gib=30.0) for step in range(1, 40)]
    handled = ["Traceback (most recent call last):", '  File "data.py", line 3, in load', "    open(p)", "FileNotFoundError: shard 3"]
    code, report = judge(tmp_path, "\n".join(steps[:20] + handled + steps[20:] + IGNORED_AT_EXIT) + "\n")
    assert code == 0 and "crash" not in errors(report), report["verdict"]


def test_a_run_stopped_with_ctrl_c_is_interrupted_not_crashed(tmp_path):
    steps = "".join(step_line(step, loss=9 - step / 10, reserved_gib=40.0, allocated_gib=30.0) + "\n" for step in range(1, 40))
    tail = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\nKeyboardInterrupt\n'
    code, report = judge(tmp_path, steps + tail)
    assert code == 0 and report["verdict"] != "crash"
    assert "keyboard-interrupt" in {f["rule"] for f in report["findings"]}


@pytest.mark.parametrize("indent", ["    ", "\t", "> ", ">     "], ids=["four-spaces", "tab", "quote", "quoted-code-block"])
def test_an_indented_or_quoted_step_line_is_read(tmp_path, indent):
    lines = [f"step:{i} - actor/pg_loss:0.12 - perf/max_memory_allocated_gb:{30 + i / 10:.1f} - perf/cpu_memory_used_gb:{100 + 2 * i:.1f}" for i in range(1, 6)]
    bare = analyze([str(_write(tmp_path / "bare.log", lines))])
    indented = analyze([str(_write(tmp_path / "indented.log", [indent + line for line in lines]))])
    assert indented.coverage["records"] == bare.coverage["records"] == 5
    assert indented.coverage["formats"] == bare.coverage["formats"] == {"verl": 5}


def test_a_viewers_line_numbers_are_taken_off(tmp_path):
    log = ROOT / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
    lines = log.read_text().splitlines()
    numbered = _write(tmp_path / "numbered.log", [f"{i:6d}\t{line}" for i, line in enumerate(lines, 1)])  # cat -n
    assert analyze([str(numbered)]).coverage["records"] == analyze([str(log)]).coverage["records"] > 0


# The tail of a CUDA error as PyTorch prints it (C10_CUDA_CHECK), kept without the traceback's head,
# and the NCCL watchdog's thread dying (torch 2.3+ wording, then <= 2.2): the process ends with them.
CUDA_ERROR_TAIL = """[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered
[rank3]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
[rank3]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1
[rank3]: Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""
WATCHDOG_THREAD_DIED = """[rank0]:[E1129 10:02:40.552101 1288 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5
[rank0]:ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.
[rank0]:Exception raised from checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/NCCLUtils.cpp:275 (most recent call first):
"""
OLD_WATCHDOG_THREAD_DIED = (
    "[rank2]:[E ProcessGroupNCCL.cpp:916] [Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=44, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
    "600450 milliseconds before timing out.\n"
)


@pytest.mark.parametrize(
    ("tail", "verdict", "said"),
    [
        (CUDA_ERROR_TAIL, "crash", "an illegal memory access"),
        (WATCHDOG_THREAD_DIED, "crash", "watchdog thread"),
        (OLD_WATCHDOG_THREAD_DIED, "crash", "timed out"),
        ("[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error\n", "crash", "NCCL call failed"),
        ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n", "crash", "DataLoader worker"),
        ("torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with exit code 1\n", "crash", "exit"),
        ("command terminated with exit code 137\n", "crash", "SIGKILL"),
        ("[rank0]: RuntimeError: CUDA driver error: out of memory\n", "oom", "device memory"),
        ("[rank0]: RuntimeError: Triton Error [CUDA]: out of memory\n", "oom", "device memory"),
        ("hipErrorOutOfMemory: out of memory\nERROR: Unexpected segmentation fault encountered in worker.\n", "oom", "device memory"),
    ],
    ids=[
        "cuda-error-without-traceback-head",
        "watchdog-thread-died",
        "watchdog-thread-died-2.2",
        "dist-backend-error",
        "dataloader-bus-error",
        "spawn-process-exited",
        "kubectl-exec-137",
        "cuda-driver-oom",
        "triton-oom",
        "hip-oom-then-worker-segfault",
    ],
)
def test_a_run_ending_in_a_fatal_line_without_its_traceback_is_not_calm(tmp_path, tail, verdict, said):
    """The last lines of a dead run as users paste them, often without the traceback's head."""
    healthy = "".join("[rank0]:" + step_line(step, loss=9 - step / 10, reserved_gib=40.0) + "\n" for step in range(1, 30))
    code, report = judge(tmp_path, healthy + tail)
    assert code == 1 and report["verdict"] == verdict, report["verdict"]
    assert said in errors(report)[verdict], errors(report)


def test_an_uncaught_oom_with_buffered_step_lines_after_it_is_still_the_runs_end(tmp_path):
    """`python train.py > log 2>&1`: stdout is block-buffered, stderr is not, so the traceback of the
    OOM that killed the run lands among the step lines and the last buffered ones are flushed after it
    at exit. Their steps go on from before it; the run is dead all the same."""
    before = "".join(step_line(step, loss=9 - step / 100, reserved_gib=40.0) + "\n" for step in range(1, 41))
    traceback = (
        'Traceback (most recent call last):\n  File "/workspace/torchtitan/train.py", line 482, in <module>\n    trainer.train()\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.20 GiB is free.\n"
    )
    flushed = "".join(step_line(step, loss=9 - step / 100, reserved_gib=40.0) + "\n" for step in range(41, 61))
    code, report = judge(tmp_path, before + traceback + flushed)
    assert code == 1 and report["verdict"] == "oom", report["verdict"]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- any fatal end, appended to any sample log -----------------------------------------------------


def _fatal_samples() -> list[tuple[str, str]]:
    """Every sample of the vocabulary that ends a run: not an allocator's warning (it says a run went on)."""
    return [(p.name, line) for p in CRASHES.patterns for line in p.samples if p.event != "memory_pressure"]


FATAL = _fatal_samples()
LOGS = [p for p in sample_logs() if p.suffix in (".log", ".jsonl")]


@pytest.mark.parametrize("log", LOGS, ids=[p.relative_to(ROOT / "sample_logs").as_posix() for p in LOGS])
def test_a_fatal_end_appended_to_any_sample_is_never_calm(tmp_path, log):
    """Each sample log gets two tails: an unknown exception's traceback, and one entry of the
    vocabulary (taken in turn, so that all of them are appended to some log)."""
    i = LOGS.index(log)
    data = log.read_bytes()
    data += b"" if data.endswith(b"\n") else b"\n"
    for name, tail in (
        (
            "unknown-exception",
            'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\nValueError: shard 17 of the dataset is empty',
        ),
        FATAL[i % len(FATAL)],
    ):
        pasted = tmp_path / f"{name}-{log.name}"
        pasted.write_bytes(data + tail.encode() + b"\n")
        result = runner.invoke(app, ["analyze", str(pasted), "-o", "json"])
        report = json.loads(result.stdout)
        assert result.exit_code == 1, (name, report["verdict"])
        assert report["verdict"] not in CALM, (name, report["verdict"])
        assert {"crash", "oom"} & set(errors(report)), (name, errors(report))


@pytest.mark.parametrize(("entry", "line"), FATAL, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FATAL)])
def test_every_fatal_entry_ends_a_healthy_run_as_crash_or_oom(tmp_path, entry, line):
    healthy = "".join(step_line(step, loss=9 - step / 10, reserved_gib=40.0, allocated_gib=30.0) + "\n" for step in range(1, 12))
    code, report = judge(tmp_path, healthy + line + "\n")
    assert code == 1 and report["verdict"] in ("crash", "oom"), (entry, report["verdict"])


# -- no reading from a line the vocabulary read -----------------------------------------------------

SIZED = [line for p in CRASHES.patterns for line in p.samples if any(c.isdigit() for c in line) and "\n" not in line]


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(3, 12),
    crashes=st.lists(st.sampled_from(SIZED), min_size=1, max_size=6),
    seed=st.randoms(use_true_random=False),
    prefix=st.sampled_from(["", "    ", "[rank0]: ", "gpu-a07: ", "> "]),
)
def test_no_reading_is_taken_from_a_line_the_crash_vocabulary_read(tmp_path_factory, steps, crashes, seed, prefix):
    lines = [step_line(step, loss=9 - step / 10, reserved_gib=40.0 + step, allocated_gib=30.0) for step in range(1, steps + 1)]
    for crash in crashes:
        lines.insert(seed.randint(0, len(lines)), crash)
    log = _write(tmp_path_factory.mktemp("mixed") / "mixed.log", [prefix + line for line in lines])
    tables, _ = parse_sources([str(log)], select_specs(SPECS, None))
    crash_lines = {e.line_no for e in tables.events}
    assert crash_lines, "the vocabulary read none of its own samples"
    assert not set(tables.records["line_no"].to_list()) & crash_lines
    assert tables.records.height == steps


# -- a traceback whose header the paste cut off ----------------------------------------------------

FRAMES = [
    '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1553, in _call_impl',
    "    return forward_call(*args, **kwargs)",
    '  File "/workspace/train.py", line 210, in forward',
    "    loss = F.cross_entropy(logits, labels)",
]
RAISED = "ValueError: Expected input batch_size (16) to match target batch_size (8)."
HEALTHY = [step_line(step, loss=9 - step / 10, reserved_gib=40.0, allocated_gib=30.0) for step in range(1, 40)]


@pytest.mark.parametrize("prefix", ["", "[rank0]: ", "    "])
def test_the_last_lines_of_a_traceback_pasted_alone_are_a_crash(tmp_path, prefix):
    # "here is the error": the last frames and the exception, copied without the header above them
    code, report = judge(tmp_path, "\n".join(prefix + line for line in [*FRAMES, RAISED]) + "\n")
    assert code == 1 and report["verdict"] == "crash"
    assert f"`{RAISED}`" in errors(report)["crash"]


def test_a_healthy_log_ending_in_a_headless_traceback_is_a_crash(tmp_path):
    code, report = judge(tmp_path, "\n".join([*HEALTHY, *FRAMES[2:], RAISED]) + "\n")
    assert code == 1 and report["verdict"] == "crash" and f"`{RAISED}`" in errors(report)["crash"]


def test_a_traceback_with_its_header_is_one_exception(tmp_path):
    # its header and each frame begin a block ending on the exception: said once
    code, report = judge(tmp_path, "\n".join([*HEALTHY, "Traceback (most recent call last):", *FRAMES, RAISED]) + "\n")
    assert code == 1 and report["coverage"]["event_counts"]["exception"] == 1
    assert "line 45" in errors(report)["crash"]  # the exception's line, not a frame's


def test_a_stack_printed_without_an_exception_ends_nothing(tmp_path):
    # traceback.print_stack() in a healthy run: frames, then the run's next log line
    code, report = judge(tmp_path, "\n".join([*HEALTHY[:20], *FRAMES, *HEALTHY[20:]]) + "\n")
    assert code == 0 and "crash" not in errors(report), report["verdict"]
    code, report = judge(tmp_path, "\n".join([*HEALTHY, *FRAMES, "INFO: saving the final checkpoint"]) + "\n")
    assert code == 0 and "crash" not in errors(report), report["verdict"]


def test_an_exception_ignored_at_exit_does_not_hide_the_one_that_ended_the_run(tmp_path):
    fatal = ["Traceback (most recent call last):", *FRAMES, RAISED]
    code, report = judge(tmp_path, "\n".join([*HEALTHY, *fatal, *IGNORED_AT_EXIT]) + "\n")
    assert code == 1 and f"`{RAISED}`" in errors(report)["crash"]


# -- fatal words a logger printed as news ----------------------------------------------------------

CAUGHT_OOM = "eval batch 17 skipped: CUDA out of memory. Tried to allocate 1.20 GiB. GPU 0 has a total capacity of 79.11 GiB of which 712.00 MiB is free."


def ranked_steps(rank: int, steps: range) -> list[str]:
    return [
        log_line(
            step_line_2025_03(step=s, loss=9 - s / 100, mem_gib=40.0, mem_pct=50.6, tps=7000 + s, tflops=300.0, mfu=30.0),
            ts=f"2025-03-04 17:{s // 60:02d}:{s % 60:02d},931",
            rank=rank,
        )
        for s in steps
    ]


@pytest.mark.parametrize(
    "news",
    [
        log_line(CAUGHT_OOM, ts="2025-03-04 17:00:30,001", level="WARNING"),  # caught, logged, went on
        log_line("sample 3: 'Segmentation fault (core dumped)' when the user ran ./a.out", ts="2025-03-04 17:00:30,001"),  # a quoted sample
        "WARNING: fused_adam kernel may cause a Segmentation fault on driver < 525; falling back to foreach",  # a library's warning
        "W1104 10:21:33.102931 140234 eval.py:88] eval batch 17 skipped: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2G",
    ],
)
def test_fatal_words_logged_as_news_by_a_worker_that_went_on_end_nothing(tmp_path, news):
    code, report = judge(tmp_path, "\n".join([*HEALTHY[:30], news, *HEALTHY[30:]]) + "\n")
    assert code == 0 and not errors(report), (report["verdict"], errors(report))


@pytest.mark.parametrize(
    ("level", "pressure"),
    [("WARNING", True), ("INFO", False)],
    ids=["warned-and-went-on", "quoted-at-info"],
)
def test_an_oom_warned_of_and_gone_on_from_is_memory_pressure(tmp_path, level, pressure):
    """A caught OOM a logger warned of (fairseq's `OOM: Ran out of memory ...`, an eval batch skipped)
    is memory running short: a warning that sets no verdict. Quoted at INFO (a generated sample, a
    dataset record) it says nothing."""
    news = log_line(CAUGHT_OOM, ts="2025-03-04 17:00:30,001", level=level)
    code, report = judge(tmp_path, "\n".join([*HEALTHY[:30], news, *HEALTHY[30:]]) + "\n")
    pressed = [f for f in report["findings"] if f["rule"] == "memory-pressure"]
    assert code == 0 and report["verdict"] in CALM and bool(pressed) == pressure
    if pressure:
        assert pressed[0]["severity"] == "warning" and pressed[0]["evidence"]["observed"]["largest_size_gib"] == 1.2


def test_fatal_words_logged_as_news_still_end_a_worker_that_logged_no_step_after_them(tmp_path):
    # the rank that warned stops; another rank's steps go on (until the collective times out)
    warned = log_line(CAUGHT_OOM, ts="2025-03-04 17:00:30,001", level="WARNING", rank=0)
    log = [*ranked_steps(0, range(1, 30)), *ranked_steps(1, range(1, 30)), warned, *ranked_steps(1, range(30, 60))]
    code, report = judge(tmp_path, "\n".join(log) + "\n")
    assert code == 1 and "oom" in errors(report)


def test_a_launcher_logging_a_kill_at_info_is_still_a_kill(tmp_path):
    exits = "[2024-10-02 14:17:04,701] [INFO] [launch.py:351:main] Process 5123 exits with return code = -9"
    code, report = judge(tmp_path, "\n".join([*HEALTHY, exits]) + "\n")
    assert code == 1 and report["verdict"] == "crash"


def test_a_traceback_after_the_ctrl_c_a_terminal_echoed_is_read_from_its_header():
    from memlog.parse.chunks import parse_line

    _, events = parse_line(SPECS.values(), "^CTraceback (most recent call last):\n" + "\n".join(FRAMES) + "\nKeyboardInterrupt")
    (event,) = [e for e in events if e["kind"] == "exception" and e.get("from_line") == 1]
    assert event["exception"] == "KeyboardInterrupt"


def test_an_exception_line_under_no_frame_is_not_read_as_a_traceback(tmp_path):
    # a message shaped like an exception, printed flat after the last step: no frame sits above it
    code, report = judge(tmp_path, "\n".join([*HEALTHY, "ValueError: tokenizer has no pad token, using eos"]) + "\n")
    assert code == 0 and "crash" not in errors(report), report["verdict"]


PREEMPTED = "slurmstepd: error: *** STEP 88121.0 ON gpu-a07 CANCELLED AT 2026-03-10T11:00:03 DUE TO PREEMPTION ***"


def _attempt(first: int, last: int, *, start: bool = True) -> list[str]:
    head = [log_line(f"Training starts at step {first}", ts="2026-03-10 08:00:00,000")] if start else []
    return head + [step_line(s, loss=3.0 - s * 1e-3, reserved_gib=30 + min(s - first, 10)) for s in range(first, last + 1)]


@pytest.mark.parametrize("start_line", [True, False], ids=["training-starts", "step-counter-back"])
def test_a_death_the_job_was_restarted_after_ended_an_attempt_not_the_run(tmp_path, start_line):
    """Preempted twice, resumed from the checkpoint each time (its steps going on, or counted again
    without the start line), then finished: calm, with the deaths said as a warning."""
    second = (41, 80) if start_line else (1, 40)
    lines = _attempt(1, 40) + [PREEMPTED] + _attempt(*second, start=start_line) + [PREEMPTED]
    lines += _attempt(second[1] + 1, second[1] + 40, start=start_line) if start_line else _attempt(1, 40, start=False)
    code, report = judge(tmp_path, "\n".join(lines + [log_line("Training completed", ts="2026-03-12 11:30:00,000")]) + "\n")
    assert (code, report["verdict"]) == (0, "warmup-plateau")
    (crash,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert crash["severity"] == "warning" and "not the run" in crash["message"]


def test_a_death_after_the_last_restart_still_ends_the_run(tmp_path):
    lines = _attempt(1, 40) + [PREEMPTED] + _attempt(41, 80) + [PREEMPTED.replace("PREEMPTION", "TIME LIMIT")]
    code, report = judge(tmp_path, "\n".join(lines) + "\n")
    assert (code, report["verdict"]) == (1, "crash")
    # The death that ended the run leads, at its own step; the preemption the run outlived comes after.
    message = errors(report)["crash"]
    assert message.startswith("TIME LIMIT") and "during step 81" in message and "Also: PREEMPTION" in message


def test_a_launchers_clean_up_is_no_evidence_of_memory_its_children_exit_is(tmp_path):
    """DeepSpeed's launcher takes its other processes down (`Killing subprocess N`, its own clean-up),
    then reports the child's `-9`: the SIGKILL says memory is likely, the clean-up's words do not."""
    lines = ranked_steps(0, range(1, 40)) + [
        "[2026-11-29 11:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 40122",
        "[2026-11-29 11:00:00,000] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 40123",
        "[2026-11-29 11:00:01,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'main.py', '--local_rank=1'] exits with return code = -9",
    ]
    code, report = judge(tmp_path, "\n".join(lines) + "\n")
    message = errors(report)["crash"]
    assert code == 1 and message.startswith("A process was killed (SIGKILL") and "`killed` says so" not in message
