"""Condense: a worker's long runs of steps kept as bins while reading, for `analyze`.

A dense log holds hundreds of thousands of steps per rank, and the rules judge at most
MAX_SERIES_POINTS points per series (series._binned): holding every step until the end of the
input made memory follow the file's size. From a worker's 2 * CONDENSE_AFTER-th step of one kind
on, its runs of steps are kept as bins about n / CONDENSE_AFTER steps wide at its n-th step, so
what is held grows with the logarithm of the steps (~2,000 * (2 + ln(n / 4,000)) records per
worker). `memlog series` prints every step and never condenses (tables.Keep).

A bin is a record standing for `steps` steps: its last step's step, line and time, and each
value's (lower) median over its steps. Everything that looks at single steps still sees them:
- only plain steps are binned: a step with a non-finite loss (or other value), a memory reading
  above its neighbours' or a non-zero count of NaN iterations (_plain) stays a record of its own
  (corrupt-readings and nan-loss report it by its line). A memory reading that cannot be true (not
  a number, negative, above MAX_DEVICE_GIB or MAX_HOST_GIB) is binned only with steps whose readings
  cannot be true in the same way: a lone one stays a record of its own, and a log of nothing but
  impossible readings is held like any other (issue 40: 361 MiB at 128 MB before). Its bins stand for
  their steps, so corrupt-readings still counts every one (series.build_series);
- a run ends at every line something later compares with a step: an event (its last step
  before), a record without a step (it takes a neighbour's), a step not above the one before (a
  restart, or another line of the same step, merged later), a change of format; and each run's
  first and last steps stay records of their own;
- steps are counted per segment (a restart starts again at 1), so a short segment after a
  restart is judged step by step;
- lines for which a later chunk may still add a record or an event (ChunkParser.open_since)
  wait for the next batch, and are never binned at the end of the source.
Where the reader cuts the file and the condenser its batches changes nothing (issue 33): each
worker's last steps wait for the next batch (its last bin, which may still grow, and the steps
whose neighbours after them are still to come), and the steps binned before them stay at hand as
their neighbours and as where their run stands (Condenser._batch). Only the bounds below, which
depend on how many workers were seen so far, make a source of many workers depend on it.
What differs from judging every step: a series longer than MAX_SERIES_POINTS is binned again by
series._binned from the bins (weighted by their steps), not from the steps; where most of a
worker's readings around one are above the capacity (a wrong unit throughout), corrupt-readings
counts the bins dropped, not the steps; and where they run above the capacity but within
CAPACITY_SLACK of it, a reading less than CAPACITY_SLACK above them but above the slack can be
binned rather than reported.

Two bounds keep what is held per worker small whatever the layout (issue: 10,000 ranks teed into
one file, a job resumed every 2,500 steps, a restart loop):
- a source of many workers condenses sooner: each worker and kind's first 2 * `after` steps of a
  segment stay alone, `after` being CONDENSE_AFTER, or HELD_RECORDS / (4 * workers seen so far)
  when that is smaller (never below MIN_CONDENSE_AFTER). Series that short are then binned while
  reading rather than by series._binned. A batch then holds a few steps of each worker, too few
  for its runs to have an inside, so the records held are binned again across batches
  (Condenser._compact) once they pass HELD_RECORDS and have grown by half since; a bin of bins
  stands for all its steps, its values the lower median of theirs (not weighted by steps);
- a worker and kind keep their last KEEP_SEGMENTS restart segments; older ones are summarised
  (Summarised: their steps per format, their restarts, their first and last steps), so that the
  coverage still counts them, and the report says so. Their own series are not judged: the live
  segment and the KEEP_SEGMENTS - 1 before it are, as they would be without the bound. Kept
  segments keep their numbers (`segment_base`: records.build_records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import polars as pl

from memlog.base.columns import ALL_VALUE_COLUMNS, MEMORY_COLUMNS
from memlog.base.limits import CAPACITY_SLACK, MAX_RESTARTS_LISTED, MAX_SERIES_POINTS, impossible_reading
from memlog.tables.records import step_rows

# Twice this many steps of one worker and kind are kept one by one: every series judged point by
# point (MAX_SERIES_POINTS) and then some is exactly what it was without condensing.
CONDENSE_AFTER = MAX_SERIES_POINTS
# Records a source's workers hold one by one, shared out among them when they are many (10,000
# ranks of a few hundred steps each: ~70 records a worker instead of every step). 2^18 records are
# ~25 MiB as compact rows and ~100 MiB as series points (Python lists).
HELD_RECORDS = 1 << 18
MIN_CONDENSE_AFTER = 4  # ... but never fewer than 2 * this steps of a segment one by one
# Restart segments of one worker and kind that keep their records; older ones are summarised.
KEEP_SEGMENTS = 8
COMPACT_SLICE_ROWS = 1 << 16  # records binned again at once (Condenser._compact)
# Records are binned a batch at a time: binning each chunk's few records cost more time than the
# binning saved, and holding many chunks' small frames until the end fragmented the allocator's
# pages (sparse 4 GiB: +30 MiB over 1 GiB at 2^20 records a batch; flat at 32 chunks).
BATCH_ROWS = 1 << 16
BATCH_CHUNKS = 32
NEIGHBOURS = 101  # readings around one (its own included) that say what is typical there (_plain)
GROUP = ["worker", "kind"]  # whose steps form a series (the frame holds one source's rows)
LAST_OF_BIN = ("step", "line_no", "_seconds", "ts", "_n")  # where a bin is: its last step
# Counts of bad iterations (Megatron's `number of nan iterations`): a non-zero count is a non-finite
# loss the line no longer shows, so its step is never binned (a bin's median would hide it).
COUNTED_BAD = ("nan_iterations",)


@dataclass
class Summarised:
    """What the segments a source's workers no longer hold stood for (module docstring)."""

    segments: int = 0  # segments summarised, over all workers and kinds
    workers: int = 0  # workers and kinds some of whose segments were
    restarts: int = 0  # restarts into them (their restart events are only counted)
    steps: dict[str, int] = field(default_factory=dict)  # steps read, per format
    restart_steps: list[int] = field(default_factory=list)  # where they started, the first MAX_RESTARTS_LISTED
    first_step: int | None = None
    last_step: int | None = None

    def __bool__(self) -> bool:
        return self.segments > 0

    def add(self, rows: pl.DataFrame) -> None:
        """Count `rows` (numbered: `_seg`, whole segments) as summarised."""
        rows = rows.filter(pl.col("step").is_not_null())
        if rows.is_empty():
            return
        # A step's first line stands for it (records._readings): its `steps`, its format.
        weight = pl.col("steps").first() if "steps" in rows.columns else pl.lit(1, dtype=pl.Int64)
        steps = rows.group_by([*GROUP, "_seg", "step"]).agg(pl.col("format").first().cast(pl.String), weight.fill_null(1).alias("n"))
        for fmt, n in steps.group_by("format").agg(pl.col("n").sum()).iter_rows():
            self.steps[fmt] = self.steps.get(fmt, 0) + int(n)
        segments = rows.group_by([*GROUP, "_seg"]).agg(pl.col("step").min())
        self.segments += segments.height
        self.restarts += segments.filter(pl.col("_seg") > 0).height
        starts = set(self.restart_steps) | set(segments.filter(pl.col("_seg") > 0)["step"].to_list())
        self.restart_steps = sorted(starts)[:MAX_RESTARTS_LISTED]
        # polars types an aggregate as any Python scalar; of an Int64 column it is an int (no nulls here).
        low, high = cast(int, rows["step"].min()), cast(int, rows["step"].max())
        self.first_step = low if self.first_step is None else min(self.first_step, low)
        self.last_step = high if self.last_step is None else max(self.last_step, high)


class Condenser:
    """A record sink (memlog/tables/records.py RecordSink): one source's records on their way to the
    records table, binned a batch of chunks at a time, held here until the end of the source so that
    segments a worker leaves behind can be summarised (module docstring). Each worker and kind's
    last step, the steps of its current segment and the segment's number are carried from batch to
    batch."""

    def __init__(self, per_step: bool = False) -> None:
        # A step's memory lines merged into its floor and peak while reading (records.step_rows;
        # Keep.per_step), where they are sure to share a step (_stepless).
        self.per_step = per_step
        self.step_lines: dict[object, int] = {}  # worker -> its step lines so far (_stepless)
        self.carried: dict[tuple, tuple[int, int, int]] = {}  # (worker, kind) -> (last step, steps in its segment, segment)
        self.floor: dict[tuple, int] = {}  # (worker, kind) -> its first segment still held, where not 0
        self.summarised = Summarised()
        self.done: list[pl.DataFrame] = []  # batches binned, with `_seg` (the segment's number)
        self.pending: list[pl.DataFrame] = []
        self.pending_rows = 0
        self.event_lines: list[pl.Series] = []
        self.label_types: tuple = (pl.Categorical, pl.Categorical)  # the worker and kind columns' types
        self.barriers: list[pl.Series] = []  # every event's line so far (they cut runs when held records are binned again)
        self.compacted = 0  # records held after they were last binned again
        # What makes the bins the same wherever a batch ends (_batch): each worker's last steps, not
        # binned yet (`waiting`), the steps before them already binned (`context`: their readings are
        # the neighbours of the next ones, their `_plain` where their runs stand), and the lines
        # since then that cut runs.
        self.waiting: pl.DataFrame | None = None
        self.context: pl.DataFrame | None = None
        self.cuts = pl.Series("line_no", [], dtype=pl.Int64)
        self.stepless_cuts: list[pl.Series] = []  # the lines of step-less records that cut runs (_compact)

    def add(self, rows: pl.DataFrame | None, events: list[pl.DataFrame], open_since: int | None) -> list[pl.DataFrame]:
        """`rows`: one chunk's compact records (tables.compact_records) of one source, or None;
        `events`: the event rows the chunk yielded (a chunk without records too);
        `open_since`: ChunkParser.open_since() after it.
        Records are held until finish(): returns nothing."""
        if rows is not None:
            self.pending.append(rows)
            self.pending_rows += rows.height
        self.event_lines += [frame["line_no"].cast(pl.Int64) for frame in events]
        if self.pending_rows >= BATCH_ROWS or len(self.pending) >= BATCH_CHUNKS:
            self._batch(open_since)
        return []

    def held(self) -> list[pl.DataFrame]:
        """Every record so far: the batches binned and the batch not yet full, as read (what a reader
        that judges before the end of its input, memlog/watch/watch.py, judges)."""
        waiting = [] if self.waiting is None else [self.waiting]
        return [*self._out(self.done), *self._out(waiting), *self.pending]

    def finish(self, open_since: int | None) -> list[pl.DataFrame]:
        """Every record of the source, binned; `open_since` as in add() (call before the source's last
        blocks). `summarised` then says what the records no longer held stood for."""
        self._batch(open_since, final=True)
        if self._after() < CONDENSE_AFTER and sum(f.height for f in self.done) > max(HELD_RECORDS, self.compacted):  # since the last time too
            self._compact(open_since)
        done, self.done = self.done, []
        return self._out(done)

    def _after(self) -> int:
        """Steps of a segment held one by one (twice this): module docstring."""
        workers = max(1, len(self.carried))
        return max(min(MIN_CONDENSE_AFTER, CONDENSE_AFTER), min(CONDENSE_AFTER, HELD_RECORDS // (4 * workers)))

    def _out(self, frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
        """Frames as the records table takes them: `_seg` gone, `segment_base` (the worker's first
        segment held) where segments were summarised."""
        if not self.floor:
            return [f.drop("_seg", "_n", strict=False) for f in frames]
        floors = self._floors()
        return [
            f.join(floors, on=GROUP, how="left", maintain_order="left").with_columns(segment_base=pl.col("_floor").fill_null(0)).drop("_seg", "_n", "_floor")
            if "_seg" in f.columns
            else f
            for f in frames
        ]

    def _floors(self) -> pl.DataFrame:
        """Each worker and kind's first segment held (`_floor`), where not 0."""
        worker, kind = self.label_types
        return pl.DataFrame(
            [(w, k, f) for (w, k), f in self.floor.items()],
            schema={"worker": worker, "kind": kind, "_floor": pl.Int64},
            orient="row",
        )

    def _batch(self, open_since: int | None, final: bool = False) -> None:
        """Bin the pending records, then summarise the segments they left behind. Each worker's
        last steps wait for the next batch (`waiting`: _waiting), with the steps binned before them
        as their neighbours (`context`), so that every step is binned with the neighbours, the run
        and the bin it has when the whole source is one batch: where batches end changes nothing.
        `final`: the end of the source, nothing waits."""
        pending, event_lines = self.pending, self.event_lines
        self.pending, self.pending_rows, self.event_lines = [], 0, []
        if not pending and not (final and self.waiting is not None):
            return
        events = pl.concat(event_lines).cast(pl.Int64) if event_lines else pl.Series("line_no", [], dtype=pl.Int64)
        self.barriers.append(events)
        cuts = [self.cuts, events]
        frames = [] if self.waiting is None else [self.waiting]
        if pending:
            # One frame either way (small frames held to the end fragment memory: BATCH_ROWS).
            rows = pl.concat(pending, how="diagonal_relaxed").rechunk()
            if "step" not in rows.columns:  # only lines that take a neighbour's step
                stepless, rows = rows, rows.clear()
                lines = stepless["line_no"].cast(pl.Int64)
            elif self.per_step and rows["step"].null_count():
                stepless, lines = self._stepless(rows)
                rows = rows.filter(pl.col("step").is_not_null())
            else:
                stepless, rows = rows.filter(pl.col("step").is_null()), rows.filter(pl.col("step").is_not_null())
                lines = stepless["line_no"].cast(pl.Int64)
            if stepless.height:  # they take a neighbour's step later (records.build_records), and cut runs
                self.done.append(stepless)
                cuts.append(lines)
                self.stepless_cuts.append(lines)
            if rows.height:
                if not rows["line_no"].is_sorted():
                    rows = rows.sort("line_no", maintain_order=True)
                frames.append(self._numbered(rows))
        if not frames:
            self._summarise()
            return
        self.cuts = pl.concat(cuts).unique().sort()
        rows = pl.concat(frames, how="diagonal_relaxed")
        if len(frames) > 1:
            rows = rows.sort("line_no", maintain_order=True)
        after = self._after()
        if (cast("int | None", rows["_n"].max()) or 0) < 2 * after:
            # No step of these can be binned yet: each is a record of its own; the last ones are kept
            # as the next steps' neighbours.
            self.waiting = None
            known = [f for f in (self.context, rows.with_columns(_plain=pl.lit(None, dtype=pl.Int64))) if f is not None]
            self.context = _last_steps(pl.concat(known, how="diagonal_relaxed"), after)
            self.done.append(rows)
        else:
            ready, self.waiting, self.context = _condensed(rows, self.context, self.cuts, open_since, after, final)
            self.done.append(ready)
        # Cuts before the steps still looked at are of no more use.
        start = min((cast(int, f["line_no"].min()) for f in (self.waiting, self.context) if f is not None and f.height), default=None)
        self.cuts = self.cuts.filter(self.cuts >= start) if start is not None else self.cuts.clear()
        self._summarise()
        # Binned again once they grew by half: each time costs what is held, and the peak is what
        # is held then, not a doubling (10,000 ranks: 534 MiB while reading at 2x).
        # Only where workers share HELD_RECORDS: with a few, a batch holds thousands of steps of each
        # (dense 1 GiB, 8 ranks: ~0.3 M records held, binned as phase 5 bins them).
        if after < CONDENSE_AFTER and sum(f.height for f in self.done) > max(HELD_RECORDS, self.compacted + self.compacted // 2):
            self._compact(open_since)

    def _compact(self, open_since: int | None) -> None:
        """Bin the records held again, across the batches: a batch holds a few steps of each worker
        when there are thousands of them, too few for its runs to have an inside. A bin of bins
        stands for their steps; its values are the (lower) median of theirs."""
        numbered = [f for f in self.done if "_n" in f.columns]
        if not numbered:
            return
        self.done = [f for f in self.done if "_n" not in f.columns]  # the batches are freed once copied
        rows = pl.concat(numbered, how="diagonal_relaxed")
        del numbered
        if not rows["line_no"].is_sorted():
            rows = rows.sort("line_no", maintain_order=True)
        # Runs are cut at events and at step-less records (Condenser._batch holds those apart).
        self.barriers = [pl.concat(self.barriers).unique().sort()]
        self.stepless_cuts = [pl.concat(self.stepless_cuts).unique().sort()] if self.stepless_cuts else []
        cuts = pl.concat([self.barriers[0], *self.stepless_cuts]).unique().sort()
        after = self._after()
        # A few workers at a time: binning copies its rows several times over, and every step of it
        # is per worker, so slices by worker give the same bins at a fraction of the peak.
        slices = max(1, rows.height // COMPACT_SLICE_ROWS)
        if slices == 1:
            parts = [_condensed(rows, None, cuts, open_since, after)[0]]
        else:
            which = pl.col("worker").hash() % slices
            parts = [_condensed(rows.filter(which == i), None, cuts, open_since, after)[0] for i in range(slices)]
        del rows
        self.done.append(pl.concat(parts, how="diagonal_relaxed").sort("line_no", maintain_order=True))
        self.compacted = sum(f.height for f in self.done)

    def _stepless(self, batch: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        """The batch's step-less records, each worker's memory lines between two of its step lines
        merged into their floor and peak (records.step_rows): they take the step of the step line
        before them (records._fill_steps) and are merged there again, to the same rows. Lines before
        a worker's first step line, and lines whose step is counted or redrawn, stay as read. Also
        the lines that cut runs of steps (_condensed): the first step-less line after each step
        line, which cuts what every step-less line after it would."""
        if not batch["line_no"].is_sorted():
            batch = batch.sort("line_no", maintain_order=True)
        worker = batch.schema["worker"]
        carried = pl.DataFrame(list(self.step_lines.items()), schema={"worker": worker, "_before": pl.Int64}, orient="row")
        has_step = pl.col("step").is_not_null()
        batch = batch.join(carried, on="worker", how="left", maintain_order="left").with_columns(
            _run=has_step.cast(pl.Int64).cum_sum().over("worker") + pl.col("_before").fill_null(0)
        )
        for name, runs in batch.group_by("worker").agg(pl.col("_run").last()).iter_rows():
            self.step_lines[name] = runs
        lines = batch.filter(~has_step & has_step.shift(1).fill_null(True))["line_no"].cast(pl.Int64)
        stepless = batch.filter(~has_step).drop("_before")
        sure = pl.col("_run") > 0
        for flag in ("refresh", "ordinal_step", "interleaved"):
            if flag in stepless.columns:
                sure = sure & pl.col(flag).is_null() if flag == "interleaved" else sure & ~pl.col(flag).fill_null(False)
        merged = step_rows(stepless.filter(sure), of_step=("worker", "kind", "_run"))
        out = pl.concat([merged, stepless.filter(~sure)], how="diagonal_relaxed").drop("_run")
        return out.sort("line_no", maintain_order=True), lines

    def _summarise(self) -> None:
        """Each worker and kind past KEEP_SEGMENTS segments: its older segments' records counted in
        `summarised` and let go."""
        floors = {key: segment - KEEP_SEGMENTS + 1 for key, (_, _, segment) in self.carried.items() if segment >= KEEP_SEGMENTS}
        if not floors or all(self.floor.get(key, 0) >= f for key, f in floors.items()):
            return
        self.floor.update(floors)
        table = self._floors()
        kept, dropped = [], []
        for frame in self.done:
            if "_seg" not in frame.columns:
                kept.append(frame)
                continue
            old = pl.col("_seg") < pl.col("_floor").fill_null(0)
            frame = frame.join(table, on=GROUP, how="left", maintain_order="left")
            dropped.append(frame.filter(old).drop("_floor"))
            kept.append(frame.filter(~old).drop("_floor"))
        # One frame: held to the end, small frames fragment memory (BATCH_ROWS).
        self.done = [pl.concat(kept, how="diagonal_relaxed").rechunk()] if kept else []
        self.summarised.workers = len(self.floor)
        self.summarised.add(pl.concat(dropped, how="diagonal_relaxed"))

    def _numbered(self, rows: pl.DataFrame) -> pl.DataFrame:
        """`rows` (in line order) with `_n`: each step's number within its worker and kind's
        segment, and `_seg`: that segment's number, as records.build_records will cut them (a step
        below the one before starts one)."""
        self.label_types = (rows.schema["worker"], rows.schema["kind"])
        carried = pl.DataFrame(
            [(w, k, last, n, seg) for (w, k), (last, n, seg) in self.carried.items()],
            schema={"worker": rows.schema["worker"], "kind": rows.schema["kind"], "_last": pl.Int64, "_count": pl.Int64, "_seg0": pl.Int64},
            orient="row",
        )
        step, has_step = pl.col("step"), pl.col("step").is_not_null()
        rows = rows.join(carried, on=GROUP, how="left", maintain_order="left")
        before = pl.coalesce(step.shift(1).forward_fill().over(GROUP), pl.col("_last"))
        rows = rows.with_columns(_segment=(has_step & (step < before)).fill_null(False).cum_sum().over(GROUP))
        in_segment = has_step.cum_sum().over([*GROUP, "_segment"])
        rows = rows.with_columns(
            _n=pl.when(has_step).then(in_segment + pl.when(pl.col("_segment") == 0).then(pl.col("_count").fill_null(0)).otherwise(0)),
            _seg=(pl.col("_segment") + pl.col("_seg0").fill_null(0)).cast(pl.Int64),
        ).drop("_last", "_count", "_segment", "_seg0")
        ends = rows.filter(has_step).group_by(GROUP).agg(step.last(), pl.col("_n").last(), pl.col("_seg").last())
        for worker, kind, last, n, seg in ends.iter_rows():
            self.carried[worker, kind] = (last, n, seg)
        return rows


def _condensed(
    rows: pl.DataFrame, context: pl.DataFrame | None, cuts: pl.Series, open_since: int | None, after: int, final: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame | None]:
    """`rows` (step lines, numbered: `_n`, in line order) with the interior of each run of plain steps
    binned: the records ready, the steps that wait for the next batch (none when `final`) and the
    new context. The n-th step of a worker and kind's segment falls in bin floor(after * ln(n /
    after)) once n >= 2 * after (before, each step is its own): bins about n / after steps wide
    (`after`: CONDENSE_AFTER unless the source has many workers, Condenser._after). `context`: the
    steps binned before, whose readings and runs the first of `rows` continue; `cuts`: the lines
    that cut runs (events, step-less records) since the context's first."""
    rows = rows.with_columns(_ctx=pl.lit(False), _plain=_plain(rows, open_since, after, context))
    if context is not None:
        rows = pl.concat([context.with_columns(_ctx=pl.lit(True)), rows], how="diagonal_relaxed").sort("line_no", maintain_order=True)
    rows = rows.with_columns(_epoch=cuts.search_sorted(rows["line_no"], side="right"))
    step, alike, epoch = pl.col("step"), pl.col("_plain"), pl.col("_epoch")
    # A run: steps alike (_plain: all plain, or impossible in the same way), none alone.
    binnable = alike.is_not_null()
    new_run = (
        ~binnable
        | ~binnable.shift(1)
        | (alike != alike.shift(1))
        | (epoch != epoch.shift(1))
        | (step <= step.shift(1))
        | (pl.col("format") != pl.col("format").shift(1))
    ).fill_null(True)
    rows = rows.with_columns(_run=new_run.cum_sum().over(GROUP))
    position, length = pl.int_range(pl.len()).over([*GROUP, "_run"]), pl.len().over([*GROUP, "_run"])
    bin_of = (after * (pl.col("_n") / after).log()).floor().cast(pl.Int64)
    rows = rows.with_columns(_bin=pl.when(binnable & (position > 0) & (position < length - 1)).then(bin_of))
    rows = rows.with_columns(_wait=pl.lit(False) if final else _waiting(rows, open_since, after))
    helpers = ["_plain", "_epoch", "_run", "_bin", "_ctx", "_wait"]
    out = rows.filter(~pl.col("_ctx") & ~pl.col("_wait"))
    # The context of the next batch: each worker's last steps before those that wait, as read.
    context = None if final else _last_steps(rows.filter(~pl.col("_wait")).drop("_epoch", "_run", "_bin", "_ctx", "_wait"), after)
    waiting = None if final else rows.filter(pl.col("_wait")).drop(helpers)
    # A record already binned (Condenser._compact) counts as the steps it stands for.
    weight = pl.col("steps").fill_null(1) if "steps" in out.columns else pl.lit(1, dtype=pl.Int64)
    exact = out.filter(pl.col("_bin").is_null()).drop(helpers).with_columns(steps=weight.cast(pl.Int64))
    binned = out.filter(pl.col("_bin").is_not_null())
    columns = [c for c in out.columns if c not in helpers and c != "steps"]
    bins = (
        binned.group_by([*GROUP, "_run", "_bin"], maintain_order=True)
        .agg(*(_summary(c) for c in columns if c not in GROUP), steps=(weight.sum() if "steps" in out.columns else pl.len()).cast(pl.Int64))
        .select(*columns, "steps")
    )
    ready = pl.concat([exact, bins], how="diagonal_relaxed").sort("line_no", maintain_order=True)
    return ready, (waiting if waiting is not None and waiting.height else None), context


def _waiting(rows: pl.DataFrame, open_since: int | None, after: int) -> pl.Series:
    """The steps of `rows` that wait for the next batch: in each worker's last segment, from the
    first of its last NEIGHBOURS // 2 steps (their neighbours after them are still to come), of a
    line a later chunk may still touch, or of its last bin (it may still grow) - and then the
    whole bin that step is in, so that a bin is never cut by a batch. Earlier segments are over:
    their steps never wait."""
    n, segment = pl.col("_n"), [*GROUP, "_seg"]
    bin_of = pl.when(n >= 2 * after).then((after * (n / after).log()).floor().cast(pl.Int64))
    hold = (pl.int_range(pl.len(), 0, -1).over(segment) <= NEIGHBOURS // 2) | (bin_of == bin_of.last().over(segment)).fill_null(False)
    if open_since is not None:
        hold = hold | (pl.col("line_no") >= open_since)
    last_segment = (pl.col("_seg") == pl.col("_seg").max().over(GROUP)) & ~pl.col("_ctx")
    marks = rows.select(*segment, n, _b=bin_of, _first=pl.when(hold & last_segment).then(n), _last=last_segment)
    marks = marks.with_columns(_first=pl.col("_first").min().over(segment))
    marks = marks.with_columns(_first_bin=pl.when(n == pl.col("_first")).then(pl.col("_b")).max().over(segment))
    wait = pl.col("_last") & ((n >= pl.col("_first")) | (pl.col("_b") == pl.col("_first_bin"))).fill_null(False)
    return marks.select(wait.alias("_wait")).to_series()


def _last_steps(rows: pl.DataFrame, after: int) -> pl.DataFrame | None:
    """Each worker and kind's last NEIGHBOURS // 2 steps (their readings are the neighbours of the
    next ones: _plain), with their `_plain`."""
    if rows.is_empty():
        return None
    return rows.filter(pl.int_range(pl.len(), 0, -1).over(GROUP) <= NEIGHBOURS // 2)


def _plain(rows: pl.DataFrame, open_since: int | None, after: int, context: pl.DataFrame | None) -> pl.Series:
    """How each step may be binned: 0 (plain) past its segment's first 2 * `after`, settled, every
    value a possible reading and no memory reading above CAPACITY_SLACK times the median of its
    worker's readings around it in its segment (`context`: the steps before `rows`); a code > 0
    where, besides, some memory readings cannot be true (which readings, and why: only steps of one
    code are binned together); null where the step stays a record of its own. The capacity is known
    only at the end, and a reading above it is above its neighbours too, so corrupt-readings still
    sees it alone; a leak's rise is not above them. (Unless the neighbours are above the capacity
    themselves, within its slack: module docstring.)"""
    line = pl.col("line_no")
    alone = [pl.col("_n") < 2 * after]  # its segment's first steps
    if open_since is not None:
        alone.append(line >= open_since)
    around = (
        rows
        if context is None
        else pl.concat([context.with_columns(_mine=pl.lit(False)), rows.with_columns(_mine=pl.lit(True))], how="diagonal_relaxed").sort(
            "line_no", maintain_order=True
        )
    )
    code = pl.lit(0, dtype=pl.Int64)
    for place, column in enumerate(c for c in ALL_VALUE_COLUMNS if c in rows.columns):
        value = pl.col(column)
        if column in MEMORY_COLUMNS:
            impossible, _ = impossible_reading(value, column, None) or (pl.lit(False), None)
            median = value.rolling_median(NEIGHBOURS, center=True, min_samples=1).over([*GROUP, "_seg"])
            alone.append(~impossible & (value > CAPACITY_SLACK * median))
            code = code + pl.when(impossible).then(_impossible_code(value, column)).otherwise(0) * (4**place)
        elif column in COUNTED_BAD:
            alone.append(value != 0)  # a step that counted NaN iterations stays a record of its own
        else:
            alone.append(~value.is_finite())  # nan-loss counts its steps one by one
    alone_any = pl.any_horizontal(pl.coalesce(c, pl.lit(False)) for c in alone)
    plain = around.select(pl.when(alone_any).then(None).otherwise(code).alias("_plain"), *([pl.col("_mine")] if context is not None else []))
    return (plain.filter(pl.col("_mine")) if context is not None else plain).get_column("_plain")


def _impossible_code(value: pl.Expr, column: str) -> pl.Expr:
    """1, 2 or 3: why a memory reading that cannot be true cannot (limits.impossible_reading's
    reasons, without a capacity)."""
    return pl.when(value.is_nan() | value.is_infinite()).then(1).when(value < 0).then(2).otherwise(3)


def _summary(column: str) -> pl.Expr:
    """A column of a bin: where it is (its last step), the median of each value, the labels."""
    if column in LAST_OF_BIN:
        return pl.col(column).last()
    if column in ALL_VALUE_COLUMNS:
        # A reading the log holds, not the mean of two (stairs stay on their levels; series._binned).
        return pl.col(column).quantile(0.5, interpolation="lower")
    if column == "repeated":
        return pl.col(column).max()
    return pl.col(column).first()
