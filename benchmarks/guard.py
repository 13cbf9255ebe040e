"""The guard's costs (issue 38): what Guard.step() costs a training loop, at 8 ranks; what one
judgement costs as the readings grow; what reading and diffing allocator snapshots cost.

    python -m benchmarks.guard                         # everything (a few minutes)
    python -m benchmarks.guard --parts ranks --ranks 8 --steps 3000 --step-ms 20
    python -m benchmarks.guard --quick                 # small sizes, a smoke run

ranks: N processes in a gloo process group on this machine (torch needed), each a training loop
whose step is `--step-ms` of sleep (the device's time: the loop's thread waits, as it waits on a
GPU) followed by Guard.step() with the default policy and cadence: judging on the guard's own
thread, agreeing every 10 steps (one all-reduce). The readings are the host reader's (a pread of
/proc/self/statm) with a synthetic device reading; the CUDA reader's call
(torch.cuda.memory_stats_as_nested_dict) needs a GPU and is not in these figures. Timed: the
wall time of each step() call, on agreement steps and others apart, and each judgement's own time.
Also: the same loop with a CPU-bound step (pure Python, holding the GIL) in one process, with and
without the guard, for what judging on a thread takes from a loop that needs the CPU.
hot: Guard.step() back to back in one process (its own CPU cost, caches warm).
judge: the judgement at the n-th reading (judged every n // 20, condensed as they come), n from
1,000 to 1,000,000.
snapshots: loading (restricted unpickler) and diffing two snapshots of n live blocks, and pickling
one as the guard writes it. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memlog.guard import Guard, HostReader, Reading, ReplayReader
from memlog.guard.document import write_pickle
from memlog.guard.snapshot import diff_snapshots, load_snapshot
from tests.logwriters import snapshots

ROOT = Path(__file__).resolve().parents[1]


def device_reading(host: HostReader, leak: float):
    """A reader: the host's resident set (a real pread) and a device at ~40 GiB with noise, leaking
    `leak` GiB per step."""
    rng = random.Random(os.getpid())

    def read(step: int) -> Reading:
        allocated = 40.0 + leak * step + rng.gauss(0, 0.05)
        return Reading(
            allocated_gib=allocated,
            reserved_gib=allocated + 4.0,
            max_allocated_gib=allocated + 6.0,
            host_rss_gib=host.rss_gib(),
            capacity_gib=79.1,
            host_total_gib=host.total_gib,
        )

    return ReplayReader(read)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- ranks -----------------------------------------------------------------------------------------


def worker(rank: int, world: int, init_file: str, steps: int, step_ms: float, leak: float, out: str) -> None:
    """One rank: a step is `step_ms` of sleep and an all-reduce (the training's own collective, which
    keeps the ranks in step as data parallelism does), then the timed call: Guard.step(), or with
    `leak` < 0 a call that does nothing (the floor: what timing any call costs here)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    guard = Guard(device_reading(HostReader(), max(leak, 0.0)), report_dir=None, on_oom="warn")
    judged: list[float] = []
    judge = guard._judge

    def timed(rows):
        started = time.perf_counter()
        result = judge(rows)
        judged.append(time.perf_counter() - started)
        return result

    guard._judge = timed
    call = guard.step if leak >= 0 else (lambda step: None)
    gradient = torch.ones(1024)
    plain, agreeing = [], []
    for step in range(1, steps + 1):
        time.sleep(step_ms / 1000)
        dist.all_reduce(gradient)
        started = time.perf_counter()
        call(step)
        (agreeing if step % guard.agree_every == 0 else plain).append(time.perf_counter() - started)
    guard.close()
    dist.destroy_process_group()
    Path(out).write_text(json.dumps({"plain": plain, "agreeing": agreeing, "judged": judged}))


def ranks(world: int, steps: int, step_ms: float, leak: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.guard",
                    "--worker",
                    str(rank),
                    str(world),
                    f"{tmp}/pg",
                    str(steps),
                    str(step_ms),
                    str(leak),
                    f"{tmp}/{rank}.json",
                ],
                cwd=ROOT,
                env=dict(os.environ, OMP_NUM_THREADS="1"),
            )
            for rank in range(world)
        ]
        if any(p.wait() for p in procs):
            raise SystemExit("a rank failed")
        results = [json.loads(Path(f"{tmp}/{rank}.json").read_text()) for rank in range(world)]
    plain = [t for r in results for t in r["plain"]]
    agreeing = [t for r in results for t in r["agreeing"]]
    judged = [t for r in results for t in r["judged"]]
    every = plain + agreeing
    return {
        "ranks": world,
        "steps": steps,
        "step_ms": step_ms,
        "readings": "no guard (floor)" if leak < 0 else "leaking" if leak else "flat",
        "step_us_median": 1e6 * statistics.median(plain),
        "step_us_p99": 1e6 * percentile(plain, 0.99),
        "agree_us_median": 1e6 * statistics.median(agreeing),
        "agree_us_p99": 1e6 * percentile(agreeing, 0.99),
        "mean_us": 1e6 * statistics.fmean(every),
        "max_ms": 1e3 * max(every),
        "judgements_per_rank": len(judged) / world,
        "judge_ms_median": 1e3 * statistics.median(judged) if judged else 0.0,
    }


def cpu_bound(steps: int, step_ms: float) -> dict:
    """One process, a step of pure-Python work (a fixed count of iterations, ~`step_ms` alone): the
    loop's time without and with the guard, whose judgements then take the GIL from it."""
    per_ms = _iterations_per_ms()
    work = int(per_ms * step_ms)

    def loop(guard: Guard | None) -> float:
        started = time.perf_counter()
        for step in range(1, steps + 1):
            x = 0
            for _ in range(work):
                x += 1
            if guard is not None:
                guard.step(step)
        if guard is not None:
            guard.close()
        return time.perf_counter() - started

    without = loop(None)
    guarded = Guard(device_reading(HostReader(), 0.002), report_dir=None, on_oom="warn")
    with_guard = loop(guarded)
    return {
        "steps": steps,
        "step_ms": step_ms,
        "without_s": without,
        "with_s": with_guard,
        "judgements": guarded.judgements,
        "overhead_pct": 100 * (with_guard - without) / without,
    }


def _iterations_per_ms() -> float:
    started, x = time.perf_counter(), 0
    for _ in range(2_000_000):
        x += 1
    return 2_000_000 / (1000 * (time.perf_counter() - started))


def hot(steps: int) -> dict:
    """One process, Guard.step() called back to back (caches warm): its own CPU cost per step, with
    judging off (every judgement past the end) and at the default cadence on its thread."""
    costs = {}
    for name, every in (("reading and deciding only", steps + 1), ("with judging every 50 on its thread", 50)):
        guard = Guard(device_reading(HostReader(), 0.0), report_dir=None, every=every)
        started = time.perf_counter()
        for step in range(1, steps + 1):
            guard.step(step)
        costs[name] = 1e6 * (time.perf_counter() - started) / steps
        guard.close()
    return costs


# -- judge -----------------------------------------------------------------------------------------


def judge_cost(n: int) -> dict:
    """The judgement at the n-th of n readings judged every n // 20 (condensed as they come), on a
    flat device and host; the clock stands still, so that no judgement waits for rest."""
    rng = random.Random(3)
    flat = ReplayReader(
        lambda step: Reading(
            allocated_gib=40.0 + rng.gauss(0, 0.05), reserved_gib=44.0, capacity_gib=79.1, host_rss_gib=12.0 + rng.gauss(0, 0.01), host_total_gib=512.0
        )
    )
    guard = Guard(flat, report_dir=None, background=False, every=max(50, n // 20), clock=lambda: 0.0)
    for step in range(1, n):
        guard.step(step)
    started = time.perf_counter()
    guard.step(n)
    return {"readings": n, "judge_s": time.perf_counter() - started, "judgements": guard.judgements, "verdict": guard.report.verdict}


# -- snapshots -----------------------------------------------------------------------------------


def snapshot_cost(sites: int) -> dict:
    rng = random.Random(1)
    steady = snapshots.steady_sites(rng, sites)
    leak = snapshots.stack("/workspace/train.py", 88, "train_step")
    a = snapshots.snapshot([*steady, (leak, [8 << 20] * 4)], rng)
    b = snapshots.snapshot([*steady, (leak, [8 << 20] * 24)], rng)
    blocks = sum(len(s["blocks"]) for s in b["segments"])
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        write_pickle(Path(tmp) / "b.pickle", b)
        pickled = time.perf_counter() - started
        size = (Path(tmp) / "b.pickle").stat().st_size
        write_pickle(Path(tmp) / "a.pickle", a)
        started = time.perf_counter()
        loaded = [load_snapshot(Path(tmp) / name) for name in ("a.pickle", "b.pickle")]
        load = (time.perf_counter() - started) / 2
    started = time.perf_counter()
    top = diff_snapshots(*loaded).grown[0]
    diffed = time.perf_counter() - started
    assert top.where.endswith("train.py:88 in train_step")
    return {"blocks": blocks, "file_mib": size / 2**20, "pickle_s": pickled, "load_s": load, "diff_s": diffed}


# -- printing ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="ranks,hot,cpu,judge,snapshots")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        rank, world, init_file, steps, step_ms, leak, out = args.worker
        worker(int(rank), int(world), init_file, int(steps), float(step_ms), float(leak), out)
        return
    parts = args.parts.split(",")
    steps = 200 if args.quick else args.steps
    if "ranks" in parts:
        print(
            "| ranks | steps | step | readings | step() median (µs) | step() p99 (µs) | agreeing step() median (µs) | agreeing p99 (µs) "
            "| mean (µs) | max (ms) | judgements per rank | judgement median (ms) |"
        )
        print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for leak in (-1.0, 0.0, 0.002):
            r = ranks(2 if args.quick else args.ranks, steps, args.step_ms, leak)
            print(
                f"| {r['ranks']} | {r['steps']:,} | {r['step_ms']:g} ms | {r['readings']} | {r['step_us_median']:.0f} | {r['step_us_p99']:.0f} "
                f"| {r['agree_us_median']:.0f} | {r['agree_us_p99']:.0f} | {r['mean_us']:.0f} | {r['max_ms']:.1f} "
                f"| {r['judgements_per_rank']:.0f} | {r['judge_ms_median']:.0f} |",
                flush=True,
            )
    if "hot" in parts:
        for name, us in hot(20_000 if args.quick else 200_000).items():
            print(f"\nGuard.step() back to back, 1 process, {name}: {us:.1f} µs per step", flush=True)
    if "cpu" in parts:
        r = cpu_bound(steps, args.step_ms)
        print(
            f"\nCPU-bound loop, 1 process, {r['steps']:,} steps of {1000 * r['without_s'] / r['steps']:.1f} ms of pure Python: "
            f"{r['without_s']:.2f} s without the guard, {r['with_s']:.2f} s with it ({r['overhead_pct']:+.1f}%, "
            f"{r['judgements']} judgements)",
            flush=True,
        )
    if "judge" in parts:
        print("\n| readings held | the last judgement (s) | judgements made | verdict |\n|---:|---:|---:|---|")
        for n in (1_000,) if args.quick else (1_000, 10_000, 100_000, 1_000_000):
            r = judge_cost(n)
            print(f"| {n:,} | {r['judge_s']:.3f} | {r['judgements']} | {r['verdict']} |", flush=True)
    if "snapshots" in parts:
        print("\n| live blocks | file (MiB) | pickle one (s) | load one (s) | diff two (s) |\n|---:|---:|---:|---:|---:|")
        for sites in (1_000,) if args.quick else (1_000, 10_000, 100_000):
            r = snapshot_cost(sites)
            print(f"| {r['blocks']:,} | {r['file_mib']:.1f} | {r['pickle_s']:.3f} | {r['load_s']:.3f} | {r['diff_s']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
