"""A series' shape, computed once (shape_of), and the shapes of many series at once: on worker
processes when asked and they are many, else on this process's threads."""

from __future__ import annotations

from collections.abc import Sequence

from memlog.base.columns import Window
from memlog.base.parallel import default_workers, ordered_map, process_map, warm_processes
from memlog.judge.trend import Shape, _shape
from memlog.tables.series import Series


def shape_of(series: Series) -> Shape:
    """The series' shape, computed once per Series object (every memory rule asks for it)."""
    shape = series.__dict__.get("_shape")
    if shape is None:
        shape = series.__dict__["_shape"] = _shape(*_shape_args(series))
    return shape


def _shape_args(series: Series) -> tuple:
    running_max = bool(series.memory and series.memory.window is Window.RUNNING_MAX)
    return tuple(series.x), tuple(series.values), running_max, tuple(series.steps)


def _shape_of_args(args: tuple) -> Shape:
    return _shape(*args)


# Shapes are pure Python (the GIL: threads do not share it out), so many series are shaped on
# worker processes, from this many points on: ~17 us a point on one core here, and starting the pool
# (a forkserver importing this module and polars) costs 0.2-0.6 s, so below ~50,000 points two
# cores cannot win it back (benchmarks/README.md, issue 33 item 4).
PROCESS_MIN_POINTS = 96_000


def warm_for_shapes(points: int) -> None:
    """Start the worker processes' server early (parallel.warm_processes) when shapes_of will likely
    use it: `points`, the records the series will be built from, are enough and there are cores."""
    if points >= PROCESS_MIN_POINTS and default_workers() > 1:
        warm_processes((__name__,))


def shapes_of(series: Sequence[Series], processes: bool = True) -> None:
    """Every series' shape computed (shape_of), on worker processes when there are several cores
    (parallel.default_workers; MEMLOG_THREADS=1 keeps everything in this process), several series
    and at least PROCESS_MIN_POINTS points to shape. The shapes are the very ones shape_of gives:
    the same code on the same floats."""
    todo = [s for s in series if "_shape" not in s.__dict__]
    workers = min(default_workers(), len(todo))
    if processes and workers > 1 and sum(len(s) for s in todo) >= PROCESS_MIN_POINTS:
        shapes = process_map(_shape_of_args, [_shape_args(s) for s in todo], workers, preload=(__name__,))
        for s, shape in zip(todo, shapes):
            s.__dict__["_shape"] = shape
        return
    for _ in ordered_map(shape_of, todo):  # threads: the pairwise slopes of long series run in polars
        pass
