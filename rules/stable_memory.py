"""stable-memory: memory is flat from the first logged step."""

from __future__ import annotations

from memlog.rulekit import Finding, Rule, Threshold, gib, rounded, workers_phrase
from memlog.trend import shape_of


def check(ctx, t) -> list[Finding]:
    findings = []
    for subject, candidates in (("device", ctx.device_series), ("host", ctx.host_series)):
        stable = []
        for series in candidates:
            shape = shape_of(series)
            if ctx.fired_on("memory-leak", series) or ctx.fired_on("warmup-plateau", series) or shape.has_warmup:
                continue
            if shape.n >= t["min_points"] and shape.is_flat(t["max_growth_gib"], t["max_growth_pct"]):
                stable.append((series, shape))
        if stable:
            labels = [ctx.label(s) for s, _ in stable]
            lo, hi = min(sh.level for _, sh in stable), max(sh.level for _, sh in stable)
            level = gib(lo) if hi - lo < 0.5 else f"{gib(lo)} to {gib(hi)}"
            findings.append(
                Finding(
                    rule=RULE.id,
                    severity=RULE.severity,
                    message=(
                        f"{'Host' if subject == 'host' else 'Device'} memory is stable on {workers_phrase(labels)}: "
                        f"{level} from step {min(sh.tail_steps[0] for _, sh in stable)} to "
                        f"{max(sh.tail_steps[-1] for _, sh in stable)}, varying by at most "
                        f"{gib(max(sh.spread for _, sh in stable))}."
                    ),
                    evidence={
                        "metric": stable[0][0].column,
                        "observed": {"level_gib_min": rounded(lo), "level_gib_max": rounded(hi), "max_spread_gib": rounded(max(sh.spread for _, sh in stable))},
                        "thresholds": dict(t),
                        "ranks": sorted({s.rank for s, _ in stable if s.rank is not None}),
                        "series": [
                            {"series": ctx.label(s), "rank": s.rank, "level_gib": rounded(sh.level), "spread_gib": rounded(sh.spread),
                             "slope_gib_per_step": rounded(sh.fit.slope if sh.fit else None, 6), "points": sh.n}
                            for s, sh in stable
                        ][:16],
                        "series_count": len(stable),
                    },
                    subject=subject,
                    series=labels,
                )
            )
    return findings


RULE = Rule(
    id="stable-memory",
    severity="info",
    order=30,
    summary="Memory is flat from the first logged step.",
    explanation="Fires for series with no warmup knee, enough points, and a fitted growth within a small tolerance.",
    not_meaning="Says nothing about memory outside this log: host memory or other processes may still grow.",
    thresholds=(
        Threshold("min_points", 5, "points", "logged points needed to call a series stable"),
        Threshold("max_growth_gib", 0.25, "GiB", "fitted growth over the run tolerated (absolute)"),
        Threshold("max_growth_pct", 1.5, "%", "fitted growth over the run tolerated (relative to level)"),
    ),
    examples=("torchtitan FSDP: 23.41 GiB +- 0.02 from step 1 to step 200.",),
    check=check,
)
