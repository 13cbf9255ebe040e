"""The benchmark scripts work (on tiny logs): generate every kind, time one case, print the table.
The benchmark's figures themselves are never asserted; see benchmarks/run.py."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

from benchmarks import floor, generate, run
from tests.samplegen.common import Clock


def test_fast_timestamps_match_samplegen_clock():
    clock = Clock(datetime(2025, 9, 12, 2, 11, 47, 208000))
    stamps = generate.Stamps(clock.start)
    rng = random.Random(6)
    for t in [0.0, 0.0005, 59.9996, 86_400 * 3 + 0.9994] + [rng.uniform(0, 3e7) for _ in range(200)]:
        assert stamps(t) == clock.asctime(t)


def test_every_kind_writes_whole_lines_of_the_requested_size(tmp_path):
    size = 48 * 1024
    for kind in generate.KINDS:
        paths = generate.generate(kind, size, tmp_path, files=2)
        assert len(paths) == (2 if kind == "ranks" else 1)
        for path in paths:
            data = path.read_bytes()
            assert 0.8 * size < len(data) <= size, (kind, len(data))
            assert data.endswith(b"\n")
            assert generate._fresh(path)


def test_a_leak_spans_the_run_whatever_its_size():
    leak = generate.Leak(start=18.0, plateau=30.0, leak=6.0)
    for total in (100, 100_000):
        assert leak.at(1, total) < leak.at(total // 2, total) < leak.at(total, total)
        assert abs(leak.at(total, total) - 36.0) < 0.01


def test_run_prints_the_table_with_memlog_figures(tmp_path, capsys):
    run.main(["--cases", "dense", "--sizes", "64k", "--runs", "1", "--warmup", "0", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| case | size | records | verdict | memlog wall (s) | polars floor (s) | ratio |" in out
    row = next(line for line in out.splitlines() if line.startswith("| dense 64k |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[2].replace(",", "")) > 100  # memlog parsed the step records
    assert float(cells[4]) > 0
    assert float(cells[5]) > 0  # the polars floor ran
    assert cells[6].endswith("×")  # memlog / floor
    assert cells[7].replace(".", "").isdigit()  # peak RSS in MiB
    assert "could not judge" not in row


def test_the_floor_reads_every_record_of_each_kind(tmp_path):
    """The floor's one regex must match the generated record lines, or its time would be a lie."""
    import subprocess
    import sys

    for kind in floor.PATTERNS:
        paths = generate.generate(kind, 512 * 1024, tmp_path / kind, files=2)
        literal = floor.PATTERNS[kind][0].encode()
        lines = sum(path.read_bytes().count(literal) for path in paths)
        out = subprocess.run([sys.executable, floor.__file__, "--kind", kind, *map(str, paths)], capture_output=True, text=True, check=True).stdout
        assert lines > 10 and int(out) == lines, (kind, out, lines)


def test_memory_stages_prints_a_peak_per_stage(capsys):
    from benchmarks import memory_stages

    sample = Path(__file__).parents[2] / "sample_logs" / "torchtitan" / "fr2_logfreq_creep.log"
    memory_stages.main([str(sample)])
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip() for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "stage" not in line
    }
    assert {"read, scan, compact records", "build the records table", "series", "rules"} <= set(rows)
    assert all(int(peak) > 0 for peak in rows.values())


def test_scan_benchmark_prints_its_table(tmp_path, capsys):
    """benchmarks/scan.py on a handful of tiny runs, without Ray (its figures are not asserted)."""
    from benchmarks import scan

    assert scan.main(["--runs", "4", "--size", "16k", "--no-ray", "--jobs", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| one process, one run at a time |" in out and "rows identical in every mode: yes" in out


def test_the_guard_benchmark_prints_its_tables(capsys):
    """benchmarks/guard.py on small sizes (its N-rank part needs torch and a minute: not here)."""
    from benchmarks import guard

    guard.main(["--quick", "--parts", "hot,judge,snapshots"])
    out = capsys.readouterr().out
    assert "Guard.step() back to back, 1 process, reading and deciding only:" in out
    assert "| 1,000 |" in out and "| live blocks | file (MiB) |" in out
