"""`memlog scan --ray [ADDRESS]`: one Ray task per run, rows streamed back as the tasks finish.

Ray is an optional extra (`pip install 'memlog[ray]'`). Each task runs memlog.scan.fleet.judge, the
function the local scan runs, so the rows are the same. The workers import memlog themselves:
install the same memlog on the cluster (a local Ray started here runs this very checkout), and give
paths every node can read (a shared file system, or s3:// / gs:// URLs with fsspec installed there).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from memlog.base.errors import MemlogError
from memlog.scan.run import ScanOptions, judge, judge_failed, limit_threads
from memlog.scan.runs import Run

# Tasks in flight per CPU of the cluster: enough to keep every CPU busy while rows stream back,
# few enough that the driver and the object store hold a bounded amount whatever the fleet size.
TASKS_PER_CPU = 2
# What `--ray` may be followed by, when it is an address rather than the first path:
# auto, local, ray://host:port, host:port.
ADDRESS = re.compile(r"^(?:auto|local|ray://\S+|[\w.-]+:\d+)$")
# ray.init retries an address where nothing listens for minutes; a head that is up accepts a
# connection at once, so memlog tries one itself first, bounded by this.
CONNECT_TIMEOUT_S = 10.0
_HOST_PORT = re.compile(r"^(?:ray://)?(?P<host>\[[^\]]+\]|[^:/\[\]]+):(?P<port>\d+)(?:/.*)?$")
# Where a running Ray head leaves its address for `auto` (Ray's own bootstrap file).
RAY_CURRENT_CLUSTER = "/tmp/ray/ray_current_cluster"


def is_address(text: str) -> bool:
    return bool(ADDRESS.match(text))


def _import_ray():
    try:
        import ray
    except ImportError:
        raise MemlogError("--ray needs Ray: pip install 'memlog[ray]'") from None
    return ray


def _task(run: Run, options: ScanOptions) -> dict[str, Any]:
    # One engine thread per task, as in a local worker (polars' own pool is set only if this
    # worker has not loaded polars yet; MEMLOG_THREADS is read at every run).
    limit_threads()
    return judge(run, options)


def _probe() -> str:
    from memlog import __version__

    return __version__


def _head_of(address: str) -> str | None:
    """The host:port `address` names, or that `auto` finds (RAY_ADDRESS, then the file a running
    head leaves); None where Ray is started here or nothing names one (ray.init says so at once)."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
        if not address:
            try:
                with open(RAY_CURRENT_CLUSTER, encoding="utf-8") as current:
                    address = current.read(200).strip()
            except (OSError, UnicodeDecodeError):
                return None
    return address if _HOST_PORT.match(address) else None


def reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """MemlogError in one line unless something accepts a TCP connection at the Ray head `address`
    names, within `timeout`."""
    import socket

    head = _head_of(address)
    if head is None:
        return
    match = _HOST_PORT.match(head)
    if match is None:
        return  # not host:port: Ray itself says what is wrong with it
    host, port = match["host"].strip("[]"), int(match["port"])
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except (OSError, ValueError, OverflowError) as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
        raise MemlogError(f"cannot connect to Ray at {address}: nothing accepts a connection at {host}:{port} ({why}, {timeout:g} s at most)") from None


def _connect(ray, address: str) -> None:
    if ray.is_initialized():
        return
    reachable(address)
    import memlog

    kwargs: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    if address:
        kwargs["address"] = address
    else:
        # A local Ray started here runs this checkout of memlog (whatever is installed elsewhere).
        here = os.path.dirname(os.path.dirname(os.path.abspath(memlog.__file__)))
        kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}}
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MemlogError(f"cannot connect to Ray{' at ' + address if address else ''}: {first}") from None


def judge_on_ray(runs: list[Run], options: ScanOptions, address: str) -> Iterator[dict[str, Any]]:
    """Rows as the Ray tasks finish. The driver checks first that the workers run this memlog."""
    ray = _import_ray()
    _connect(ray, address)
    from memlog import __version__

    try:
        theirs = ray.get(ray.remote(num_cpus=1)(_probe).remote())
    except Exception as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise MemlogError(f"the Ray workers cannot run memlog ({first}): install memlog {__version__} on the cluster") from None
    if theirs != __version__:
        raise MemlogError(f"the Ray workers run memlog {theirs}, this is memlog {__version__}: install the same version on the cluster")
    task = ray.remote(num_cpus=1, max_retries=1)(_task)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    options_ref = ray.put(options)
    queue = iter(runs)
    running: dict[Any, Run] = {}
    for run in queue:
        running[task.remote(run, options_ref)] = run
        if len(running) >= TASKS_PER_CPU * cpus:
            break
    while running:
        done, _ = ray.wait(list(running), num_returns=1)
        for ref in done:
            yield _result(ray, ref, running.pop(ref))
            following = next(queue, None)
            if following is not None:
                running[task.remote(following, options_ref)] = following


def _result(ray, ref, run: Run) -> dict[str, Any]:
    """The task's row; a task that died (its worker killed, e.g. by Ray's memory monitor) is a row
    with the reason, as an unreadable run is."""
    try:
        return ray.get(ref)
    except Exception as exc:
        text = str(exc).strip()
        row = judge_failed(run, f"the Ray task failed: {type(exc).__name__}: {text.splitlines()[-1] if text else ''}")
        return row


def ray_option_args(args: list[str]) -> list[str]:
    """`--ray` takes an optional ADDRESS (click options cannot): a `--ray` not followed by an
    address (`auto`, `ray://head:10001`, `head:6379`) becomes `--ray=`, so that what follows it
    stays a path."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        if arg == "--ray" and not (i + 1 < len(args) and is_address(args[i + 1])):
            out.append("--ray=")
        else:
            out.append(arg)
    return out
