"""fragmentation: reserved memory grows while allocated memory stays flat on the same worker."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, Verdict, gib, known_issues, rounded, shape_of, step_word, workers_phrase

# Allocated and reserved readings of the same window: live tensors versus the allocator's pool.
PAIRS = (
    ("mem_allocated_gib", "mem_reserved_gib"),
    ("mem_peak_allocated_gib", "mem_peak_reserved_gib"),
    ("mem_max_allocated_gib", "mem_max_reserved_gib"),
)
HINTS = [
    "On CUDA, set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the allocator then grows segments in place instead of "
    "caching blocks of every size it has seen, which removes most fragmentation.",
    "Varying shapes (sequence lengths, rollout/generation vs training phases) leave blocks of many sizes in the cache: "
    "torch.cuda.empty_cache() (torch.mps.empty_cache() on Apple MPS) between phases returns them, at some speed cost.",
]


def check(ctx, t) -> list[Finding]:
    hits = []
    for allocated_column, reserved_column in PAIRS:
        allocated = {s.key: s for s in ctx.series(allocated_column) if len(s)}
        for reserved in ctx.series(reserved_column):
            alloc = allocated.get(reserved.key)
            if alloc is None or len(reserved) < t["min_points"] or len(alloc) < t["min_points"]:
                continue
            r_shape, a_shape = shape_of(reserved), shape_of(alloc)
            r_fit, r_trend = r_shape.fit, r_shape.trend
            if r_fit is None or r_trend is None or not r_fit.low > 0 or r_trend.p_increasing > t["max_p_value"]:
                continue
            r_growth = r_shape.growth
            if r_growth < max(t["min_growth_gib"], r_shape.level * t["min_growth_pct"] / 100):
                continue
            a_growth = a_shape.overall_change if not a_shape.has_warmup else a_shape.growth
            if abs(a_growth) > max(t["max_allocated_growth_share"] * r_growth, a_shape.tolerance(t["min_growth_gib"], 0.5)):
                continue  # allocated grows too: live tensors, the memory-leak rule's case
            hits.append((reserved, alloc, r_shape, a_shape))
    if not hits:
        return []
    labels = sorted({ctx.label(r) for r, *_ in hits})
    reserved, alloc, r_shape, a_shape = hits[0]
    cache_start = r_shape.tail_values[0] - _at(alloc, r_shape.tail_steps[0], _line(reserved, r_shape.tail_start))
    cache_end = r_shape.tail_values[-1] - _at(alloc, r_shape.tail_steps[-1], _line(reserved, len(reserved) - 1))
    word = step_word([reserved])  # `from_reading` when the log numbers its readings, not its steps
    msg = (
        f"Reserved memory grows while allocated memory is flat on {workers_phrase(labels)}: "
        f"reserved {gib(r_shape.tail_values[0])} -> {gib(r_shape.tail_values[-1])} (+{gib(r_shape.growth)} fitted, from {word} "
        f"{r_shape.tail_steps[0]} to {r_shape.tail_steps[-1]}) while allocated stays at ~{gib(a_shape.level)}. "
        f"The growth is the caching allocator's pool (cached or fragmented blocks: {gib(cache_start)} -> "
        f"{gib(cache_end)} above allocated), not live tensors."
    )
    if r_shape.stairs:
        msg += f" It grows in stairs of ~{gib(r_shape.stairs.mean_jump)}."
    return [
        RULE.finding(
            t,
            msg,
            subject="device",
            series=labels,
            ranks=[r.rank for r, *_ in hits],
            observed={
                "reserved_start_gib": rounded(r_shape.tail_values[0]),
                "reserved_end_gib": rounded(r_shape.tail_values[-1]),
                "reserved_growth_gib": rounded(r_shape.growth),
                "allocated_level_gib": rounded(a_shape.level),
                "allocated_growth_gib": rounded(a_shape.growth),
                "cache_start_gib": rounded(cache_start),
                "cache_end_gib": rounded(cache_end),
                f"from_{word}": r_shape.tail_steps[0],
                f"to_{word}": r_shape.tail_steps[-1],
            },
            evidence={
                "metric": reserved.column,
                "compared_with": alloc.column,
                "confidence": {
                    f"reserved_slope_ci_gib_per_{word}": [rounded(r_shape.fit.low, 6), rounded(r_shape.fit.high, 6)],
                    "reserved_trend_p_value": rounded(r_shape.trend.p_increasing, 6),
                    "points": len(r_shape.tail_values),
                },
                "series": [
                    {
                        "series": ctx.label(r),
                        "rank": r.rank,
                        "reserved_metric": r.column,
                        "allocated_metric": a.column,
                        "reserved_growth_gib": rounded(rs.growth),
                        "allocated_growth_gib": rounded(asp.growth),
                        "allocated_level_gib": rounded(asp.level),
                    }
                    for r, a, rs, asp in hits
                ][:16],
                "series_count": len(hits),
            },
            hints=known_issues(ctx.versions, "device") + HINTS,
            lines=[(r.key.source, r.line_nos[-1]) for r, *_ in hits[:4]],
        )
    ]


def _line(series, index: int) -> int | None:
    return series.line_nos[index] if 0 <= index < len(series.line_nos) else None


def _at(series, step: int, line: int | None = None) -> float:
    """The series' reading on `line` (allocated and reserved printed on one line: the same moment),
    else at `step` or the nearest earlier one. A step of several readings holds its floor and its
    peak (records.step_rows), each on its own line."""
    if line is not None and line in series.line_nos:
        return series.values[series.line_nos.index(line)]
    best = series.values[0]
    for s, v in zip(series.steps, series.values):
        if s > step:
            break
        best = v
    return best


_STEPS = list(range(1, 41))

RULE = Rule(
    id="fragmentation",
    severity="warning",
    verdict=Verdict("fragmentation", 90, "FRAGMENTATION: reserved memory grows while allocated is flat (cache, not live tensors)"),
    summary="Reserved memory grows while allocated memory stays flat: caching or fragmentation, not live tensors.",
    explanation=(
        "For each worker that logs both allocated and reserved memory of the same kind (current: DeepSpeed MA vs CA; "
        "running maximum: verl max_memory_allocated vs max_memory_reserved), fires when reserved memory has a "
        "significant upward trend and allocated memory stays flat. The difference is the caching allocator's pool: "
        "blocks cached for reuse, or fragmented so they cannot be reused."
    ),
    not_meaning=(
        "Not a leak of live tensors, and not harmless either: a fragmented pool can still run out of memory. When "
        "allocated memory grows too, that is a memory-leak."
    ),
    thresholds=(
        Threshold("min_points", 5, "points", "logged points of both series, at least"),
        Threshold("max_p_value", 0.01, "p", "Mann-Kendall one-sided p-value for the rise of reserved memory"),
        Threshold(
            "min_growth_gib", 0.0001, "GiB", "reporting floor: reserved growth below this (0.1 MiB) is never reported; above it the relative gate decides"
        ),
        Threshold("min_growth_pct", 2.0, "%", "fitted growth of reserved memory relative to its level, at least"),
        Threshold("max_allocated_growth_share", 0.2, "fraction", "allocated growth tolerated, as a share of reserved growth"),
    ),
    examples=(
        Example(
            "DeepSpeed (field report 4): MA flat at 12.4 GiB while CA climbs 14 -> 21.8 GiB over 40 steps.",
            True,
            columns={"mem_allocated_gib": {0: [12.4] * 40}, "mem_reserved_gib": {0: [14.0 + 0.2 * i for i in range(40)]}},
            steps=_STEPS,
        ),
        Example(
            "Both rise together: a leak of live tensors, not fragmentation.",
            False,
            columns={"mem_allocated_gib": {0: [12.4 + 0.2 * i for i in range(40)]}, "mem_reserved_gib": {0: [14.0 + 0.2 * i for i in range(40)]}},
            steps=_STEPS,
        ),
        Example("Both flat.", False, columns={"mem_allocated_gib": {0: [12.4] * 40}, "mem_reserved_gib": {0: [14.0] * 40}}, steps=_STEPS),
    ),
    check=check,
)
