"""corrupt-readings: memory readings that cannot be true, excluded from every other rule."""

from __future__ import annotations

from collections import Counter

from memlog.judge.rulekit import MAX_DEVICE_GIB, MAX_HOST_GIB, MEMORY_COLUMNS, Example, Finding, Rule, Threshold, gib, rounded, workers_phrase


def check(ctx, t) -> list[Finding]:
    dropped = []  # (series, corrupt reading): the first ones each series lists
    reasons: Counter = Counter()  # every one, listed or only counted (tables/series.py)
    for column in MEMORY_COLUMNS:
        for series in ctx.series(column):
            dropped += [(series, c) for c in series.corrupt]
            reasons.update(series.corrupt_counts or Counter(c.reason for c in series.corrupt))
    total = sum(reasons.values())
    if total < t["min_readings"]:  # at least 1 (rulekit.UNIT_BOUNDS)
        return []
    dropped.sort(key=lambda pair: (pair[0].key.source, pair[1].line_no))
    labels = sorted({ctx.label(s) for s, _ in dropped})
    subjects = {"host" if s.memory.is_host else "device" for s, _ in dropped}
    first = dropped[0][0].limit
    shown = [f"{_value(c.value)} at {s.unit} {c.step} (line {c.line_no}, {ctx.label(s)}, {_why(c.reason, s, ctx)})" for s, c in dropped[:5]]
    msg = (
        f"{total} impossible memory reading{'s' if total != 1 else ''} on {workers_phrase(labels)} "
        f"{'were' if total != 1 else 'was'} excluded from the analysis: {'; '.join(shown)}"
        f"{f'; and {total - 5} more' if total > 5 else ''}. They are misparsed or corrupt values "
        "(a wrong unit, an overflow, a broken monitor), not spikes and not a leak."
    )
    return [
        RULE.finding(
            t,
            msg,
            subject="device" if "device" in subjects else "host",
            series=labels,
            ranks=[s.rank for s, _ in dropped],
            observed={"readings": total, **{reason.replace(" ", "_"): n for reason, n in sorted(reasons.items())}},
            evidence={
                "capacity_gib": rounded(first.gib) if first else None,
                "capacity_from": first.origin if first else None,
                "limit_without_capacity_gib": MAX_DEVICE_GIB,
                "readings": [
                    {"series": ctx.label(s), "metric": s.column, "step": c.step, "line": c.line_no, "value": _number(c.value), "reason": c.reason}
                    for s, c in dropped[:32]
                ],
            },
            hints=[
                "Check the unit the log prints (bytes, MB, GB) and whether the monitor wraps or overflows; "
                "with --capacity the device limit used to judge readings can be set explicitly."
            ],
            lines=[(s.key.source, c.line_no) for s, c in dropped[:8]],
        )
    ]


def _number(value: float) -> float | str:
    return rounded(value, 4) if rounded(value, 4) is not None else str(value)


def _value(value: float) -> str:
    return gib(value) if value == value and abs(value) != float("inf") else str(value)


def _why(reason: str, series, ctx) -> str:
    if reason != "above capacity":
        return reason
    if series.limit and series.limit.own:
        return f"above the {gib(series.limit.gib)} capacity"
    return f"above {MAX_HOST_GIB:g} GiB, more than any node holds" if series.memory.is_host else f"above {MAX_DEVICE_GIB:g} GiB, more than any device holds"


RULE = Rule(
    id="corrupt-readings",
    severity="warning",
    summary="Memory readings that cannot be true (above capacity, negative, not a number) were excluded.",
    explanation=(
        "Lists the memory readings that the series builder dropped: negative values, NaN or infinite values, and "
        "values above the series' own capacity (device: its capacity line, percentage or --capacity, 5% slack; "
        "host: its node's total from an OOM message; without one, above 1024 GiB per device or 64 TiB per node), "
        "unless most of the series' readings are above it (then the capacity is what is wrong: capacity-conflict). "
        "They never reach the trend statistics, so they can be neither a spike nor a leak."
    ),
    not_meaning="Not a memory problem of the run: a problem of the numbers in the log (unit, overflow, monitor).",
    thresholds=(Threshold("min_readings", 1, "readings", "impossible readings that trigger the warning"),),
    examples=(
        Example(
            "mmdetection-style overflow: one reading of 1136404.00 GiB among 23.4 GiB readings on an 80 GiB device.",
            True,
            memory={0: [23.4] * 10 + [1136404.0] + [23.4] * 10},
            capacity_gib=79.11,
        ),
        Example("Plausible readings only.", False, memory={0: [23.4] * 20}, capacity_gib=79.11),
    ),
    check=check,
)
