"""Run a function over a stream of work items on a few threads, yielding results in input order.

polars releases the GIL while it works, so threads put both cores on the per-chunk regex work
without the cost of pickling frames between processes. At most `ahead` items are in flight, so
memory stays a few chunks whatever the input size. Pure-Python work that holds the GIL (the shapes
of many series) goes to processes instead (process_map).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
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


def warm_processes(preload: tuple[str, ...] = ()) -> None:
    """Start the server process_map forks its workers from, without waiting for it: it imports
    `preload` while the caller goes on (what a pool costs to start, 0.2-0.6 s, overlaps other work)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
        forkserver.ensure_running()


def process_map(fn: Callable[[T], R], items: list[T], workers: int, preload: tuple[str, ...] = ()) -> list[R]:
    """`list(map(fn, items))` on `workers` processes. They are forked from a fresh server process
    (forkserver; spawn where there is none), never from this one: polars' threads and any state of
    the caller stay here. `preload`: modules the server imports once for every worker."""
    context: multiprocessing.context.BaseContext
    if "forkserver" in multiprocessing.get_all_start_methods():
        server = multiprocessing.get_context("forkserver")
        server.set_forkserver_preload(list(preload))
        context = server
    else:
        context = multiprocessing.get_context("spawn")
    chunk = max(1, len(items) // (4 * workers))  # a few chunks per worker: balanced, few round trips
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        return list(pool.map(fn, items, chunksize=chunk))
