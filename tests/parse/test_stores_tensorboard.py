"""TensorBoard event files as inputs (memlog/parse/stores/tensorboard.py), written here by the
`tensorboard` package's own writer: the same series judged through an event file and printed as a
torchtitan log get the same verdict (a metamorphic test across stores); TF2's tensor scalars, a
folder of runs, a cut file and a missing extra."""

from __future__ import annotations

import os
import sys

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze
from tests.synthetic import torchtitan_lines

if os.environ.get("MEMLOG_REQUIRE_STORES"):
    import tensorboard  # noqa: F401  (CI installs memlog[tensorboard]: a skip would be a failure)
else:
    pytest.importorskip("tensorboard")

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

CAPACITY = 79.11
runner = CliRunner()


def leak(n: int) -> list[float]:
    return [20.0 + (0.0 if i < 10 else 0.1 * (i - 9)) + 0.02 * ((i * 7919) % 13) / 13 for i in range(n)]


def warmup(n: int) -> list[float]:
    return [20.0 + 8.0 * min(i, 30) / 30 + 0.02 * ((i * 7919) % 13) / 13 for i in range(n)]


def write_run(folder, memory: list[float], *, tensors: bool = False, first_step: int = 1) -> str:
    """torchtitan's TensorBoard tags, one event per tag and step, as its metrics logger writes them."""
    writer = EventFileWriter(str(folder))
    for i, gib in enumerate(memory):
        step = first_step + i
        for tag, value in (
            ("loss_metrics/global_avg_loss", 10.0 - 0.01 * i),
            ("memory/max_reserved(GiB)", gib),
            ("memory/max_reserved(%)", 100 * gib / CAPACITY),
            ("wps", 7421.0),
        ):
            if tensors:  # TF2's tf.summary.scalar: a rank-0 tensor under the scalars plugin
                proto = summary_pb2.Summary.Value(tag=tag, tensor=tensor_util.make_tensor_proto(value))
                proto.metadata.plugin_data.plugin_name = "scalars"
            else:
                proto = summary_pb2.Summary.Value(tag=tag, simple_value=value)
            writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary_pb2.Summary(value=[proto])))
    writer.close()
    (path,) = [p for p in folder.iterdir() if ".tfevents." in p.name]
    return str(path)


def as_log(tmp_path, memory: list[float]) -> str:
    path = tmp_path / "train.log"
    path.write_text("\n".join(torchtitan_lines({0: memory})) + "\n")
    return str(path)


@pytest.mark.parametrize("series", [leak, warmup], ids=["leak", "warmup"])
@pytest.mark.parametrize("tensors", [False, True], ids=["simple_value", "tf2_tensor"])
def test_an_event_file_is_judged_as_the_same_series_printed(tmp_path, series, tensors):
    memory = series(200)
    (tmp_path / "tb").mkdir()
    events = write_run(tmp_path / "tb", memory, tensors=tensors)
    read, printed = analyze([events]), analyze([as_log(tmp_path, memory)])
    assert read.verdict == printed.verdict and read.verdict in ("leak", "warmup-plateau")
    assert {f.rule for f in read.findings} == {f.rule for f in printed.findings}
    assert read.coverage["records"] == 200 and read.coverage["steps"] == [1, 200]
    # what was read, said as the generic reader says it: the tag, never the share of the capacity
    said = " ".join(str(g) for g in read.coverage.get("guessed", []) or [read.to_dict()])
    assert "memory/max_reserved(GiB)" in said and "max_reserved(%)" not in said


def test_a_folder_of_runs_and_the_command_line(tmp_path):
    for name, memory in (("run_a", leak(150)), ("run_b", leak(150))):
        (tmp_path / name).mkdir()
        write_run(tmp_path / name, memory)
    result = runner.invoke(app, ["analyze", str(tmp_path), "-o", "json"])
    assert result.exit_code == 1, result.output  # a leak found
    series = runner.invoke(app, ["series", str(tmp_path / "run_a"), "-o", "csv"])
    assert series.exit_code == 0 and len(series.stdout.strip().splitlines()) == 151


def test_a_cut_event_file_is_read_up_to_the_damage(tmp_path):
    (tmp_path / "tb").mkdir()
    events = write_run(tmp_path / "tb", leak(200))
    data = open(events, "rb").read()
    with open(events, "wb") as out:
        out.write(data[: len(data) * 2 // 3] + b"\x00garbage\x17" * 3)
    report = analyze([events])
    assert 100 < report.coverage["records"] < 200
    assert "read up to there" in (report.coverage["sources"][0].get("damaged") or "")
    whole = tmp_path / "whole"
    whole.mkdir()
    assert not analyze([write_run(whole, leak(200))]).coverage["sources"][0].get("damaged")


def test_without_the_extra_one_line_names_it(tmp_path, monkeypatch):
    (tmp_path / "tb").mkdir()
    events = write_run(tmp_path / "tb", leak(50))
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing.event_file_loader", None)  # (as if not installed)
    result = runner.invoke(app, ["analyze", events])
    assert result.exit_code == 2 and "memlog[tensorboard]" in result.stderr and result.stderr.count("\n") == 1


def test_watch_follows_an_event_file_as_it_is_written(tmp_path):
    from memlog.watch.watch import Watcher

    memory = leak(300)
    writer = EventFileWriter(str(tmp_path))

    def steps(first: int, last: int) -> None:
        for step in range(first, last + 1):
            value = summary_pb2.Summary.Value(tag="memory/max_reserved(GiB)", simple_value=memory[step - 1])
            writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary_pb2.Summary(value=[value])))
        writer.flush()

    steps(1, 100)
    (events,) = [str(p) for p in tmp_path.iterdir() if ".tfevents." in p.name]
    watcher = Watcher([events], interval=0)
    assert watcher.poll() and watcher.judge().coverage["steps"] == [1, 100]
    assert not watcher.poll()  # unchanged: not read again
    steps(101, 300)
    writer.close()
    assert watcher.poll()
    watcher.finish()
    report = watcher.judge()
    assert report.coverage["steps"] == [1, 300] and report.verdict == analyze([events]).verdict == "leak"
    watcher.close()
