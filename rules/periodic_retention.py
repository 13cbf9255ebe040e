"""periodic-retention: memory climbs and drops back to the same floor at a regular period."""

from __future__ import annotations

import statistics

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, Verdict, gib, rounded, shape_of, step_word, workers_phrase

HINT = (
    "Memory held until a periodic flush: values kept on the device until the next log step (per-step loss "
    "tensors awaiting .item()), gradient accumulation buffers, or caches emptied at intervals. Call .item() or "
    "move values to the CPU at once; with a larger log interval the peak grows with it and can reach OOM."
)


def _cycle(series, shape) -> tuple[float, float]:
    """(median climb within a cycle, median floor) of a sawtooth."""
    saw = shape.sawtooth
    bounds = [*saw.drops, len(series.values)]
    climbs = [max(series.values[a:b]) - min(series.values[a:b]) for a, b in zip(bounds, bounds[1:]) if b - a >= 2]
    return (statistics.median(climbs) if climbs else 0.0), statistics.median(saw.floors)


def _loss_interval(ctx, series) -> int | None:
    """The loss log interval of the same worker (torchtitan's log_freq), when the log shows it."""
    for loss in ctx.loss_series:
        if loss.key == series.key and len(loss) >= 3:
            return ctx.log_interval(loss)
    return None


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        hits = []
        for series in candidates:
            shape = shape_of(series)
            if not shape.sawtooth or ctx.decided(series) or len(shape.sawtooth.floors) < t["min_cycles"]:
                continue
            if shape.sawtooth.period < t["min_period_steps"]:
                continue  # the forward/backward cycle inside every step, read between step lines
            if len(shape.sawtooth.floors) * shape.sawtooth.period < t["min_coverage"] * (series.x[-1] - series.x[0]):
                continue  # a few cycles in a long run are a coincidence, not a habit of the run
            climb, floor = _cycle(series, shape)
            floor_growth = shape.growth
            if climb < max(t["min_climb_gib"], floor * t["min_climb_pct"] / 100):
                continue
            if abs(floor_growth) > max(t["max_floor_growth_gib"], floor * t["max_floor_growth_pct"] / 100):
                continue
            hits.append((series, shape, climb, floor))
        if hits:
            findings.append(_finding(ctx, subject, hits, t))
    return findings


def _finding(ctx, subject, hits, t) -> Finding:
    labels = [ctx.label(s) for s, *_ in hits]
    series, shape, climb, floor = hits[0]
    period = statistics.median(sh.sawtooth.period for _, sh, _, _ in hits)
    interval = shape.interval
    loss_interval = _loss_interval(ctx, series)
    where = "Host" if subject == "host" else "Device"
    word = step_word(s for s, *_ in hits)  # a period counted in readings when the log numbers no steps
    msg = (
        f"{where} memory on {workers_phrase(labels)} climbs by ~{gib(climb)} and drops back to the same floor "
        f"(~{gib(floor)}) every ~{period:g} {word}s, over {len(shape.sawtooth.floors)} cycles: memory is retained for "
        f"{period:g} {word}s, then released."
    )
    if loss_interval and abs(period - loss_interval) <= 0.1 * loss_interval:
        msg += (
            f" The period matches the loss log interval of {loss_interval} steps (log_freq): values kept on the device "
            "until each log step are the likely cause."
        )
    elif interval and interval > 0:
        points = period / interval
        msg += f" That is every {points:g} logged points at the memory log interval of {interval:g} step{'s' if interval != 1 else ''}"
        if loss_interval:
            msg += f" (the loss is logged every {loss_interval} steps)"
        msg += f"; if the trainer logs or flushes every {period:g} {word}s (log_freq, steps_per_print), values kept until then are the likely cause."
    msg += " The floor does not rise, so this is not a leak, but the peak grows with the interval."
    return RULE.finding(
        t,
        msg,
        subject=subject,
        series=labels,
        ranks=[s.rank for s, *_ in hits],
        observed={
            f"period_{word}s": rounded(period, 2),
            "cycles": min(len(sh.sawtooth.floors) for _, sh, _, _ in hits),
            "climb_gib": rounded(climb),
            "floor_gib": rounded(floor),
            f"floor_slope_gib_per_{word}": rounded(shape.fit.slope if shape.fit else None, 6),
            "memory_log_interval_steps": interval,
            "loss_log_interval_steps": loss_interval,
        },
        evidence={
            "metric": series.column,
            "series": [
                {
                    "series": ctx.label(s),
                    "rank": s.rank,
                    f"period_{word}s": rounded(sh.sawtooth.period, 2),
                    "cycles": len(sh.sawtooth.floors),
                    "climb_gib": rounded(c),
                    "floor_gib": rounded(f),
                    "floor_growth_gib": rounded(sh.growth),
                }
                for s, sh, c, f in hits
            ][:16],
            "series_count": len(hits),
        },
        hints=[HINT],
        lines=[(s.key.source, s.line_nos[sh.sawtooth.drops[0]]) for s, sh, _, _ in hits[:4]],
    )


_SAW = [40.0 + 0.4 * (i % 5) for i in range(40)]

RULE = Rule(
    id="periodic-retention",
    severity="warning",
    verdict=Verdict("periodic-retention", 60, "PERIODIC RETENTION: memory climbs and drops back to the same floor (not a leak)"),
    after=("memory-leak",),
    decides=True,
    summary="Memory climbs and drops back to the same floor at a regular period: retained until a flush, not a leak.",
    explanation=(
        "Fires for series the shared shape reads as a sawtooth (regular drops after climbs) whose cycle floors do "
        "not rise and whose climb is large enough to matter. It names the period in steps and relates it to the "
        "memory log interval and, when the log shows one, the loss log interval (field report 2: loss tensors kept "
        "on the device until the log step). A sawtooth whose floor rises is a memory-leak instead."
    ),
    not_meaning="Not a leak: the floor returns to the same level. But the peak grows with the flush interval and can reach OOM.",
    thresholds=(
        Threshold("min_cycles", 4, "cycles", "complete cycles needed (three can be a coincidence of spikes)"),
        Threshold("min_coverage", 0.5, "share", "the cycles span at least this share of the run: retention is a habit of the run, not a passing episode"),
        Threshold(
            "min_period_steps",
            2,
            "steps",
            "period, at least: a shorter cycle is the forward/backward cycle within each step "
            "(memory lines read between step lines), not memory held across steps",
        ),
        Threshold("min_climb_gib", 0.0001, "GiB", "reporting floor: a climb below this (0.1 MiB) is never reported"),
        Threshold("min_climb_pct", 1.0, "%", "climb within a cycle relative to the floor, at least"),
        Threshold(
            "max_floor_growth_gib",
            0.0001,
            "GiB",
            "fitted growth of the floors below this (0.1 MiB) is flat at any level; above it the relative tolerance decides",
        ),
        Threshold("max_floor_growth_pct", 1.5, "%", "fitted growth of the floors over the run tolerated (relative to the floor)"),
    ),
    examples=(
        Example("torchtitan with a large log_freq (field report 2): +0.4 GiB per step for 4 steps, back to 40 GiB at every 5th step.", True, memory={0: _SAW}),
        Example("Flat memory with noise: no cycles.", False, memory={0: [40.0, 40.02, 39.99, 40.01] * 10}),
        Example(
            "A sawtooth whose floor rises 0.3 GiB per cycle: a leak, not periodic retention.",
            False,
            memory={0: [v + 0.3 * (i // 5) for i, v in enumerate(_SAW)]},
        ),
    ),
    check=check,
)
