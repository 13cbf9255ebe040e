"""warmup-plateau: memory rises in the first steps, then stays flat. Normal."""

from __future__ import annotations

import statistics

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, Verdict, gib, rounded, shape_of, step_word, workers_phrase


def is_plateau(shape, t) -> bool:
    """A warmup rise that stands out, then enough flat points (shared with stable-memory's view)."""
    return (
        shape.has_warmup
        and len(shape.tail_values) >= t["min_plateau_points"]
        and shape.rise >= max(t["min_rise_gib"], shape.level * t["min_rise_pct"] / 100)
        and shape.is_flat(t["max_tail_growth_gib"], t["max_tail_growth_pct"])
    )


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        plateaus = []
        for series in candidates:
            shape = shape_of(series)
            if not ctx.decided(series) and is_plateau(shape, t):
                plateaus.append((series, shape))
        if plateaus:
            findings.append(_finding(ctx, subject, plateaus, t))
    return findings


def _finding(ctx, subject, plateaus, t) -> Finding:
    labels = [ctx.label(s) for s, _ in plateaus]
    knee = max(sh.knee_step for _, sh in plateaus)
    levels = [sh.level for _, sh in plateaus]
    where = "Host" if subject == "host" else "Device"
    by = "the worker and restart segment" if any(s.key.segment for s, _ in plateaus) else "the worker"
    level_text = gib(levels[0]) if max(levels) - min(levels) < 0.5 else f"{gib(min(levels))} to {gib(max(levels))} depending on {by}"
    points = min(len(sh.tail_values) for _, sh in plateaus)
    word = step_word(s for s, _ in plateaus)
    rise = gib(statistics.median(sh.rise for _, sh in plateaus))
    last = max(sh.tail_steps[-1] for _, sh in plateaus)
    changes = [sh for _, sh in plateaus if sh.step_change > 0]
    if changes:
        # A step up long after the warmup is said as what it is: one jump, then flat again.
        size = max(sh.step_change for sh in changes)
        msg = (
            f"{where} memory warms up and then stays flat on {workers_phrase(labels)}: it rises {rise} until {word} {knee} "
            f"and holds at {gib(min(sh.level - sh.step_change for sh in changes))}, then makes a one-off jump of {gib(size)} "
            f"at {word} {min(sh.step_change_step for sh in changes)} (an evaluation, a checkpoint save, a longer batch) and "
            f"holds at {level_text} through {word} {last} ({points}+ points after it). Neither is a leak."
        )
    else:
        msg = (
            f"{where} memory warms up and then stays flat on {workers_phrase(labels)}: it rises {rise} until {word} {knee}, "
            f"then holds at {level_text} through {word} {last} ({points}+ points on the plateau). This is warmup, not a leak."
        )
    if any(sh.running_max for _, sh in plateaus):
        msg += " The series is a running maximum: its new peaks stopped at the knee (a high-water mark that has settled)."
    if points < 5:
        msg += f" Only {points} logged points show the plateau; a few more would confirm it."
    return RULE.finding(
        t,
        msg,
        subject=subject,
        series=labels,
        ranks=[s.rank for s, _ in plateaus],
        observed={
            f"plateau_from_{word}": knee,
            "plateau_gib_min": rounded(min(levels)),
            "plateau_gib_max": rounded(max(levels)),
            **(
                {f"step_change_at_{word}": min(sh.step_change_step for sh in changes), "step_change_gib": rounded(max(sh.step_change for sh in changes))}
                if changes
                else {}
            ),
        },
        evidence={
            "metric": plateaus[0][0].column,
            "confidence": {
                "points_on_plateau_min": points,
                f"tail_slope_ci_gib_per_{word}": [
                    rounded(min(sh.fit.low for _, sh in plateaus if sh.fit), 6),
                    rounded(max(sh.fit.high for _, sh in plateaus if sh.fit), 6),
                ],
            },
            "series": [
                {
                    "series": ctx.label(s),
                    "rank": s.rank,
                    "start_gib": rounded(sh.first_value),
                    "rise_gib": rounded(sh.rise),
                    f"plateau_from_{word}": sh.knee_step,
                    "plateau_gib": rounded(sh.level),
                    "plateau_spread_gib": rounded(sh.spread),
                    f"tail_slope_gib_per_{word}": rounded(sh.fit.slope if sh.fit else None, 6),
                    "tail_growth_gib": rounded(sh.growth),
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
        lines=[(s.key.source, s.line_nos[sh.tail_start]) for s, sh in plateaus[:4]],
    )


RULE = Rule(
    id="warmup-plateau",
    severity="info",
    verdict=Verdict("warmup-plateau", 40, "WARMUP PLATEAU: memory rose in the first steps, then stayed flat (normal)", calm=True),
    after=("memory-leak",),
    decides=True,
    summary="Memory rises in the first steps, then stays flat: warmup (optimizer state, caches, allocator), not a leak.",
    explanation=(
        "Fires for series where the shared knee detection finds a steep early rise followed by a tail whose slope is "
        "bounded well below the rise's rate and whose fitted growth stays within a small tolerance, with enough "
        "points on the plateau (3 are enough when they are flat), and memory-leak did not fire. A running maximum "
        "whose new peaks stopped counts as a plateau from its last new peak."
    ),
    not_meaning="Does not mean the plateau fits the device: a high plateau can still run out of memory on a longer sequence.",
    thresholds=(
        Threshold("min_plateau_points", 3, "points", "logged points on the plateau, at least"),
        Threshold(
            "min_rise_gib",
            0.0001,
            "GiB",
            "reporting floor: a warmup rise below this (0.1 MiB) is never reported; "
            "above it the rise must stand out of the noise and reach min_rise_pct of the level",
        ),
        Threshold("min_rise_pct", 1.5, "%", "warmup rise relative to the plateau level, at least"),
        Threshold(
            "max_tail_growth_gib",
            0.0001,
            "GiB",
            "fitted growth over the plateau below this (0.1 MiB) is flat at any level; above it the relative tolerance decides",
        ),
        Threshold("max_tail_growth_pct", 1.5, "%", "fitted growth over the plateau tolerated (relative to level)"),
    ),
    examples=(
        Example(
            "torchtitan pp=2 (field report 5): 18.2 GiB at step 1, 31.6 GiB at step 2 (optimizer state), flat at 31.9 GiB through step 12.",
            True,
            memory={0: [18.2, 31.6, 31.9, 31.88, 31.9, 31.92, 31.9, 31.89, 31.9, 31.91, 31.9, 31.9]},
        ),
        Example(
            "A plateau seen in only three points after the rise: 19.5, then 33.8, 33.9, 33.8 GiB.",
            True,
            memory={0: [19.5, 33.8, 33.9, 33.8]},
            steps=[1, 10, 20, 30],
        ),
        Example("Flat from the first step: 23.4 GiB throughout.", False, memory={0: [23.41, 23.4, 23.42, 23.41, 23.4] * 4}),
        Example("A rise that keeps going: +2 GiB per step after the first jump.", False, memory={0: [18.0, 30.0, 32.0, 34.0, 36.0, 38.0, 40.0, 42.0]}),
    ),
    check=check,
)
