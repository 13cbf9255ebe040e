"""warmup-plateau: memory rises in the first steps, then stays flat. Normal."""

from __future__ import annotations

import statistics

from memlog.rulekit import Finding, Rule, Threshold, gib, rounded, workers_phrase
from memlog.trend import shape_of


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        plateaus = []
        for series in candidates:
            shape = shape_of(series)
            if ctx.fired_on("memory-leak", series) or not shape.has_warmup:
                continue
            rise_pct = 100 * shape.rise / shape.first_value if shape.first_value > 0 else float("inf")
            if (
                len(shape.tail_values) >= t["min_plateau_points"]
                and shape.rise >= t["min_rise_gib"]
                and rise_pct >= t["min_rise_pct"]
                and shape.is_flat(t["max_tail_growth_gib"], t["max_tail_growth_pct"])
            ):
                plateaus.append((series, shape))
        if plateaus:
            findings.append(_finding(ctx, subject, plateaus, t))
    return findings


def _finding(ctx, subject, plateaus, t) -> Finding:
    labels = [ctx.label(s) for s, _ in plateaus]
    knee = max(sh.knee_step for _, sh in plateaus)
    levels = [sh.level for _, sh in plateaus]
    where = "Host" if subject == "host" else "Device"
    level_text = gib(levels[0]) if max(levels) - min(levels) < 0.5 else f"{gib(min(levels))} to {gib(max(levels))} depending on the worker"
    msg = (
        f"{where} memory warms up and then stays flat on {workers_phrase(labels)}: it rises "
        f"{gib(statistics.median(sh.rise for _, sh in plateaus))} until step {knee}, then holds at {level_text} "
        f"through step {max(sh.tail_steps[-1] for _, sh in plateaus)} "
        f"({min(len(sh.tail_values) for _, sh in plateaus)}+ points on the plateau). This is warmup, not a leak."
    )
    return Finding(
        rule=RULE.id,
        severity=RULE.severity,
        message=msg,
        evidence={
            "metric": plateaus[0][0].column,
            "observed": {"plateau_from_step": knee, "plateau_gib_min": rounded(min(levels)), "plateau_gib_max": rounded(max(levels))},
            "thresholds": dict(t),
            "ranks": sorted({s.rank for s, _ in plateaus if s.rank is not None}),
            "series": [
                {
                    "series": ctx.label(s),
                    "rank": s.rank,
                    "start_gib": rounded(sh.first_value),
                    "rise_gib": rounded(sh.rise),
                    "plateau_from_step": sh.knee_step,
                    "plateau_gib": rounded(sh.level),
                    "plateau_spread_gib": rounded(sh.spread),
                    "tail_slope_gib_per_step": rounded(sh.fit.slope if sh.fit else None, 6),
                    "points_on_plateau": len(sh.tail_values),
                    "lines": [s.line_nos[0], s.line_nos[sh.tail_start]],
                }
                for s, sh in plateaus
            ][:16],
            "series_count": len(plateaus),
        },
        hints=[
            "Early growth is expected: optimizer state appears at the first optimizer step, then caches and "
            "allocator pools fill to their working size. Nothing to fix unless the plateau itself is too high.",
            "First and last pipeline stages hold different, legitimately constant amounts: compare ranks of the same stage.",
        ],
        subject=subject,
        series=labels,
        lines=[(s.key.source, s.line_nos[sh.tail_start]) for s, sh in plateaus[:4]],
    )


RULE = Rule(
    id="warmup-plateau",
    severity="info",
    order=20,
    summary="Memory rises in the first steps, then stays flat: warmup (optimizer state, caches, allocator), not a leak.",
    explanation=(
        "Fires for series where the shared knee detection finds a steep early rise followed by a tail whose fitted "
        "growth stays within a small tolerance, with enough points on the plateau, and memory-leak did not fire."
    ),
    not_meaning="Does not mean the plateau fits the device: a high plateau can still run out of memory on a longer sequence.",
    thresholds=(
        Threshold("min_plateau_points", 3, "points", "logged points on the plateau, at least"),
        Threshold("min_rise_gib", 0.25, "GiB", "warmup rise, at least"),
        Threshold("min_rise_pct", 3.0, "%", "warmup rise relative to the first value, at least"),
        Threshold("max_tail_growth_gib", 0.25, "GiB", "fitted growth over the plateau tolerated (absolute)"),
        Threshold("max_tail_growth_pct", 1.5, "%", "fitted growth over the plateau tolerated (relative to level)"),
    ),
    examples=("torchtitan pp=2: 18 GiB at step 1, 31.6 GiB at step 2 (optimizer state), flat at 31.9 GiB through step 30.",),
    check=check,
)
