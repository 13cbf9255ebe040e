"""Series: one metric of one worker over one restart segment, ordered by step.

Rules judge series, never raw rows: a series never mixes ranks, pipeline stages or restarts, so
nothing is ever averaged across them. Non-finite and impossible values are dropped here, kept with
the reason, and reported as corrupt readings (rule corrupt-readings) rather than fed to the
statistics. Each kept point carries its timestamp when the log has one (wall-time projections).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import polars as pl

from memlog.base.columns import MEMORY_COLUMNS, MemoryColumn
from memlog.base.keys import group_key
from memlog.base.limits import CAPACITY_SLACK, MAX_EVENTS_PER_KIND, MAX_SERIES_POINTS, impossible_reading
from memlog.read.inputs import torchrun_attempt
from memlog.tables.capacity import WRONG_CAPACITY_SHARE, Limit
from memlog.tables.records import with_seconds


class Corrupt(NamedTuple):
    """A reading dropped from a series because it cannot be true."""

    line_no: int
    value: float
    step: int
    reason: str  # "not a number", "negative", "above capacity"


class Conflict(NamedTuple):
    """Readings kept although they are above the capacity that applies to their series: it is
    another node's (or device's) number, or most readings are above it (capacity.py)."""

    readings: int  # how many are above it
    of: int  # of how many readings
    highest: float
    line_no: int  # the first one's line
    step: int


@dataclass(frozen=True)
class SeriesKey:
    source: str
    worker: str
    segment: int

    @property
    def run(self) -> tuple[str, str]:
        """The run this series is a segment of: its source's and worker's, where a torchrun
        `--log-dir` run's attempt files are one run (memlog/read/inputs.torchrun_attempt)."""
        attempt = torchrun_attempt(self.source)
        return (attempt[0] if attempt else self.source, self.worker)

    @property
    def place(self) -> tuple[int, int]:
        """Where the series falls in its run: attempt, then restart segment within the attempt's file."""
        attempt = torchrun_attempt(self.source)
        return (attempt[1] if attempt else 0, self.segment)


def worker_names(records: pl.DataFrame) -> dict[tuple[str, str], str]:
    """What each (source, worker) of the records is called in reports: the worker's own name
    (`rank5`) where that names it alone (one source, or each worker named in one source only:
    per-rank files whose lines name their rank), its rank and attempt for the attempts of one
    torchrun `--log-dir` run (`rank5 (attempt 1)`), else the fewest trailing parts of its source's
    path that no other source ends with, then the worker (`node2/train.log:main`), never the whole
    path: the evidence lines name the file."""
    if records.is_empty():
        return {}
    pairs = [(str(source), str(worker)) for source, worker in records.select("source", "worker").unique().iter_rows()]
    sources = sorted({source for source, _ in pairs})
    if len(sources) == 1 or len({worker for _, worker in pairs}) == len(pairs):
        return {pair: pair[1] for pair in pairs}
    attempts = {source: found for source in sources if (found := torchrun_attempt(source)) is not None}
    roots = {run.split("attempt_*", 1)[0] for run, _ in attempts.values()}
    if len(attempts) == len(sources) and len(roots) == 1:  # one torchrun --log-dir run: its ranks per attempt
        return {(source, worker): f"{worker} (attempt {attempts[source][1]})" for source, worker in pairs}
    short = _short_paths(sources)
    return {(source, worker): f"{short[source]}:{worker}" for source, worker in pairs}


def _short_paths(sources: list[str]) -> dict[str, str]:
    """Each source by the fewest trailing parts of its path that tell it from the others."""
    parts = {source: source.replace("\\", "/").split("/") for source in sources}
    names = {}
    for source, path in parts.items():
        names[source] = source
        for n in range(1, len(path) + 1):
            if all(other[-n:] != path[-n:] for s, other in parts.items() if s != source):
                names[source] = "/".join(path[-n:])
                break
    return names


@dataclass
class Series:
    """One worker's readings of one column in one segment. `steps` says at which step each point
    was read (for messages); `x` is where the statistics place it, in steps: the step itself, or,
    when several readings share a step, spread evenly up to the next logged step, in their order."""

    key: SeriesKey
    column: str
    rank: int | None
    steps: list[int]
    values: list[float]
    line_nos: list[int]
    corrupt: list[Corrupt] = field(default_factory=list)  # readings dropped as impossible (the first MAX_EVENTS_PER_KIND)
    corrupt_counts: dict[str, int] = field(default_factory=dict)  # all of them, per reason (empty: as `corrupt`)
    times: list[float | None] = field(default_factory=list)  # seconds (the log's clock), per kept point
    x: list[float] = field(default_factory=list)
    ordinal: bool = False  # `steps` number readings or log lines, not training steps (records.py)
    machine: str | None = None  # the node its lines name (IP, else host name)
    limit: Limit | None = None  # the capacity it is judged against (capacity.py)
    conflict: Conflict | None = None  # readings above `limit` that were kept
    readings: bool = False  # some steps hold several readings
    collided: bool = False  # a copy of a worker the log does not tell apart from another (records.py)
    x_origin: int = 0  # the step x counts from: 0, or the first step when steps pass 2**53
    # A step_envelopes view: the series it was made from (its key) and which view ("floor", "peak").
    envelope: tuple[SeriesKey, str] | None = None

    def __post_init__(self) -> None:
        if not self.x:
            # A float holds every integer only up to 2**53: larger steps are placed from the first
            # one, so neighbouring steps stay apart (x + x_origin is the step).
            self.x_origin = _x_origin(self.steps)
            self.x = [float(s - self.x_origin) for s in self.steps]

    @property
    def unit(self) -> str:
        """What one step of `steps` is, for messages."""
        return "reading" if self.ordinal else "step"

    @property
    def memory(self) -> MemoryColumn | None:
        return MEMORY_COLUMNS.get(self.column)

    def __len__(self) -> int:
        return len(self.steps)


def build_series(
    records: pl.DataFrame, column: str, limit_of: Callable[[str, str, str | None], Limit | None] | None = None, kind: str = "train"
) -> list[Series]:
    """Series of `column` per (source, worker, segment) for records of `kind`.

    `limit_of(source, worker, machine)` gives the capacity a memory series is judged against
    (capacity.Capacities.limit). Negative and non-finite memory readings are dropped into `corrupt`,
    and so are readings above the series' own capacity, unless most of its readings are: then, as
    for a capacity from elsewhere, they are kept and counted in `conflict`. Without a capacity the
    physical bounds apply (limits.py).
    Series longer than MAX_SERIES_POINTS are binned in polars (see _binned) before they reach Python.
    `records` may carry a `_seconds` column (timestamps already parsed, see with_seconds), and must
    be in the records table's order (records.build_records): each group's steps ascend row by row."""
    if records.is_empty() or column not in records.columns:
        return []
    keys = ["source", "worker", "segment"]
    records = with_seconds(records)
    # Only the columns a series needs are filtered (not a copy of the whole table per series).
    flags = [pl.col(c) if c in records.columns else pl.lit(False).alias(c) for c in ("ordinal", "collided")]
    machine = [pl.col(c) for c in ("ip", "node") if c in records.columns]
    rows = records.select(
        *keys,
        "kind",
        "rank",
        "step",
        pl.col("reading") if "reading" in records.columns else pl.lit(0, dtype=pl.Int64).alias("reading"),
        "line_no",
        "_seconds",
        pl.col("steps") if "steps" in records.columns else pl.lit(1, dtype=pl.Int64).alias("steps"),
        *flags,
        pl.col(column).alias("_value"),
        # A step's floor row (records.step_rows: `readings` 0) is binned apart from its peak rows.
        ((pl.col("readings") == 0) if "readings" in records.columns else pl.lit(False)).cast(pl.UInt8).alias("_floor"),
        (pl.coalesce(*machine).cast(pl.String) if machine else pl.lit(None, dtype=pl.String)).alias("_machine"),
    )
    rows = _only(rows, (pl.col("kind") == kind) & pl.col("_value").is_not_null()).drop("kind")
    if rows.is_empty():
        return []
    rows = rows.with_columns(_series=group_key(rows, keys))  # one cheap key for the groups below
    # Each group with the rank of its earliest step.
    groups = (
        rows.group_by("_series")
        .agg(
            pl.col(keys).first(),
            pl.col("rank").sort_by("step").first(),
            pl.col("ordinal").any(),
            pl.col("collided").any(),
            pl.col("_machine").drop_nulls().first(),
        )
        .sort(keys)
    )
    limits: dict[tuple, Limit] = {}
    if column in MEMORY_COLUMNS and limit_of is not None:
        for source, worker, segment, found in groups.select(*keys, "_machine").iter_rows():
            if (limit := limit_of(source, worker, found)) is not None:
                limits[(source, worker, segment)] = limit
    rows, conflicts = _judged_against(rows, groups, keys, limits)
    rows = rows.drop("_machine")
    corrupt: dict[tuple, list[Corrupt]] = {}
    corrupt_counts: dict[tuple, dict[str, int]] = {}
    is_impossible, why = impossible_reading(pl.col("_value"), column, pl.col("_limit")) or (None, None)
    if is_impossible is not None:
        bad = rows.filter(is_impossible).with_columns(_why=why)
        # Evidence, not an archive: a log whose every reading is impossible lists the first ones of
        # each series and counts the rest, so what is held does not grow with the file.
        # A condensed record counts as the steps it stands for (condense._plain bins impossible
        # readings alike), any other as one reading (a step's further lines have `steps` 0).
        readings = pl.max_horizontal(pl.col("steps").fill_null(1), 1).sum()
        for source, worker, segment, reason, n in bad.group_by(*keys, "_why").agg(readings).iter_rows():
            corrupt_counts.setdefault((source, worker, segment), {})[reason] = n
        listed = bad.sort([*keys, "step"]).group_by(keys, maintain_order=True).head(MAX_EVENTS_PER_KIND)
        for source, worker, segment, line_no, value, step, reason in listed.select(*keys, "line_no", "_value", "step", "_why").iter_rows():
            corrupt.setdefault((source, worker, segment), []).append(Corrupt(line_no, value, step, reason))
        rows = _only(rows, ~is_impossible)
    floors = bool(rows["_floor"].max())
    if floors:
        # A step's floor before its peak, whichever was printed first: every step's two readings in
        # the same places (step_envelopes reads a step's cycle by its readings' places).
        rows = rows.sort("_series", "step", pl.col("_floor"), descending=[False, False, True], maintain_order=True)
    positioned = _positioned(rows.drop("_limit"))
    if floors:
        # Floors and peaks binned each on their own, into the same bins of steps: a bin's median of
        # both would be neither, and the steps' cycle (step_envelopes) would be lost in a long series.
        step = pl.col("step")
        new_step = (step != step.shift(1)).fill_null(True)
        weight = pl.when(new_step).then(pl.max_horizontal(pl.col("steps"), 1)).otherwise(0)
        at = pl.when(new_step).then(weight.cum_sum() - weight).forward_fill()
        positioned = positioned.with_columns(_i=at.over("_series"), _n=weight.sum().over("_series"))
        positioned = positioned.with_columns(_series=group_key(positioned, [*keys, "_floor"]))
    kept = _binned(positioned.drop("_floor"), keys)
    points: dict[tuple, tuple[int, int, bool]] = {}  # group -> (offset, length, several readings at a step) in `kept`
    bounds = kept.group_by(keys, maintain_order=True).agg(pl.len().alias("n"), (pl.col("step").n_unique() < pl.len()).alias("several"))
    offset = 0
    for source, worker, segment, n, several in bounds.iter_rows():
        points[(source, worker, segment)] = (offset, n, several)
        offset += n
    steps, xs, values, line_nos, times = (kept[c].to_list() for c in ("step", "_x", "_value", "line_no", "_seconds"))
    out: list[Series] = []
    for source, worker, segment, rank, ordinal, collided, found in groups.select(*keys, "rank", "ordinal", "collided", "_machine").iter_rows():
        group = (source, worker, segment)
        start, n, several = points.get(group, (0, 0, False))
        end = start + n
        out.append(
            Series(
                SeriesKey(source, worker, segment),
                column,
                rank,
                steps[start:end],
                values[start:end],
                line_nos[start:end],
                corrupt=corrupt.get(group, []),
                corrupt_counts=corrupt_counts.get(group, {}),
                times=times[start:end],
                x=xs[start:end],
                x_origin=_x_origin(steps[start:end]),
                ordinal=bool(ordinal),
                readings=bool(several),
                collided=bool(collided),
                machine=found,
                limit=limits.get(group),
                conflict=conflicts.get(group),
            )
        )
    return out


def _judged_against(rows: pl.DataFrame, groups: pl.DataFrame, keys: list[str], limits: dict[tuple, Limit]) -> tuple[pl.DataFrame, dict[tuple, Conflict]]:
    """`rows` with `_limit`, the capacity above which a reading is dropped (null: the physical
    bound), and the groups whose readings above their capacity are kept (module docstring)."""
    if not limits:
        return rows.with_columns(_limit=pl.lit(None, dtype=pl.Float64)), {}
    table = pl.DataFrame(
        [(*group, limit.gib, limit.own) for group, limit in limits.items()],
        schema={**{k: groups.schema[k] for k in keys}, "_cap": pl.Float64, "_own": pl.Boolean},
        orient="row",
    )
    rows = rows.join(groups.select("_series", *keys).join(table, on=keys).drop(keys), on="_series", how="left", maintain_order="left")
    value = pl.col("_value")
    readable = value.is_finite() & (value >= 0)
    above = readable & (value > pl.col("_cap") * CAPACITY_SLACK)
    counts = (
        rows.lazy()
        .filter(pl.col("_cap").is_not_null())
        .group_by(keys)
        .agg(
            above.sum().alias("n"),
            readable.sum().alias("of"),
            value.filter(above).max().alias("highest"),
            pl.col("line_no").filter(above).first().alias("line"),
            pl.col("step").filter(above).first().alias("step"),
            pl.col("_own").first(),
        )
        .collect()
    )
    conflicts, kept = {}, []
    for source, worker, segment, n, of, highest, line, step, own in counts.iter_rows():
        if n and (not own or n > WRONG_CAPACITY_SHARE * of):
            conflicts[(source, worker, segment)] = Conflict(n, of, highest, line, step)
            kept.append((source, worker, segment))
    if kept:  # their capacity drops nothing
        table = pl.DataFrame(kept, schema={k: groups.schema[k] for k in keys}, orient="row").with_columns(_keep=pl.lit(True))
        rows = rows.join(groups.select("_series", *keys).join(table, on=keys).drop(keys), on="_series", how="left", maintain_order="left")
        rows = rows.with_columns(_own=pl.col("_own") & pl.col("_keep").is_null()).drop("_keep")
    rows = rows.with_columns(_limit=pl.when(pl.col("_own")).then(pl.col("_cap")).otherwise(None)).drop("_cap", "_own")
    return rows, conflicts


def _only(rows: pl.DataFrame, condition: pl.Expr) -> pl.DataFrame:
    """`rows.filter(condition)`, without a copy of millions of rows when all pass (a dense log's do)."""
    passes = rows.select(condition.alias("passes")).to_series()
    return rows if passes.all() else rows.filter(passes)


def _x_origin(steps: list[int]) -> int:
    """The step a series' x counts from (_positioned): its first, when its steps pass 2**53."""
    return steps[0] if steps and max(abs(steps[0]), abs(steps[-1])) > 2**53 else 0


def _positioned(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with `_x`, where each point sits in steps: its step, or, for the readings of a step that
    holds several, spread evenly from that step to the series' next logged step (the last step of a
    series by its usual interval), in reading order."""
    # A float holds every integer only up to 2**53: a series with larger steps is placed from its
    # first step (Series.x_origin), so neighbouring steps stay apart.
    origin = pl.when(pl.col("step").abs().max().over("_series") > 2**53).then(pl.col("step").min().over("_series")).otherwise(0)
    rows = rows.with_columns(_origin=origin)
    runs = _step_runs(rows)
    if runs is None:
        return _positioned_by_windows(rows)
    return _positioned_by_runs(rows, runs)


def _at_steps(rows: pl.DataFrame) -> pl.DataFrame:
    """_positioned where every step holds one reading: at its step."""
    return rows.with_columns(_x=(pl.col("step") - pl.col("_origin")).cast(pl.Float64))


def _x(within: pl.Expr, readings_at: pl.Expr, gap: pl.Expr) -> pl.Expr:
    """A step's `within`-th of its `readings_at` readings, spread over the `gap` steps to the next."""
    return (pl.col("step") - pl.col("_origin")).cast(pl.Float64) + within / readings_at * gap


def _gaps(logged: pl.DataFrame) -> pl.DataFrame:
    """Each logged (series, step) with `_gap`, the steps to the series' next one (at its last, the
    series' median gap)."""
    gap = pl.col("step").shift(-1).over("_series") - pl.col("step")
    return logged.with_columns(_gap=gap).with_columns(_gap=pl.col("_gap").fill_null(pl.col("_gap").median().over("_series")).fill_null(1))


def _step_runs(rows: pl.DataFrame) -> pl.Series | None:
    """Where each series' rows are consecutive (the records table is in line order: so in a source
    one worker wrote, such as a per-rank file or a DeepSpeed log of one rank, not in a teed log whose
    ranks alternate) and its steps ascend, the readings of a step are one run of rows: true on each
    run's first row. None otherwise."""
    if rows.is_empty():
        return None
    series, step = pl.col("_series"), pl.col("step")
    new_series = (series != series.shift()).fill_null(True)
    found = rows.select(
        series_runs=new_series.sum(),
        series=series.n_unique(),
        nulls=step.null_count(),
        ascending=((step >= step.shift()) | new_series).all(),
        runs=(new_series | (step != step.shift())).fill_null(True),
    )
    if found["series_runs"][0] != found["series"][0] or found["nulls"][0] or not found["ascending"][0]:
        return None
    return found["runs"]


def _positioned_by_runs(rows: pl.DataFrame, runs: pl.Series) -> pl.DataFrame:
    """_positioned where a step's readings are one run of rows: read off each row's run instead of
    windows over (series, step), whose groups, one per row, cost a 1.4 M-row DeepSpeed table
    ~60 ms per series."""
    if runs.all():  # one reading per step
        return _at_steps(rows)
    per_run = _gaps(rows.select("_series", "step", _first=pl.int_range(pl.len())).filter(runs))
    per_run = per_run.with_columns(_length=pl.col("_first").shift(-1, fill_value=rows.height) - pl.col("_first"))
    run = runs.cum_sum() - 1
    first, length, gap = (pl.lit(per_run[column].gather(run)) for column in ("_first", "_length", "_gap"))
    return rows.with_columns(_x=_x(pl.int_range(pl.len()) - first, length, gap))


def _positioned_by_windows(rows: pl.DataFrame) -> pl.DataFrame:
    """_positioned for rows in any order: by windows over (series, step)."""
    readings_at = pl.len().over("_series", "step")
    if not _several_at_a_step(rows, readings_at):
        return _at_steps(rows)
    logged = _gaps(rows.select("_series", "step").unique(maintain_order=True))
    rows = rows.join(logged, on=["_series", "step"], how="left", maintain_order="left")
    within = pl.int_range(pl.len()).over("_series", "step")
    return rows.with_columns(_x=_x(within, readings_at, pl.col("_gap"))).drop("_gap")


def _several_at_a_step(rows: pl.DataFrame, readings_at: pl.Expr) -> bool:
    """Whether some series holds several readings at one step. Where each series' steps ascend row by
    row (the records table's order), they show as a step equal to the one before it in the series,
    found without a window over (series, step), whose groups, one per row, cost a 630,000-row table
    ~100 MiB and 70 ms; otherwise the window says."""
    since = pl.col("step").diff().over("_series")
    ascending, repeated = rows.select(((since >= 0) | since.is_null()).all().alias("ascending"), (since == 0).any().alias("repeated")).row(0)
    return repeated if ascending else rows.select((readings_at > 1).any()).item()


# A reading this many times the series' typical distance from its local level (the median of the
# bin points around it) is kept as a point of its own when a series is binned: a one-step spike (a
# 70 GiB reading in a flat 30 GiB run) must not vanish into a bin's median. Gaussian noise puts a
# bin's farthest reading ~3.5 typical distances out.
EXTREME_SPREADS = 8.0
# At most this many such readings per series, the farthest first: the points stay bounded.
MAX_EXTREMES = MAX_SERIES_POINTS // 20
LOCAL_BINS = 5  # the bin points the local level is the median of (the bin's and two each side)
EXTREME_LEVEL_SHARE = 0.01  # ... and never closer than this share of the local level (times EXTREME_SPREADS)
_POINT = ("step", "_x", "line_no", "_seconds")


def _binned(kept: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Kept points sorted by group and position; a group longer than MAX_SERIES_POINTS binned down to it.

    A bin's point is the median of its values (the first non-finite value if the bin has one, so a
    NaN loss stays visible), at the bin's last step, with that step's line and time. The first and
    last points of a series are bins of their own: where a series starts and ends stays exact.
    A condensed series keeps its extremes: a bin's reading farthest from the local level stays a
    point of its own, at its own step, when it is EXTREME_SPREADS typical distances away (at most
    MAX_EXTREMES per series); the bin's point then takes the bin's last other step.
    The records are in line order, so each group's steps already ascend: only the points that come
    out are sorted, not the millions of rows of a dense log. `_series` is the group's key.
    A record condensed while reading (memlog/tables/condense.py) counts as the `steps` steps it stands
    for (a step's later readings as one): bins hold equal numbers of steps, not of records."""
    weight = pl.max_horizontal(pl.col("steps"), 1)
    # `_i` and `_n` given: each row's place in its series' steps and their number, shared by the
    # groups binned apart (a step's floors and peaks: build_series).
    placed = "_i" in kept.columns
    # polars types an aggregate as any Python scalar; of these integer columns it is an int or None.
    n = kept["_n"].max() if placed else kept.group_by("_series").agg(weight.sum().alias("w"))["w"].max()
    if (cast("int | None", n) or 0) <= MAX_SERIES_POINTS:
        return kept.drop("_i", "_n", strict=False).sort([*keys, "_x"])
    kept = kept.with_columns(_w=weight)
    steps = pl.col("_w")
    if not placed:
        kept = kept.with_columns(_i=(steps.cum_sum() - steps).over("_series"), _n=steps.sum().over("_series"))
    inner = MAX_SERIES_POINTS - 2
    last = pl.col("_n") - 1
    bin_of = (
        pl.when((pl.col("_n") <= MAX_SERIES_POINTS) | (pl.col("_i") == 0))
        .then(pl.col("_i"))
        .when(pl.col("_i") == last)
        .then(MAX_SERIES_POINTS - 1)
        .otherwise(1 + (pl.col("_i") - 1) * inner // (pl.col("_n") - 2))
    )
    value = pl.col("_value")
    median = _weighted_median(value, steps) if cast(int, kept["_w"].max()) > 1 else value.median()
    kept = kept.with_columns(_bin=bin_of)
    bins = kept.group_by("_series", "_bin", maintain_order=True).agg(
        pl.col(keys).first(),
        *(pl.col(c).last() for c in _POINT),
        pl.when(value.is_finite().all()).then(median).otherwise(value.filter(~value.is_finite()).first()).alias("_value"),
    )
    columns = ["_series", "_bin", *keys, *_POINT, "_value"]
    # The local level around each bin, and each finite reading's distance from it.
    finite_points = pl.when(value.is_finite()).then(value)
    local = bins.select("_series", "_bin", finite_points.rolling_median(LOCAL_BINS, center=True, min_samples=1).over("_series").alias("_local"))
    far = kept.join(local, on=["_series", "_bin"], how="left").with_columns(
        _dev=pl.when(value.is_finite() & pl.col("_local").is_finite()).then((value - pl.col("_local")).abs())
    )  # null: no distance
    far = far.with_columns(_typical=pl.col("_dev").median().over("_series")).filter(pl.col("_dev").is_not_null() & (pl.col("_dev") > 0))
    # Where most readings sit on their local level (no noise), the typical distance is ~0: a
    # reading is far only beyond EXTREME_LEVEL_SHARE of the local level too, or a ramp's every
    # step would be an extreme.
    far = far.filter(pl.col("_dev") > EXTREME_SPREADS * pl.max_horizontal(pl.col("_typical"), EXTREME_LEVEL_SHARE * pl.col("_local").abs()))
    if far.is_empty():
        return bins.select(columns).sort([*keys, "_x"])
    # One per bin (its farthest), the series' farthest MAX_EXTREMES of those.
    far = far.sort("_dev", descending=True).group_by("_series", "_bin", maintain_order=True).first()
    far = far.filter(pl.int_range(pl.len()).over("_series") < MAX_EXTREMES).select(
        "_series", "_bin", *keys, *_POINT, "_value", pl.col("step").alias("_far_step")
    )
    # A bin whose last step is its extreme: its point moves to the bin's last other step.
    others = kept.join(far.select("_series", "_bin", "_far_step"), on=["_series", "_bin"]).filter(pl.col("step") != pl.col("_far_step"))
    others = others.group_by("_series", "_bin").agg(*(pl.col(c).last().alias(f"{c}_other") for c in _POINT))
    bins = bins.join(far.select("_series", "_bin", "_far_step"), on=["_series", "_bin"], how="left").join(others, on=["_series", "_bin"], how="left")
    moved = (pl.col("_far_step") == pl.col("step")) & pl.col("step_other").is_not_null()
    bins = bins.with_columns(pl.when(moved).then(pl.col(f"{c}_other")).otherwise(pl.col(c)).alias(c) for c in _POINT)
    # An extreme that was a bin's only step is that bin's point already.
    alone = bins.filter(pl.col("_far_step").is_not_null() & pl.col("step_other").is_null()).select("_series", "_bin")
    far = far.join(alone, on=["_series", "_bin"], how="anti")
    return pl.concat([bins.select(columns), far.select(columns)]).sort([*keys, "_x"])


def _weighted_median(value: pl.Expr, weight: pl.Expr) -> pl.Expr:
    """The (lower) median of values that each count `weight` times: a condensed record's median
    stands for its steps. A stair step inside the bin then stays on one of its levels, as the
    median of the steps themselves does, rather than halfway (records of equal weight split a bin
    exactly in half at every step)."""
    cumulative = weight.sort_by(value).cum_sum() * 2
    return value.sort().filter(cumulative >= weight.sum()).first()


# Readings that cycle within each step (vLLM waking and sleeping, forward and backward prints) are
# judged by each step's lowest and highest reading: the cycle itself is no trend.
CYCLE_SHARE = 0.6  # the phases explain at least this share of the variance
CYCLE_STEPS = 0.75  # ... on at least this share of the steps, which hold the same number of readings


def step_envelopes(series: Series) -> list[Series] | None:
    """A series whose readings repeat the same cycle at every step, as two series with one point per
    step: the lowest reading of each step (`[floor]`) and the highest (`[peak]`); None when its
    readings do not cycle (one per step, or readings that move on from step to step, which are
    judged in their own order)."""
    if not series.readings or len(series) < 8:
        return None
    by_step: dict[int, list[int]] = {}
    for i, step in enumerate(series.steps):
        by_step.setdefault(step, []).append(i)
    counts = [len(v) for v in by_step.values()]
    usual = max(set(counts), key=counts.count)
    regular = [idx for idx in by_step.values() if len(idx) == usual]
    if usual < 2 or len(regular) < max(3, CYCLE_STEPS * len(by_step)):
        return None
    values = series.values
    phases = [[values[idx[p]] for idx in regular] for p in range(usual)]
    mean = sum(sum(p) for p in phases) / (usual * len(regular))
    total = sum((v - mean) ** 2 for p in phases for v in p)
    within = sum((v - sum(p) / len(p)) ** 2 for p in phases for v in p)
    if total <= 0 or 1 - within / total < CYCLE_SHARE:
        return None
    views = []
    for name, pick in (("floor", min), ("peak", max)):
        chosen = [pick(idx, key=values.__getitem__) for idx in by_step.values()]
        key = SeriesKey(series.key.source, f"{series.key.worker} [{name}]", series.key.segment)
        views.append(
            Series(
                key,
                series.column,
                series.rank,
                [series.steps[i] for i in chosen],
                [values[i] for i in chosen],
                [series.line_nos[i] for i in chosen],
                corrupt=series.corrupt if name == "floor" else [],
                corrupt_counts=series.corrupt_counts if name == "floor" else {},
                times=[series.times[i] for i in chosen] if series.times else [],
                ordinal=series.ordinal,
                collided=series.collided,
                machine=series.machine,
                limit=series.limit,
                conflict=series.conflict if name == "floor" else None,
                envelope=(series.key, name),
            )
        )
    return views
