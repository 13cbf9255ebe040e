"""PyTorch and torchrun output around any framework: rank prefixes, torchrun's and c10's log heads,
the CUDA out-of-memory message, torchrun's failure summary, NCCL debug lines (parsers/pytorch.yaml)."""

from __future__ import annotations

from datetime import datetime

from .python import warning_lines

H100 = "NVIDIA H100 80GB HBM3"  # torch.cuda.get_device_name()
H100_GIB = 79.11  # torch.cuda.get_device_properties().total_memory of an H100 80GB HBM3, in GiB


def torchrun_prefix(rank: int) -> str:
    """``torchrun --tee 3 --role rank`` header on every child line: ``[rank0]:`` (no space)."""
    return f"[rank{rank}]:"


def excepthook_prefix(rank: int) -> str:
    """torch.distributed's prefix on a rank's traceback lines: ``[rank0]: `` (with a space); under
    ``--tee`` it stacks behind the tee header: ``[rank0]:[rank0]: Traceback ...``."""
    return f"[rank{rank}]: "


def glog_head(dt: datetime, level: str) -> str:
    """torchrun's own logger head ``W0318 10:02:11.530000`` (microseconds printed as ms * 1000)."""
    return f"{level}{dt:%m%d %H:%M:%S}.{dt.microsecond // 1000:03d}000"


def torchrun_log(dt: datetime, level: str, pid: int, where: str, msg: str) -> str:
    """A line of torchrun's own logger: ``W0318 10:02:11.530000 1843021 torch/distributed/run.py:792] msg``."""
    return f"{glog_head(dt, level)} {pid} {where}] {msg}"


# torch/distributed/run.py warns once per launch; every message line gets the head, so the empty
# first line ends in a space.
OMP_BANNER = [
    "",
    "*****************************************",
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, "
    "to avoid your system being overloaded, please further tune the variable for "
    "optimal performance in your application as needed. ",
    "*****************************************",
]


def c10_head(dt: datetime, level: str, nanos: int) -> str:
    """c10 (C++) log head ``W318 10:03:31.612834271``: month not padded, nanoseconds after the ms."""
    mmdd = dt.month * 100 + dt.day
    ns = (dt.microsecond // 1000) * 1_000_000 + nanos % 1_000_000
    return f"{level}{mmdd} {dt:%H:%M:%S}.{ns:09d}"


def c10_warning(dt: datetime, nanos: int, where: str, msg: str) -> str:
    """A c10 warning: ``[W318 10:03:31.612834271 ProcessGroupNCCL.cpp:1496] msg``."""
    return f"[{c10_head(dt, 'W', nanos)} {where}] {msg}"


def cuda_oom(
    *,
    tried: str,
    gpu: int,
    capacity_gib: float,
    free: str,
    processes: list[tuple[int, str]] = (),
    in_use: str | None = None,
    allocated: str | None = None,
    unallocated: str | None = None,
) -> str:
    """CUDACachingAllocator's message (PyTorch >= 2.2 wording); sizes as printed (``2.00 GiB``).

    ``processes`` are other processes' (pid, size) on the device; without ``in_use`` the message stops
    after ``is free.`` (the scenario grid's short form)."""
    text = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. "
        f"GPU {gpu} has a total capacity of {capacity_gib:.2f} GiB of which {free} is free."
    )
    if in_use is None:
        return text
    others = "".join(f" Process {pid} has {size} memory in use." for pid, size in processes)
    return (
        f"{text}{others} Including non-PyTorch memory, this process has {in_use} memory in use. "
        f"Of the allocated memory {allocated} is allocated by PyTorch, and {unallocated} "
        "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
        "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
        "See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def elastic_time(dt: datetime) -> str:
    """torchelastic's failure time: ``2025-03-18_10:03:32``."""
    return dt.strftime("%Y-%m-%d_%H:%M:%S")


def failure_lines(index: int, *, time: str, host: str, rank: int, pid: int, error_file: str, traceback: list[str], exitcode: int = 1) -> list[str]:
    """One ``[N]:`` entry of torchrun's ChildFailedError summary; with @record the traceback field
    holds the child's error.json py_callstack, its lines indented by two spaces."""
    callstack = "\n".join(traceback).replace("\n", "\n  ")
    block = (
        f"[{index}]:\n"
        f"  time      : {time}\n"
        f"  host      : {host}\n"
        f"  rank      : {rank} (local_rank: {rank})\n"
        f"  exitcode  : {exitcode} (pid: {pid})\n"
        f"  error_file: {error_file}\n"
        f"  traceback : {callstack}"
    )
    return block.split("\n")


def child_failed_summary(name: str, failures: list[list[str]], root_cause: list[str]) -> list[str]:
    """torchrun's summary after its ChildFailedError (errors/__init__.py _MSG_FORMAT_TEMPLATE);
    ``failures`` and ``root_cause`` are ``failure_lines`` entries."""
    lines = ["=" * 60, f"{name} FAILED", "-" * 60, "Failures:"]
    for failure in failures:
        lines += failure
    return lines + ["-" * 60, "Root Cause (first observed failure):", *root_cause, "=" * 60]


def autocast_warning(site_packages: str) -> list[str]:
    """torch/utils/checkpoint.py's FutureWarning under torch 2.4 with activation checkpointing (two lines)."""
    return warning_lines(
        f"{site_packages}/torch/utils/checkpoint.py",
        1399,
        "FutureWarning",
        "`torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', args...)` instead.",
        "with device_autocast_ctx, torch.cpu.amp.autocast(**cpu_autocast_kwargs), recompute_context:  # type: ignore[attr-defined]",
    )


def nccl_line(host: str, pid: int, tid: int, device: int, msg: str) -> str:
    """An ``NCCL_DEBUG=INFO`` line: ``h100-node-07:2903:3034 [0] NCCL INFO ...``."""
    return f"{host}:{pid}:{tid} [{device}] {msg}"


NCCL_VERSION = "NCCL version 2.20.5+cuda12.4"  # printed without the host:pid:tid head
# NCCL's start-up on rank 0 of 8 (NCCL_DEBUG=INFO); None is where the version banner goes.
NCCL_INIT = [
    "NCCL INFO Bootstrap : Using eth0:10.52.3.17<0>",
    "NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or "
    "directory No plugin found (libnccl-net.so), using internal implementation",
    "NCCL INFO cudaDriverVersion 12040",
    None,
    "NCCL INFO Failed to open libibverbs.so[.1]",
    "NCCL INFO NET/Socket : Using [0]eth0:10.52.3.17<0>",
    "NCCL INFO Using network Socket",
    "NCCL INFO comm 0x55d4c2a1e6b0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9a1f5ad2c8e7b341 - Init START",
    "NCCL INFO Setting affinity for GPU 0 to ffffffff,00000000,ffffffff",
    "NCCL INFO NVLS multicast support is available on dev 0",
    "NCCL INFO Channel 00/24 :    0   1   2   3   4   5   6   7",
    "NCCL INFO Channel 01/24 :    0   1   2   3   4   5   6   7",
    "NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
    "NCCL INFO P2P Chunksize set to 524288",
    "NCCL INFO Connected all rings",
    "NCCL INFO Connected all trees",
    "NCCL INFO NVLS comm 0x55d4c2a1e6b0 headRank 0 nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736",
    "NCCL INFO comm 0x55d4c2a1e6b0 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9a1f5ad2c8e7b341 - Init COMPLETE",
]
