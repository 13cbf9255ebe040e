"""nan-grad-norm: the gradient norm is NaN or infinite on logged steps whose loss is finite.

The loss rule (nan-loss) sees the loss only: an fp16 run whose loss scaler skips overflowing steps,
or a bf16 run whose gradients blow up before the loss does, prints a finite loss beside
`grad_norm: nan`. Lines where the loss is non-finite too, or vanished (Megatron prints no loss
when it is NaN), are nan-loss's, so each line is reported once.
"""

from __future__ import annotations

import math

import polars as pl

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, step_word, workers_phrase


def _loss_at(ctx) -> dict:
    """(series key, line) -> the loss printed on that line, for every worker."""
    return {(s.key, line): value for s in ctx.loss_series for line, value in zip(s.line_nos, s.values)}


def check(ctx, t) -> list[Finding]:
    records = ctx.tables.records
    # Most logs have no non-finite grad norm: one scan of the column, before any series is built.
    if records.is_empty() or "grad_norm" not in records.columns or not records.select((~pl.col("grad_norm").is_finite()).any()).item():
        return []
    losses = _loss_at(ctx)
    hits = []
    for series in ctx.series("grad_norm"):
        if any(f.marks == "placeholder" and ctx.label(series) in f.series for f in ctx.findings):
            continue
        bad = [
            (step, line, value)
            for step, line, value in zip(series.steps, series.line_nos, series.values)
            if not math.isfinite(value) and math.isfinite(losses.get((series.key, line), math.nan))
        ]
        if len(bad) >= t["min_steps"]:
            hits.append((series, bad))
    if not hits:
        return []
    labels = [ctx.label(s) for s, _ in hits]
    total = sum(len(b) for _, b in hits)
    word = step_word(s for s, _ in hits)
    series, bad = min(hits, key=lambda h: (h[1][0][0], h[1][0][1]))
    step, line, _ = bad[0]
    kinds = sorted({"NaN" if math.isnan(v) else "inf" for _, b in hits for *_, v in b})
    persistent = [s for s, b in hits if b[-1][1] == s.line_nos[-1] and len(b) == len(s.line_nos) - s.line_nos.index(b[0][1])]
    msg = (
        f"Gradient norm is {'/'.join(kinds)} at {total} logged {word}{'s' if total != 1 else ''} on {workers_phrase(labels)} "
        f"while the loss is finite, first at {word} {step} (line {line})"
    )
    if persistent:
        msg += f"; from then on it stays non-finite on {workers_phrase([ctx.label(s) for s in persistent])}"
    else:
        msg += "; intermittent, finite in between"
    msg += ". This is a numerical problem of training and says nothing about memory."
    return [
        RULE.finding(
            t,
            msg,
            subject="loss",
            series=labels,
            ranks=[s.rank for s, _ in hits],
            observed={"non_finite_steps": total, "first_step": step, "series_diverged": len(persistent)},
            evidence={
                "series": [{"series": ctx.label(s), "rank": s.rank, "steps": [st for st, _, _ in b][:16], "count": len(b)} for s, b in hits][:16],
            },
            hints=[
                "fp16 with a dynamic loss scaler: a few NaN/inf grad norms are overflowing steps the scaler skipped "
                "(the weights were not updated); many, or ever more often, mean the scale keeps collapsing: try bf16.",
                "bf16 or fp32 (no scaler skips the step): the update was applied with non-finite gradients and the loss "
                "follows soon; lower the learning rate, check gradient clipping (max_grad_norm) and the batch at that step.",
            ],
            lines=[(s.key.source, b[0][1]) for s, b in hits[:4]],
        )
    ]


RULE = Rule(
    id="nan-grad-norm",
    severity="warning",
    after=("pp-sentinel-loss", "nan-loss"),
    summary="The gradient norm is NaN or infinite on logged steps whose loss is finite: a numerical training problem.",
    explanation=(
        "Reports every gradient-norm series with non-finite values on lines whose loss is finite: where they start and "
        "whether they persist. Lines whose loss is non-finite or vanished are nan-loss's, so a line is reported once."
    ),
    not_meaning="Says nothing about memory; an occasional NaN grad norm under fp16 loss scaling is a skipped step.",
    thresholds=(Threshold("min_steps", 1, "steps", "non-finite logged grad norms that trigger the warning"),),
    examples=(
        Example(
            "fp16 overflow: grad norm nan at step 12, loss finite throughout.",
            True,
            lines=tuple(
                f"Step {i} | loss:{2.5 - 0.01 * i} lr:2e-05 tokens_per_second_per_gpu:2864.1 peak_memory_active:21.3 "
                f"peak_memory_alloc:21.3 peak_memory_reserved:24.5 grad_norm:{'nan' if i == 12 else 0.43} "
                for i in range(1, 21)
            ),
        ),
        Example(
            "Finite grad norms throughout.",
            False,
            lines=tuple(
                f"Step {i} | loss:{2.5 - 0.01 * i} lr:2e-05 tokens_per_second_per_gpu:2864.1 peak_memory_active:21.3 "
                f"peak_memory_alloc:21.3 peak_memory_reserved:24.5 grad_norm:0.43 "
                for i in range(1, 21)
            ),
        ),
    ),
    check=check,
)
