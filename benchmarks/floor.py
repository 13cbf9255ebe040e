"""The floor of this stack: the 20-line script a user would write instead of memlog.

polars' own multi-threaded reader takes the file as one string column (a separator and no quote
character that cannot occur in a log, so every line is one row), a literal filter keeps the lines
that can hold a record, and one regex pulls four fields out of each: rank, step, loss and memory for
torchtitan (the time instead of the rank in per-rank files); the actor, its pid, the key and the value of EasyR1's metric lines under Ray; the four
see_memory_usage readings for DeepSpeed. None of memlog's own work: no escape stripping or prefix
unwrapping, no other fields or formats, no tables, no rules.

benchmarks/run.py times it next to memlog (issue 20's targets are ratios to this floor). Prints the
number of lines the regex matched.

    python benchmarks/floor.py --kind dense FILE...
"""

from __future__ import annotations

import argparse

import polars as pl

# kind (benchmarks/generate.py) -> (literal every record line holds, the one regex with four fields)
TORCHTITAN = ("step:", r"\[rank(\d+)\]:.*?step:\s*(\d+).*?loss:\s*([-\d.]+).*?memory:\s*([\d.]+)GiB")
PATTERNS = {
    "dense": TORCHTITAN,
    "sparse": TORCHTITAN,
    # one rank per file: the rank is in the file's name, the fourth field is the time instead
    "ranks": ("step:", r"\] (\S+ \S+) - .*?step:\s*(\d+).*?loss:\s*([-\d.]+).*?memory:\s*([\d.]+)GiB"),
    "ray": ("_gb:", r"\((\w+) pid=(\d+)[^)]*\)\S*\s+(\w+_gb):\s*([\d.]+)"),
    "deepspeed": ("Max_MA", r"MA ([\d.]+) GB\s+Max_MA ([\d.]+) GB\s+CA ([\d.]+) GB\s+Max_CA ([\d.]+) GB"),
}
NO_SEPARATOR = "\x1f"  # ASCII unit separator: never in a log line, so a line is one field


def records(paths: list[str], kind: str) -> int:
    literal, pattern = PATTERNS[kind]
    lines = pl.scan_csv(
        paths, has_header=False, separator=NO_SEPARATOR, quote_char=None, schema={"line": pl.String}, encoding="utf8-lossy", truncate_ragged_lines=True
    )
    found = (
        lines.filter(pl.col("line").str.contains(literal, literal=True))
        .select(pl.col("line").str.extract_groups(pattern).alias("fields"))
        .unnest("fields")
        .drop_nulls()
        .select(pl.len())
        .collect()
    )
    return found.item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=sorted(PATTERNS), default="dense")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    print(records(args.paths, args.kind))
