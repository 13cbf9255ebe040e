"""EasyR1 and verl under Ray (parsers/easyr1.yaml, verl.yaml, ray.yaml): parsing the Ray-hosted RL
sample logs gives exactly the generator's ground truth, every line of a Ray driver log is attributed
to the process that printed it, EasyR1's YAML blocks end where their worker says so, and detection,
forcing a format and one file per rank work on these formats (the §3.7, §4.1 and §4.2 lines that
carry records or events are spec samples, checked by test_specs)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest

from memlog.base.columns import ALL_VALUE_COLUMNS
from memlog.base.errors import NoRecordsError
from memlog.base.events import build_events, typed_detail
from memlog.engine.api import analyze, parse_sources, select_specs
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import ChunkParser, parse_line
from memlog.read.source import Source, read_chunks
from memlog.tables.records import build_records, source_frame
from tests.samplegen import build_all

SAMPLES = [s for s in build_all() if s.path.startswith(("easyr1/", "verl/"))]
SPECS = list(load_specs().values())
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TRUTH_META = {"kind", "rank", "line_no", "worker"}


def _write(tmp_path_factory, sample) -> Path:
    path = tmp_path_factory.mktemp("s") / Path(sample.path).name
    path.write_bytes(sample.text.encode())
    return path


@pytest.fixture(scope="module", params=SAMPLES, ids=[s.path for s in SAMPLES])
def parsed(request, tmp_path_factory):
    sample = request.param
    path = _write(tmp_path_factory, sample)
    tables, _ = parse_sources([str(path)], SPECS)
    return sample, path, tables


def test_every_record_with_exact_values(parsed):
    sample, _, tables = parsed
    # One record per line read: its worker and first line name it.
    rows = {(r["worker"], r["line_no"]): r for r in tables.records.iter_rows(named=True)}
    truth = {(t["worker"], t["line_no"]): t for t in sample.truth.records}
    assert len(rows) == tables.records.height
    assert sorted(rows) == sorted(truth)
    for key, expected in truth.items():
        row = rows[key]
        assert (row["kind"], row["step"], row["reading"]) == (expected["kind"], expected["step"], expected["reading"]), key
        for column in ALL_VALUE_COLUMNS:  # values the truth lacks must be null, not invented
            want, got = expected.get(column), row[column]
            if want is None:
                assert got is None, (key, column, got)
            else:
                assert got is not None and math.isclose(got, want, rel_tol=1e-12), (key, column, got, want)


def test_events_on_their_lines_with_their_detail(parsed):
    sample, _, tables = parsed
    found = {(e.kind, e.line_no): e for e in tables.events if e.kind != "restart"}
    assert sorted(found) == sorted((t["kind"], t["line_no"]) for t in sample.truth.events)
    for t in sample.truth.events:
        event = found[(t["kind"], t["line_no"])]
        assert event.worker == t["worker"], t
        printed = {k: v for k, v in t.items() if k not in TRUTH_META}
        assert {k: event.detail.get(k) for k in printed} == typed_detail(t["kind"], printed)  # as memlog/base/events.py reads them


def test_every_record_comes_from_its_workers_own_lines(parsed):
    """A record's first line carries the Ray prefix of its worker (after a `\\r` the prefix repeats);
    nothing unprefixed (raylet continuation lines, tracebacks, tables) becomes a record in a Ray log."""
    sample, _, tables = parsed
    lines = sample.text.split("\n")
    ray_log = "(pid=" in sample.text or " pid=" in sample.text
    for row in tables.records.iter_rows(named=True):
        line = ANSI.sub("", lines[row["line_no"] - 1])
        if ray_log:
            assert line.startswith(f"({row['worker']}) "), (row["worker"], line[:80])
        else:
            assert row["worker"] == "main" and not line.startswith("(")


def test_parsing_in_small_chunks_gives_the_same_tables(parsed):
    """Blocks, continuation tables and inherited steps survive chunk boundaries anywhere."""
    sample, path, tables = parsed
    for chunk_bytes in (1500, 7919):
        parser = ChunkParser(SPECS)
        source = Source(str(path))
        records, events = [], []
        for chunk in read_chunks(source, chunk_bytes=chunk_bytes):
            matches = parser(chunk)
            records += matches.records
            events += matches.events
        last = parser.finish_source()
        records += last.records
        events += last.events
        table = build_records([source_frame(source.name, records)])
        got_events, _ = build_events([source_frame(source.name, events)] if events else [], table)
        assert table.select(sorted(tables.records.columns)).equals(tables.records.select(sorted(tables.records.columns)))
        assert [(e.kind, e.line_no, e.worker, e.detail) for e in got_events] == [
            (e.kind, e.line_no, e.worker, e.detail) for e in tables.events if e.kind != "restart"
        ]


def _sample(name: str):
    return next(s for s in SAMPLES if s.path == name)


def test_fr3_host_stairs_flat_device_and_the_kill(tmp_path):
    """The truth itself says what field report 3 says (guards the generator)."""
    s = _sample("easyr1/fr3_geometry3k_host_stairs_raykill.log")
    runner = [r for r in s.truth.records if r["worker"] == "Runner pid=2911" and r["step"] >= 1]
    host = [r["host_mem_used_gib"] for r in runner]
    jumps = [b - a for a, b in zip(host, host[1:])]
    assert len(runner) == 7 and [j > 10 for j in jumps] == [False, True, False, True, False, True]
    assert max(r["mem_max_allocated_gib"] for r in runner) - min(r["mem_max_allocated_gib"] for r in runner) < 0.05
    assert "offload_params: true" in s.text and "offload_optimizer: true" in s.text and "\r" in s.text
    (oom,) = [e for e in s.truth.events if e["kind"] == "oom" and "top_memory_users" in e]  # the monitor's report, not the driver's echo
    assert (oom["host_used_gib"], oom["host_total_gib"], oom["used_fraction"], oom["threshold"]) == ("891.06", "937.50", "0.950459", "0.95")
    assert len(oom["top_memory_users"]) == 10
    report = analyze([str(_write_to(tmp_path, s))])
    assert report.verdict == "leak"
    assert {(f.rule, f.subject) for f in report.findings} >= {("memory-leak", "host"), ("oom", "run")}
    assert report.coverage["capacity"]["host_gib"] == 937.5 and report.coverage["capacity"]["device_gib"] == 79.11


def _write_to(tmp_path: Path, sample) -> Path:
    path = tmp_path / Path(sample.path).name
    path.write_bytes(sample.text.encode())
    return path


def test_mixed_driver_log_keeps_every_worker_apart(tmp_path):
    s = _sample("verl/ray_driver_mixed.log")
    tables, _ = parse_sources([str(_write_to(tmp_path, s))], SPECS)
    workers = set(tables.records["worker"].to_list())
    assert "Runner pid=5121" in workers and "main" not in workers
    assert any(w.endswith(", ip=10.0.0.3") for w in workers) and any(w.startswith("WorkerDict pid=53") for w in workers)
    assert tables.records.filter(pl.col("repeated") > 1).height > 0  # values of dedup summaries kept
    # The Runner's blocks were read in two pieces with another worker's line in between.
    assert set(tables.records.filter(pl.col("worker") == "Runner pid=5121")["step"].to_list()) == set(range(1, 10))
    # The monitor's kill and the death notice name the killed worker; the driver's traceback ends in
    # its own echo of the error (`OutOfMemoryError: Task was killed ...`), an event of the driver.
    kill = [e for e in tables.events if e.kind in ("oom", "worker_died")]
    assert {e.worker for e in kill if "worker_pid" in e.detail} == {"WorkerDict pid=4125, ip=10.0.0.3"}
    assert {e.worker for e in kill if "worker_pid" not in e.detail} == {"main"}
    assert {e.after_step for e in kill} == {9}


def test_fr3_oom_is_attributed_to_the_killed_worker_during_step_8(tmp_path):
    s = _sample("easyr1/fr3_geometry3k_host_stairs_raykill.log")
    tables, _ = parse_sources([str(_write_to(tmp_path, s))], SPECS)
    (oom,) = [e for e in tables.events_of("oom") if "worker_pid" in e.detail]  # the monitor's, not the driver's echo
    assert oom.worker == "WorkerDict pid=3322" and oom.after_step == 7
    assert oom.detail["top_memory_users"][0] == {"pid": "3323", "mem_gib": "110.59", "command": "ray::WorkerDict.actor_rollout_update_actor"}


# -- EasyR1's YAML blocks ---------------------------------------------------------------------------


def test_a_yaml_block_interrupted_by_its_own_worker_ends_there():
    """A Runner line that is no `key: value` closes its block: later look-alikes are not metrics."""
    block = "\n".join(
        [
            "(Runner pid=5) Step 4",
            "(Runner pid=5) perf:",
            "(Runner pid=5)   cpu_memory_used_gb: 100.5",
            "(WorkerDict pid=9) perf: interleaved lines of others do not end it",
            "(Runner pid=5)   max_memory_allocated_gb: 30.25",
            "(Runner pid=5) Running step:   7%|▋         | 4/60 [09:51<2:18:00, 147.86s/it]",
            "(Runner pid=5)   max_memory_reserved_gb: 99.0",
        ]
    )
    records, _ = parse_line(SPECS, block)
    (row,) = [r for r in records if r["actor"] == "Runner"]
    assert (row["step"], row["host_mem_used_gib"], row["mem_max_allocated_gib"], row["mem_max_reserved_gib"]) == (4, 100.5, 30.25, None)


# -- detection, forcing, several files --------------------------------------------------------------


def test_forcing_a_format_keeps_rays_events_and_drops_the_others_records(tmp_path):
    s = _sample("easyr1/fr3_geometry3k_host_stairs_raykill.log")
    path = str(_write_to(tmp_path, s))
    tables, _ = parse_sources([path], select_specs(load_specs(), "easyr1"))
    assert tables.formats == {"easyr1": len({(r["worker"], r["kind"], r["step"]) for r in s.truth.records})}
    assert tables.events_of("oom")
    # Forced to a format that reads none of its lines, the log is still judged by its OOM kill.
    report = analyze([path], format="verl")
    assert report.verdict == "oom" and report.coverage["records"] == 0


def test_nothing_matched_names_the_formats_tried(tmp_path):
    path = tmp_path / "noise.log"
    path.write_text("(Runner pid=1) hello\n(raylet) nothing to see\n")
    with pytest.raises(NoRecordsError) as error:
        analyze([str(path)])
    assert all(name in str(error.value) for name in ("easyr1", "verl"))


def test_one_file_per_rank_is_merged_with_the_rank_from_the_file_name(tmp_path):
    for rank in (0, 1):
        lines = [f"step:{step} - actor/pg_loss:{0.1 * rank + step / 100} - perf/cpu_memory_used_gb:{40 + rank}.5" for step in (1, 2, 3)]
        (tmp_path / f"verl_rank{rank}.log").write_text("\n".join(lines) + "\n")
    tables, _ = parse_sources([str(tmp_path / "verl_rank0.log"), str(tmp_path / "verl_rank1.log")], SPECS)
    by_worker = tables.records.group_by("worker").agg(pl.col("rank").first(), pl.col("host_mem_used_gib").first())
    assert sorted(by_worker.iter_rows()) == [("rank0", 0, 40.5), ("rank1", 1, 41.5)]
