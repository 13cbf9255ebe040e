"""Where `memlog analyze` reaches its peak memory: the highest RSS seen during each pipeline stage.

    python -m benchmarks.memory_stages /tmp/memlog-bench/dense-1G.log
    python -m benchmarks.memory_stages /tmp/memlog-bench/ranks-64x16M/*.log

Runs `memlog analyze -o json` in this process (output discarded) with a thread reading VmRSS from
/proc every 10 ms. The stage is the pipeline function entered last (reading and scanning are
`parse_sources` until the records are built; rules ask for more series as they go), so a stage's
figure is the peak while it ran, memory freed before but kept by the allocator included. Linux
only. Figures are printed, never asserted.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memlog  # noqa: F401  (sets polars' allocator options before polars loads, as the CLI does)
from memlog.engine import api, reader
from memlog.judge import context

# (module, function, stage) in pipeline order.
STAGES = (
    (api, "read_sources", "read, scan, compact records"),
    (reader, "build_records", "build the records table"),
    (reader, "build_events", "events"),
    (api, "Context", "capacity"),
    (api, "shapes_of", "shapes of the judged series"),
    (context, "build_series", "series"),
    (api, "load_rules", "rules"),
    (api, "coverage", "report"),
)


def rss_mib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def main(paths: list[str]) -> None:
    stage = ["start"]
    peaks: dict[str, int] = {}
    done = threading.Event()

    def sample() -> None:
        peaks[stage[0]] = max(peaks.get(stage[0], 0), rss_mib())

    def sampling() -> None:
        while not done.is_set():
            sample()
            time.sleep(0.01)

    def entering(name: str, function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            stage[0] = name
            sample()  # a stage shorter than the sampling period is still seen
            try:
                return function(*args, **kwargs)
            finally:
                sample()

        return wrapped

    originals = [(module, function, getattr(module, function)) for module, function, _ in STAGES]
    for module, function, name in STAGES:
        setattr(module, function, entering(name, getattr(module, function)))
    sampler = threading.Thread(target=sampling, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            api.analyze(paths)
    finally:
        wall = time.perf_counter() - started
        time.sleep(0.05)
        done.set()
        sampler.join()
        for module, function, original in originals:
            setattr(module, function, original)
    print(f"memlog analyze {' '.join(paths)}: {wall:.1f} s in-process")
    print("| stage | peak RSS while it ran (MiB) |\n|---|---:|")
    for name, peak in peaks.items():
        print(f"| {name} | {peak} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
