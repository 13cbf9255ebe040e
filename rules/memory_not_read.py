"""memory-not-read: step records were read, but no memory reading: say why instead of a silent inconclusive."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Threshold


def check(ctx, t) -> list[Finding]:
    records = ctx.tables.records
    if records.is_empty() or ctx.device_series or ctx.host_series:
        return []
    steps = ctx.tables.step_count  # the steps the coverage counts (a step's several lines are one)
    if steps < t["min_step_records"]:
        return []
    formats = ", ".join(sorted(ctx.tables.formats)) or "the log's format"
    unread = [e for e in ctx.tables.events if e.kind == "memory_unread"]
    if unread:
        first = unread[0]
        shapes = list(dict.fromkeys(e.detail.get("fragment", "") for e in unread))[:3]
        msg = (
            f"{steps:,} step records were read ({formats}) but no memory reading: step lines print memory as "
            f"{', '.join(repr(s) for s in shapes)} (first at line {first.line_no:,}), which the "
            f"{first.detail.get('pattern', first.format)} pattern does not read (a unit or a layout it does not "
            "know), so memory could not be judged."
        )
        hints = [
            "If the format changed, `memlog formats check LOG` shows the near misses; a spec in a --formats-dir "
            "folder can read the new shape (`memlog formats test` checks it against your lines)."
        ]
        severity, lines = "warning", [(e.source, e.line_no) for e in unread[:3]]
    else:
        msg = (
            f"{steps:,} step records were read ({formats}), but no line of this log prints memory in a form "
            "memlog reads, so only the loss was judged: memory is neither a leak nor healthy here."
        )
        hints = [
            "Log memory beside the loss: torchtitan prints it on every step line; DeepSpeed with "
            "`memory_breakdown: true` or see_memory_usage; Ray/verl with the perf/ memory metrics; anywhere, "
            "torch.cuda.max_memory_allocated() per logged step."
        ]
        severity, lines = "info", []
    return [
        RULE.finding(
            t,
            msg,
            subject="device",
            severity=severity,
            observed={"step_records": steps, "memory_lines_seen": len(unread)},
            evidence={
                "formats": sorted(ctx.tables.formats),
                "unread": [
                    {"line": e.line_no, "source": e.source, "fragment": e.detail.get("fragment"), "pattern": e.detail.get("pattern")} for e in unread[:8]
                ],
            },
            hints=hints,
            lines=lines,
        )
    ]


RULE = Rule(
    id="memory-not-read",
    severity="warning",
    summary="Step records but no memory reading: which lines printed memory that was not read, or that none did.",
    explanation=(
        "Fires when training-step records were read but not a single memory reading (device or host), so no "
        "memory rule can judge anything. When step lines print something memory-like that their format did not "
        "read (an unknown unit such as `36943.36 MiBs`, a changed layout), it quotes them and names the pattern "
        "(warning); when no line prints memory at all, it says only the loss was judged (info)."
    ),
    not_meaning="Not a memory problem of the run: memlog could not see its memory.",
    thresholds=(Threshold("min_step_records", 1, "records", "step records needed before the missing memory is worth a finding"),),
    examples=(
        Example("Loss logged for 30 steps, memory never.", True, loss={0: [3.0 - 0.01 * i for i in range(30)]}),
        Example("Memory logged beside the loss.", False, memory={0: [40.0] * 30}),
    ),
    check=check,
)
