"""Score the rule engine on the labelled scenarios (tests/scenarios.py).

Prints the confusion matrix of headline verdicts (expected x found), the accuracy per shape, the
detection rate of leaks at or above the target rate, and every scenario that missed its label,
first as plain text and then as Markdown tables for the README. An accuracy tool over the test
grid, so it lives beside it (benchmarks/ measures speed and memory and imports nothing from tests/).

    python tests/evaluate_rules.py [--workers N] [--only SUBSTRING] [--draws 0-4] [--markdown-only]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memlog.judge.rulekit import declared_verdicts, load_rules
from tests.scenarios import TARGET_LEAK_MIN_STEPS, TARGET_LEAK_PCT_PER_100_STEPS, Outcome, judge_all, scenarios

VERDICTS = tuple(v.name for v in declared_verdicts(load_rules()))


def confusion(outcomes: list[Outcome]) -> dict[tuple[str, str], int]:
    return Counter((o.scenario.expect.verdict, o.verdict) for o in outcomes)


def per_shape(outcomes: list[Outcome]) -> dict[str, tuple[int, int, int]]:
    """shape -> (cases, headline verdict right, every expectation met)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for o in outcomes:
        row = table[o.scenario.shape]
        row[0] += 1
        row[1] += o.verdict_ok
        row[2] += not o.problems
    return {k: tuple(v) for k, v in table.items()}


def target_leaks(outcomes: list[Outcome]) -> list[Outcome]:
    """Leaks of at least the target rate over at least the target number of steps."""
    return [
        o
        for o in outcomes
        if (o.scenario.expect.leak_pct_per_100_steps or 0) >= TARGET_LEAK_PCT_PER_100_STEPS and (o.scenario.expect.leak_steps or 0) >= TARGET_LEAK_MIN_STEPS
    ]


def markdown(outcomes: list[Outcome]) -> str:
    matrix = confusion(outcomes)
    found = [v for v in VERDICTS if any(matrix.get((e, v)) for e in VERDICTS)]
    expected = [v for v in VERDICTS if any(matrix.get((v, f)) for f in VERDICTS)]
    lines = ["| expected \\ found | " + " | ".join(found) + " |", "|---|" + "---:|" * len(found)]
    for e in expected:
        lines.append(f"| {e} | " + " | ".join(str(matrix.get((e, f), 0) or "") for f in found) + " |")
    right = sum(o.verdict_ok for o in outcomes)
    lines += ["", f"Headline verdict correct: {right} / {len(outcomes)} ({100 * right / len(outcomes):.1f} %)", ""]
    lines += ["| shape | cases | verdict right | all expectations met |", "|---|---:|---:|---:|"]
    for shape, (cases, ok, full) in per_shape(outcomes).items():
        lines.append(f"| {shape} | {cases} | {ok} ({100 * ok / cases:.0f} %) | {full} ({100 * full / cases:.0f} %) |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="judge only scenarios whose name contains this")
    parser.add_argument("--markdown-only", action="store_true")
    parser.add_argument("--draws", default="0", help="seeded draws of the grid to judge, e.g. 0 or 0-4 (0 is the tested one)")
    args = parser.parse_args()
    first, _, last = args.draws.partition("-")
    draws = range(int(first), int(last or first) + 1)
    items = [s for d in draws for s in scenarios(d) if args.only in s.name]
    started = time.perf_counter()
    outcomes = judge_all(items, workers=args.workers)
    elapsed = time.perf_counter() - started
    if not args.markdown_only:
        matrix = confusion(outcomes)
        width = max(len(v) for v in VERDICTS) + 2
        print(f"{len(outcomes)} scenarios judged in {elapsed:.1f} s ({args.workers} workers)\n")
        print("expected \\ found".ljust(width) + "".join(v.rjust(width) for v in VERDICTS))
        for e in VERDICTS:
            if any(matrix.get((e, f)) for f in VERDICTS):
                print(e.ljust(width) + "".join(str(matrix.get((e, f), 0)).rjust(width) for f in VERDICTS))
        leaks = target_leaks(outcomes)
        found = sum("memory-leak" in o.fired for o in leaks)
        print(f"\nleaks >= {TARGET_LEAK_PCT_PER_100_STEPS} % of level per 100 steps over >= {TARGET_LEAK_MIN_STEPS} steps found: {found} / {len(leaks)}")
        wrong = [o for o in outcomes if o.problems]
        print(f"\n{len(wrong)} scenario(s) missed an expectation:" if wrong else "\nevery expectation met")
        for o in wrong:
            print(f"  {o.scenario.name}: {'; '.join(o.problems)}")
        print()
    print(markdown(outcomes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
