"""crash: a process died of something other than an out-of-memory error, and whether memory may be involved."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Verdict, keyboard_interrupt, memory_words, quote, ray_death_cause, restarted_after, workers_phrase

SIGNALS = {9: "SIGKILL", 6: "SIGABRT", 11: "SIGSEGV", 15: "SIGTERM", 7: "SIGBUS", 4: "SIGILL", 8: "SIGFPE"}
# Signal names as strsignal, systemd and zsh print them (srun's `task 12: Killed`, `status=9/KILL`), to their numbers.
STRSIGNAL = {
    "killed": 9,
    "kill": 9,
    "aborted": 6,
    "abort": 6,
    "abrt": 6,
    "segmentation fault": 11,
    "segv": 11,
    "terminated": 15,
    "term": 15,
    "bus error": 7,
    "bus": 7,
    "iot instruction": 6,
}


def _signal(d: dict) -> int | None:
    """The signal a process died of, from whatever the line gave: a number, a name, a negative
    return code (Python's, torchrun's) or one above 128 (a shell's, Kubernetes', Docker's)."""
    for value in (d.get("signal"), d.get("signal_name")):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value:
            name = value.upper().removeprefix("SIG")
            number = next((n for n, s in SIGNALS.items() if s == "SIG" + name), None) or STRSIGNAL.get(value.lower()) or STRSIGNAL.get(name.lower())
            if number:
                return number
    code = d.get("return_code")
    if isinstance(code, int) and code < 0:
        return -code
    if isinstance(code, int) and 128 < code < 160:
        return code - 128
    return None


def _cause(event) -> tuple[str, str, str | None]:
    """(what happened, whether memory is involved: "likely", "no" or "unknown", the words that say so)."""
    d = event.detail
    if event.kind == "exception":
        words = memory_words(d.get("exception") or event.text)
        return f"the process ended with an uncaught exception: {quote(d.get('exception') or event.text)}", "likely" if words else "unknown", words
    if event.kind == "crash" and "op" in d:
        timeout = f" after {d['timeout_ms'] / 60000:g} min" if "timeout_ms" in d else ""
        return f"an NCCL collective ({d['op']}) timed out{timeout}: a rank stopped answering", "no", None
    if event.kind == "crash" and "heartbeat" in str(d.get("cause", "")).lower():
        return "the NCCL heartbeat monitor timed out and took the process down: a collective hung (a rank stopped answering)", "no", None
    if event.kind == "crash" and "pids" in d and "cause" not in d:
        signal = str(d.get("signal", ""))
        how = f" by signal {signal}" if signal else " unexpectedly"
        return f"a DataLoader worker was killed{how}", ("likely", signal) if signal.lower() in ("killed", "sigkill") else ("unknown", None)
    signal = _signal(d)
    said = quote(event.text)
    if event.kind == "crash":
        cause = d.get("cause")
        what = f"{cause} ({said})" if cause else f"a process crashed{f' ({SIGNALS.get(signal, signal)})' if signal else ''}: {said}"
        words = memory_words(str(cause or "")) or memory_words(event.text)
        return what, "likely" if words or signal == 9 else "unknown", words or ("SIGKILL" if signal == 9 else None)
    if signal == 9:
        return (
            f"a process was killed (SIGKILL: {said}): usually the Linux OOM killer, out of host memory",
            "likely",
            str(d.get("signal_name") or d.get("return_code") or "SIGKILL"),
        )
    if signal == 6:
        return f"a process aborted (SIGABRT: {said}): often the NCCL watchdog taking the process down", "no", None
    if signal:
        return f"a process died of signal {signal} ({SIGNALS.get(signal, d.get('signal_name', '?'))}: {said})", "unknown", None
    if ray_death_cause(event) == "possible":
        how = f"{d['exit_type']}, connection lost" if "exit_type" in d else "connection lost"
        return (f"a Ray worker process died unexpectedly ({how}): Ray lists the Linux OOM killer first among the possible causes", "likely", "the OOM killer")
    if event.kind == "worker_died":
        how = ": ".join(str(d[k]) for k in ("exit_type", "exit_detail") if k in d) or "no detail"
        return f"a Ray worker died ({how})", "unknown", None
    code = d.get("return_code")
    if isinstance(code, int):
        return f"a process exited with code {code} ({said})", "unknown", None
    return "a worker process failed (torchrun)", "unknown", None


def _died(events) -> list:
    """The events that say a process died (a Python exception is one only where nothing of its process
    follows it: base/events.py keeps no other)."""
    died = []
    for e in events:
        if (
            e.kind in ("exception", "crash", "child_failed", "worker_died")
            or e.kind == "process_exit"
            and (e.detail.get("signal") or e.detail.get("signal_name") or e.detail.get("return_code", 0) != 0)
        ):
            died.append(e)
    # The oom rule explains memory kills; a run stopped from the keyboard did not fail (rules/keyboard_interrupt.py).
    died = [e for e in died if ray_death_cause(e) != "killed" and not keyboard_interrupt(e)]
    # One event per line: a line several entries read (`... ProcessExitedException: process 0 terminated
    # with signal SIGKILL` is an exception and an exit) says its most specific thing once.
    by_line: dict[tuple, object] = {}
    for e in died:
        key = (e.source, e.line_no)
        if key not in by_line or by_line[key].kind == "exception":
            by_line[key] = e
    return list(by_line.values())


def check(ctx, t) -> list[Finding]:
    if any(e.kind in ("oom", "oom_summary", "oom_hint") for e in ctx.tables.events):
        return []  # the out-of-memory error is the failure; exits that follow it are its consequence
    died = _died(ctx.tables.events)
    if not died:
        return []
    # Deaths the job was restarted after (a preemption, a node failure, then a resume) ended an
    # attempt, not the run: said as a warning that decides nothing, unless another death ended it.
    restarts = {id(e): restarted_after(e, ctx.tables.events) for e in died}
    return [_finding(ctx, t, died, restarts)]


def _finding(ctx, t, died: list, restarts: dict) -> Finding:
    """The deaths said, the most telling first; `restarts`: each death's restart after it, or None."""
    causes = [(e, *_cause(e)) for e in died]
    # The most telling cause first: one that ended the run over one an attempt ended with, a named
    # one (timeout, signal, exception) over a bare exit code, the launcher's summary last; among
    # equals, the one that says memory, then the earliest.
    first, what, memory, words = min(
        causes, key=lambda c: (restarts[id(c[0])] is not None, c[0].kind == "child_failed", "exited with code" in c[1], c[2] != "likely", c[0].line_no)
    )
    outlived = all(restarts.values())
    # Who died and when: of the deaths that ended the run, where some did; the others are "Also".
    ended = died if outlived else [e for e in died if restarts[id(e)] is None]
    steps = sorted({e.after_step + 1 for e in ended if e.after_step is not None})
    earliest = min((e for e in ended if e.after_step is not None), key=lambda e: e.after_step, default=None)
    msg = f"{what[0].upper()}{what[1:]}"
    msg += (
        f" (on {workers_phrase(sorted({e.worker for e in ended}))}"
        + (f", {ctx.during(earliest)}" if earliest is not None else "")
        + f", line {first.line_no})."
    )
    if memory == "likely":
        msg += (
            f" Memory is probably involved: {quote(words)} says so."
            if first.kind in ("exception", "crash")
            else " Memory is probably involved: the kernel kills the process with the most memory when the host runs out."
        )
    elif memory == "no":
        msg += " This is not an out-of-memory error."
    others = sorted({c[1] for c in causes if c[1] != what})
    if others:
        msg += " Also: " + "; ".join(others[:3]) + "."
    hints = []
    if memory == "likely":
        hints.append(
            "Check the kernel log for the OOM killer (`dmesg -T | grep -i 'killed process'`) and the host memory per "
            "process; log host memory (RSS) per step to see it grow."
        )
    if any("NCCL" in c[1] or "SIGABRT" in c[1] for c in causes):
        hints.append(
            "An NCCL timeout usually follows another rank's death or hang: look for the first rank that failed (its traceback, an OOM) before the timeouts."
        )
    if first.kind == "exception":
        hints.append("The exception is the process's last word: its traceback above the quoted line says where it was raised.")
    resumed = None
    if outlived:
        resumed = restarts[id(first)]
        after = "it" if len(died) == 1 else "each of them, the first time"
        ended = "this ended an earlier attempt" if len(died) == 1 else "they ended earlier attempts"
        msg += f" The run was restarted after {after} ({resumed.text}, line {resumed.line_no}) and went on: {ended}, not the run, and memory is judged per attempt."
    return RULE.finding(
        t,
        msg,
        subject="run",
        series=sorted({e.worker for e in died}),
        ranks=[e.rank for e in died],
        observed={
            "events": len(died),
            "during_step": steps[0] if steps else None,
            "memory_involved": memory,
            **({"restarted_at_line": resumed.line_no} if resumed is not None else {}),
        },
        evidence={"events": [e.to_json() for e in died[:8]]},
        hints=hints,
        lines=[(e.source, e.line_no) for e in died[:8]],
        severity="warning" if outlived else None,
        implies_verdict=not outlived,
    )


RULE = Rule(
    id="crash",
    severity="error",
    verdict=Verdict("crash", 70, "CRASH: a process died, and no out-of-memory error proves memory did it (see the crash finding)"),
    summary="A process died of something else than a proven out-of-memory error: an uncaught exception, a signal, a timeout, an exit code.",
    explanation=(
        "Fires on every fatal end a log shows when it holds no out-of-memory event: a Python traceback whose final "
        "exception nothing of its process follows (any exception, known or not), aborts and signals (segmentation "
        "fault, core dumped, `Killed` in the shell's language), the NCCL watchdog's collective timeout, a DataLoader "
        "worker killed by a signal, torchrun's failure summary, launchers', schedulers' and container runtimes' exit "
        "codes, Ray worker deaths (parsers/crashes.yaml lists what is read). It quotes the line and says whether "
        "memory is likely involved: SIGKILL (-9, 137, `Killed`) is the Linux OOM killer's mark, and an exception "
        "whose words say memory (`out of memory`, `RESOURCE_EXHAUSTED`, `allocation failed`) is named by them. "
        "Where the job was restarted after every death (a step counter going back, a run started again: a "
        "preemption, then a resume), they ended attempts, not the run: the finding is a warning that sets no verdict."
    ),
    not_meaning="A crash with no memory involved is still a failed run; a kill by signal 9 may also come from a scheduler or a user.",
    thresholds=(),
    examples=(
        Example(
            "NCCL watchdog timeout on rank 6.",
            True,
            memory={0: [20.0] * 6},
            lines=(
                "[rank6]:[E304 11:02:40.551908231 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=912, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=600000) ran for 600033 milliseconds before timing out.",
            ),
        ),
        Example("A run that ends normally.", False, memory={0: [20.0] * 6}),
    ),
    check=check,
)
