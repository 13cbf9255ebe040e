"""Segments: which run of a worker each of its records belongs to, so that a series never joins two.

A worker's records start a new `segment` where
- its step counter goes back: a resume from an earlier checkpoint, a restarted job appending to the
  same file;
- it said it started training (a `run_start` event: torchtitan's `Training starts at step N`, the HF
  Trainer's `***** Running training *****`, Megatron's `[before the start of training step]`) after
  records of its own; a start no process is named on (Megatron's rank 0 prints it for the job)
  concerns every worker of the source. A job resumed from the checkpoint of its last step goes on
  counting, so only that line tells the two runs apart, and the new process's memory starts afresh:
  judged as one series, the drop at the restart hid a leak's rate and put its capacity far off.

A run start before a worker's first record is every log's own start and changes nothing. The
events themselves are not reported: the restart they mark is (reader._restart_events).
"""

from __future__ import annotations

import polars as pl

from memlog.base.keys import group_key

RUN_START = "run_start"
# Who a run start concerns: the records of the same worker in the same source.
WORKER = ["source", "worker"]


def run_starts(event_frames: list[pl.DataFrame]) -> tuple[list[pl.DataFrame], pl.DataFrame | None]:
    """The event frames without their run starts, and the run starts' (source, worker, line_no)."""
    starts, others = [], []
    for frame in event_frames:
        is_start = pl.col("kind") == RUN_START
        if frame.select(is_start.any()).item():
            starts.append(frame.filter(is_start).select(*(pl.col(c).cast(pl.String) for c in WORKER), pl.col("line_no").cast(pl.Int64)))
            frame = frame.filter(~is_start)
        if frame.height:
            others.append(frame)
    return others, (pl.concat(starts) if starts else None)


def with_segments(frame: pl.DataFrame, starts: pl.DataFrame | None = None) -> pl.DataFrame:
    """`frame` (records in line order per source, every row with a step) with `segment`: 0, 1, ...
    per source, worker and kind. `segment_base`, where condensing summarised earlier segments while
    reading (memlog/tables/condense.py), is added to the numbers and dropped."""
    group = group_key(frame, ["source", "worker", "kind"])
    new_run = pl.col("step") < pl.col("step").shift(1)
    started = _started_since(frame, starts)
    if started is not None:
        frame = frame.with_columns(_started=started)
        # The run start the row follows is not the one the group's row before it followed.
        new_run = new_run | (pl.col("_started").ne_missing(pl.col("_started").shift(1)) & pl.col("step").shift(1).is_not_null())
    segment = new_run.fill_null(False).cum_sum().over(group).cast(pl.Int64)
    if "segment_base" in frame.columns:
        segment = segment + pl.col("segment_base").max().over(group).fill_null(0)
    return frame.with_columns(segment=segment).drop("segment_base", "_started", strict=False)


def training(records: pl.DataFrame) -> pl.DataFrame:
    """The records whose new segments are restarts of the run: not an evaluation's, whose counter
    starts again at each evaluation (`eval step 1/40`)."""
    return records.filter(pl.col("kind") != "validate") if "kind" in records.columns else records


def _per_worker(starts: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """The run starts, one per worker they concern: a start printed by a process the line does not
    name (`main`, `node/main`: Megatron's rank 0 through print_rank_0, a job script) is the job's,
    and concerns every worker of its source (of its node, when a launcher named one)."""
    job = (pl.col("worker") == "main") | pl.col("worker").str.ends_with("/main")
    if not starts.select(job.any()).item():
        return starts
    node = pl.col("worker").str.strip_suffix("main")  # "" or "node/"
    jobs = starts.filter(job).with_columns(_node=node).drop("worker")
    workers = rows.select(WORKER).unique()
    concerned = jobs.join(workers, on="source").filter(pl.col("worker").str.starts_with(pl.col("_node"))).drop("_node")
    return pl.concat([starts.filter(~job), concerned.select(starts.columns)])


def _started_since(frame: pl.DataFrame, starts: pl.DataFrame | None) -> pl.Series | None:
    """Per row, the line of the last run start of its worker before it that came after a training
    step of the worker; None when there is none (the usual log: one start, at its top)."""
    if starts is None or starts.is_empty() or frame.is_empty():
        return None
    rows = frame.select(*(pl.col(c).cast(pl.String) for c in WORKER), "line_no")
    # A step, not what a worker printed while it set up: memory lines before its first step line
    # (`_early`: records._fill_steps) and DeepSpeed's `step=0` as its engine starts, before the
    # Trainer says it starts training.
    stepped = (pl.col("step") > 0) & (~pl.col("_early") if "_early" in frame.columns else pl.lit(True))
    first = rows.filter(frame.select(stepped.fill_null(False)).to_series()).group_by(WORKER).agg(pl.col("line_no").min().alias("_first"))
    late = _per_worker(starts, rows).join(first, on=WORKER).filter(pl.col("line_no") > pl.col("_first"))
    if late.is_empty():
        return None
    # Rows are in line order within each source (records._in_line_order), so within each worker too.
    marks = late.select(*WORKER, "line_no").sort(*WORKER, "line_no").rename({"line_no": "_started"})
    found = rows.join_asof(marks, left_on="line_no", right_on="_started", by=WORKER, strategy="backward", check_sortedness=False)
    return found["_started"]
