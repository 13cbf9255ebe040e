"""memory-pressure: memory ran short and the run went on (an allocator retried, a batch was skipped)."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Threshold, gib, quote, workers_phrase


def check(ctx, t) -> list[Finding]:
    pressed = [e for e in ctx.tables.events if e.kind == "memory_pressure"]
    if not pressed or len(pressed) < t["min_events"]:
        return []
    first = min(pressed, key=lambda e: (e.source, e.line_no))
    causes = sorted({str(e.detail.get("cause") or "") for e in pressed} - {""})
    tried = [e.detail["tried"] for e in pressed if isinstance(e.detail.get("tried"), float)]
    when = f", {ctx.during(first)}" if first.after_step is not None else ""
    times = "once" if len(pressed) == 1 else f"{len(pressed)} times"
    message = (
        f"Memory ran short {times} without ending the run, on {workers_phrase(sorted({e.worker for e in pressed}))}: "
        f"{'; '.join(causes) or 'an allocation failed and was retried'} (first {quote(first.text)}{when}, line {first.line_no})."
    )
    if tried:  # (a request that failed, or the size XLA could not fit a program below)
        message += f" The largest size they name is {gib(max(tried))}."
    message += " A run this close to its limit dies of the next larger batch, sequence or evaluation."
    return [
        RULE.finding(
            t,
            message,
            subject="device",
            series=sorted({e.worker for e in pressed}),
            ranks=[e.rank for e in pressed],
            observed={"events": len(pressed), "largest_size_gib": round(max(tried), 4) if tried else None},
            evidence={"events": [e.to_json() for e in pressed[:8]]},
            hints=[
                "Lower the batch size or sequence length (or the evaluation's), enable activation checkpointing, or set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True where fragmentation leaves free memory unusable.",
            ],
            lines=[(e.source, e.line_no) for e in pressed[:8]],
        )
    ]


RULE = Rule(
    id="memory-pressure",
    severity="warning",
    summary="Memory ran short and the run went on: an allocator retried or warned, a batch was skipped after an out-of-memory error.",
    explanation=(
        "Fires on the memory-pressure events the crash vocabulary reads (TensorFlow's and XLA's BFC allocator running "
        "out of memory for a request it then retries, a driver allocation retried, a KV-cache pool retracting "
        "requests) and on an out-of-memory error a logger reported as a warning from a process that went on logging "
        "training steps (fairseq's `OOM: Ran out of memory with exception: ...`, an evaluation batch skipped). It says "
        "how often, where first, and the largest size the messages name (a request that failed, a program XLA could "
        "not fit). It sets no verdict: the run did not end there."
    ),
    not_meaning="Not a leak, and not an out-of-memory death: the memory series decide those.",
    thresholds=(Threshold("min_events", 1, "events", "times memory ran short (retries, skipped batches) that trigger the warning"),),
    examples=(
        Example(
            "TensorFlow's BFC allocator runs out of memory for a request and retries it.",
            True,
            memory={0: [28.4] * 6},
            lines=(
                "2021-03-02 11:22:43.440000: W tensorflow/core/common_runtime/bfc_allocator.cc:467] Allocator (GPU_0_bfc) ran "
                "out of memory trying to allocate 128.0KiB (rounded to 131072)requested by op Adam/update",
            ),
        ),
        Example("A run that never runs short.", False, memory={0: [20.0] * 6}),
    ),
    check=check,
)
