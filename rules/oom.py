"""oom: the run ran out of memory: a CUDA out-of-memory error, a memory-monitor or OOM-killer kill."""

from __future__ import annotations

import json

from memlog.judge.rulekit import Example, Finding, Rule, Verdict, gib, ray_death_cause, workers_phrase

FRAGMENTATION_HINT = (
    "Memory reserved by PyTorch but unallocated was large when the allocation failed: the caching allocator's "
    "pool is fragmented. Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_ALLOC_CONF on torch 2.10)."
)
OTHER_PROCESS_HINT = (
    "Another process held memory on the same GPU (a co-located inference engine such as vLLM, or a stale process): "
    "lower its share (vLLM gpu_memory_utilization, free_cache_engine / sleep mode) or free it."
)
VLLM_HINT = (
    "vLLM's sleep-mode allocator failed to take its memory back at wake-up: the trainer left too little free. "
    "Lower gpu_memory_utilization, or free the trainer's memory before rollout (offload, empty_cache)."
)
HOST_HINT = (
    "Host (system) memory ran out: check CPU offload (FSDP param/optimizer offload, ZeRO offload), dataloader "
    "workers and checkpoint saves, and compare the node's memory with the number of processes on it."
)
RAY_HINT = (
    "Ray kills the most recently scheduled worker when node memory passes RAY_memory_usage_threshold (0.95 by "
    "default): the top consumers Ray lists in its message say which process held the memory. Raising the threshold only moves the "
    "kill to the Linux OOM killer."
)
MORE_LINES_HINT = (
    "This log shows the crash but no memory readings before it: paste the per-step memory lines that led up to it "
    "(torchtitan `memory:` at log_freq=1, DeepSpeed see_memory_usage, verl/EasyR1 perf/max_memory_* and "
    "perf/cpu_memory_used_gb) so a leak can be told from one large allocation."
)
STEP_HINT = (
    "When memory-leak or fragmentation fired on the same worker, that growth explains this OOM; when memory was "
    "flat, one large allocation did it (a long sequence, a checkpoint save, an evaluation batch)."
)


def _memory_kill(event) -> bool:
    """A Ray worker death whose exit detail says memory killed it (not one that only lists the OOM killer
    among possible causes: the crash rule says that)."""
    return ray_death_cause(event) == "killed"


def check(ctx, t) -> list[Finding]:
    ooms = [e for e in ctx.tables.events if e.kind == "oom" or _memory_kill(e)]
    # The raylet's count of workers it killed for memory stands in for the kill itself only when the
    # memory monitor's own message was not read (a paste that cut or wrapped it); the closing lines of
    # Ray's report only when neither was.
    ooms = ooms or [e for e in ctx.tables.events if e.kind == "oom_summary"] or [e for e in ctx.tables.events if e.kind == "oom_hint"]
    if not ooms:
        return []
    ooms = [e for e in ooms if not _continued(e, ooms)]
    # One entry per worker: its most telling message (the one that says most), the earliest among
    # equals. Launchers and drivers repeat a process's error in their own summaries (torchrun's
    # ChildFailedError block, the traceback Ray re-raises on the driver): an identical message counts
    # once when the line repeating it names no process of its own and no other machine than the ones
    # it came from (two nodes' identical OOMs under pdsh are two).
    per_worker: dict = {}
    seen_on: dict[tuple, set] = {}
    for event in ooms:
        message = (event.source, event.kind, json.dumps(event.detail, sort_keys=True))  # detail may hold lists (Ray's top-10 table)
        machines = seen_on.setdefault(message, set())
        repeat = bool(machines) and not event.named and (event.machine is None or event.machine in machines)
        machines.add(event.machine)
        if repeat:
            continue
        held = per_worker.get((event.source, event.worker))
        if held is None or _telling(event) > _telling(held):
            per_worker[(event.source, event.worker)] = event
    events = sorted(per_worker.values(), key=lambda e: (e.source, e.line_no))
    steps = sorted({e.after_step + 1 for e in events if e.after_step is not None})
    first = max((e for e in events if e.kind == "oom"), key=_telling, default=events[0])
    earliest = min((e for e in events if e.after_step is not None), key=lambda e: e.after_step, default=None)
    scopes = {e.detail.get("scope", "host" if e.kind in ("worker_died", "oom_summary", "oom_hint") else "device") for e in events}
    what = "host (system) memory" if scopes == {"host"} else "device memory" if scopes == {"device"} else "memory"
    msg = f"Out of {what} on {workers_phrase([e.worker for e in events])}"
    if earliest is not None:
        msg += f" {ctx.during(earliest)}"
    msg += f": {_facts(first)}" if _facts(first) else ""
    msg += f" ({_quoted(first.text)}, line {first.line_no})."
    hints = []
    detail = first.detail
    if detail.get("reserved_unallocated", 0) >= max(1.0, 0.1 * detail.get("allocated", 0), detail.get("tried", 0)):
        hints.append(FRAGMENTATION_HINT)
    if detail.get("other_used", 0) >= 1.0:
        hints.append(OTHER_PROCESS_HINT)
    if detail.get("allocator"):
        hints.append(VLLM_HINT)
    if "host" in scopes:
        hints.append(RAY_HINT if any("host_total_gib" in e.detail or e.kind in ("worker_died", "oom_summary", "oom_hint") for e in events) else HOST_HINT)
    hints.append(STEP_HINT if not ctx.tables.records.is_empty() else MORE_LINES_HINT)
    return [
        RULE.finding(
            t,
            msg,
            subject="run",
            series=[e.worker for e in events],
            ranks=[e.rank for e in events],
            observed={"events": len(ooms), "workers": len(events), "during_step": steps[0] if steps else None},
            evidence={"events": [e.to_json() for e in events[:8]]},
            hints=hints,
            lines=[(e.source, e.line_no) for e in events[:8]],
        )
    ]


def _continued(event, ooms) -> bool:
    """A message's first line whose facts follow on the next lines (Ray's `OutOfMemoryError: Task was
    killed ...` above `Memory on the node ... pid=N`): one OOM, told by the lines below, even where
    they name another worker (the killed one) than the one that printed them."""
    bare = set(event.detail) <= {"scope", "cause", "device"}
    return bare and any(o.source == event.source and 0 < o.line_no - event.line_no <= 2 and _telling(o) > _telling(event) for o in ooms)


def _telling(event) -> tuple[int, int]:
    """How much an OOM message says: an out-of-memory error over a kill notice, then its facts."""
    return (event.kind == "oom", len(event.detail))


def _quoted(text: str, width: int = 120) -> str:
    text = " ".join(str(text).split())
    return f"`{text[:width]}{'...' if len(text) > width else ''}`"


def _facts(event) -> str:
    """What the error message says, in a sentence: request, free, capacity, who held what; where it
    gives no numbers, what ran out in its own words (the vocabulary's `cause`)."""
    d = event.detail
    parts = []
    if event.kind == "oom_hint":
        return f"{d.get('cause', 'the end of an out-of-memory report')} is in the log, but not the lines that name the node's memory and the killed worker"
    if event.kind == "worker_died":
        return f"Ray killed the worker ({d.get('exit_detail', 'memory')})"
    if event.kind == "oom_summary":
        where = f" on node {d['node_ip']}" if "node_ip" in d else ""
        count = d.get("count")
        return f"the raylet killed {count if count is not None else 'some'} worker(s){where} for memory pressure (the node's used and total memory were not read from this log)"
    if "tried" in d:
        request = f"it tried to allocate {gib(d['tried'])}"
        if "free" in d:
            request += f" with {gib(d['free'])} free"
            if "capacity" in d:
                request += f" of {gib(d['capacity'])}"
        parts.append(request)
    if "allocated" in d:
        held = f"PyTorch held {gib(d['allocated'])} allocated"
        if "reserved_unallocated" in d:
            held += f" and {gib(d['reserved_unallocated'])} reserved but unallocated"
        elif "reserved" in d:
            held += f" of {gib(d['reserved'])} reserved"
        parts.append(held)
    if "other_used" in d:
        parts.append(f"another process (pid {d.get('other_pid', '?')}) held {gib(d['other_used'])}")
    if "allocator" in d:
        parts.append("vLLM's sleep-mode allocator (cumem) could not map its memory back")
    if "host_used_gib" in d and "host_total_gib" in d:
        node = f" {d['node_ip']}" if "node_ip" in d else ""
        use = f"node{node} memory {gib(d['host_used_gib'])} / {gib(d['host_total_gib'])}"
        if "threshold" in d:
            use += f" ({100 * d['host_used_gib'] / d['host_total_gib']:.1f}%, above Ray's threshold of {100 * d['threshold']:g}%)"
        parts.append(use)
        if "worker_name" in d:
            parts.append(f"Ray killed {d['worker_name']}" + (f" (pid {d['worker_pid']}, {gib(d['worker_used_gib'])})" if "worker_used_gib" in d else ""))
        top = d.get("top_memory_users") or []
        if top:
            parts.append("top consumers: " + ", ".join(f"{row.get('command', '?')} {row.get('mem_gib', '?')} GiB" for row in top[:3]))
    if "victim" in d:
        killed = f"the Linux OOM killer killed {d['victim']}" + (f" (pid {d['victim_pid']})" if "victim_pid" in d else "")
        parts.append(killed + (f" holding {gib(d['anon_rss'])} of host memory" if "anon_rss" in d else ""))
    if "tasks" in d:
        parts.append(f"SLURM reports task {d['tasks']} on {d.get('node', '?')} out of memory")
    if "count" in d and not parts:
        parts.append(f"SLURM counted {d['count']} OOM kill(s) in the step")
    if "cause" in d:
        parts.insert(0, str(d["cause"]))
    return "; ".join(parts)


RULE = Rule(
    id="oom",
    severity="error",
    verdict=Verdict("oom", 80, "OUT OF MEMORY: the run ran out of memory; no growth in this log explains it"),
    summary="The run ran out of memory: any backend's out-of-memory error (CUDA, ROCm, MPS, XPU, NPU, JAX/XLA, TensorFlow, native allocators), vLLM/SGLang, Ray's memory monitor, the OOM killer, Slurm, Kubernetes.",
    explanation=(
        "Fires on out-of-memory events: one entry per worker, with the step it was in and what the error says "
        "(the request against the free memory and the capacity, what PyTorch held allocated and reserved but "
        "unallocated, other processes on the GPU; for host memory the node's use against Ray's threshold, the top "
        "consumers, the OOM killer's victim). Also judges a paste of the crash alone, with no step lines, and says "
        "what to paste next."
    ),
    not_meaning="Does not by itself say why: a leak, a warmup that peaks above capacity, or one oversized batch all end this way.",
    thresholds=(),
    examples=(
        Example(
            "`[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB ...` after step 6.",
            True,
            memory={0: [21.0 + 9.5 * i for i in range(6)]},
            lines=(
                "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                "capacity of 79.11 GiB of which 1.02 GiB is free.",
            ),
        ),
        Example("A run that ends normally.", False, memory={0: [20.0] * 6}),
    ),
    check=check,
)
