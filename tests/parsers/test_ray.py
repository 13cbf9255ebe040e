"""Ray (parsers/ray.yaml): the Ray examples of log-formats.md §3.1, §3.2 and §3.7 unwrap as documented
(actor/pid/ip prefixes, the dedup suffix, driver and raylet logger prefixes), and a dedup summary keeps
the values of the worker it names."""

from __future__ import annotations

import polars as pl
import pytest

from memlog.parse.catalog import load_specs
from memlog.parse.chunks import parse_line
from memlog.parse.unwrap import Unwrapper

SPECS = list(load_specs().values())
UNWRAP = Unwrapper(p for spec in SPECS for p in spec.logger_prefixes)


def unwrapped(line: str) -> dict:
    return UNWRAP(pl.DataFrame({"line_no": [1], "text": [line]})).row(0, named=True)


@pytest.mark.parametrize(
    ("line", "actor", "pid", "ip", "text"),
    [
        (
            "\x1b[36m(WorkerDict pid=3048142, ip=10.0.0.2)\x1b[0m INFO 03-01 12:00:00 [gpu_worker.py:232] Available KV cache memory: 13.48 GiB",
            "WorkerDict",
            3048142,
            "10.0.0.2",
            "INFO 03-01 12:00:00 [gpu_worker.py:232] Available KV cache memory: 13.48 GiB",
        ),
        ("\x1b[36m(TaskRunner pid=247607)\x1b[0m step:1 - actor/pg_loss:-0.0036 - …", "TaskRunner", 247607, None, "step:1 - actor/pg_loss:-0.0036 - …"),
        ("(task_name pid=12345, ip=10.0.0.2) msg", "task_name", 12345, "10.0.0.2", "msg"),
        ("(pid=12345) msg", None, 12345, None, "msg"),
        # Old Ray (<= ~2.3) adds DIM before the colour; syslog captures show the escapes as `#033[`.
        ("\x1b[2m\x1b[36m(pid=22967)\x1b[0m Running step 0:   7%", None, 22967, None, "Running step 0:   7%"),
        ("#033[2m#033[33m(raylet)#033[0m [2024-05-02 03:04:05,678 E 2211 2211] (raylet) node_manager.cc:3084: 2 Workers", "raylet", None, None, "2 Workers"),
        ("(raylet, ip=10.0.0.5) [2024-05-02 03:04:05,678 E 2211 2211] (raylet) node_manager.cc:3084: 2 Workers", "raylet", None, "10.0.0.5", "2 Workers"),
        (
            "\x1b[36m(autoscaler +1m2s)\x1b[0m Tip: use `ray status` to view detailed cluster status.",
            "autoscaler +1m2s",
            None,
            None,
            "Tip: use `ray status` to view detailed cluster status.",
        ),
        ("\x1b[33m(raylet)\x1b[0m ", "raylet", None, None, ""),
    ],
)
def test_ray_prefixes_unwrap_into_actor_pid_ip(line, actor, pid, ip, text):
    row = unwrapped(line)
    assert (row["actor"], row["pid"], row["ip"], row["text"]) == (actor, pid, ip, text)


@pytest.mark.parametrize(
    ("line", "count", "text"),
    [
        ("\x1b[36m(WorkerDict pid=3048150, ip=10.0.0.3)\x1b[0m some repeated message\x1b[32m [repeated 7x across cluster]\x1b[0m", 7, "some repeated message"),
        # The first summary of a driver carries Ray's notice, inside the same colour.
        (
            "\x1b[36m(WorkerDict pid=3327)\x1b[0m Loading model weights took 15.6200 GB\x1b[32m [repeated 7x across cluster] "
            "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
            "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication for more "
            "options.)\x1b[0m",
            7,
            "Loading model weights took 15.6200 GB",
        ),
        # Ray 2.10's notice points at another page.
        (
            "(pid=77) x [repeated 2x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
            "deduplication, or see https://docs.ray.io/en/master/ray-observability/ray-logging.html#log-deduplication for "
            "more options.)",
            2,
            "x",
        ),
    ],
)
def test_dedup_suffix_is_counted_and_removed(line, count, text):
    row = unwrapped(line)
    assert (row["repeated"], row["text"]) == (count, text)


def test_driver_and_raylet_logger_prefixes_give_the_time():
    row = unwrapped("2025-08-31 15:45:59,633\tINFO worker.py:1927 -- Started a local Ray instance.")
    assert (row["ts"], row["text"]) == ("2025-08-31 15:45:59,633", "Started a local Ray instance.")
    row = unwrapped("(raylet) [2025-08-31 16:27:59,635 E 6656 6656] (raylet) node_manager.cc:3041: 1 Workers (tasks / actors) killed")
    assert (row["actor"], row["ts"]) == ("raylet", "2025-08-31 16:27:59,635")
    assert row["text"].startswith("1 Workers")


def test_a_dedup_summary_keeps_the_values_of_the_worker_it_names():
    records, _ = parse_line(
        SPECS,
        "\x1b[36m(WorkerDict pid=4125, ip=10.0.0.3)\x1b[0m DEBUG:2025-06-03 07:45:58,175:dp actor "
        "After update_policy, memory allocated (GB): 21.51, memory reserved (GB): 31.27, device memory "
        "used/total (GB): 40.17/79.11\x1b[32m [repeated 15x across cluster]\x1b[0m",
    )
    (row,) = records
    assert (row["pid"], row["ip"], row["repeated"], row["mem_reserved_gib"], row["ts"]) == (4125, "10.0.0.3", 15, 31.27, "2025-06-03 07:45:58,175")
