"""Regenerate the sample logs: ``python -m tests.samplegen [ROOT]``.

ROOT defaults to ``sample_logs/`` at the repository root.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import write_all

REPO_ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.samplegen", description=__doc__)
    parser.add_argument("root", nargs="?", type=Path, default=REPO_ROOT / "sample_logs", help="output directory (default: <repo>/sample_logs)")
    args = parser.parse_args(argv)
    for path in write_all(args.root):
        data = path.read_bytes()
        n_lines = data.count(b"\n")
        print(f"{path}: {n_lines} lines, {len(data):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
