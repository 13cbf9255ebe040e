"""insufficient-data: too few logged points, or no clear shape, to call leak or warmup."""

from __future__ import annotations

import math

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, gib, shape_of, step_word, workers_phrase


def check(ctx, t) -> list[Finding]:
    undecided = [s for s in (*ctx.device_series, *ctx.host_series) if not ctx.decided(s)]
    if not undecided:
        return []
    labels = list(dict.fromkeys(ctx.label(s) for s in undecided))  # a worker's device and host series name it once
    fewest = min(undecided, key=len)
    interval = ctx.log_interval(fewest)
    missing = max(int(t["target_points"]) - len(fewest), 1)
    word = step_word([fewest])
    points = ", ".join(f"{word} {st}: {gib(v)}" for st, v in list(zip(fewest.steps, fewest.values))[:4])
    if len(fewest) < t["target_points"]:
        msg = (
            f"Not enough evidence to call leak or warmup on {workers_phrase(labels)}: only {len(fewest)} logged "
            f"point{'s' if len(fewest) != 1 else ''} ({points}). Growth over the first steps is usually warmup "
            f"(optimizer state appears at step 1-2, then caches fill). About {missing} more logged {word}s would decide it"
        )
        msg += f" ({missing * interval} steps at the current log interval of {interval})" if interval and interval > 1 else ""
        msg += "; best: log every step (log_freq = 1) for 20-30 steps."
    else:
        # The most suggestive of the undecided series: the one that rises furthest above its noise.
        fewest = max(undecided, key=lambda s: (shape_of(s).effect if shape_of(s).growth > 0 else 0.0, -len(s)))
        shape = shape_of(fewest)
        after = " after a warmup" if shape.has_warmup else ""
        if shape.trend and shape.fit and shape.p_increasing <= 0.05 and shape.growth > 0:
            leak = ctx.thresholds.get("memory-leak", {})
            needed = leak.get("min_effect", 5.0)
            seen = (
                f"it rises {gib(shape.growth)} (fitted) from {step_word([fewest])} {shape.tail_steps[0]} to {shape.tail_steps[-1]}{after} "
                f"(trend p = {shape.p_increasing:.2g}, {shape.effect:.1f} times its noise of ±{gib(shape.residual_noise)}), "
                "more than a flat run moves"
            )
            if 0 < shape.effect < needed:
                more = max(1, math.ceil(len(shape.tail_values) * (needed / shape.effect - 1)))
                missing = more
                seen += f", but a leak stands out {needed:g} times its noise; if it keeps rising at this rate, about {more} more logged points would decide it"
            else:
                seen += (
                    f" but less than the leak thresholds (at least {gib(leak.get('min_growth_gib', 0.1))} and "
                    f"{leak.get('min_growth_pct', 0.75):g}% of its level, after any warmup)"
                )
        else:
            seen = f"no significant trend{after} and no flat plateau ({gib(min(fewest.values))} to {gib(max(fewest.values))})"
        msg = (
            f"Memory on {workers_phrase(labels)} changes without a clear shape over {len(fewest)} points: {seen}. "
            "A longer run, or every step logged, would decide it."
        )
    return [
        RULE.finding(
            t,
            msg,
            subject="device" if any(not (s.memory and s.memory.is_host) for s in undecided) else "host",
            series=labels,
            ranks=[s.rank for s in undecided],
            observed={"points": len(fewest), "log_interval_steps": interval, "more_points_needed": missing},
            evidence={
                "series": [
                    {"series": ctx.label(s), "rank": s.rank, "metric": s.column, "points": len(s), "steps": s.steps[:8], "values_gib": s.values[:8]}
                    for s in undecided
                ][:16],
                "series_count": len(undecided),
            },
            hints=["Rerun with every step logged (torchtitan: --metrics.log_freq 1; DeepSpeed: steps_per_print 1) for 20-30 steps."],
            lines=[(s.key.source, s.line_nos[-1]) for s in undecided[:4]],
        )
    ]


RULE = Rule(
    id="insufficient-data",
    severity="info",
    # Runs once every rule that settles memory series has: it speaks for the ones none settled.
    after=("memory-leak", "periodic-retention", "stable-memory", "warmup-plateau"),
    summary="Too few logged points (or no clear shape) to tell a leak from warmup; says how many more would decide.",
    explanation=(
        "Fires for every memory series that no rule settling memory series (memory-leak, warmup-plateau, "
        "stable-memory, periodic-retention) could judge: too few points (it says how many more logged steps would "
        "decide), or a movement without a clear shape."
    ),
    not_meaning="Not a clean bill of health and not a leak: the log simply does not decide it.",
    thresholds=(Threshold("target_points", 8, "points", "logged points that usually decide leak versus warmup"),),
    examples=(
        Example(
            "torchtitan log_freq=10 stopped after step 10 (field report 5): two points, 19.5 GiB then 33.8 GiB.", True, memory={0: [19.5, 33.8]}, steps=[1, 10]
        ),
        Example("Thirty flat points at 23.4 GiB: decided (stable).", False, memory={0: [23.4] * 30}),
    ),
    check=check,
)
