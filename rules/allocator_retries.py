"""allocator-retries: the caching allocator had to free its cache and retry, or counted OOMs."""

from __future__ import annotations

from memlog.rulekit import Example, Finding, Rule, Threshold, workers_phrase


def check(ctx, t) -> list[Finding]:
    # torchtitan prints the allocator's cumulative counters at every log step while they are > 0,
    # so the last reading per worker is the total and the first says when it started.
    latest, first = {}, {}
    for event in ctx.tables.events:
        if event.kind in ("alloc_retries", "oom_count") and "count" in event.detail:
            key = (event.kind, event.source, event.worker)
            first.setdefault(key, event)
            latest[key] = event
    flagged = [(k, e) for k, e in latest.items() if int(float(e.detail["count"])) >= t["min_retries"]]
    if not flagged:
        return []
    retries = [(k, e) for k, e in flagged if k[0] == "alloc_retries"]
    counted_ooms = [(k, e) for k, e in flagged if k[0] == "oom_count"]
    parts = []
    if retries:
        total = max(int(float(e.detail["count"])) for _, e in retries)
        since = min(first[k].after_step or 0 for k, _ in retries)
        parts.append(
            f"{total} CUDA memory allocation retr{'y' if total == 1 else 'ies'} on {workers_phrase([e.worker for _, e in retries])} "
            f"(first reported after step {since}): the caching allocator ran out of free blocks, released its cache and retried"
        )
    if counted_ooms:
        total = max(int(float(e.detail["count"])) for _, e in counted_ooms)
        parts.append(f"the allocator counted {total} OOM error(s) on {workers_phrase([e.worker for _, e in counted_ooms])}")
    message = "; ".join(parts) + ". Retries mean memory is near capacity or fragmented: they slow steps and precede OOMs that no trend predicts."
    return [
        Finding(
            rule=RULE.id,
            severity=RULE.severity,
            message=message[0].upper() + message[1:],
            evidence={
                "observed": {kind: max(int(float(e.detail["count"])) for k, e in flagged if k[0] == kind)
                             for kind in sorted({k[0] for k, _ in flagged})},
                "thresholds": dict(t),
                "ranks": sorted({e.rank for _, e in flagged if e.rank is not None}),
            },
            hints=[
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to reduce fragmentation, or lower the batch / "
                "sequence length if memory is near the device's capacity.",
            ],
            subject="device",
            series=[e.worker for _, e in flagged],
            lines=[(first[k].source, first[k].line_no) for k, _ in flagged][:8],
        )
    ]


RULE = Rule(
    id="allocator-retries",
    severity="warning",
    order=45,
    summary="The CUDA caching allocator had to free its cache and retry allocations (or counted OOMs): near capacity or fragmented.",
    explanation=(
        "Reads torchtitan's `N CUDA memory allocation retries.` and `N CUDA OOM errors thrown.` warnings (cumulative "
        "counters printed at every log step while they are non-zero) and reports the total per worker and when it started."
    ),
    not_meaning="Not a leak by itself: retries also happen on a flat series that runs close to the device's capacity.",
    thresholds=(Threshold("min_retries", 1, "retries", "cumulative retries (or counted OOMs) that trigger the warning"),),
    examples=(
        Example("torchtitan at 94-98% memory: `WARNING - 2 CUDA memory allocation retries.` before a step line.", True,
                memory={0: [75.2] * 6},
                lines=("[rank0]:[titan] 2025-06-01 08:00:40,000 - root - WARNING - 2 CUDA memory allocation retries.",)),
        Example("No allocator warnings.", False, memory={0: [40.0] * 6}),
    ),
    check=check,
)
