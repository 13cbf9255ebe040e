"""capacity-conflict: readings above a capacity that cannot be theirs were kept, and why."""

from __future__ import annotations

from memlog.judge.rulekit import MEMORY_COLUMNS, Example, Finding, Rule, Threshold, gib, rounded, workers_phrase


def check(ctx, t) -> list[Finding]:
    conflicted = [s for column in MEMORY_COLUMNS for s in ctx.series(column) if s.conflict and s.limit and s.conflict.readings >= t["min_readings"]]
    by_limit: dict[tuple, list] = {}
    for s in conflicted:
        known = s.limit.known
        by_limit.setdefault((s.limit.gib, s.limit.origin, s.limit.own, known.about if known else None), []).append(s)
    return [_finding(ctx, t, key, group) for key, group in by_limit.items()]


def _finding(ctx, t, key, group) -> Finding:
    cap, origin, own, about = key
    labels = [ctx.label(s) for s in group]
    highest = max(s.conflict.highest for s in group)
    above, of = sum(s.conflict.readings for s in group), sum(s.conflict.of for s in group)
    host = any(s.memory.is_host for s in group)
    what = "node memory total" if host else "device capacity"
    if origin == "--capacity":
        msg = (
            f"--capacity {gib(cap)} is below {above} of {of} readings on {workers_phrase(labels)} (up to {gib(highest)}): "
            "it cannot be their device's capacity, so no reading was dropped for it and no projection uses it. "
            "--capacity takes the device's total in GiB"
        )
    elif own:
        msg = (
            f"The {what} {gib(cap)} ({origin}) is below {above} of {of} readings on {workers_phrase(labels)} "
            f"(up to {gib(highest)}): it cannot be their capacity (a unit, or a number about something else), so no "
            "reading was dropped for it and no projection uses it"
        )
    else:
        msg = (
            f"Readings on {workers_phrase(labels)} go up to {gib(highest)}, above the {what} {gib(cap)} that the log "
            f"gives for {about} ({origin}): that is another {'node' if host else 'device'}'s number, so {above} "
            f"reading{'s' if above != 1 else ''} above it {'were' if above != 1 else 'was'} kept and judged, and no "
            "projection uses it"
        )
    first = min(group, key=lambda s: (s.key.source, s.conflict.line_no))
    return RULE.finding(
        t,
        msg + ".",
        subject="host" if host else "device",
        series=labels,
        ranks=[s.rank for s in group],
        observed={"capacity_gib": rounded(cap), "readings_above": above, "readings": of, "highest_gib": rounded(highest)},
        evidence={
            "capacity_from": origin,
            "capacity_about": about,
            "own": own,
            "series": [
                {
                    "series": ctx.label(s),
                    "metric": s.column,
                    "machine": s.machine,
                    "readings_above": s.conflict.readings,
                    "readings": s.conflict.of,
                    "highest_gib": rounded(s.conflict.highest),
                    "first_step": s.conflict.step,
                    "first_line": s.conflict.line_no,
                }
                for s in group
            ][:16],
            "series_count": len(group),
        },
        hints=[
            "Check the capacity's unit and what it is about; when nodes hold different devices or memory, each "
            "node's own number (its capacity line, its OOM message) is the one that judges its readings."
        ],
        lines=[(first.key.source, first.conflict.line_no)],
    )


RULE = Rule(
    id="capacity-conflict",
    severity="warning",
    summary="Readings above a capacity that cannot be theirs: another node's number, or one most readings exceed.",
    explanation=(
        "A capacity judges only the series it is about: a device capacity its device (the worker that printed it, "
        "or any device of its node, or of its file when no line names a node), a node's memory total that node. "
        "Readings above a capacity printed for another node, or above their own when most of a series' readings "
        "are (a wrong unit, a mistyped --capacity), are kept and judged like any other; this rule says so and "
        "names the number, where it came from and the readings above it. No projection to capacity uses it."
    ),
    not_meaning="Not a memory problem of the run: a capacity number that does not fit these readings.",
    thresholds=(Threshold("min_readings", 1, "readings", "kept readings above a capacity not theirs that trigger the warning"),),
    examples=(
        Example(
            "A capacity of 10 GiB given for a device that reads 40 GiB at every step.",
            True,
            memory={0: [40.0 + 0.01 * (i % 3) for i in range(12)]},
            capacity_gib=10.0,
        ),
        Example("80 GiB capacity, readings at 40 GiB.", False, memory={0: [40.0] * 12}, capacity_gib=80.0),
    ),
    check=check,
)
