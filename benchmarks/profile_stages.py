"""Where `memlog analyze` spends its wall time, by pipeline stage, sampled with py-spy.

    pip install py-spy
    python -m benchmarks.profile_stages /tmp/memlog-bench/sparse-1G.log
    python -m benchmarks.profile_stages /tmp/memlog-bench/dense-1G.log --rate 20 --keep dense.txt

py-spy samples the Python stack of every thread (idle frames included, so time spent waiting inside a
polars call counts against the Python line that made it). Chunks are scanned on a thread pool
(memlog/base/parallel.py), so stage figures are thread-seconds and can add up to more than the wall
time; a pool thread waiting for work or the main thread waiting for a scan counts as `waiting`,
shown apart and left out of the shares. Each sample goes to the stage of its innermost memlog frame: read / decode / split / pre-filter / unwrap / extract / blocks (multi-line) / tables / rules / report /
startup (imports and format-spec loading) / other. The top lines show the detail. --keep saves the
collapsed stacks, which speedscope (https://www.speedscope.app) and flamegraph.pl open as they are.
"""

from __future__ import annotations

import argparse
import collections
import linecache
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.run import default_memlog

REPO = Path(__file__).resolve().parents[1]
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*):(?P<line>\d+)\)$")
STAGES = ("read", "decode", "split", "pre-filter", "unwrap", "extract", "blocks", "tables", "rules", "report", "startup", "other")


def _source(file: str, line: int) -> str:
    path = file if file.startswith("/") else str(REPO / file)
    return linecache.getline(path, line)


def stage_of(func: str, file: str, line: int) -> str | None:
    """The stage of one memlog frame, or None for a frame outside memlog: by the folder it is in
    (memlog/read, parse, tables, judge and rules/, report and render), and within parse by module."""
    name = file.rsplit("/", 1)[-1]
    func = func.rsplit(".", 1)[-1]  # py-spy writes methods as Class.method
    if func == "<module>" and ("memlog/" in file or "/rules/" in file or file.startswith("rules/")):
        return "startup"
    if "/rules/" in file or file.startswith("rules/") or "memlog/judge/" in file:
        return "rules"
    if "memlog/" not in file:
        return None
    text = _source(file, line)
    if "memlog/read/" in file:
        if func in ("to_frame", "_split_utf8"):
            return "decode" if ("decode" in text or "\\ufffd" in text) else "split"
        return "read"
    if name == "parallel.py":
        return "waiting"
    if "memlog/parse/" in file:
        if name == "chunks.py":
            return "pre-filter" if func in ("_flagged", "first", "rest", "present", "found", "_alternation") else "extract"
        if name == "unwrap.py":
            return "unwrap"
        if name == "multiline.py":
            return "blocks"
        if name == "formats.py":
            return "extract" if func in ("extract", "_value", "to_number") else "startup"
        return "extract"
    if "memlog/tables/" in file:
        return "tables"
    if "/report/" in file or "/render/" in file:
        return "report"
    if "memlog/base/" in file and name in ("content.py", "config.py", "yamlfile.py"):
        return "startup"
    return "other"


def classify(stack: str) -> tuple[str, str]:
    """(stage, innermost memlog frame) of one collapsed stack."""
    frames = stack.split(";")
    for frame in reversed(frames):
        match = FRAME.match(frame)
        if not match:
            continue
        stage = stage_of(match["func"], match["file"], int(match["line"]))
        if stage:
            return stage, frame
    if any("concurrent/futures/thread.py" in f for f in frames):
        return "waiting", "a pool thread waiting for work"
    if any("importlib" in f for f in frames):
        return "startup", "imports"
    return "other", frames[-1] if frames else "?"


def summarise(collapsed: str, rate: int, top: int) -> str:
    stages: collections.Counter[str] = collections.Counter()
    lines: collections.Counter[str] = collections.Counter()
    for row in collapsed.splitlines():
        stack, _, count = row.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stage, frame = classify(stack)
        stages[stage] += int(count)
        if stage != "waiting":
            lines[f"{stage}: {frame}"] += int(count)
    waiting = stages.pop("waiting", 0)
    total = sum(stages.values()) or 1
    out = ["| stage | thread-seconds | share |", "|---|---:|---:|"]
    out += [f"| {s} | {stages[s] / rate:.2f} | {100 * stages[s] / total:.0f}% |" for s in STAGES if stages[s]]
    out.append(f"| total busy | {total / rate:.2f} | 100% |")
    out.append(f"| waiting (not in the shares) | {waiting / rate:.2f} | |")
    out += ["", f"Top {top} lines (innermost memlog frame):", ""]
    out += [f"- {100 * n / total:4.1f}%  {frame}" for frame, n in lines.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_stages", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+", help="log files to analyze")
    parser.add_argument("--rate", type=int, default=50, help="samples per second (default 50)")
    parser.add_argument("--top", type=int, default=15, help="how many top lines to list (default 15)")
    parser.add_argument("--keep", type=Path, help="also save the collapsed stacks here")
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy")
    if not py_spy:
        raise SystemExit("py-spy not found: pip install py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "stacks.txt"
        cmd = [
            py_spy,
            "record",
            "--idle",
            "--rate",
            str(args.rate),
            "--format",
            "raw",
            "--output",
            str(raw),
            "--",
            *default_memlog(),
            "analyze",
            "-o",
            "json",
            *args.logs,
        ]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
        collapsed = raw.read_text()
        if args.keep:
            args.keep.write_text(collapsed)
    print(summarise(collapsed, args.rate, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
