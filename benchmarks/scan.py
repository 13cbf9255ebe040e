"""Runs per second of `memlog scan` on a fleet of small runs: one process, the local process pool,
and Ray (a local cluster started here); prints a Markdown table. Figures are printed, never asserted.

    python -m benchmarks.scan                       # 200 runs of 64 KiB, pool and Ray on every core
    python -m benchmarks.scan --runs 50 --no-ray    # quicker, without Ray
    python -m benchmarks.scan --jobs 2 --size 256k

The fleet is written once under `--out` (default /tmp/memlog-bench/scan-<runs>x<size>/): run-NNN/
folders, each holding one generated log (dense torchtitan, sparse torchtitan, EasyR1 under Ray,
DeepSpeed in turn: benchmarks/generate.py, so every run has a warm-up and then a slow leak).

"one process" judges the runs one after another in this process with one engine thread: its wall
per run is the per-run cost on one core, what the cluster estimate in the README is made from.
Ray's start (`ray.init`) and a first scan that starts its workers are timed apart from the scan.
Every mode's JSON must be identical; the script says so.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generate import DEFAULT_OUT, generate, parse_size, size_label

KINDS = ("dense", "sparse", "ray", "deepspeed")


def build_fleet(out: Path, runs: int, size: int) -> Path:
    fleet = out / f"scan-{runs}x{size_label(size)}"
    if fleet.is_dir() and len(list(fleet.iterdir())) == runs:
        return fleet
    shutil.rmtree(fleet, ignore_errors=True)
    templates = [generate(kind, size, out / "scan-templates")[0] for kind in KINDS]
    for i in range(runs):
        run = fleet / f"run-{i:03d}"
        run.mkdir(parents=True)
        shutil.copyfile(templates[i % len(templates)], run / "train.log")
    return fleet


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the pool's workers, once reaped)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(label: str, action) -> tuple[float, float, object]:
    """Wall and CPU seconds of `action` (CPU: this process and its reaped children; a Ray worker is
    the raylet's child, not ours, so a Ray scan's CPU is not counted)."""
    start, cpu = time.perf_counter(), _cpu()
    result = action()
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU here", file=sys.stderr)
    return wall, cpu, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scan", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--size", default="64k", help="bytes per run's log (default 64k)")
    parser.add_argument("--jobs", type=int, default=None, help="local worker processes and Ray CPUs (default: every core)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray measurement")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    from memlog.render.fleet import render_fleet
    from memlog.scan.fleet import default_jobs, limit_threads, scan
    from memlog.scan.runs import find_runs

    jobs = args.jobs or default_jobs()
    fleet_dir = build_fleet(args.out, args.runs, parse_size(args.size))
    runs = find_runs([str(fleet_dir)])
    print(f"{len(runs)} runs of {args.size} under {fleet_dir}; {jobs} job(s); load average {os.getloadavg()[0]:.1f}", file=sys.stderr)

    rows = []  # (mode, wall, json)
    saved = os.environ.get("MEMLOG_THREADS")
    limit_threads()  # one engine thread, as in a worker (polars is loaded already: its pool stays)
    wall, cpu, fleet = timed("one process", lambda: scan(runs, jobs=1))
    if saved is None:
        os.environ.pop("MEMLOG_THREADS", None)
    else:
        os.environ["MEMLOG_THREADS"] = saved
    rows.append(("one process, one run at a time", wall, cpu, render_fleet(fleet, "json")))
    wall, cpu, fleet = timed(f"process pool, {jobs} workers", lambda: scan(runs, jobs=jobs))
    rows.append((f"process pool, {jobs} workers (their start included)", wall, cpu, render_fleet(fleet, "json")))

    ray_start = None
    if not args.no_ray:
        import ray

        import memlog

        here = str(Path(memlog.__file__).resolve().parents[1])
        ray_start, _, _ = timed(
            "ray.init",
            lambda: ray.init(
                num_cpus=jobs, include_dashboard=False, logging_level="ERROR", log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": here}}
            ),
        )
        warm, _, first = timed("Ray, first scan (starts the workers)", lambda: scan(runs, ray_address=""))
        wall, _, fleet = timed(f"Ray, {jobs} CPUs", lambda: scan(runs, ray_address=""))
        rows.append((f"Ray (local cluster, {jobs} CPUs), workers warm", wall, None, render_fleet(fleet, "json")))
        rows.append((f"Ray, first scan after ray.init ({ray_start:.1f} s, not included)", warm, None, render_fleet(first, "json")))
        ray.shutdown()

    print("\n| mode | wall (s) | runs/s | CPU s per run |\n|---|---:|---:|---:|")
    for mode, wall, cpu, _ in rows:
        print(f"| {mode} | {wall:.2f} | {len(runs) / wall:.1f} | {f'{cpu / len(runs):.3f}' if cpu is not None else '-'} |")
    print(
        f"\nper-run cost on one core: {rows[0][1] / len(runs):.3f} s wall, {rows[0][2] / len(runs):.3f} s CPU; "
        f"load average {os.getloadavg()[0]:.1f}; rows identical in every mode: {'yes' if len({r[3] for r in rows}) == 1 else 'NO'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
