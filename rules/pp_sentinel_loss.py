"""pp-sentinel-loss: a constant negative whole-number loss is pipeline parallelism's placeholder."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, Verdict, workers_phrase


def is_placeholder(value: float, t) -> bool:
    """A negative whole number: -1 per micro-batch/DP rank (so -1, -2, -4, -8 ...)."""
    # (is_integer is False for -inf and nan: a corrupt reading is no placeholder)
    return value <= -1 and float(value).is_integer() and abs(value) <= t["max_abs_sentinel"]


def is_sentinel(values: list[float], t) -> bool:
    """All readings the same placeholder."""
    return len(values) >= t["min_points"] and is_placeholder(values[0], t) and all(v == values[0] for v in values)


def placeholder_among_copies(copies: list, t) -> float | None:
    """A placeholder printed at every step by some of the ranks whose lines carry no rank, read as
    copies in print order (`main#1`...): when the ranks print in another order each step, no copy
    holds it alone, but every step shows it beside the real loss."""
    by_step: dict[int, list[float]] = {}
    for s in copies:
        for step, v in zip(s.steps, s.values):
            by_step.setdefault(step, []).append(v)
    if len(copies) < 2 or len(by_step) < t["min_points"]:
        return None
    every = set.intersection(*(set(vs) for vs in by_step.values()))
    placeholders = sorted(v for v in every if is_placeholder(v, t))
    if not placeholders or all(v == placeholders[0] for vs in by_step.values() for v in vs):
        return None
    return placeholders[0]


def check(ctx, t) -> list[Finding]:
    losses = ctx.loss_series
    sentinel = [s for s in losses if is_sentinel(s.values, t)]
    if sentinel:
        value = sentinel[0].values[0]
    else:
        copies = [s for s in losses if s.collided]
        found_among = placeholder_among_copies(copies, t)
        if found_among is None:
            return []
        value, sentinel = found_among, [s for s in copies if found_among in s.values]
    # The real loss is a rank's, or a copy's of a worker the log does not tell apart (unlabelled ranks).
    real = [s for s in losses if s not in sentinel and (s.rank is not None or s.collided)]
    labels = [ctx.label(s) for s in sentinel]
    asked = sorted({e.detail["loss_rank"] for e in ctx.tables.events_of("pp_loss_not_visible") if "loss_rank" in e.detail})
    msg = (
        f"Loss {value:g} on {workers_phrase(labels)} is the pipeline-parallel placeholder, not a real loss: only the last "
        "pipeline stage computes the loss, other stages log -1 (summed over gradient accumulation and data-parallel "
        "ranks in newer torchtitan, so -2, -4, -8 also occur)."
    )
    # Untagged ranks read as copies in print order (`main#3`) mix placeholder and real lines when the
    # ranks print in a different order each step: the real loss is then their last other value.
    printing = real or [s for s in sentinel if s.collided]
    found = [(step, v) for s in printing for step, v in zip(s.steps, s.values) if v != value]
    mixed = any(v == value for s in printing for v in s.values)
    if found:
        step, last = max(found, key=lambda sv: sv[0])
        who = "appears among the same lines" if not real else f"is logged by {workers_phrase([ctx.label(s) for s in real])}"
        msg += f" The real loss {who} (last value {last:.4f} at step {step})."
        if mixed:
            msg += " The lines carry no rank and the ranks print in no fixed order: which rank prints the real loss cannot be told from this log."
    elif asked:
        msg += f" No logged rank shows the real loss; torchtitan names rank {asked[0]}: set LOG_RANK={','.join(str(r) for r in sorted({*(s.rank for s in sentinel if s.rank is not None), asked[0]}))}."
    else:
        msg += (
            " No logged rank shows the real loss: add the first rank of the last stage to LOG_RANK, "
            "(world_size // pp) * (pp - 1), e.g. LOG_RANK=0,4 on 8 GPUs with pp=2 (rank 0 for V-shaped schedules such as ZBVZeroBubble)."
        )
    return [
        RULE.finding(
            t,
            msg,
            subject="loss",
            series=labels,
            ranks=[s.rank for s in sentinel],
            observed={"sentinel_value": value, "points": sum(v == value for s in sentinel for v in s.values)},
            evidence={
                "sentinel_ranks": sorted({s.rank for s in sentinel if s.rank is not None}),
                "real_loss_ranks": sorted({s.rank for s in real if s.rank is not None}),
                "loss_rank_named_by_log": asked[0] if asked else None,
                "series": [ctx.label(s) for s in sentinel][:32],
            },
            hints=[
                "To see the real loss, log the first rank of the last stage too: LOG_RANK=0,<(world_size // pp) * (pp - 1)>; "
                "for V-shaped schedules (ZBVZeroBubble, DualPipeV) the loss is on rank 0.",
                "torchrun's --local-ranks-filter takes LOCAL ranks and applies per node: on a multi-node run the last "
                "stage's first rank is local rank (rank % nproc_per_node) on its node.",
            ],
            lines=[(s.key.source, s.line_nos[0]) for s in sentinel[:4]],
        )
    ]


RULE = Rule(
    id="pp-sentinel-loss",
    severity="info",
    verdict=Verdict("pp-sentinel-loss", 50, "PIPELINE-PARALLEL SENTINEL LOSS: the negative loss is a placeholder (normal)", calm=True),
    marks="placeholder",
    summary="A constant negative whole-number loss (-1, -2, -8 ...) on some ranks is pipeline parallelism's placeholder.",
    explanation=(
        "Under pipeline parallelism only the last stage computes the loss; torchtitan's other stages log a "
        "placeholder of -1.0 (summed over micro-batches and DP ranks in newer versions). The rule reports which "
        "ranks print it, which ranks print the real loss, and which LOG_RANK would show it. Sentinel series are "
        "never fed to any other loss rule."
    ),
    not_meaning="Not divergence and not a bug in training: those ranks simply have no loss to report.",
    thresholds=(
        Threshold("min_points", 1, "points", "logged loss values needed"),
        Threshold("max_abs_sentinel", 4096, "", "largest |placeholder| accepted (micro-batches x DP ranks)", low=0),
    ),
    examples=(
        Example("torchtitan pp=2 on 8 GPUs with LOG_RANK=0: `loss: -1.0000` at every step.", True, memory={0: [22.74] * 6}, loss={0: [-1.0] * 6}),
        Example("Newer torchtitan summing the placeholder over 8 micro-batches: `loss: -8.0000`.", True, memory={0: [22.74] * 6}, loss={0: [-8.0] * 6}),
        Example(
            "A real loss that happens to be negative and varies (e.g. a reward-shaped objective).",
            False,
            memory={0: [22.74] * 6},
            loss={0: [-1.5, -1.52, -1.49, -1.55, -1.6, -1.58]},
        ),
    ),
    check=check,
)
