"""The fixtures modelled on issue threads (sample_logs/threads/, see its README.md): what they taught
the reader and the rules."""

from __future__ import annotations

import polars as pl

from memlog.engine.api import analyze, parse_sources
from memlog.parse.catalog import load_specs
from tests.samples import SAMPLE_ROOT

THREADS = SAMPLE_ROOT / "threads"
RAY_UNEXPECTED_EXIT = (
    "\x1b[33m(raylet)\x1b[0m A worker died or was killed while executing a task by an unexpected system error. "
    "To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff01 Worker ID: 0a1b2c "
    "Node ID: 3d4e5f Worker IP address: 10.3.2.1 Worker port: 10100 Worker PID: 5150 Worker exit type: "
    "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
    "There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory "
    "usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
    "unexpected errors.\n"
)
RAY_MONITOR_KILL = RAY_UNEXPECTED_EXIT.replace(
    RAY_UNEXPECTED_EXIT[RAY_UNEXPECTED_EXIT.index("Worker unexpectedly") :], "Task was killed due to the node running low on memory.\n"
)
RAYLET_SUMMARY = (
    "(raylet) [2025-05-21 03:44:10,552 E 6121 6121] (raylet) node_manager.cc:3069: 2 Workers (tasks / actors) killed "
    "due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 7f31c0, IP: 10.8.14.22) over "
    "the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.8.14.22`\n"
)


def rules_of(tmp_path, text: str) -> tuple[str, dict]:
    log = tmp_path / "paste.log"
    log.write_text(text)
    report = analyze([str(log)])
    return report.verdict, {f.rule: f for f in report.findings}


def test_a_ray_worker_that_vanished_is_a_crash_with_memory_likely_not_a_ray_memory_kill(tmp_path):
    # Ray lists the OOM killer among the *possible* causes of any unexpected exit: memory is likely, not certain,
    # and Ray's memory monitor did not kill it (OpenRLHF #970/#1139).
    verdict, found = rules_of(tmp_path, RAY_UNEXPECTED_EXIT)
    assert verdict == "crash" and "oom" not in found
    assert found["crash"].evidence["observed"]["memory_involved"] == "likely"
    assert "Ray killed" not in found["crash"].message


def test_a_ray_memory_monitor_kill_is_still_an_oom(tmp_path):
    verdict, found = rules_of(tmp_path, RAY_MONITOR_KILL)
    assert verdict == "oom" and "crash" not in found


def test_the_raylet_summary_alone_explains_the_crash(tmp_path):
    # A paste whose memory-monitor message was cut keeps the raylet's count: that is an OOM, said as such.
    verdict, found = rules_of(tmp_path, RAYLET_SUMMARY)
    assert verdict == "oom"
    assert "killed 2 worker(s) on node 10.8.14.22 for memory pressure" in found["oom"].message


def test_the_raylet_summary_does_not_count_twice_beside_the_kill_it_summarises(tmp_path):
    _, found = rules_of(tmp_path, RAYLET_SUMMARY + RAY_MONITOR_KILL)
    assert found["oom"].evidence["observed"]["events"] == 1


def test_srun_nodes_printing_the_same_local_rank_stay_apart():
    report = analyze([str(THREADS / "torchtitan_1232_pp16_srun_two_nodes.log")])
    assert report.coverage["records"] == 60  # 30 steps x 2 nodes, none merged
    assert report.verdict == "pp-sentinel-loss"


def test_hard_wrapped_verl_step_lines_keep_every_key():
    """Step lines a log viewer broke at 512 characters are joined back (memlog/read/hardwrap.py)."""
    tables, _ = parse_sources([str(THREADS / "verl_1208_hardwrapped_step_lines.log")], list(load_specs().values()))
    training = tables.records.filter(pl.col("step") >= 1)
    assert training.height == 24
    assert training["mem_max_allocated_gib"].null_count() == 0  # before the wrap: read
    assert training["host_mem_used_gib"].null_count() == 0
    assert training["mem_max_reserved_gib"].null_count() == 0


def test_a_terminal_wrapped_ray_kill_gives_the_node_numbers():
    """Ray's memory-monitor message wrapped at 160 columns (shorter lines padded with blanks)."""
    report = analyze([str(THREADS / "easyr1_50_raykill_top10_terminal_wrapped.log")])
    oom = next(f for f in report.findings if f.rule == "oom")
    assert "959.41 GiB / 1007.60 GiB" in oom.message
