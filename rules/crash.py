"""crash: a process died of something other than an out-of-memory error, and whether memory may be involved."""

from __future__ import annotations

from memlog.judge.rulekit import Example, Finding, Rule, Verdict, ray_death_cause, workers_phrase

SIGNALS = {9: "SIGKILL", 6: "SIGABRT", 11: "SIGSEGV", 15: "SIGTERM", 7: "SIGBUS"}
# Signal names as strsignal prints them (srun's `task 12: Killed`), to their numbers.
STRSIGNAL = {"killed": 9, "aborted": 6, "segmentation fault": 11, "terminated": 15, "bus error": 7}


def _cause(event) -> tuple[str, str]:
    """(what happened, whether memory is involved: "likely", "no" or "unknown")."""
    d = event.detail
    if event.kind == "crash" and "op" in d:
        timeout = f" after {d['timeout_ms'] / 60000:g} min" if "timeout_ms" in d else ""
        return f"an NCCL collective ({d['op']}) timed out{timeout}: a rank stopped answering", "no"
    if event.kind == "crash" and "heartbeat" in str(d.get("cause", "")).lower():
        return "the NCCL heartbeat monitor timed out and took the process down: a collective hung (a rank stopped answering)", "no"
    if event.kind == "crash":
        signal = str(d.get("signal", ""))
        memory = "likely" if signal.lower() in ("killed", "sigkill") else "unknown"
        how = f" by signal {signal}" if signal else " unexpectedly"
        return f"a DataLoader worker was killed{how}", memory
    code = d.get("return_code")
    signal = d.get("signal") or (-code if isinstance(code, int) and code < 0 else None)
    named = STRSIGNAL.get(str(d.get("signal_name", "")).lower())  # srun prints the signal's name only
    if signal is None and named == 9:
        return f"a process was killed (`{d['signal_name']}`: SIGKILL): usually the Linux OOM killer, out of host memory", "likely"
    signal = signal or named
    if signal == 9:
        return "a process was killed (SIGKILL, exit code -9): usually the Linux OOM killer, out of host memory", "likely"
    if signal == 6:
        return "a process aborted (SIGABRT): often the NCCL watchdog taking the process down", "no"
    if signal:
        return f"a process died of signal {signal} ({SIGNALS.get(signal, d.get('signal_name', '?'))})", "unknown"
    if ray_death_cause(event) == "possible":
        how = f"{d['exit_type']}, connection lost" if "exit_type" in d else "connection lost"
        return (f"a Ray worker process died unexpectedly ({how}): Ray lists the Linux OOM killer first among the possible "
                "causes", "likely")
    if event.kind == "worker_died":
        how = ": ".join(str(d[k]) for k in ("exit_type", "exit_detail") if k in d) or "no detail"
        return f"a Ray worker died ({how})", "unknown"
    if isinstance(code, int):
        return f"a process exited with code {code}", "unknown"
    return "a worker process failed (torchrun)", "unknown"


def check(ctx, t) -> list[Finding]:
    if any(e.kind == "oom" for e in ctx.tables.events):
        return []  # the out-of-memory error is the failure; exits that follow it are its consequence
    died = [
        e for e in ctx.tables.events
        if e.kind in ("crash", "child_failed", "worker_died")
        or (e.kind == "process_exit" and (e.detail.get("signal") or e.detail.get("signal_name") or e.detail.get("return_code", 0) != 0))
    ]
    died = [e for e in died if ray_death_cause(e) != "killed"]  # the oom rule explains those
    if not died:
        return []
    causes = [(e, *_cause(e)) for e in died]
    # The most telling cause first: a named one (timeout, signal) over a bare exit code.
    first, what, memory = min(causes, key=lambda c: (c[0].kind == "child_failed", "exited with code" in c[1], c[0].line_no))
    steps = sorted({e.after_step + 1 for e in died if e.after_step is not None})
    earliest = min((e for e in died if e.after_step is not None), key=lambda e: e.after_step, default=None)
    msg = f"{what[0].upper()}{what[1:]}"
    msg += f" (on {workers_phrase(sorted({e.worker for e in died}))}" + (f", {ctx.during(earliest)}" if earliest is not None else "") + f", line {first.line_no})."
    if memory == "likely":
        msg += " Memory is probably involved: the kernel kills the process with the most memory when the host runs out."
    elif memory == "no":
        msg += " This is not an out-of-memory error."
    others = sorted({c[1] for c in causes if c[1] != what})
    if others:
        msg += " Also: " + "; ".join(others[:3]) + "."
    hints = []
    if memory == "likely":
        hints.append("Check the kernel log for the OOM killer (`dmesg -T | grep -i 'killed process'`) and the host memory per "
                     "process; log host memory (RSS) per step to see it grow.")
    if any("NCCL" in c[1] or "SIGABRT" in c[1] for c in causes):
        hints.append("An NCCL timeout usually follows another rank's death or hang: look for the first rank that failed "
                     "(its traceback, an OOM) before the timeouts.")
    return [
        RULE.finding(
            t, msg, subject="run", series=sorted({e.worker for e in died}), ranks=[e.rank for e in died],
            observed={"events": len(died), "during_step": steps[0] if steps else None, "memory_involved": memory},
            evidence={"events": [e.to_json() for e in died[:8]]},
            hints=hints,
            lines=[(e.source, e.line_no) for e in died[:8]],
        )
    ]


RULE = Rule(
    id="crash",
    severity="error",
    verdict=Verdict("crash", 70, "CRASH: a process died; no out-of-memory error in the log (see the crash finding)"),
    summary="A process died of something else than an out-of-memory error: an NCCL timeout, a killed DataLoader worker, a signal.",
    explanation=(
        "Fires on the crashes users paste besides OOM errors when the log holds no out-of-memory event: the NCCL "
        "watchdog's collective timeout, a DataLoader worker killed by a signal, torchrun's failure summary and exit "
        "codes, launchers' exit codes, Ray worker deaths. It says whether memory is likely involved (SIGKILL, "
        "exit code -9 and `killed by signal: Killed` are the Linux OOM killer's mark)."
    ),
    not_meaning="A crash with no memory involved is still a failed run; a kill by signal 9 may also come from a scheduler or a user.",
    thresholds=(),
    examples=(
        Example("NCCL watchdog timeout on rank 6.", True, memory={0: [20.0] * 6},
                lines=("[rank6]:[E304 11:02:40.551908231 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=912, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                       "Timeout(ms)=600000) ran for 600033 milliseconds before timing out.",)),
        Example("A run that ends normally.", False, memory={0: [20.0] * 6}),
    ),
    check=check,
)
