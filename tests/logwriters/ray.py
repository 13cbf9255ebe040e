"""Ray's driver output (parsers/ray.yaml): worker and raylet prefixes, the deduplication suffix, the
driver's own logger, and the memory monitor's kill reports (python/ray/_private/worker.py,
ray_logging, src/ray/raylet)."""

from __future__ import annotations

# colorama codes the driver uses: actor prefixes CYAN, raylet YELLOW, dedup suffix GREEN, RESET_ALL.
CYAN, YELLOW, GREEN, RESET = "\x1b[36m", "\x1b[33m", "\x1b[32m", "\x1b[0m"
DEDUP_NOTICE = (
    " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
    "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
    "for more options.)"
)
DASHBOARD = "\x1b[1m\x1b[32m127.0.0.1:8265 \x1b[39m\x1b[22m"  # bold green address, then resets


def actor_prefix(pid: int, actor: str | None = None, ip: str | None = None) -> str:
    """A worker line's prefix: ``(WorkerDict pid=4121, ip=10.0.0.3) `` in cyan; ``ip`` only for another
    node than the driver's, no name for a nameless task."""
    name = f"{actor} " if actor else ""
    node = f", ip={ip}" if ip else ""
    return f"{CYAN}({name}pid={pid}{node}){RESET} "


def raylet_prefix(ip: str | None = None) -> str:
    """A raylet line's prefix: ``(raylet, ip=10.0.0.3) `` in yellow."""
    node = f", ip={ip}" if ip else ""
    return f"{YELLOW}(raylet{node}){RESET} "


def autoscaler_prefix(seconds: int) -> str:
    return f"{CYAN}(autoscaler +{seconds}s){RESET} "


def repeated(count: int, notice: bool = False) -> str:
    """The deduplicator's suffix on the line it prints for `count` folded copies; the first one of a
    run carries Ray's notice."""
    return f"{GREEN} [repeated {count}x across cluster]{DEDUP_NOTICE if notice else ''}{RESET}"


def driver_log(ts: str, where: str, msg: str, level: str = "INFO") -> str:
    """The driver's own logger: ``2025-06-03 07:41:05,120\\tINFO worker.py:1843 -- msg``."""
    return f"{ts}\t{level} {where} -- {msg}"


def started_local() -> str:
    return f"Started a local Ray instance. View the dashboard at {DASHBOARD}"


def connecting(address: str) -> str:
    return f"Connecting to existing Ray cluster at address: {address}..."


def connected() -> str:
    return f"Connected to Ray cluster. View the dashboard at {DASHBOARD}"


def task_ref(name: str, *, pid: int, ip: str, actor_id: str, repr_: str | None = None) -> str:
    """How an error names a task: ``ray::Runner.run() (pid=2911, ip=10.0.0.2, actor_id=..., repr=<...>)``."""
    rep = f", repr=<{repr_}>" if repr_ is not None else ""
    return f"ray::{name}() (pid={pid}, ip={ip}, actor_id={actor_id}{rep})"


def task_error(exc: str, ref: str) -> str:
    """The line that follows a remote traceback: ``ray.exceptions.RayTaskError(OutOfMemoryError): ray::...``."""
    return f"ray.exceptions.RayTaskError({exc}): {ref}"


OOM_ERROR = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."


# --------------------------------------------------------------------------
# The memory monitor's kill, three ways
# --------------------------------------------------------------------------

OOM_DOCS = (
    "Refer to the documentation on how to address the out of memory issue: "
    "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more "
    "memory on this node or reducing task parallelism by requesting more CPUs per task. Set max_restarts and "
    "max_task_retries to enable retry when the task crashes due to OOM. To adjust the kill threshold, set the "
    "environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker killing, set the "
    "environment variable `RAY_memory_monitor_refresh_ms` to zero."
)
RAYLET_OOM_DOCS = (
    "Refer to the documentation on how to address the out of memory issue: "
    "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more "
    "memory on this node or reducing task parallelism by requesting more CPUs per task. To adjust the kill "
    "threshold, set the environment variable `RAY_memory_usage_threshold` when starting Ray. To disable worker "
    "killing, set the environment variable `RAY_memory_monitor_refresh_ms` to zero."
)


def used_fraction(used_gib: float, total_gib: float) -> str:
    """The node's used fraction as the kill message prints it (``%g`` with 6 digits)."""
    return f"{used_gib / total_gib:.6g}"


def memory_monitor_kill(
    *,
    node_ip: str,
    node_id: str,
    lease_id: str,
    worker_name: str,
    pid: int,
    worker_gib: float,
    used_gib: float,
    total_gib: float,
    threshold: float,
    worker_id: str,
) -> str:
    """Ray ~2.4x lease wording, up to ``Top 10 memory users:`` (the table follows: ``top_memory_users``)."""
    return (
        f"Memory on the node (IP: {node_ip}, ID: {node_id}) where the lease (lease ID: {lease_id}, "
        f"name={worker_name}, pid={pid}, memory used={worker_gib:.2f}GB) was running was "
        f"{used_gib:.2f}GB / {total_gib:.2f}GB ({used_fraction(used_gib, total_gib)}), which exceeds the memory "
        f"usage threshold of {threshold:g}. Ray killed this worker (ID: {worker_id}) because it was the most "
        f"recently scheduled task; to see more information about memory usage on this node, use `ray logs "
        f"raylet.out -ip {node_ip}`. To see the logs of the worker, use `ray logs worker-{worker_id}*out "
        f"-ip {node_ip}. Top 10 memory users:"
    )


def top_memory_users(rows: list[tuple[int, float, str]]) -> list[str]:
    """The tab-separated table after the kill message: (pid, GB, command) rows."""
    return ["PID\tMEM(GB)\tCOMMAND", *(f"{pid}\t{gb:.2f}\t{cmd}" for pid, gb, cmd in rows)]


def worker_died(*, task_id: str, worker_id: str, node_id: str, ip: str, port: int, pid: int, exit_type: str, exit_detail: str) -> str:
    """The error-channel message when a worker running a task dies."""
    return (
        f"A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
        f"problem, check the logs for the dead worker. RayTask ID: {task_id} Worker ID: {worker_id} "
        f"Node ID: {node_id} Worker IP address: {ip} Worker port: {port} Worker PID: {pid} "
        f"Worker exit type: {exit_type} Worker exit detail: {exit_detail}"
    )


def raylet_log_head(ts: str, pid: int, where: str, level: str = "E") -> str:
    """The raylet's C++ log head, forwarded from raylet.err: ``[ts E 3121 3121] (raylet) file.cc:581: ``."""
    return f"[{ts} {level} {pid} {pid}] (raylet) {where}: "


def oom_killer_summary(node_id: str, node_ip: str, killed: int = 1, crashed: int = 0) -> str:
    """node_manager.cc's periodic summary of workers the memory monitor killed."""
    return (
        f"{killed} Workers (tasks / actors) killed due to memory pressure (OOM), {crashed} Workers crashed due to "
        f"other reasons at node (ID: {node_id}, IP: {node_ip}) over the last time period. To see more "
        f"information about the Workers killed on this node, use `ray logs raylet.out -ip {node_ip}`"
    )
