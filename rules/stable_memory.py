"""stable-memory: memory is flat from the first logged step."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, Verdict, gib, rounded, shape_of, step_word, workers_phrase

# Readings off a stable level by more than the tolerance, at most this share of a series', are spikes
# worth naming; more are the series' own pattern.
STRAY_SHARE = 0.05
NOT_IN_THIS_LOG_HINT = (
    "If memory grows somewhere else (nvidia-smi, host RAM, a monitoring dashboard), that growth is not in this "
    "log's device metric: log host RSS per process and per dataloader worker, or the driver's view of the device."
)


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        stable = []
        for series in candidates:
            if ctx.decided(series):
                continue
            shape = shape_of(series)
            tolerance = shape.tolerance(t["max_growth_gib"], t["max_growth_pct"])
            # Flat overall: any small early step (a running maximum settling, a tiny warmup) plus the
            # tail's fitted growth stay within the tolerance.
            if shape.n >= t["min_points"] and shape.rise <= tolerance and abs(shape.overall_change) <= tolerance:
                stable.append((series, shape))
        if stable:
            findings.append(_finding(ctx, subject, stable, t))
    return findings


# How a series' window reads in words: a current reading, the peak since the last log line, the
# running maximum since the process started.
WINDOW_WORDS = {"current": "", "window-peak": "peak ", "running-max": "running-maximum "}


def _what(subject: str, series: list) -> str:
    """The memory the finding is about, named by what its series measure ("Allocated memory",
    "Peak reserved memory"): beside a fragmentation finding, it is allocated memory that is stable,
    not "device memory". "Host memory" or "Device memory" when the series measure different things."""
    if subject == "host":
        return "Host memory"
    kinds = {(s.memory.measure.value, s.memory.window.value) for s in series if s.memory}
    if len(kinds) != 1 or len(series) != sum(1 for s in series if s.memory):
        return "Device memory"
    measure, window = kinds.pop()
    if measure == "used":
        return "Device memory (the driver's view)"
    return f"{WINDOW_WORDS.get(window, '')}{measure} memory".capitalize()


def _finding(ctx, subject, stable, t) -> Finding:
    labels = [ctx.label(s) for s, _ in stable]
    lo, hi = min(sh.level for _, sh in stable), max(sh.level for _, sh in stable)
    level = gib(lo) if hi - lo < 0.5 else f"{gib(lo)} to {gib(hi)} depending on the worker"
    where = _what(subject, [s for s, _ in stable])
    spread = max(max(s.values) - min(s.values) for s, _ in stable)
    # What the rule measured and bounded: the movement from the first point (early step plus fitted
    # tail growth), never above the tolerance it fired under. Single readings may scatter further.
    movement = max(max(sh.rise, abs(sh.overall_change)) for _, sh in stable)
    tolerance = max(sh.tolerance(t["max_growth_gib"], t["max_growth_pct"]) for _, sh in stable)
    word = step_word(s for s, _ in stable)
    first, last = min(s.steps[0] for s, _ in stable), max(s.steps[-1] for s, _ in stable)
    falls = [sh for _, sh in stable if sh.fall < 0]
    if falls:
        # A fall, then flat: the level it held at is what the run needs, not the first readings.
        fell = max(-sh.fall for sh in falls)
        msg = (
            f"{where} is stable on {workers_phrase(labels)}: it fell by up to {gib(fell)} from {word} {first} to "
            f"{max(sh.fall_step for sh in falls)}, then held at {level} through {word} {last}, moving by at most "
            f"{gib(movement)} (within the {gib(tolerance)} a flat run may move). A fall is no leak"
        )
    elif any(sh.step_change > 0 for _, sh in stable):
        changes = [sh for _, sh in stable if sh.step_change > 0]
        msg = (
            f"{where} is stable on {workers_phrase(labels)} apart from one step: {gib(min(sh.level - sh.step_change for sh in changes))} "
            f"from {word} {first}, a one-off jump of {gib(max(sh.step_change for sh in changes))} at {word} "
            f"{min(sh.step_change_step for sh in changes)} (an evaluation, a checkpoint save, a longer batch), then {level} "
            f"through {word} {last}, moving by at most {gib(movement)} (within the {gib(tolerance)} a flat run may move). A jump that holds is no leak"
        )
    else:
        msg = (
            f"{where} is stable on {workers_phrase(labels)}: {level} from {word} {first} to {last}, "
            f"moving by at most {gib(movement)} (within the {gib(tolerance)} a flat run may move)"
        )
    saws = [sh for _, sh in stable if sh.sawtooth]
    if saws:
        msg += f" (a small bounded sawtooth on {len(saws)} series)"
    # The movement bounds the level, not each reading: a few readings far off it (spikes) are said, not
    # hidden. Many are a pattern of the series (readings before and after an offload at every step).
    strays = []
    for series, shape in stable:
        off = [(abs(v - shape.level), v, at, series) for v, at in zip(series.values, series.steps) if abs(v - shape.level) > tolerance]
        if len(off) <= STRAY_SHARE * len(series):
            strays += off
    if strays:
        _, value, step, series = max(strays, key=lambda stray: stray[0])
        where = f"{gib(value)} at {step_word([series])} {step} on {workers_phrase([ctx.label(series)])}"
        msg += f"; one reading strays further: {where}" if len(strays) == 1 else f"; {len(strays)} readings stray further, the farthest {where}"
    msg += "."
    hints = [NOT_IN_THIS_LOG_HINT] if subject == "device" and not ctx.host_series else []
    return RULE.finding(
        t,
        msg,
        subject=subject,
        series=labels,
        ranks=[s.rank for s, _ in stable],
        observed={
            "level_gib_min": rounded(lo),
            "level_gib_max": rounded(hi),
            "max_movement_gib": rounded(movement),
            "tolerance_gib": rounded(tolerance),
            "max_spread_gib": rounded(spread),
            **({"fell_gib": rounded(max(-sh.fall for sh in falls))} if falls else {}),
            **({"step_change_gib": rounded(max(sh.step_change for _, sh in stable))} if any(sh.step_change > 0 for _, sh in stable) else {}),
        },
        evidence={
            "metric": stable[0][0].column,
            "confidence": {
                "points_min": min(sh.n for _, sh in stable),
                f"slope_ci_gib_per_{step_word(s for s, _ in stable)}": [
                    rounded(min((sh.fit.low for _, sh in stable if sh.fit), default=None), 6),
                    rounded(max((sh.fit.high for _, sh in stable if sh.fit), default=None), 6),
                ],
            },
            "series": [
                {
                    "series": ctx.label(s),
                    "rank": s.rank,
                    "level_gib": rounded(sh.level),
                    "spread_gib": rounded(max(s.values) - min(s.values)),
                    f"slope_gib_per_{step_word([s])}": rounded(sh.fit.slope if sh.fit else None, 6),
                    "growth_gib": rounded(sh.overall_change),
                    "points": sh.n,
                }
                for s, sh in stable
            ][:16],
            "series_count": len(stable),
        },
        hints=hints,
    )


RULE = Rule(
    id="stable-memory",
    severity="info",
    verdict=Verdict("stable", 30, "STABLE: memory is flat", calm=True),
    after=("memory-leak", "periodic-retention", "warmup-plateau"),
    decides=True,
    summary="Memory is flat from the first logged step.",
    explanation=(
        "Fires for series with enough points whose movement from the first point (any small early step plus the "
        "tail's fitted growth) stays within a small tolerance, where no other rule settled the series (memory-leak, "
        "warmup-plateau, periodic-retention). Different ranks and pipeline stages may sit at different flat levels. "
        "A small sawtooth below periodic-retention's thresholds is bounded and counts as stable."
    ),
    not_meaning="Says nothing about memory outside this log: host memory or other processes may still grow.",
    thresholds=(
        Threshold("min_points", 5, "points", "logged points needed to call a series stable"),
        Threshold(
            "max_growth_gib",
            0.0001,
            "GiB",
            "movement below this (0.1 MiB) is flat at any level (a floor for series near zero); above it the relative tolerance decides",
        ),
        Threshold("max_growth_pct", 1.5, "%", "movement over the run tolerated (relative to level)"),
    ),
    examples=(
        Example("torchtitan FSDP: 23.41 GiB +- 0.02 from step 1 to step 20.", True, memory={0: [23.41, 23.39, 23.42, 23.4, 23.41] * 4}),
        Example("Two pipeline stages at 22.74 and 17.97 GiB, both flat.", True, memory={0: [22.74] * 10, 1: [17.97] * 10}),
        Example("Only four points: 23.4 GiB four times.", False, memory={0: [23.4] * 4}),
        Example("Creeping +0.5 GiB per step.", False, memory={0: [20.0 + 0.5 * i for i in range(12)]}),
    ),
    check=check,
)
