"""Detection power and false-leak rate of the judge on the shape generator (tests/shapes.py, issue 34).

Prints, for each leak class, the share of leaks found by rise (in noise SDs of one reading) and
number of readings, and the rise at which 99 % are found; then the false-leak rate and the verdicts
over draws of the classes that do not grow. An accuracy tool beside the generator it measures, like
tests/evaluate_rules.py; figures are printed, never asserted (tests/judge/test_shapes.py asserts).

    python tests/shape_power.py                        # 10,000 calm draws, power grid of 25 draws per cell
    python tests/shape_power.py --calm 1000 --per-cell 10 --workers 2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.shapes import CALM_CLASSES, LEAK_CLASSES, draw, draws, judge

SIGMAS = (1, 2, 3, 4, 6, 8, 12, 16, 24)
POINTS = (12, 30, 100, 300)


def _power_cell(args: tuple[str, int, float, int]) -> tuple[str, int, float, int, int]:
    shape, points, sigmas, per_cell = args
    hits = 0
    for k in range(per_cell):
        d = draw(shape, 10_000 * points + 100 * int(sigmas * 10) + k, sigmas=sigmas, points=points)
        hits += "memory-leak" in judge(d).fired
    return shape, points, sigmas, hits, per_cell


def _calm_chunk(args: tuple[int, int]) -> list[tuple[str, str, bool]]:
    seed, count = args
    return [(j.draw.shape, j.verdict, j.false_leak) for j in (judge(d) for d in draws(seed, count, CALM_CLASSES))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calm", type=int, default=10_000, help="draws of the classes that do not grow")
    parser.add_argument("--per-cell", type=int, default=25, help="leak draws per (class, readings, rise) cell")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    started = time.time()
    cells = [(shape, n, s, args.per_cell) for shape in LEAK_CLASSES for n in POINTS for s in SIGMAS]
    chunks = [(seed, min(500, args.calm - seed * 500)) for seed in range((args.calm + 499) // 500)]
    with ProcessPoolExecutor(args.workers) as pool:
        power = list(pool.map(_power_cell, cells))
        calm = [row for chunk in pool.map(_calm_chunk, chunks) for row in chunk]

    print(
        f"Power: share of leaks found, by rise over the run in noise SDs of one reading (columns) and readings (rows);"
        f" {args.per_cell} draws per cell, noise 0.4-1 % of the level, white or AR(1) rho 0.2-0.7.\n"
    )
    rate = {(shape, n, s): hits / total for shape, n, s, hits, total in power}
    header = "| class | readings | " + " | ".join(f"{s:g}σ" for s in SIGMAS) + " | 99 % found from |"
    print(header)
    print("|" + "---|" * (len(SIGMAS) + 3))
    for shape in LEAK_CLASSES:
        for n in POINTS:
            row = [rate[shape, n, s] for s in SIGMAS]
            first = next((s for i, s in enumerate(SIGMAS) if all(r >= 0.99 for r in row[i:])), None)
            cells_text = " | ".join(f"{100 * r:.0f}%" for r in row)
            print(f"| {shape} | {n} | {cells_text} | {f'{first:g}σ' if first else '> ' + str(SIGMAS[-1]) + 'σ'} |")

    false = sum(f for _, _, f in calm)
    print(f"\nFalse leaks: {false} in {len(calm)} draws that do not grow ({100 * false / max(len(calm), 1):.3f} %).\n")
    print("| class | draws | verdicts |")
    print("|---|---:|---|")
    for shape in CALM_CLASSES:
        verdicts = Counter(v for s, v, _ in calm if s == shape)
        print(f"| {shape} | {sum(verdicts.values())} | " + ", ".join(f"{v} {c}" for v, c in verdicts.most_common()) + " |")
    print(f"\n{time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
