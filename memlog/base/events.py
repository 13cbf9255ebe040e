"""The event vocabulary: what happened besides steps (an OOM, a kill, a capacity line, a restart),
and the detail each kind carries, declared once beside the column vocabulary (memlog/base/columns.py).

Format specs name an event kind per event pattern and capture its detail keys as regex groups; a
spec that names an undeclared kind or key is refused when it loads (memlog/parse/formats.py). The text a
group captured is turned into a value of the declared type here, once: sizes with their unit
(`79.11 GiB`, `896.00 MiB`) become GiB, counts integers. Rules read `event.detail[...]` as typed
values and never parse text again.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

from memlog.base.columns import unit_gib
from memlog.base.keys import packed_key
from memlog.base.limits import EVENT_TEXT_CHARS, MAX_EVENTS_PER_KIND

# How a captured detail value is read.
TEXT, INT, FLOAT, GIB, ROWS = "text", "int", "float", "gib", "rows"

_SIZE = re.compile(r"^\s*(?P<number>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-z]+)?\s*$")


@dataclass(frozen=True)
class EventKind:
    name: str
    meaning: str
    detail: dict[str, str]  # key -> TEXT, INT, FLOAT, GIB (a size: GiB unless a unit says otherwise) or ROWS
    memory: bool = False  # the event says memory ran out (or may have)
    fatal: bool = False  # a process died: a log holding one is judged even without a single step line
    # A process's last words: only a worker's last such event is kept, and only where nothing of that
    # worker follows it (a traceback a logger printed mid-run ended nothing).
    last_word: bool = False


def _kind(name: str, meaning: str, memory: bool = False, fatal: bool = False, last_word: bool = False, **detail: str) -> EventKind:
    return EventKind(name, meaning, detail, memory, fatal, last_word)


EVENT_KINDS: dict[str, EventKind] = {
    k.name: k
    for k in (
        _kind(
            "oom", "a process ran out of memory: CUDA (or XPU, NPU) out-of-memory error, vLLM's allocator, the Linux "
            "OOM killer, Ray's memory monitor, SLURM's cgroup", memory=True, fatal=True,
            scope=TEXT,  # device or host: which memory ran out
            device=TEXT, tried=GIB, gpu=INT, capacity=GIB, free=GIB, process_used=GIB, allocated=GIB, reserved=GIB,
            reserved_unallocated=GIB, other_pid=INT, other_used=GIB, allocator=TEXT,
            node_ip=TEXT, node_id=TEXT, worker_name=TEXT, worker_pid=INT, worker_used_gib=GIB,
            host_used_gib=GIB, host_total_gib=GIB, used_fraction=FLOAT, threshold=FLOAT, workers_killed=INT,
            top_memory_users=ROWS, victim=TEXT, victim_pid=INT, anon_rss=GIB, node=TEXT, tasks=TEXT, count=INT,
            cause=TEXT,  # what ran out, in words, where the message gives no numbers (parsers/crashes.yaml)
        ),
        _kind("oom_hint", "words that only an out-of-memory report prints, without its facts (the tail of Ray's memory-monitor "
              "report: its top-memory table header, its documentation link)", memory=True, fatal=True, cause=TEXT),
        _kind("memory_pressure", "an allocator could not get memory at once and retried or warned (TensorFlow/XLA's BFC "
              "allocator, a driver allocation it retries, a KV-cache pool retracting requests): not a failure by itself",
              memory=True, cause=TEXT, tried=GIB),
        _kind("crash", "a process died of something else than a memory error: an NCCL watchdog timeout, a DataLoader "
              "worker killed by a signal, a C++ abort, a segmentation fault, a job cancelled by its scheduler", fatal=True,
              cause=TEXT, signal=TEXT, op=TEXT, timeout_ms=INT, seq=INT, pids=TEXT, rank=INT, node=TEXT, job=TEXT, error=TEXT),
        _kind("exception", "the final line of a Python traceback (the exception that ended it, quoted), where nothing of its "
              "process follows it", fatal=True, last_word=True,
              exception=TEXT, from_line=INT),
        _kind("oom_summary", "the raylet's count of workers it killed for memory", memory=True, fatal=True,
              count=INT, crashed=INT, node_id=TEXT, node_ip=TEXT),
        _kind("worker_died", "a Ray worker died (its exit detail says whether memory killed it)", fatal=True,
              worker_ip=TEXT, worker_pid=INT, exit_type=TEXT, exit_detail=TEXT),
        _kind("capacity", "the device's memory capacity, as the framework prints it", device=TEXT, mem_capacity_gib=GIB),
        _kind("node_memory", "a node's host memory in use and its total, from a memory monitor",
              host_used_gib=GIB, host_total_gib=GIB, node_ip=TEXT),
        _kind("model_memory", "device memory taken by the model after it was built", mem_gib=GIB, pct=FLOAT),
        _kind("alloc_retries", "the caching allocator freed its cache and retried (cumulative `count`, or `new_retries` since the last step)",
              count=INT, new_retries=INT),
        _kind("oom_count", "out-of-memory errors the allocator counted (cumulative)", count=INT),
        _kind("pp_loss_not_visible", "the framework says which rank holds the pipeline-parallel loss", loss_rank=INT),
        _kind("overflow", "an fp16 loss-scale overflow: the step was skipped",
              loss_scale=FLOAT, new_loss_scale=FLOAT, hysteresis=INT, iteration=INT),
        _kind("version", "a framework version the log names", framework=TEXT, version=TEXT, git_hash=TEXT, git_branch=TEXT),
        _kind("process_exit", "a launcher, scheduler, container runtime or shell reports a process's exit (-9, 137, "
              "`Killed`: killed, often by the OOM killer)", fatal=True,
              return_code=INT, signal=INT, signal_name=TEXT, exit_pid=INT, local_rank=INT, node=TEXT, tasks=TEXT, job=TEXT),
        _kind("child_failed", "torchrun reports a failed worker process", fatal=True),
        _kind("memory_unread", "a step line prints memory that its format did not read (a unit or a layout it does not know)",
              fragment=TEXT, pattern=TEXT),
        _kind("restart", "the step counter went back (a resume from a checkpoint, a restarted job), or a run started "
              "again after steps of its own (memlog/tables/segments.py)"),
        _kind("run_start", "a process says it starts training (read to tell a restarted run from the one before it; "
              "never reported itself)", step=INT),
    )
}  # fmt: skip


# Words that say memory ran out, in a message no vocabulary entry knows (an exception of a library
# memlog has no spec for): the crash it ends is "memory likely", said with these words.
_MEMORY_WORDS = re.compile(
    r"out of (?:device |host |gpu |cpu |system )?memory|\bOOM\b|RESOURCE_EXHAUSTED|ResourceExhausted|OutOfMemory|"
    r"MemoryError|(?:cannot|can't|could not|unable to) allocate|allocation (?:of \S+ bytes )?failed|failed to allocate|"
    r"not enough (?:\w+ )?memory|insufficient (?:\w+ )?memory|memory (?:pressure|limit)|low on memory|killed by the OOM|"
    # A SIGKILL is the OOM killer's mark: its name, its number as an exit status (-9, 137).
    r"SIGKILL|\bKilled\b|signal 9\b|(?:code|status|exitcode|returncode)\W{0,3}(?:-9|137)\b|:\s*-9\s*\}",
    re.IGNORECASE,
)


def memory_words(text: str) -> str | None:
    """The words of `text` that say memory ran out (`out of memory`, `RESOURCE_EXHAUSTED`), or None."""
    found = _MEMORY_WORDS.search(text)
    return found.group(0) if found else None


_INTERRUPT = re.compile(r"^(?:\w+\.)*KeyboardInterrupt\b|\bSIGINT\b|got signal: (?:2|Signals\.SIGINT)\b")


def keyboard_interrupt(event: Event) -> bool:
    """Whether the event is a run stopped on purpose from the keyboard (Ctrl-C: KeyboardInterrupt,
    SIGINT), which ends a run without being its failure."""
    if event.kind not in ("exception", "process_exit", "crash"):
        return False
    if event.detail.get("signal") in (2, "SIGINT", "2") or str(event.detail.get("signal_name", "")).upper() in ("SIGINT", "INT"):
        return True
    return bool(_INTERRUPT.search(str(event.detail.get("exception") or event.text)))


def restarted_after(event: Event, events: list[Event]) -> Event | None:
    """The first restart of the event's source after it (a step counter going back, a run started
    again: memlog/tables/segments.py), or None. A death followed by one ended an attempt of the
    run, not the run: the job was resumed and went on."""
    return min((e for e in events if e.kind == "restart" and e.source == event.source and e.line_no > event.line_no), key=lambda e: e.line_no, default=None)


def ray_death_cause(event: Event) -> str | None:
    """What a Ray worker death's exit detail says about memory: "killed" when Ray's memory monitor
    killed it ("Task was killed due to the node running low on memory"), "possible" when the process
    just vanished and Ray lists the Linux OOM killer among its *possible* root causes (its text for
    any unexpected exit, so it mentions memory without saying memory did it), else None."""
    if event.kind != "worker_died":
        return None
    text = str(event.detail.get("exit_detail", "")).lower()
    if "oom killer" in text or "potential root causes" in text:
        return "possible"
    return "killed" if "memory" in text else None


def size_gib(text: str) -> float | None:
    """'79.11 GiB' -> 79.11, '896.00 MiB' -> 0.875, '48112044kB'-style units too; a bare number is GiB."""
    match = _SIZE.match(text)
    if not match:
        return None
    scale = unit_gib(match["unit"]) if match["unit"] else 1.0
    value = float(match["number"]) * scale if scale is not None else None
    return value if value is not None and math.isfinite(value) else None


def typed_detail(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A kind's captured detail with each value read as its declared type; a value that does not
    read (an empty group, garbage) is left out rather than guessed."""
    declared = EVENT_KINDS[kind].detail
    detail: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None:
            continue
        how = declared.get(key, TEXT)
        if how == ROWS:
            detail[key] = value
            continue
        text = str(value).strip()
        try:
            if how == INT:
                detail[key] = int(float(text))
            elif how == FLOAT:
                number = float(text)
                if math.isfinite(number):
                    detail[key] = number
            elif how == GIB:
                gib = size_gib(text)
                if gib is not None:
                    detail[key] = gib
            elif text:
                detail[key] = text
        except (ValueError, OverflowError):
            continue
    return detail


def unknown_detail_keys(kind: str, keys: list[str] | tuple[str, ...]) -> list[str]:
    return [k for k in keys if k not in EVENT_KINDS[kind].detail]


@dataclass
class Event:
    kind: str
    source: str
    line_no: int
    worker: str
    rank: int | None
    format: str
    text: str
    ts: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    after_step: int | None = None  # the last step this worker logged before the event
    # The first step it logged after the event: None when nothing of its process follows (the
    # event ends its output: a traceback there is a fatal end, not one a logger printed and went on).
    next_step: int | None = None
    machine: str | None = None  # the node the printer runs on (IP, else host name), when a prefix says
    named: bool = False  # the line names the process that printed it (a rank, a Ray actor or pid)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "line": self.line_no,
            "worker": self.worker,
            "rank": self.rank,
            "after_step": self.after_step,
            "next_step": self.next_step,
            "text": self.text,
            "detail": self.detail,
        }


def build_events(frames: list[pl.DataFrame], records: pl.DataFrame) -> tuple[list[Event], dict[str, int]]:
    if not frames:
        return [], {}
    frame = pl.concat(frames, how="diagonal_relaxed").sort(
        "source", "line_no", "kind", maintain_order=True
    )  # (kind: events of one line in one order, however the chunks fell)
    frame = frame.with_columns(_after_step=_steps_beside(frame, records, "backward"), _next_step=_steps_beside(frame, records, "forward"))
    frame = _last_words_only(_news_it_went_on_from(frame, records), records)
    by_pid = _workers_by_pid(records, frame)
    events: list[Event] = []
    dropped: dict[str, int] = {}
    kept: dict[str, int] = {}
    for row in frame.iter_rows(named=True):
        kind = row["kind"]
        if kept.get(kind, 0) >= MAX_EVENTS_PER_KIND:
            dropped[kind] = dropped.get(kind, 0) + 1
            continue
        kept[kind] = kept.get(kind, 0) + 1
        detail = typed_detail(kind, json.loads(row["detail"]) if row["detail"] else {})
        worker = _concerned_worker(row, detail, by_pid)
        events.append(
            Event(
                kind=kind,
                source=row["source"],
                line_no=row["line_no"],
                worker=worker,
                rank=row["rank"],
                format=row["format"],
                text=row["text"][:EVENT_TEXT_CHARS],
                ts=row["ts"],
                detail={k: v for k, v in detail.items() if v is not None},
                # The step context is the printer's (the raylet, the driver: any worker of the source).
                after_step=row["_after_step"],
                next_step=row["_next_step"],
                machine=row.get("ip") or row.get("node"),
                named=any(row.get(c) is not None for c in ("rank", "actor", "pid")),
            )
        )
    return events, dropped


# Levels at which a logger reports news, not an end (parse/chunks.py reads them off event lines).
NEWS_LEVELS = ("DEBUG", "INFO", "NOTICE", "WARNING", "WARN")


def ends_a_run_unless_news(kind: str | None) -> bool:
    """Whether an event of `kind` ends a run unless a logger printed it as news (_news_it_went_on_from):
    the fatal kinds but a process's last word (a traceback's exception is never a logger's line)."""
    found = EVENT_KINDS.get(kind or "")
    return found is not None and found.fatal and not found.last_word


def _news_it_went_on_from(events: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """Without the fatal words a logger printed as news where the worker that printed them logged
    training steps after them: `WARNING - eval batch 17 skipped: CUDA out of memory`, a generated
    sample quoting a segfault, a library warning that a kernel may crash. The process was alive to
    log them and went on. A traceback's last line (no logger's) and a kill are never news, and a
    run whose output a buffer flushed after its error keeps the error (no level on that line)."""
    if "logged_at" not in events.columns or records.is_empty():
        return events.drop("logged_at", strict=False)
    fatal = [name for name in EVENT_KINDS if ends_a_run_unless_news(name)]
    # A supervisor's report of other processes' end (a launcher killing its subprocesses, the OOM
    # killer's victim) names them: never news of its printer, whatever its level.
    about_others = pl.any_horizontal(pl.col("detail").str.json_path_match(f"$.{key}").is_not_null() for key in ("pids", "worker_pid", "victim_pid"))
    news = pl.col("kind").is_in(fatal) & pl.col("logged_at").is_in(NEWS_LEVELS) & ~about_others.fill_null(False)
    if not events.select(news.any()).item():
        return events.drop("logged_at")
    train = records.lazy().filter(pl.col("kind") == "train")
    last = train.group_by(_s=pl.col("source").cast(pl.String), _w=pl.col("worker").cast(pl.String)).agg(_last_train=pl.col("line_no").max())
    went_on = (
        events.lazy()
        .with_columns(_s=pl.col("source").cast(pl.String), _w=pl.col("worker").cast(pl.String))
        .join(last, on=["_s", "_w"], how="left", maintain_order="left")
        .select(pl.col("_last_train") > pl.col("line_no"))
        .collect()
        .to_series()
        .fill_null(False)
    )
    # An out-of-memory error a logger warned of, and went on from (fairseq's `OOM: Ran out of memory
    # ... attempting to recover`, an eval batch skipped), is memory running short, not an end; at
    # INFO and below it is a quotation (a generated sample, a dataset record) and says nothing.
    recovered = news & went_on & (pl.col("kind") == "oom") & pl.col("logged_at").is_in(("WARNING", "WARN"))
    kept = events.with_columns(
        kind=pl.when(recovered).then(pl.lit("memory_pressure")).otherwise(pl.col("kind")),
        detail=pl.when(recovered).then(pl.col("detail").map_elements(_went_on_from, return_dtype=pl.String)).otherwise(pl.col("detail")),
    )
    return kept.filter(~(news & went_on) | recovered).drop("logged_at")


def _went_on_from(detail: str | None) -> str:
    """An OOM event's detail as the memory pressure it was: what it tried to allocate, and why."""
    tried = (json.loads(detail) if detail else {}).get("tried")
    return json.dumps({"cause": "ran out of memory, and the process logged it as a warning and went on", **({"tried": tried} if tried else {})})


def _last_words_only(events: pl.DataFrame, records: pl.DataFrame) -> pl.DataFrame:
    """Of the kinds that are a process's last words (EventKind.last_word), each worker's last event,
    where nothing of that worker follows it: no step of its own, or, for a printer without steps of
    its own (a Ray driver), none of the run's beyond its last (its workers' output flushed at exit)."""
    last_words = [name for name, kind in EVENT_KINDS.items() if kind.last_word]
    if not last_words or not events.select(pl.col("kind").is_in(last_words).any()).item():
        return events
    if records.is_empty():
        ends = pl.col("_next_step").is_null()
    else:
        train = records.lazy().filter(pl.col("kind") == "train").select(_s=pl.col("source").cast(pl.String), _w=pl.col("worker").cast(pl.String), step="step")
        steppers = train.group_by("_s", "_w").agg(_own=pl.lit(True))
        last = train.group_by("_s").agg(_last_step=pl.col("step").max())
        events = (
            events.lazy()
            .with_columns(_s=pl.col("source").cast(pl.String), _w=pl.col("worker").cast(pl.String))
            .join(steppers, on=["_s", "_w"], how="left", maintain_order="left")
            .join(last, on="_s", how="left", maintain_order="left")
            .collect()
        )
        ends = pl.col("_next_step").is_null() | (pl.col("_own").is_null() & (pl.col("_next_step") >= pl.col("_last_step")))
    # One last word a line, the one begun first: a traceback's header's event ends on its exception,
    # which is read on its own too (a traceback whose header a paste cut off). Then those said to
    # end nothing (parse/multiline.py Continuation.not_after: Python's `Exception ignored in`) go.
    last_word = pl.col("kind").is_in(last_words)
    begun = pl.col("detail").str.json_path_match("$.from_line").cast(pl.Int64, strict=False)
    events = events.with_columns(_begun=begun, _i=pl.int_range(pl.len())).sort("_begun", "_i", nulls_last=True)
    first = pl.int_range(pl.len()).over("source", "worker", "kind", "line_no") == 0
    nothing = pl.col("detail").str.json_path_match("$.ends_nothing").fill_null("") == "true"
    events = events.filter(~last_word | (first & ~nothing)).sort("_i").drop("_begun", "_i")
    is_last = pl.col("line_no") == pl.col("line_no").max().over("source", "worker", "kind")
    return events.filter(~last_word | (ends & is_last)).drop("_s", "_w", "_own", "_last_step", strict=False)


def _workers_by_pid(records: pl.DataFrame, events: pl.DataFrame) -> dict[tuple[str, int], str]:
    """(source, pid) -> the worker label its Ray-prefixed lines carry. A pid under several labels (the
    same pid on two nodes) takes the records' first label in sorted order, else the events' first
    in line order."""
    table: dict[tuple[str, int], str] = {}
    for frame, order in ((records, ["source", "pid", "worker"]), (events, [])):
        if frame.is_empty() or "pid" not in frame.columns:
            continue
        rows = frame.lazy().filter(pl.col("pid").is_not_null()).select("source", "pid", "worker").unique(maintain_order=True)
        for source, pid, worker in (rows.sort(order) if order else rows).collect().iter_rows():
            table.setdefault((source, pid), worker)
    return table


def _concerned_worker(row: dict[str, Any], detail: dict[str, Any], by_pid: dict[tuple[str, int], str]) -> str:
    """An event about another process belongs to that process: Ray's memory-monitor message and its
    worker-death notice name the killed worker's pid (`worker_pid`), while their lines come from the
    raylet or the driver's traceback. Named as that worker's own lines name it, else as Ray would."""
    pid = detail.get("worker_pid")
    if not isinstance(pid, int):
        return row["worker"]
    if (row["source"], pid) in by_pid:
        return by_pid[(row["source"], pid)]
    name = str(detail.get("worker_name") or "")  # `1HsG1ZWorkerDict_0:0:WorkerDict.__init__` -> WorkerDict
    name = name.rsplit(":", 1)[-1].split(".")[0]
    return f"{name} pid={pid}" if name else f"pid={pid}"


def _steps_beside(events: pl.DataFrame, records: pl.DataFrame, strategy: Literal["backward", "forward"]) -> pl.Series:
    """Per event row, the training step its worker logged last before the event's line (`backward`),
    or first after it (`forward`); for a worker that logs no training steps, the latest (earliest)
    such step of any worker of the source. An as-of join: the records are never turned into Python
    lists."""
    none = pl.Series("after_step", [None] * events.height, dtype=pl.Int64)
    if records.is_empty():
        return none
    workers = records.lazy().filter(pl.col("kind") == "train").select("source", "worker").unique().collect()
    wanted = events.select(pl.col("source", "worker").cast(pl.Categorical), "line_no").with_row_index("_event")
    own = wanted.join(workers, on=["source", "worker"], how="semi")
    # Each step-less printer's event asks every worker of its source.
    shared = wanted.join(workers, on=["source", "worker"], how="anti").drop("worker").join(workers, on="source")
    asked = pl.concat([own, shared.select(own.columns)]).sort("line_no").with_columns(kind=pl.lit("train", dtype=pl.Categorical))
    if asked.is_empty():
        return none
    # Joined by kind rather than filtered to training records, on one packed key when the codes fit
    # (every code of `asked` is one of the records', by the joins above): no copy of the millions of
    # records. They are in line order per source, so sorted within each group: all the as-of join
    # needs. (polars cannot join as-of by a struct, hence the columns themselves otherwise.)
    keys = ["source", "worker", "kind"]
    packed = packed_key(records, keys)
    if packed is not None:
        asked, steps, keys = asked.with_columns(packed.alias("_group")), records.select(packed.alias("_group"), "line_no", "step"), ["_group"]
    else:
        steps = records.select(*keys, "line_no", "step")
    found = asked.join_asof(steps, on="line_no", by=keys, strategy=strategy, allow_exact_matches=False, check_sortedness=False)
    latest = found.group_by("_event").agg(pl.col("step").max() if strategy == "backward" else pl.col("step").min())
    return wanted.join(latest, on="_event", how="left").sort("_event")["step"].alias("after_step")
