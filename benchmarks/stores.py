"""Time to read the metrics stores (issue 37): a TensorBoard event file of N scalar points and an
MLflow file store of N metric points, each judged by `memlog analyze` in a child process; prints
wall and CPU seconds, peak RSS and points per second. Figures are printed, never asserted.

    python -m benchmarks.stores                    # 1,000,000 points each (TensorBoard, MLflow)
    python -m benchmarks.stores --points 200000 --no-mlflow

The inputs are written once under `--out` (default /tmp/memlog-bench/stores-<points>/) by the
stores' own writers (the `tensorboard` package's EventFileWriter, MLflow's client): torchtitan's
four tags per step (loss, reserved GiB and %, throughput), reserved memory warming up and then
leaking slowly, so the verdict is a leak.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generate import DEFAULT_OUT

TAGS = 4  # points per step (the tags below)
CAPACITY = 79.11


def memory(step: int) -> float:
    """Reserved GiB at `step`: a warm-up to 30 GiB over 200 steps, then 1 GiB per 100,000 steps."""
    return 20.0 + 10.0 * min(step, 200) / 200 + step / 100_000 + 0.02 * ((step * 7919) % 13) / 13


def values(step: int) -> tuple[tuple[str, float], ...]:
    gib = memory(step)
    return (
        ("loss_metrics/global_avg_loss", 10.0 - 1e-5 * step),
        ("memory/max_reserved(GiB)", gib),
        ("memory/max_reserved(%)", 100 * gib / CAPACITY),
        ("wps", 7421.0),
    )


def write_tensorboard(folder: Path, steps: int) -> Path:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    found = list(folder.glob("*tfevents*")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder), max_queue_size=10_000)
    for step in range(1, steps + 1):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=v) for tag, v in values(step)])
        writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary))
    writer.close()
    return next(folder.glob("*tfevents*"))


def write_mlflow(folder: Path, steps: int) -> Path:
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    if folder.is_dir():
        return folder
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(folder.as_uri())
    run = client.create_run(client.create_experiment("bench"), run_name="bench").info.run_id
    batch: list = []
    for step in range(1, steps + 1):
        batch += [Metric(tag.replace("(", "_").replace(")", "").replace("%", "pct"), v, 1_700_000_000_000 + 1000 * step, step) for tag, v in values(step)]
        if len(batch) >= 1000:
            client.log_batch(run, metrics=batch)
            batch = []
    if batch:
        client.log_batch(run, metrics=batch)
    client.set_terminated(run)
    return folder


def measure(label: str, target: Path, points: int) -> None:
    """`memlog analyze` on `target` in a child process: wall, CPU, peak RSS, the verdict line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memlog", "analyze", str(target), "--fail-on", "never"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    verdict = next((line for line in done.stdout.splitlines() if line.strip()), done.stderr.strip()[:120])
    print(f"| {label} | {points:,} | {wall:.1f} | {cpu:.1f} | {after.ru_maxrss / 1024:.0f} | {points / wall:,.0f} | {verdict.strip()[:60]} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stores", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000, help="scalar points per store (default 1,000,000)")
    parser.add_argument("--no-mlflow", action="store_true", help="skip MLflow (its client writes slowly)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    steps = args.points // TAGS
    folder = args.out / f"stores-{args.points}"
    print("| store | points | wall s | CPU s | peak RSS MiB | points/s | verdict |\n|---|---:|---:|---:|---:|---:|---|")
    measure("TensorBoard event file", write_tensorboard(folder / "tb", steps), steps * TAGS)
    if not args.no_mlflow:
        measure("MLflow file store", write_mlflow(folder / "mlruns", steps), steps * TAGS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
