"""nvidia-smi (parsers/nvidia_smi.yaml, nvidia_smi_blocks.py): each GPU's `used / total` read as a
reading of its device with the device's capacity, in every layout; the tables of a training log
judged beside its own step lines; a table behind a launcher's prefix; a snapshot at the start
changing nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlog.engine.api import analyze, parse_sources
from tests.logwriters import nvidia_smi as smi
from tests.parsers.sample_truth import SPECS

MIB = 1 / 1024


def _write(tmp_path: Path, lines: list[str], name: str = "train.log") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _readings(path: str, chunk_bytes: int | None = None) -> list[tuple]:
    """(worker, step, used GiB, capacity GiB) of every nvidia-smi reading, in line order."""
    tables, _ = parse_sources([path], SPECS, **({"chunk_bytes": chunk_bytes} if chunk_bytes else {}))
    rows = tables.records.filter(tables.records["format"] == "nvidia_smi").sort("line_no")
    return [(str(r["worker"]), r["step"], r["device_mem_used_gib"], r["mem_capacity_gib"]) for r in rows.iter_rows(named=True)]


def _steps(first: int, last: int) -> list[str]:
    return [f"step {step}/5000 | loss {3.2 - step / 1000:.4f} | lr 2.00e-04 | 3.41 it/s" for step in range(first, last + 1)]


def _script_log(used_at, *, every: int = 100, steps: int = 1200, driver: int = 550, prefix: str = "", gpus: int = 4) -> list[str]:
    """A training script's own step lines, and `nvidia-smi` run every `every` steps: GPU g's used
    memory at the k-th table is used_at(k, g) MiB."""
    lines, k = [], 0
    for step in range(10, steps + 1, 10):
        lines += _steps(step, step)
        if step % every == 0:
            lines += smi.table([used_at(k, g) for g in range(gpus)], 81559, driver=driver)
            k += 1
    return [prefix + line for line in lines]


@pytest.mark.parametrize("driver", [440, 535, 550, 580])
def test_each_gpu_is_a_device_with_its_used_memory_and_capacity(driver, tmp_path):
    name = "Tesla V100-SXM2..." if driver == 440 else "NVIDIA H100 80GB HBM3"
    path = _write(tmp_path, [*_steps(1, 10), *smi.table([41235, 15000, 7], 81920, driver=driver, name=name), *_steps(11, 20)])
    assert _readings(path) == [
        ("GPU0", 10, 41235 * MIB, 80.0),
        ("GPU1", 10, 15000 * MIB, 80.0),
        ("GPU2", 10, 7 * MIB, 80.0),
    ]


def test_the_processes_and_mig_tables_are_not_devices(tmp_path):
    mig = [
        "+-----------------------------------------------------------------------------+",
        "| MIG devices:                                                                |",
        "+------------------+----------------------+-----------+-----------------------+",
        "| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |",
        "|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|",
        "|==================+======================+===========+=======================|",
        "|  0    3   0   0  |  14366MiB / 19968MiB | 28      0 |  2   0    1    0    0 |",
        "|                  |      4MiB / 32767MiB |           |                       |",
        "+------------------+----------------------+-----------+-----------------------+",
    ]
    table = smi.table([30000], 81920, driver=535, processes=False)
    path = _write(tmp_path, [*_steps(1, 5), *table, "", *mig, *smi.table([30000], 81920, driver=535)[len(table) :], *_steps(6, 10)])
    assert _readings(path) == [("GPU0", 5, 30000 * MIB, 80.0)]


@pytest.mark.parametrize(
    ("fields", "units"),
    [
        (("index", "memory.used", "memory.total"), True),
        (("index", "name", "utilization.gpu", "memory.used", "memory.total"), False),
        (("memory.total", "memory.used"), True),
    ],
)
def test_query_gpu_csv_in_the_order_asked(fields, units, tmp_path):
    path = _write(tmp_path, [*_steps(1, 10), *smi.query_csv([61440, 1024], 81559, fields=fields, units=units), *_steps(11, 20)])
    assert _readings(path) == [("GPU0", 10, 60.0, 81559 * MIB), ("GPU1", 10, 1.0, 81559 * MIB)]


def test_a_rising_series_of_tables_is_a_leak_at_the_scripts_steps(tmp_path):
    path = _write(tmp_path, _script_log(lambda k, g: 21400 + 600 * k + (7 * g + 3 * k) % 5))
    readings = _readings(path)
    assert [r for r in readings if r[0] == "GPU2"][:3] == [
        ("GPU2", 100, (21400 + 4) * MIB, 81559 * MIB),
        ("GPU2", 200, (21400 + 600 + 2) * MIB, 81559 * MIB),
        ("GPU2", 300, (21400 + 1200 + 0) * MIB, 81559 * MIB),
    ]
    report = analyze([path])
    assert report.verdict == "leak"
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert leak.subject == "device" and sorted(report.coverage["workers"]) == ["GPU0", "GPU1", "GPU2", "GPU3"]


def test_flat_tables_are_not_a_leak(tmp_path):
    # Warmed up by the first table, then flat to within a few MiB on every GPU.
    path = _write(tmp_path, _script_log(lambda k, g: (9000 if k == 0 else 21400) + (11 * g + 5 * k) % 7))
    report = analyze([path])
    assert report.verdict in ("stable", "warmup-plateau")
    assert not any(f.rule == "memory-leak" for f in report.findings)


def test_tables_without_steps_are_read_in_order(tmp_path):
    lines = [line for k in range(12) for line in ["=== nvidia-smi ===", *smi.table([30000 + 2048 * k], 81920)]]
    path = _write(tmp_path, lines)
    assert [(w, s) for w, s, _, _ in _readings(path)] == [("GPU0", k) for k in range(1, 13)]
    assert analyze([path]).verdict == "leak"


def test_a_table_behind_torchruns_rank_prefix(tmp_path):
    path = _write(tmp_path, _script_log(lambda k, g: 21400 + 600 * k, prefix="[rank0]:", gpus=2))
    readings = _readings(path)
    assert {w for w, *_ in readings} == {"rank0/GPU0", "rank0/GPU1"}
    assert readings[:2] == [("rank0/GPU0", 100, 21400 * MIB, 81559 * MIB), ("rank0/GPU1", 100, 21400 * MIB, 81559 * MIB)]
    assert analyze([path]).verdict == "leak"


def test_two_nodes_tables_interleaved_behind_srun_labels(tmp_path):
    # srun --label: task 0 on one node, task 8 on the other, each printing its node's table; their
    # lines arrive interleaved, and each node's GPU0 is its own device.
    node_a = _script_log(lambda k, g: 21400 + 600 * k, prefix="0: ", gpus=2, steps=600)
    node_b = _script_log(lambda k, g: 30000, prefix="8: ", gpus=2, steps=600)
    lines = [line for pair in zip(node_a, node_b) for line in pair]
    readings = _readings(_write(tmp_path, lines))
    assert {w for w, *_ in readings} == {"rank0/GPU0", "rank0/GPU1", "rank8/GPU0", "rank8/GPU1"}
    assert [u for w, _, u, _ in readings if w == "rank8/GPU1"] == [30000 * MIB] * 6
    assert [u for w, _, u, _ in readings if w == "rank0/GPU0"] == [(21400 + 600 * k) * MIB for k in range(6)]


def test_tables_cut_by_chunk_boundaries_read_the_same(tmp_path):
    path = _write(tmp_path, _script_log(lambda k, g: 21400 + 600 * k + g, gpus=8))
    whole = _readings(path)
    assert len(whole) == 12 * 8
    assert _readings(path, chunk_bytes=4096) == whole


def test_a_snapshot_before_the_first_step_adds_no_worker(tmp_path):
    # A job script's `nvidia-smi` before training: the machine before the run, not one of its workers.
    steps = [f"iter {i}: loss {3.0 - i / 500:.4f}, time 412.31ms, mem 21.{30 + i % 3} GiB" for i in range(0, 600, 10)]
    plain = analyze([_write(tmp_path, steps, "plain.log")])
    with_snapshot = analyze([_write(tmp_path, [*smi.table([4] * 8, 81559, driver=535), *steps], "snapshot.log")])
    assert with_snapshot.verdict == plain.verdict
    assert with_snapshot.coverage["workers"] == plain.coverage["workers"]
    assert [f.rule for f in with_snapshot.findings] == [f.rule for f in plain.findings]


def test_tables_whose_rows_are_the_longest_lines_are_no_hard_wrap(tmp_path):
    # Every row of a table is one length, the log's longest: lengths alone would take them for a
    # terminal's cut; a row printed between borders is whole (memlog/read/hardwrap.py).
    from memlog.read import hardwrap

    path = _write(tmp_path, _script_log(lambda k, g: 21400 + 600 * k, driver=535))
    assert hardwrap.wrap_of(Path(path).read_bytes()) is None


@pytest.mark.parametrize(
    "fields",
    [
        ("timestamp", "name", "memory.used", "memory.total"),
        ("pci.bus_id", "memory.used", "memory.total"),
        ("timestamp", "pci.bus_id", "memory.used", "memory.total"),
    ],
    ids=["by-timestamp", "by-bus-id", "both"],
)
def test_a_query_loop_without_index_is_each_gpu_over_time(fields, tmp_path):
    """`nvidia-smi --query-gpu=... --format=csv -l 30` for 100 intervals (one header, 200 rows): two
    GPUs followed over all of them, however far the rows run past the header."""
    queries = [(31_000 + 400 * n, 20_000) for n in range(100)]
    path = _write(tmp_path, smi.query_csv_loop(queries, 81_920, fields=fields))
    readings = _readings(path)
    gpu0 = [used for worker, _, used, _ in readings if worker == "GPU0"]
    assert {worker for worker, *_ in readings} == {"GPU0", "GPU1"} and len(gpu0) == 100
    assert gpu0[0] == 31_000 * MIB and gpu0[-1] == (31_000 + 400 * 99) * MIB
    report = analyze([path])
    assert report.verdict == "leak" and "GPU0" in report.findings[0].message and "GPU1" not in report.findings[0].message
