"""memory-leak: memory keeps rising after any warmup, so the run will run out of memory."""

from __future__ import annotations

import math
import statistics

from memlog import stats
from memlog.columns import Window
from memlog.rulekit import Finding, Rule, Threshold, gib, rounded, workers_phrase
from memlog.trend import shape_of

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


def _leak(series, shape, t) -> dict | None:
    """Evidence for one series, or None when it does not pass every gate."""
    fit, trend = shape.fit, shape.trend
    if len(shape.tail_values) < t["min_tail_points"] or fit is None or trend is None:
        return None
    growth_pct = 100 * shape.growth / shape.level if shape.level > 0 else math.inf
    if not (
        fit.low > 0
        and trend.p_increasing <= t["max_p_value"]
        and shape.growth >= t["min_growth_gib"]
        and growth_pct >= t["min_growth_pct"]
    ):
        return None
    if series.memory and series.memory.window is Window.RUNNING_MAX:
        # A running maximum only goes up: a few ratchets are new peaks, not a leak. Require it to
        # keep rising through the tail, including its last third.
        ups = [b > a for a, b in zip(shape.tail_values, shape.tail_values[1:])]
        last_third = ups[len(ups) * 2 // 3 :]
        if sum(ups) / len(ups) < t["min_rising_fraction"] or not any(last_third):
            return None
    return {"growth_pct": growth_pct}


def _projection(series, shape, capacity: float | None) -> float | None:
    if not capacity or not shape.fit:
        return None
    last_step = shape.tail_steps[-1]
    fitted_now = shape.fit.intercept + shape.fit.slope * last_step
    return stats.project_crossing(last_step, max(fitted_now, shape.tail_values[-1]), shape.fit.slope, capacity)


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        capacity = ctx.capacity.device_gib if subject == "device" else ctx.capacity.host_gib
        capacity_from = ctx.capacity.device_from if subject == "device" else ctx.capacity.host_from
        leaking = []
        for series in candidates:
            shape = shape_of(series)
            extra = _leak(series, shape, t)
            if extra is not None:
                leaking.append((series, shape, extra, _projection(series, shape, capacity)))
        if leaking:
            findings.append(_finding(ctx, subject, leaking, candidates, capacity, capacity_from, t))
    return findings


def _finding(ctx, subject, leaking, candidates, capacity, capacity_from, t) -> Finding:
    labels = [ctx.label(s) for s, *_ in leaking]
    slopes = [sh.fit.slope for _, sh, _, _ in leaking]
    slope = statistics.median(slopes)
    first = min(sh.tail_steps[0] for _, sh, _, _ in leaking)
    last = max(sh.tail_steps[-1] for _, sh, _, _ in leaking)
    start = statistics.median(sh.tail_values[0] for _, sh, _, _ in leaking)
    end = statistics.median(sh.tail_values[-1] for _, sh, _, _ in leaking)
    projected = [p for *_, p in leaking if p is not None]
    column = leaking[0][0].memory
    where = "Host" if subject == "host" else "Device"
    warmed = any(sh.has_warmup for _, sh, _, _ in leaking)

    straightness = [sh.r_squared for _, sh, _, _ in leaking if sh.r_squared is not None]
    r2 = min(straightness) if straightness else None
    per_1k = f" ({gib(slope * 1000)} per 1k steps)" if slope < 0.1 else ""
    msg = (
        f"{where} memory leak on {workers_phrase(labels)}: {column.measure.value} memory rises "
        f"{gib(slope)}/step{per_1k} from step {first} to {last}, {gib(start)} -> {gib(end)}"
    )
    if r2 is not None and r2 >= 0.95:
        msg += f" in a straight line (R² {r2:.3f})"
    msg += ", after a warmup" if warmed else ", from the first logged steps (with constant-size inputs that is not warmup)"
    if projected:
        msg += f"; projected to reach the {gib(capacity)} capacity at step ~{round(min(projected))}"
    ooms = [e for e in ctx.tables.events if e.kind == "oom"]
    if ooms:
        oom_steps = sorted({e.after_step + 1 for e in ooms if e.after_step is not None})
        msg += f"; the run hit out-of-memory{f' during step {oom_steps[0]}' if oom_steps else ''}"
    if len(leaking) < len(candidates):
        msg += f" ({len(candidates) - len(leaking)} other series do not grow)"
    msg += "."

    per_series = [
        {
            "series": ctx.label(s),
            "rank": s.rank,
            "metric": s.column,
            "slope_gib_per_step": rounded(sh.fit.slope, 6),
            "slope_ci_gib_per_step": [rounded(sh.fit.low, 6), rounded(sh.fit.high, 6)],
            "trend_p_value": rounded(sh.trend.p_increasing, 6),
            "kendall_tau": rounded(sh.trend.tau),
            "r_squared": rounded(sh.r_squared),
            "from_step": sh.tail_steps[0],
            "to_step": sh.tail_steps[-1],
            "start_gib": rounded(sh.tail_values[0]),
            "end_gib": rounded(sh.tail_values[-1]),
            "growth_pct_of_level": rounded(extra["growth_pct"], 2),
            "points": len(sh.tail_values),
            "warmup_until_step": sh.knee_step if sh.has_warmup else None,
            "projected_capacity_step": rounded(p, 1),
            "lines": [s.line_nos[sh.tail_start], s.line_nos[-1]],
        }
        for s, sh, extra, p in leaking
    ]
    evidence = {
        "metric": column.name,
        "measures": column.description,
        "observed": {
            "slope_gib_per_step": rounded(slope, 6),
            "slope_gib_per_1k_steps": rounded(slope * 1000, 3),
            "r_squared_min": rounded(r2),
            "from_step": first,
            "to_step": last,
            "start_gib": rounded(start),
            "end_gib": rounded(end),
        },
        "thresholds": dict(t),
        "capacity_gib": rounded(capacity),
        "capacity_from": capacity_from,
        "projected_capacity_step": rounded(min(projected), 1) if projected else None,
        "ranks": sorted({s.rank for s, *_ in leaking if s.rank is not None}),
        "series": per_series[:16],
        "series_count": len(per_series),
    }
    anchors = [(s.key.source, s.line_nos[-1]) for s, *_ in leaking[:4]]
    return Finding(
        rule=RULE.id,
        severity=RULE.severity,
        message=msg,
        evidence=evidence,
        hints=HOST_HINTS if subject == "host" else DEVICE_HINTS,
        subject=subject,
        series=labels,
        lines=anchors,
    )


RULE = Rule(
    id="memory-leak",
    severity="error",
    order=10,
    summary="Memory keeps rising after any warmup: something is retained every step and the run will run out of memory.",
    explanation=(
        "Splits each worker's memory series into warmup and tail (the knee where a steep rise turns flat), "
        "then fits the tail with a Theil-Sen slope and tests it with Mann-Kendall. It fires when the slope's "
        "confidence interval is above zero, the trend is significant, and the growth is large enough in GiB and "
        "relative to the level. It judges allocated memory when the log has it (live tensors), otherwise reserved "
        "or peak memory, and host memory separately. A running maximum (process-lifetime peak) must keep rising "
        "through the tail: a few ratchets that stop are new peaks, not a leak."
    ),
    not_meaning=(
        "Not a leak: growth in the first steps that then flattens (warmup-plateau), reserved memory growing while "
        "allocated is flat (fragmentation), a sawtooth returning to the same floor, a few new peaks of a "
        "running maximum."
    ),
    thresholds=(
        Threshold("min_tail_points", 5, "points", "logged points after warmup needed to judge a trend"),
        Threshold("max_p_value", 0.01, "p", "Mann-Kendall one-sided p-value for an increasing trend"),
        Threshold("min_growth_gib", 0.1, "GiB", "fitted growth over the judged steps, at least"),
        Threshold("min_growth_pct", 0.75, "%", "fitted growth over the judged steps relative to the memory level, at least"),
        Threshold("min_rising_fraction", 0.5, "fraction", "running-maximum series: share of intervals that rise"),
    ),
    examples=(
        "torchtitan pp=2 ep=2: 21 -> 68 GiB in 6 steps, +9.5 GiB/step on every rank, then CUDA OOM at step 7.",
        "torchtitan log_freq=10: +3 MiB/step for 1000 steps under 0.04 GiB noise.",
    ),
    check=check,
)
