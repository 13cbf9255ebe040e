"""allocator-retries: the caching allocator had to free its cache and retry, or counted OOMs."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, workers_phrase


def check(ctx, t) -> list[Finding]:
    # torchtitan prints the allocator's cumulative counters at every log step while they are > 0,
    # so the last reading per worker is the total and the first says when it started; DeepSpeed's
    # ZeRO-3 warns with the retries since the previous step, which add up.
    totals, first = {}, {}
    for event in ctx.tables.events:
        if event.kind not in ("alloc_retries", "oom_count"):
            continue
        key = (event.kind, event.source, event.worker)
        if "count" in event.detail:
            totals[key] = event.detail["count"]
        elif "new_retries" in event.detail:
            totals[key] = totals.get(key, 0) + event.detail["new_retries"]
        else:
            continue
        first.setdefault(key, event)
    flagged = [(k, n) for k, n in totals.items() if n >= t["min_retries"]]
    if not flagged:
        return []
    retries = [(k, n) for k, n in flagged if k[0] == "alloc_retries"]
    counted_ooms = [(k, n) for k, n in flagged if k[0] == "oom_count"]
    parts = []
    if retries:
        total = max(n for _, n in retries)
        since = min(first[k].after_step or 0 for k, _ in retries)
        parts.append(
            f"{total} CUDA memory allocation retr{'y' if total == 1 else 'ies'} on {workers_phrase([k[2] for k, _ in retries])} "
            f"(first reported after step {since}): the caching allocator ran out of free blocks, released its cache and retried"
        )
    if counted_ooms:
        total = max(n for _, n in counted_ooms)
        parts.append(f"the allocator counted {total} OOM error(s) on {workers_phrase([k[2] for k, _ in counted_ooms])}")
    message = "; ".join(parts) + ". Retries mean memory is near capacity or fragmented: they slow steps and precede OOMs that no trend predicts."
    return [
        RULE.finding(
            t,
            message[0].upper() + message[1:],
            subject="device",
            series=[k[2] for k, _ in flagged],
            ranks=[first[k].rank for k, _ in flagged],
            observed={kind: max(n for k, n in flagged if k[0] == kind) for kind in sorted({k[0] for k, _ in flagged})},
            hints=[
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation, or lower the batch / "
                "sequence length if memory is near the device's capacity.",
            ],
            lines=[(first[k].source, first[k].line_no) for k, _ in flagged][:8],
        )
    ]


RULE = Rule(
    id="allocator-retries",
    severity="warning",
    summary="The CUDA caching allocator had to free its cache and retry allocations (or counted OOMs): near capacity or fragmented.",
    explanation=(
        "Reads torchtitan's `N CUDA memory allocation retries.` and `N CUDA OOM errors thrown.` warnings (cumulative "
        "counters printed at every log step while they are non-zero) and DeepSpeed ZeRO-3's `N pytorch allocator cache "
        "flushes since last step` (added up), and reports the total per worker and when it started."
    ),
    not_meaning="Not a leak by itself: retries also happen on a flat series that runs close to the device's capacity.",
    thresholds=(Threshold("min_retries", 1, "retries", "cumulative retries (or counted OOMs) that trigger the warning"),),
    examples=(
        Example(
            "torchtitan at 94-98% memory: `WARNING - 2 CUDA memory allocation retries.` before a step line.",
            True,
            memory={0: [75.2] * 6},
            lines=("[rank0]:[titan] 2025-06-01 08:00:40,000 - root - WARNING - 2 CUDA memory allocation retries.",),
        ),
        Example("No allocator warnings.", False, memory={0: [40.0] * 6}),
    ),
    check=check,
)
