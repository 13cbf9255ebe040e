"""keyboard-interrupt: the run was stopped on purpose from the keyboard (Ctrl-C), not killed by a failure."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, keyboard_interrupt, workers_phrase


def check(ctx, t) -> list[Finding]:
    stops = [e for e in ctx.tables.events if keyboard_interrupt(e) and e.next_step is None]
    if not stops:
        return []
    first = min(stops, key=lambda e: e.line_no)
    earliest = min((e for e in stops if e.after_step is not None), key=lambda e: e.after_step, default=None)
    when = f" {ctx.during(earliest)}" if earliest is not None else ""
    msg = (
        f"The run was interrupted from the keyboard (Ctrl-C: KeyboardInterrupt, SIGINT) on "
        f"{workers_phrase(sorted({e.worker for e in stops}))}{when} (line {first.line_no}): stopped on purpose, not a crash."
    )
    return [
        RULE.finding(
            t,
            msg,
            subject="run",
            series=sorted({e.worker for e in stops}),
            ranks=[e.rank for e in stops],
            observed={"events": len(stops), "during_step": earliest.after_step + 1 if earliest is not None else None},
            evidence={"events": [e.to_json() for e in stops[:8]]},
            lines=[(e.source, e.line_no) for e in stops[:8]],
        )
    ]


RULE = Rule(
    id="keyboard-interrupt",
    severity="info",
    summary="The run was stopped from the keyboard (Ctrl-C): a KeyboardInterrupt or SIGINT ends its output.",
    explanation=(
        "Fires when a process's output ends in a KeyboardInterrupt or in a launcher's report of SIGINT (torchrun's "
        "`got signal: 2`). A run stopped on purpose has not failed, so the crash rule leaves these out; the memory "
        "before the stop is judged as usual."
    ),
    not_meaning="Does not mean the run was healthy: its memory findings still stand.",
    thresholds=(),
    examples=(
        Example(
            "A run stopped with Ctrl-C after step 6.",
            True,
            memory={0: [20.0] * 6},
            lines=("Traceback (most recent call last):", '  File "train.py", line 9, in <module>', "KeyboardInterrupt"),
        ),
        Example("A run that ends normally.", False, memory={0: [20.0] * 6}),
    ),
    check=check,
)
