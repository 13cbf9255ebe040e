"""`memlog watch` on a large growing log: the cost of one append, read and judged.

    python -m benchmarks.watch_append                      # 1 GiB dense log, 1 MiB appended, 3 times
    python -m benchmarks.watch_append --size 256M --append 4M --runs 5

Writes the dense benchmark log (benchmarks/generate.py), copies it (the generated file stays as
generated), follows the copy with memlog.watch.watch.Watcher and reads its backlog, then appends
`--append` bytes of further step lines (the same format: 8 ranks behind torchrun's prefix, colours)
and times the poll (reading and parsing the new bytes) and the judgement (every rule over the
records held) separately. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generate import DEFAULT_OUT, generate, parse_size
from memlog.parse.catalog import load_specs
from memlog.watch.watch import Watcher
from tests.logwriters import torchtitan as titan
from tests.logwriters.pytorch import H100_GIB

STEP = re.compile(rb"step:\s*(\d+)\s.*?memory:\s*([\d.]+)GiB")


def last_step(path: Path) -> tuple[int, float]:
    """The last step number and memory reading in the file's last 64 KiB."""
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - 65536))
        tail = re.sub(rb"\x1b\[[0-9;]*m", b"", handle.read())
    found = STEP.findall(tail)
    return int(found[-1][0]), float(found[-1][1])


def appended_lines(first_step: int, level: float, size: int) -> tuple[bytes, int]:
    """About `size` bytes of dense torchtitan step lines from `first_step` on, memory still creeping."""
    out, step, start = [], first_step, datetime(2026, 1, 1)
    total = 0
    while total < size:
        ts = (start + timedelta(seconds=6 * step)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
        gib = level + 0.00002 * (step - first_step)
        for rank in range(8):
            msg = titan.step_line_2025_09(
                step=step, loss=3.2, grad_norm=0.9, mem_gib=gib, mem_pct=100 * gib / H100_GIB, tps=5350, tflops=310.0, mfu=31.3, color=titan.COLOR
            )
            line = (titan.log_line(msg, ts=ts, rank=rank) + "\n").encode()
            out.append(line)
            total += len(line)
        step += 1
    return b"".join(out), step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G")
    parser.add_argument("--append", default="1M")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    source = generate("dense", parse_size(args.size), args.out)[0]
    watched = source.with_name(f"watched-{source.name}")
    shutil.copyfile(source, watched)
    try:
        step, level = last_step(watched)
        started = time.perf_counter()
        watcher = Watcher([str(watched)], list(load_specs().values()))
        watcher.poll()
        read = time.perf_counter()
        report = watcher.judge()
        judged = time.perf_counter()
        records = sum(f.records().height for f in watcher.followers.values())
        print(
            f"backlog: {watched.stat().st_size / 2**30:.2f} GiB read in {read - started:.1f} s, judged in {judged - read:.2f} s "
            f"({records:,} records held, verdict {report.verdict})"
        )
        for run in range(1, args.runs + 1):
            data, step = appended_lines(step + 1, level, parse_size(args.append))
            with open(watched, "ab") as handle:
                handle.write(data)
            t0 = time.perf_counter()
            before = watcher.followers[str(watched)].source.stats.bytes_read
            watcher.poll()
            t1 = time.perf_counter()
            report = watcher.judge()
            t2 = time.perf_counter()
            read_bytes = watcher.followers[str(watched)].source.stats.bytes_read - before
            print(
                f"append {run}: {len(data) / 2**20:.2f} MiB appended, {read_bytes / 2**20:.2f} MiB read: "
                f"poll {1000 * (t1 - t0):.0f} ms + judge {1000 * (t2 - t1):.0f} ms = {1000 * (t2 - t0):.0f} ms "
                f"(steps to {report.coverage['steps'][1]:,}, verdict {report.verdict})"
            )
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        watcher.close()
    finally:
        os.unlink(watched)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
