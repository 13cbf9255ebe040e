"""A launcher's console beside the per-rank files it tees is read once (memlog/tables/streams.py):
torchrun `--tee 3 --log-dir logs` writes each rank's lines to `logs/<run>/attempt_0/<rank>/
stdout.log` and the same lines behind `[rank<r>]:` to the console the user keeps beside them."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memlog.cli import app
from tests.logwriters import torchtitan as titan
from tests.logwriters.pytorch import H100_GIB

runner = CliRunner()


def _job(root, ranks: int = 4, console: bool = True, leak_rank: int | None = 2):
    """A torchrun job: per-rank stdout.log files (no prefix: the rank is the folder) and, beside
    them, the console with every rank's lines interleaved behind `[rankN]:`."""
    per_rank: dict[int, list[str]] = {r: [] for r in range(ranks)}
    console_lines = ["W1129 08:00:00.118000 4021 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1"]
    for step in range(1, 121):
        ts = f"2025-06-01 08:{step // 60:02d}:{step % 60:02d},{(step * 37) % 1000:03d}"
        for r in range(ranks):
            gib = 30.0 + 0.5 * r + (0.05 * step if r == leak_rank and step > 10 else 0.0) + 0.01 * ((step * 7 + r) % 5)
            msg = titan.step_line_2025_03(step=step, loss=9.0 - 0.01 * step, mem_gib=gib, mem_pct=100 * gib / H100_GIB, tps=7421, tflops=341.26, mfu=34.5)
            per_rank[r].append(titan.log_line(msg, ts=ts))
            console_lines.append(titan.log_line(msg, ts=ts, rank=r))
    run = root / "logs" / "none_k2x9w1qa" / "attempt_0"
    for r, lines in per_rank.items():
        (run / str(r)).mkdir(parents=True)
        (run / str(r) / "stdout.log").write_text("\n".join(lines) + "\n")
    if console:
        (root / "console.log").write_text("\n".join(console_lines) + "\n")
    return root


def _report(path) -> dict:
    result = runner.invoke(app, ["analyze", str(path), "-o", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_a_console_beside_the_per_rank_files_is_read_once(tmp_path):
    with_console = _report(_job(tmp_path / "a"))
    without = _report(_job(tmp_path / "b", console=False))
    cov = with_console["coverage"]
    assert list(cov["repeated"]) == [str(tmp_path / "a" / "console.log")] and len(cov["repeated"][str(tmp_path / "a" / "console.log")]) == 4
    assert len(cov["workers"]) == len(without["coverage"]["workers"]) == 4  # not a fifth worker, nor eight
    assert cov["records"] == without["coverage"]["records"]
    assert with_console["verdict"] == without["verdict"] == "leak"
    (leak,) = [f for f in with_console["findings"] if f["rule"] == "memory-leak"]
    assert leak["evidence"]["ranks"] == [2]
    text = runner.invoke(app, ["analyze", str(tmp_path / "a"), "--fail-on", "never"]).stdout
    assert "console.log repeats the steps of 4 other files" in " ".join(text.split())


def test_the_console_alone_is_read_as_before(tmp_path):
    _job(tmp_path, console=True)
    report = _report(tmp_path / "console.log")
    assert "repeated" not in report["coverage"] and report["coverage"]["ranks"] == [0, 1, 2, 3]


def test_two_nodes_printing_the_same_flat_readings_are_not_repeats(tmp_path):
    # Local ranks 0-3 on two nodes, flat, the same readings and loss at the same steps: the
    # timestamps differ (each node's logger), so neither repeats the other.
    for node, ms in (("node0", 118), ("node1", 377)):
        lines = []
        for step in range(1, 61):
            for r in range(4):
                msg = titan.step_line_2025_03(step=step, loss=5.0, mem_gib=30.0, mem_pct=37.92, tps=7421, tflops=341.26, mfu=34.5)
                lines.append(titan.log_line(msg, ts=f"2025-06-01 08:{step // 60:02d}:{step % 60:02d},{ms:03d}", rank=r))
        (tmp_path / f"{node}.log").write_text("\n".join(lines) + "\n")
    report = _report(tmp_path)
    assert "repeated" not in report["coverage"] and report["coverage"]["records"] == 2 * 60 * 4


def test_rays_job_driver_log_beside_the_worker_files_is_read_once(tmp_path):
    """A Ray session's logs/: the TaskRunner's own worker-<id>-<job>-<pid>.out, and the Ray Jobs
    driver log relaying the same lines behind `(TaskRunner pid=40120)`: one actor, not two."""
    from tests.logwriters import verl

    logs = tmp_path / "session_2025-06-03_07-41-01_120333_5001" / "logs"
    logs.mkdir(parents=True)
    worker, driver = [":actor_name:TaskRunner", ":job_id:02000000"], ["2025-06-03 07:41:05,120\tINFO worker.py:1616 -- Connecting to existing Ray cluster"]
    for step in range(1, 41):
        metrics = {
            "actor/pg_loss": round(0.31 - 0.002 * step, 4),
            "perf/max_memory_allocated_gb": round(41.2 + 0.4 * step, 3),
            "perf/max_memory_reserved_gb": round(52.0 + 0.4 * step, 3),
        }
        line = verl.step_line(step, metrics)
        worker.append(line)
        driver.append(f"(TaskRunner pid=40120) {line}")
    (logs / "worker-5f1c09e2a7d34b11-02000000-40120.out").write_text("\n".join(worker) + "\n")
    (logs / "job-driver-raysubmit_XYZ123abc.log").write_text("\n".join(driver) + "\n")
    report = _report(logs)
    assert list(report["coverage"]["repeated"]) == [str(logs / "job-driver-raysubmit_XYZ123abc.log")]
    assert len(report["coverage"]["workers"]) == 1 and report["coverage"]["records"] == 40


def test_rays_own_logs_give_events_but_never_steps(tmp_path):
    """raylet.out beside the worker files: the node's used fraction it prints every few seconds is
    Ray's number, never a training step's reading (it was guessed as host GiB and merged into the
    steps); the memory monitor's kill it logs is still an event."""
    from tests.logwriters import ray, verl

    logs = tmp_path / "session_2025-06-03_07-41-01_120333_5001" / "logs"
    logs.mkdir(parents=True)
    worker = [":actor_name:TaskRunner"]
    for step in range(1, 41):
        worker.append(
            verl.step_line(step, {"actor/pg_loss": 0.3, "perf/max_memory_allocated_gb": 41.2, "perf/max_memory_reserved_gb": 52.0 + 0.01 * (step % 3)})
        )
    (logs / "worker-5f1c09e2a7d34b11-02000000-40120.out").write_text("\n".join(worker) + "\n")
    raylet = [
        f"[2025-06-03 07:{41 + i // 12:02d}:{(5 * i) % 60:02d},120 I 5001 5001] memory_monitor.cc:210: Node memory usage: {0.36 + 0.0145 * i:.4f}, "
        f"used: {(0.36 + 0.0145 * i) * 256:.2f} GB of 256.00 GB, iteration {i}"
        for i in range(40)
    ]
    raylet.append(
        ray.raylet_log_head("2025-06-03 07:45:01,120", 5001, "node_manager.cc:3103")
        + ray.memory_monitor_kill(
            node_ip="10.0.0.2", node_id="a1b2", lease_id="00ff", worker_name="TaskRunner.fit", pid=40120, worker_gib=61.2,
            used_gib=242.5, total_gib=256.0, threshold=0.95, worker_id="5f1c09e2a7d34b11",
        )
    )  # fmt: skip
    (logs / "raylet.out").write_text("\n".join(raylet) + "\n")
    report = _report(logs)
    assert len(report["coverage"]["workers"]) == 1 and report["coverage"]["records"] == 40
    assert "guessed" not in report["coverage"] or all("raylet" not in g["source"] for g in report["coverage"]["guessed"])
    assert report["verdict"] in ("oom", "crash"), [f["rule"] for f in report["findings"]]
