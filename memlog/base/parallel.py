"""Run a function over a stream of work items on a few threads, yielding results in input order.

polars releases the GIL while it works, so threads put both cores on the per-chunk regex work
without the cost of pickling frames between processes. At most `ahead` items are in flight, so
memory stays a few chunks whatever the input size.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


MAX_WORKERS = 8  # each worker holds a chunk in flight; measured only on 2 cores so far


def default_workers() -> int:
    """One thread per usable core, up to MAX_WORKERS; MEMLOG_THREADS overrides (1 runs everything
    on the calling thread)."""
    wanted = os.environ.get("MEMLOG_THREADS", "")
    if wanted.isdigit() and int(wanted) > 0:
        return min(int(wanted), MAX_WORKERS)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> Iterator[R]:
    """`map(fn, items)` on `workers` threads; an exception in `fn` is raised where its result is due."""
    workers = workers or default_workers()
    if workers == 1:
        yield from map(fn, items)
        return
    ahead = workers + 1  # one more than the threads, so none idles while the consumer works
    with ThreadPoolExecutor(workers, thread_name_prefix="memlog") as pool:
        pending: deque[Future[R]] = deque()
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:  # the consumer stopped early or failed: drop queued work
                future.cancel()
