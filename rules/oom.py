"""oom: the run ended in an out-of-memory error or a memory-monitor kill."""

from __future__ import annotations

import json

from memlog.rulekit import Example, Finding, Rule, Verdict, gib, workers_phrase


def check(ctx, t) -> list[Finding]:
    ooms = ctx.tables.events_of("oom")
    if not ooms:
        return []
    # One entry per worker; launchers repeat the same error in their failure summaries
    # (torchrun's ChildFailedError block), so an identical message counts once.
    first_per_worker, seen_messages = {}, set()
    for event in ooms:
        message = (event.source, json.dumps(event.detail, sort_keys=True))  # detail may hold lists (Ray's top-10 table)
        if message in seen_messages and event.rank is None:
            continue
        seen_messages.add(message)
        first_per_worker.setdefault((event.source, event.worker), event)
    events = list(first_per_worker.values())
    steps = sorted({e.after_step + 1 for e in events if e.after_step is not None})
    first = events[0]
    detail = first.detail
    msg = f"Out of memory on {workers_phrase([e.worker for e in events])}"
    msg += f" during step {steps[0]}" if steps else ""
    facts = []
    if "tried" in detail:
        facts.append(f"tried to allocate {gib(detail['tried'])}")
    if "free" in detail and "capacity" in detail:
        facts.append(f"{gib(detail['free'])} free of {gib(detail['capacity'])}")
    if "host_used_gib" in detail and "host_total_gib" in detail:
        facts.append(f"node memory {gib(detail['host_used_gib'])} / {gib(detail['host_total_gib'])}")
    msg += f" ({'; '.join(facts)})" if facts else ""
    msg += f", line {first.line_no}."
    return [
        RULE.finding(
            t, msg, subject="run", series=[e.worker for e in events], ranks=[e.rank for e in events],
            observed={"events": len(ooms), "workers": len(events), "during_step": steps[0] if steps else None},
            evidence={"events": [e.to_json() for e in events[:8]]},
            hints=["Read the memory findings above: a leak predicts this; a flat series with a sudden OOM points at one large allocation (a long sequence, a checkpoint save, an eval batch)."],
            lines=[(e.source, e.line_no) for e in events[:8]],
        )
    ]

RULE = Rule(
    id="oom",
    severity="error",
    verdict=Verdict("oom", 80, "OUT OF MEMORY: the run ran out of memory; no growth in this log explains it"),
    summary="The run ended in an out-of-memory error (CUDA OOM, Ray memory-monitor kill).",
    explanation="Fires on out-of-memory events in the log: one entry per worker, with the step it was in and what the error message says.",
    not_meaning="Does not by itself say why: a leak, a warmup that peaks above capacity, or one oversized batch all end this way.",
    thresholds=(),
    examples=(
        Example("`[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB ...` after step 6.", True,
                memory={0: [21.0 + 9.5 * i for i in range(6)]},
                lines=("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                       "capacity of 79.11 GiB of which 1.02 GiB is free.",)),
        Example("A run that ends normally.", False, memory={0: [20.0] * 6}),
    ),
    check=check,
)
