"""nan-loss: the loss is NaN or infinite on some steps. A training problem, not a memory one."""

from __future__ import annotations

import math

from memlog.rulekit import Example, Finding, Rule, Threshold, workers_phrase


def check(ctx, t) -> list[Finding]:
    hits = []
    for series in ctx.loss_series:
        if ctx.marked(series, "placeholder"):
            continue  # placeholders are never judged as a loss
        bad = [i for i, v in enumerate(series.values) if not math.isfinite(v)]
        if len(bad) >= t["min_steps"]:
            hits.append((series, bad))
    if not hits:
        return []
    labels = [ctx.label(s) for s, _ in hits]
    total = sum(len(b) for _, b in hits)
    first_series, first_bad = min(hits, key=lambda h: h[0].steps[h[1][0]])
    first = first_bad[0]
    persistent = [s for s, b in hits if b[-1] == len(s.values) - 1 and len(b) == len(s.values) - b[0]]
    kinds = sorted({"NaN" if math.isnan(s.values[i]) else "inf" for s, b in hits for i in b})
    msg = (
        f"Loss is {'/'.join(kinds)} at {total} logged step{'s' if total != 1 else ''} on {workers_phrase(labels)}, "
        f"first at step {first_series.steps[first]} (line {first_series.line_nos[first]})"
    )
    if persistent:
        msg += f"; from then on it stays non-finite on {workers_phrase([ctx.label(s) for s in persistent])} (training diverged)"
    else:
        msg += "; intermittent, the loss recovers in between"
    msg += ". This is a numerical problem of training and says nothing about memory."
    return [
        RULE.finding(
            t, msg, subject="loss", series=labels, ranks=[s.rank for s, _ in hits],
            observed={
                "non_finite_steps": total,
                "first_step": first_series.steps[first],
                "series_diverged": len(persistent),
            },
            evidence={
                "series": [
                    {"series": ctx.label(s), "rank": s.rank, "steps": [s.steps[i] for i in b][:16], "count": len(b)}
                    for s, b in hits
                ][:16],
            },
            hints=[
                "Intermittent NaN/inf: fp16 overflow (watch the loss scaler), a bad batch, or a too-high learning rate at "
                "the end of warmup; check gradient clipping.",
                "NaN from some step on: the run diverged; resume from an earlier checkpoint with a lower learning rate, "
                "bf16 instead of fp16, or the offending data skipped.",
            ],
            lines=[(s.key.source, s.line_nos[b[0]]) for s, b in hits[:4]],
        )
    ]

RULE = Rule(
    id="nan-loss",
    severity="warning",
    after=("pp-sentinel-loss",),
    summary="The loss is NaN or infinite on some logged steps: a numerical training problem, not a memory one.",
    explanation=(
        "Reports every loss series with non-finite values: where they start, whether they persist (divergence) or "
        "come and go. Pipeline-parallel placeholder series (pp-sentinel-loss) are never judged here."
    ),
    not_meaning="Says nothing about memory; a NaN memory reading is a corrupt reading instead.",
    thresholds=(Threshold("min_steps", 1, "steps", "non-finite logged losses that trigger the warning"),),
    examples=(
        Example("fp16 overflow: loss NaN at step 12, finite before and after.", True,
                memory={0: [23.4] * 20}, loss={0: [9.0 - 0.1 * i if i != 11 else float("nan") for i in range(20)]}),
        Example("Pipeline placeholder -1.0 on rank 0 with a real loss on rank 1.", False,
                memory={0: [23.4] * 10, 1: [20.1] * 10}, loss={0: [-1.0] * 10, 1: [9.0 - 0.1 * i for i in range(10)]}),
    ),
    check=check,
)
