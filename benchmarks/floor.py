"""The floor of this stack: polars alone reading a log, keeping the lines that hold `step:` and
pulling the step number out of each with one regex; none of memlog's other work (no escape
stripping or prefix unwrapping, no other fields or formats, no tables or rules).

benchmarks/run.py times it next to memlog and ripgrep, as the issue's reference point ("a
straightforward polars read + literal filter + one extraction regex"): how much of memlog's time
any tool built on Python and polars pays before it does anything of its own. Prints the number of
lines with a step.

    python benchmarks/floor.py FILE...
"""

from __future__ import annotations

import sys

import polars as pl

CHUNK_BYTES = 8 << 20  # as memlog reads


def steps_in(data: bytes) -> int:
    lines = pl.Series([data.decode("utf-8", errors="replace")]).str.split("\n").explode()
    steps = lines.filter(lines.str.contains("step:", literal=True)).str.extract(r"step:\s*(\d+)", 1)
    return steps.len() - steps.null_count()


def count(path: str) -> int:
    total, carry = 0, b""
    with open(path, "rb") as log:
        while block := log.read(CHUNK_BYTES):
            data = carry + block
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            total += steps_in(data[:cut])
    return total + (steps_in(carry) if carry else 0)


if __name__ == "__main__":
    print(sum(count(path) for path in sys.argv[1:]))
