"""memory-leak: memory keeps rising after any warmup, so the run will run out of memory."""

from __future__ import annotations

import math
import statistics

from memlog.judge.rulekit import (
    Example,
    Finding,
    Measure,
    Rule,
    SeriesKey,
    Threshold,
    Verdict,
    duration,
    gib,
    known_issues,
    project,
    rounded,
    shape_of,
    step_word,
    workers_phrase,
)

DEVICE_HINTS = [
    "Look for tensors or buffers kept alive across steps: lists of losses or outputs, hooks, caches keyed by step.",
    "Check that every forward has its backward, especially custom autograd functions and communication ops "
    "(e.g. symmetric-memory all-to-all under expert parallelism): skipped backward keeps each step's intermediates alive.",
    "Values kept on the device until the next log step (e.g. per-step loss tensors) grow with the log interval: "
    "call .item() or move them to the CPU at once, and compare a run with log_freq=1.",
]
HOST_HINTS = [
    "The growth is in host (system) memory, not on the device: check CPU offload settings "
    "(FSDP param_offload / optimizer_offload, ZeRO offload_param / offload_optimizer) and compare a run with offload off.",
    "Check what else keeps host memory per step: dataloader workers, rollout buffers, checkpoint saves "
    "(memory that jumps at each save), and the inference engine version (e.g. vLLM v0 vs v1).",
]
STAIRS_HINT = (
    "Stairs mean something is retained at intervals, not every step: line the jumps up against checkpoint saves, "
    "rollout/generation phases and evaluation, and with parameter or optimizer offload on, compare a run with it off."
)
SAWTOOTH_HINT = (
    "The memory retained between flushes is released, but not all of it: look for what survives each flush "
    "(values accumulated until the log step and only partly cleared, caches keyed by step)."
)
RESERVED_ONLY_HINT = (
    "Only reserved memory (the caching allocator's pool) is logged: part of this growth may be cache or "
    "fragmentation rather than live tensors. Log allocated memory as well to tell them apart."
)


def leak_evidence(series, shape, t) -> dict | None:
    """Numbers for one series when it passes every gate, else None."""
    fit, trend = shape.fit, shape.trend
    if fit is None or trend is None:
        return None
    if shape.sawtooth:
        if len(shape.sawtooth.floors) < t["min_cycles"] or trend.p_increasing > t["max_pattern_p_value"]:
            return None
    elif len(shape.tail_values) < t["min_tail_points"]:
        return None
    elif shape.p_increasing > (t["max_pattern_p_value"] if shape.stairs else t["max_p_value"]):
        return None  # p corrected for autocorrelated noise (trend.Shape.p_increasing)
    if shape.effect < shape.effect_needed(t["min_effect"], t["min_effect_many_points"], t["min_growth_z"]):
        return None  # a drift the series' own noise around its line could make, given how many readings show it
    if shape.saturation_gain is not None and shape.saturation_gain >= t["max_saturation_bic"]:
        return None  # still bending towards a cap: the end of the warmup
    if shape.saturating:
        return None  # the whole series approaches a cap and needs no steady rise on top: a warmup settling
    growth_pct = 100 * shape.growth / shape.level if shape.level > 0 else math.inf
    # Stairs of exactly repeated readings tie most pairwise slopes at zero, which pins the lower
    # bound of Sen's interval at 0; the detected jumps themselves carry the evidence there.
    rising = fit.low > 0 or (shape.stairs is not None and fit.low >= 0 and fit.slope > 0)
    if not (rising and shape.growth >= t["min_growth_gib"] and growth_pct >= t["min_growth_pct"]):
        return None
    new_peaks = None
    if shape.running_max:
        # A running maximum only goes up: a few new peaks are a high-water mark settling, not a
        # leak. It must keep making new peaks, at a steady rate, through the end of the log.
        new_peaks = sum(b > a for a, b in zip(shape.tail_values, shape.tail_values[1:]))
        late = shape.late_rate_ratio
        if new_peaks < t["min_new_peaks"] or late is None or late < t["min_late_rate_ratio"]:
            return None
    return {"growth_pct": growth_pct, "new_peaks": new_peaks}


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        leaking = []
        for series in candidates:
            shape = shape_of(series)
            extra = leak_evidence(series, shape, t)
            if extra is not None:
                leaking.append((series, shape, extra, project(series, shape, ctx.capacity_of(series)[0])))
        if leaking:
            findings.append(_finding(ctx, subject, leaking, candidates, t))
    return findings


def _pattern_text(shape, slope: float, word: str = "step") -> str:
    if shape.sawtooth:
        saw = shape.sawtooth
        per_cycle = shape.fit.slope * saw.period
        return (
            f" under a sawtooth: it climbs and drops back every ~{saw.period:g} {word}s, but the floor rises from "
            f"{gib(saw.floors[0])} to {gib(saw.floors[-1])} over {len(saw.floors)} cycles ({gib(per_cycle)} per cycle)"
        )
    if shape.stairs:
        every = shape.stair_period_steps()
        every_text = f" every ~{every:g} {word}s" if every else ""
        return f" in stairs: +{gib(shape.stairs.mean_jump)}{every_text} ({len(shape.stairs.jumps)} jumps), flat in between"
    r2 = shape.r_squared
    return f" in a straight line (R² {r2:.3f})" if r2 is not None and r2 >= 0.95 else ""


def _live(leaking: list) -> list:
    """Of each worker's leaking segments, the last: a resumed run is judged where it runs now
    (an earlier segment's rate and projection describe a run that no longer exists). A torchrun
    restart's attempt files are segments of one run, in attempt order (SeriesKey.run)."""
    last: dict[tuple, tuple] = {}
    for item in leaking:
        key = item[0].key
        if key.run not in last or key.place > last[key.run][0].key.place:
            last[key.run] = item
    return [item for item in leaking if last[item[0].key.run] is item]


def _finding(ctx, subject, all_leaking, candidates, t) -> Finding:
    leaking = _live(all_leaking)
    # Earlier segments of the run, not series: the ranks of one attempt restarted together.
    earlier = len({item[0].key.place for item in all_leaking if not any(item is live for live in leaking)})
    labels = [ctx.label(s) for s, *_ in all_leaking]
    # A worker's step floor and peak both leaking: its figures are those of the one its line fits best
    # (a median of the two would be a level no reading had; a peak's first reading may be a spike).
    best: dict[SeriesKey, float] = {}  # by the series the views were made from
    for s, sh, _, _ in leaking:
        if s.envelope is not None:
            best[s.envelope[0]] = max(best.get(s.envelope[0], -math.inf), sh.r_squared)
    shapes = [sh for s, sh, _, _ in leaking if s.envelope is None or sh.r_squared >= best[s.envelope[0]]]
    slope = statistics.median(sh.fit.slope for sh in shapes)
    first = min(sh.tail_steps[0] for sh in shapes)
    last = max(sh.tail_steps[-1] for sh in shapes)
    start = statistics.median(sh.tail_values[0] for sh in shapes)
    end = statistics.median(sh.tail_values[-1] for sh in shapes)
    projections = [p for *_, p in leaking if p is not None]
    soonest = min(projections, key=lambda p: p.step) if projections else None
    column = leaking[0][0].memory
    where = "Host" if subject == "host" else "Device"
    typical = min(shapes, key=lambda sh: abs(sh.fit.slope - slope))  # the series the pattern text describes
    patterns = sorted({sh.pattern for sh in shapes})

    word = step_word(s for s, *_ in leaking)
    # A rate too small to print per step (under 0.1 MiB) is given per 1k steps only.
    rate = f"{gib(slope * 1000)} per 1k {word}s" if slope * 1024 < 0.1 else f"{gib(slope)}/{word}"
    if slope < 0.1 and slope * 1024 >= 0.1:
        rate += f" ({gib(slope * 1000)} per 1k {word}s)"
    msg = f"{where} memory leak on {workers_phrase([ctx.label(s) for s, *_ in leaking])}: {column.measure.value} memory rises {rate} from {word} {first} to {last}, {gib(start)} -> {gib(end)}"
    msg += _pattern_text(typical, slope, word)
    if typical.running_max:
        msg += (
            f" (a running maximum that keeps setting new peaks through {word} {last}: {typical_new_peaks(leaking)} new peaks, "
            "so this is sustained growth, not a few large batches)"
        )
    onsets = [sh for sh in shapes if sh.onset is not None]
    jumps = [sh for sh in shapes if sh.jump is not None]
    warmed = [sh for sh in shapes if sh.has_warmup and sh.onset is None and sh.jump is None]
    if jumps and not onsets:
        msg += f"; it jumped by {gib(statistics.median(sh.jump for sh in jumps))} at {word} {min(sh.jump_step for sh in jumps)} and has kept growing since"
    elif onsets:
        held = statistics.median(sh.tail_values[0] for sh in onsets)
        msg += f"; it started growing at {word} {min(sh.onset_step for sh in onsets)} after holding at ~{gib(held)}"
    elif warmed:
        msg += f", after a warmup until {word} {max(sh.knee_step for sh in warmed)}"
    elif not typical.sawtooth:
        msg += f", from the first logged {word}s (with constant-size inputs that is not warmup)"
    if earlier:
        msg += f"; also in {earlier} earlier segment{'s' if earlier > 1 else ''} before the run restarted"
    if soonest:
        capacity, capacity_from = ctx.capacity_of(leaking[0][0])
        msg += (
            f"; at this rate it reaches the {gib(soonest.capacity_gib)} {'node' if subject == 'host' else 'device'} capacity at {word} ~{round(soonest.step)}"
        )
        if soonest.seconds is not None and soonest.steps_left > 0:
            msg += f", {duration(soonest.seconds)} after the last logged {word}" + (f" (around {soonest.at})" if soonest.at else "")
    ooms = [e for e in ctx.tables.events if e.kind == "oom"]
    if ooms:
        earliest = min((e for e in ooms if e.after_step is not None), key=lambda e: e.after_step, default=None)
        msg += f"; the run hit out-of-memory{' ' + ctx.during(earliest) if earliest is not None else ''}"
    if len(all_leaking) < len(candidates):
        msg += f" ({len(candidates) - len(all_leaking)} other series do not grow)"
    msg += "."
    if subject == "host":
        flat_device = [s for s in ctx.device_series if not _grows(s, t)]
        if ctx.device_series and len(flat_device) == len(ctx.device_series):
            msg += f" Device memory does not grow meanwhile ({workers_phrase([ctx.label(s) for s in flat_device])}): the growth is in host memory."

    hints = list(HOST_HINTS if subject == "host" else DEVICE_HINTS)
    if "stairs" in patterns:
        hints.insert(0, STAIRS_HINT)
    if "sawtooth" in patterns:
        hints.insert(0, SAWTOOTH_HINT)
    if subject == "device" and column.measure is Measure.RESERVED and not _logs_allocated(ctx):
        hints.append(RESERVED_ONLY_HINT)
    versions = known_issues(ctx.versions, subject)
    hints = versions + hints

    per_series = [
        {
            "series": ctx.label(s),
            "rank": s.rank,
            "metric": s.column,
            "pattern": sh.pattern,
            "basis": sh.basis,
            # Rates in the unit of the axis: per step when the log numbers steps, per reading when it
            # only numbers its readings (an HF Trainer dict every logging_steps): the name says which.
            f"slope_gib_per_{word}": rounded(sh.fit.slope, 6),
            f"slope_ci_gib_per_{word}": [rounded(sh.fit.low, 6), rounded(sh.fit.high, 6)],
            "trend_p_value": rounded(sh.p_increasing, 6),
            "effect_sigmas": rounded(sh.effect, 2),
            "noise_gib": rounded(sh.residual_noise),
            "autocorrelation": rounded(sh.autocorrelation, 3),
            f"onset_{word}": sh.onset_step,
            f"jump_{word}": sh.jump_step,
            "jump_gib": rounded(sh.jump),
            "kendall_tau": rounded(sh.trend.tau),
            "r_squared": rounded(sh.r_squared),
            f"from_{word}": sh.tail_steps[0],
            f"to_{word}": sh.tail_steps[-1],
            "start_gib": rounded(sh.tail_values[0]),
            "end_gib": rounded(sh.tail_values[-1]),
            "growth_pct_of_level": rounded(extra["growth_pct"], 2),
            "points": sh.points_used,
            f"warmup_until_{word}": sh.knee_step if sh.has_warmup else None,
            "warmup_rise_gib": rounded(sh.rise) if sh.has_warmup else None,
            "stair_jump_gib": rounded(sh.stairs.mean_jump) if sh.stairs else None,
            f"stair_every_{word}s": rounded(sh.stair_period_steps()) if sh.stairs else None,
            f"cycle_period_{word}s": rounded(sh.sawtooth.period) if sh.sawtooth else None,
            "new_peaks": extra["new_peaks"],
            "projected_capacity_step": rounded(p.step, 1) if p else None,
            "projected_capacity_seconds": rounded(p.seconds, 0) if p else None,
            "lines": [s.line_nos[sh.tail_start], s.line_nos[-1]],
        }
        for s, sh, extra, p in leaking
    ]
    capacity, capacity_from = ctx.capacity_of(leaking[0][0])
    observed = {
        f"slope_gib_per_{word}": rounded(slope, 6),
        f"slope_gib_per_1k_{word}s": rounded(slope * 1000, 3),
        "r_squared_min": rounded(min((sh.r_squared for sh in shapes if sh.r_squared is not None), default=None)),
        f"from_{word}": first,
        f"to_{word}": last,
        "start_gib": rounded(start),
        "end_gib": rounded(end),
    }
    evidence = {
        "metric": column.name,
        "measures": column.description,
        "pattern": typical.pattern,
        "confidence": {
            f"slope_ci_gib_per_{word}": [rounded(min(sh.fit.low for sh in shapes), 6), rounded(max(sh.fit.high for sh in shapes), 6)],
            "trend_p_value_max": rounded(max(sh.p_increasing for sh in shapes), 6),
            "effect_sigmas_min": rounded(min(sh.effect for sh in shapes), 2),
            "points_min": min(sh.points_used for sh in shapes),
            "basis": typical.basis,
        },
        "capacity_gib": rounded(capacity),
        "capacity_from": capacity_from,
        "projected_capacity_step": rounded(soonest.step, 1) if soonest else None,
        "projected_capacity_seconds": rounded(soonest.seconds, 0) if soonest else None,
        "projected_capacity_at": soonest.at if soonest else None,
        "known_versions": ctx.versions or None,
        "series": per_series[:16],
        "series_count": len(per_series),
    }
    return RULE.finding(
        t,
        msg,
        subject=subject,
        series=labels,
        ranks=[s.rank for s, *_ in leaking],
        observed=observed,
        evidence=evidence,
        hints=hints,
        lines=[(s.key.source, s.line_nos[-1]) for s, *_ in leaking[:4]],
    )


def typical_new_peaks(leaking) -> int:
    return int(statistics.median(extra["new_peaks"] or 0 for _, _, extra, _ in leaking))


def _grows(series, t) -> bool:
    return leak_evidence(series, shape_of(series), t) is not None


def _logs_allocated(ctx) -> bool:
    return any(ctx.series(c) for c in ("mem_allocated_gib", "mem_peak_allocated_gib", "mem_max_allocated_gib"))


_LINE = [21.0 + 9.5 * i for i in range(6)]
_CREEP_STEPS = [1] + list(range(10, 1001, 10))
_CREEP = [34.0] + [41.8 + 0.003 * (s - 10) + (0.04 if i % 3 == 0 else -0.03 if i % 3 == 1 else 0.0) for i, s in enumerate(_CREEP_STEPS[1:])]

RULE = Rule(
    id="memory-leak",
    severity="error",
    verdict=Verdict("leak", 100, "LEAK: memory keeps growing; the run will run out of memory"),
    decides=True,
    summary="Memory keeps rising after any warmup: something is retained every step and the run will run out of memory.",
    explanation=(
        "Splits each worker's memory series into warmup and tail (the knee where a steep rise demonstrably slows "
        "down), then fits the tail with a Theil-Sen slope and tests it with Mann-Kendall. It fires when the slope's "
        "95% confidence interval is above zero, the trend is significant, and the growth is large enough in GiB and "
        "relative to the level. Stairs (a fixed jump every few steps) are reported as stairs. A sawtooth is judged by "
        "its cycle floors: a rising floor is a leak under the periodic part. A running maximum (process-lifetime "
        "peak) must keep setting new peaks at a steady rate through the end of the log: a few new peaks that stop are "
        "a settled high-water mark. It judges allocated memory when the log has it (live tensors), otherwise "
        "reserved or peak memory, and host memory separately; ranks and pipeline stages are never averaged. When "
        "the log reveals the capacity (and timestamps), it projects the step (and wall time) at which it is reached."
    ),
    not_meaning=(
        "Not a leak: growth in the first steps that then flattens (warmup-plateau), reserved memory growing while "
        "allocated is flat (fragmentation), a sawtooth returning to the same floor (periodic-retention), a few new "
        "peaks of a running maximum, different but flat levels on different ranks or pipeline stages."
    ),
    thresholds=(
        Threshold("min_tail_points", 5, "points", "logged points after warmup needed to judge a trend"),
        Threshold("max_p_value", 0.01, "p", "Mann-Kendall one-sided p-value for an increasing trend over the tail"),
        Threshold(
            "min_growth_gib",
            0.0001,
            "GiB",
            "reporting floor: a fitted growth below this (0.1 MiB) is never reported, "
            "at any scale; the gates that decide are relative to the series' level and noise",
        ),
        Threshold("min_growth_pct", 0.75, "%", "fitted growth over the judged steps relative to the memory level, at least"),
        Threshold(
            "min_effect",
            5.0,
            "sigmas",
            "fitted growth over the judged steps in units of the series' own noise around the "
            "fitted line (robust spread of the residuals): this much always stands out, however few the readings",
        ),
        Threshold("min_effect_many_points", 2.0, "sigmas", "the least effect that can stand out, however many readings show it"),
        Threshold(
            "min_growth_z",
            8.0,
            "sigmas",
            "between the two: the fitted growth in standard errors of a line fitted to "
            "noise alone over as many independent readings (sigma * sqrt(12 / n), n discounted for autocorrelation)",
        ),
        Threshold(
            "max_saturation_bic",
            2.0,
            "BIC",
            "after a warmup, a tail that bends towards a cap better than it follows a "
            "straight line by at least this much (Bayesian information criterion: 2 is positive evidence) is the "
            "warmup's end, not a leak",
        ),
        Threshold("min_cycles", 6, "cycles", "sawtooth: cycle floors needed to judge their trend (6 is the fewest that bound Sen's 95% interval)"),
        Threshold(
            "max_pattern_p_value",
            0.05,
            "p",
            "sawtooth floors (one point per cycle) and stairs (jumps of at least "
            "6 noise sigmas): Mann-Kendall p-value, where the pattern itself already carries evidence",
        ),
        Threshold("min_new_peaks", 4, "peaks", "running maximum: new peaks in the tail, at least"),
        Threshold("min_late_rate_ratio", 0.35, "ratio", "running maximum: growth rate over the last third of the tail relative to the whole tail, at least"),
    ),
    examples=(
        Example(
            "torchtitan pp=2 ep=2 (field report 1): 21 -> 68.5 GiB in 6 steps, +9.5 GiB/step, projected to hit 79 GiB at step ~7.",
            True,
            memory={0: _LINE},
            capacity_gib=79.11,
        ),
        Example("torchtitan log_freq=10 (field report 2): +3 MiB/step for 1000 steps under 0.04 GiB noise.", True, memory={0: _CREEP}, steps=_CREEP_STEPS),
        Example(
            "EasyR1 with offload (field report 3): host memory +12 GiB every 2 steps, flat in between.",
            True,
            columns={"host_mem_used_gib": {0: [310.0, 310.2, 322.1, 322.0, 334.2, 334.1, 346.0, 346.1]}},
            memory={0: [30.1] * 8},
        ),
        Example(
            "Warmup then flat: 18.2 GiB at step 1, 31.6-31.9 GiB from step 2 on.",
            False,
            memory={0: [18.2, 31.6, 31.9, 31.85, 31.9, 31.88, 31.9, 31.87, 31.9, 31.9]},
        ),
        Example(
            "Running maximum with three new peaks early, then flat for 30 steps (variable batch sizes).",
            False,
            columns={"mem_max_allocated_gib": {0: [30.0, 31.2, 31.2, 32.0, 32.0, 32.6] + [32.6] * 30}},
        ),
        Example("Two pipeline stages flat at 22.7 and 18.0 GiB.", False, memory={0: [22.74] * 12, 1: [17.97] * 12}),
    ),
    check=check,
)
