"""unread-values: a log printed memory or loss values that no format spec reads and the generic
reader could not turn into series; says why nothing was judged and how to make it readable."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule


def check(ctx, t) -> list[Finding]:
    weak = [g for g in ctx.tables.guessed if g.weak]
    findings = []
    for guessed in weak:
        keys = ", ".join(f"`{k}`" for k in guessed.keys[:8])
        message = (
            f"No series read from {guessed.source}: no format spec reads one from it, and the {guessed.reader} reader did not guess a "
            f"series: {guessed.weak}." + (f" Keys seen: {keys}." if keys else "")
        )
        findings.append(
            RULE.finding(
                t,
                message,
                subject="run",
                observed={"reason": guessed.weak},
                evidence={"source": guessed.source},
                hints=[
                    "A series needs the same line printed at least three times, ideally with a step counter "
                    "(`step N`, `iter N`, `Epoch [e][i/N]`); print one memory line per logged step.",
                    "Or write a format spec for the log: `memlog formats guess LOG` starts one, `memlog formats test DIR` "
                    "checks it and `--formats-dir DIR` loads it.",
                ],
            )
        )
    return findings


RULE = Rule(
    id="unread-values",
    severity="info",
    summary="The log prints memory or loss values, but neither a format spec nor the generic reader could read them as series.",
    explanation=(
        "Fires when no format spec matched a source and the generic reader saw memory or loss values but could not "
        "guess series from them: no step counter and no line shape repeating often enough. It says why and how to "
        "make the log readable, instead of judging nothing in silence."
    ),
    not_meaning="Not a finding about the run's memory: the log did not say enough to judge it.",
    thresholds=(),
    examples=(
        Example(
            "Two one-off memory prints and nothing else.",
            True,
            lines=("Before training: allocated 12.1 GB, reserved 14.0 GB", "After training: peak memory 30.2 GB"),
        ),
        Example("A torchtitan log: a spec reads it, the generic reader never runs.", False, memory={0: [30.0] * 10}),
    ),
    check=check,
)
