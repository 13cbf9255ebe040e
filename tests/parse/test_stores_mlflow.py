"""MLflow runs as inputs (memlog/parse/stores/mlflow.py), written here through MLflow itself: a file
store as MLflow 2 kept it (`mlruns/`), the SQLite file MLflow 3 writes, and a real `mlflow server`
started on a free port. The same series logged to MLflow and printed as a torchtitan log get the
same verdict; scan judges each run of a store on its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze
from tests.synthetic import torchtitan_lines

if os.environ.get("MEMLOG_REQUIRE_STORES"):
    import mlflow  # noqa: F401  (CI installs memlog[mlflow]: a skip would be a failure)
else:
    pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient

runner = CliRunner()
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 writes MLflow 2's file store only when asked


def leak(n: int) -> list[float]:
    return [20.0 + (0.0 if i < 10 else 0.1 * (i - 9)) + 0.02 * ((i * 7919) % 13) / 13 for i in range(n)]


def warmup(n: int) -> list[float]:
    return [20.0 + 8.0 * min(i, 30) / 30 + 0.02 * ((i * 7919) % 13) / 13 for i in range(n)]


def log_run(uri: str, name: str, memory: list[float]) -> str:
    """What a training script logs: loss and reserved memory per step (log_batch, as loggers do)."""
    from mlflow.entities import Metric

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("train") or client.get_experiment(client.create_experiment("train"))
    run = client.create_run(experiment.experiment_id, run_name=name)
    metrics = [
        Metric(key, value, 1_700_000_000_000 + 1000 * step, step)
        for step, gib in enumerate(memory, start=1)
        for key, value in (("train/loss", 10.0 - 0.01 * step), ("memory/max_reserved_gib", gib))
    ]
    for i in range(0, len(metrics), 1000):
        client.log_batch(run.info.run_id, metrics=metrics[i : i + 1000])
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def printed(tmp_path, memory: list[float]) -> str:
    path = tmp_path / "train.log"
    path.write_text("\n".join(torchtitan_lines({0: memory})) + "\n")
    return str(path)


@pytest.mark.parametrize("store", ["file", "sqlite"])
@pytest.mark.parametrize("series", [leak, warmup], ids=["leak", "warmup"])
def test_a_run_is_judged_as_the_same_series_printed(tmp_path, store, series):
    memory = series(200)
    target = tmp_path / ("mlruns" if store == "file" else "mlflow.db")
    uri = target.as_uri() if store == "file" else f"sqlite:///{target}"
    log_run(uri, "run-a", memory)
    read, same = analyze([str(target)]), analyze([printed(tmp_path, memory)])
    assert read.verdict == same.verdict and read.verdict in ("leak", "warmup-plateau")
    assert {f.rule for f in read.findings} == {f.rule for f in same.findings}
    assert read.coverage["records"] == 200 and read.coverage["sources"][0]["name"].endswith("/train/run-a")


def test_scan_judges_each_run_of_a_store(tmp_path):
    uri = (tmp_path / "mlruns").as_uri()
    leaky = log_run(uri, "leaky", leak(120))
    log_run(uri, "calm", [30.0 + 0.01 * (i % 3) for i in range(120)])
    result = runner.invoke(app, ["scan", str(tmp_path), "--jobs", "1", "-o", "json"])
    rows = json.loads(result.stdout)["runs"]
    assert result.exit_code == 1 and len(rows) == 2
    assert [row["run"].rsplit("/", 1)[-1] for row in rows if row["verdict"] == "leak"] == [leaky]


def test_watch_follows_a_run_as_it_is_logged_and_runs_as_they_start(tmp_path):
    from mlflow.entities import Metric

    from memlog.watch.follow import STORE_POLL_SECONDS
    from memlog.watch.watch import RESCAN_SECONDS, Watcher

    store = tmp_path / "mlruns"
    memory = leak(300)
    client = MlflowClient(store.as_uri())
    experiment = client.create_experiment("train")
    run_id = client.create_run(experiment, run_name="live").info.run_id

    def steps(first: int, last: int) -> None:
        metrics = [Metric("memory/max_reserved_gib", memory[s - 1], 1_700_000_000_000 + 1000 * s, s) for s in range(first, last + 1)]
        client.log_batch(run_id, metrics=metrics)

    steps(1, 100)
    now = [0.0]
    watcher = Watcher([str(store)], interval=0, clock=lambda: now[0])
    assert watcher.judge().coverage["steps"] == [1, 100]
    steps(101, 300)
    assert not watcher.poll()  # asked again only every STORE_POLL_SECONDS
    now[0] += STORE_POLL_SECONDS
    assert watcher.poll()
    report = watcher.judge()
    assert report.coverage["steps"] == [1, 300] and report.verdict == analyze([str(store)]).verdict == "leak"
    now[0] += STORE_POLL_SECONDS
    assert not watcher.poll()  # nothing new: the records stand
    assert not watcher.ended  # a store can gain runs: watching it never ends by itself
    log_run(store.as_uri(), "second", [30.0] * 50)
    now[0] += RESCAN_SECONDS
    watcher.poll()
    assert len(watcher.judge().coverage["sources"]) == 2
    watcher.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_tracking_server_by_uri_and_run_id(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--default-artifact-root",
            str(tmp_path / "art"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # until it answers (each try waits on the socket, not on a clock)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if server.poll() is not None:
                    pytest.fail("mlflow server exited")
                time.sleep(0.1)
        run_id = log_run(f"http://127.0.0.1:{port}", "remote", leak(150))
        one = analyze([f"mlflow://127.0.0.1:{port}/{run_id}"])
        every = analyze([f"mlflow://127.0.0.1:{port}"])
    finally:
        server.terminate()
        server.wait(30)
    assert one.verdict == every.verdict == "leak" and one.coverage["records"] == 150


def test_without_the_extra_or_the_server_one_line(tmp_path, monkeypatch):
    result = runner.invoke(app, ["analyze", f"mlflow://127.0.0.1:{free_port()}/abc"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "MLflow could not" in result.stderr
    log_run((tmp_path / "mlruns").as_uri(), "a", leak(20))
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # (as if not installed)
    result = runner.invoke(app, ["analyze", str(tmp_path / "mlruns")])
    assert result.exit_code == 2 and "memlog[mlflow]" in result.stderr and result.stderr.count("\n") == 1
