"""Parsing the Ray / EasyR1 / verl sample logs gives exactly the generator's ground truth, every
line of a Ray driver log is attributed to the process that printed it, and the Ray examples of
log-formats.md §3.7 unwrap as documented (the §3.7, §4.1 and §4.2 lines that carry records or
events are spec samples in parsers/ray.yaml, verl.yaml and easyr1.yaml, checked by test_formats)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest

from memlog.api import analyze, parse_sources, select_specs
from memlog.columns import ALL_VALUE_COLUMNS
from memlog.errors import NoRecordsError
from memlog.events import typed_detail
from memlog.formats import load_specs
from memlog.parse import ChunkParser, parse_line
from memlog.reading import Source, read_chunks
from memlog.events import build_events
from memlog.records import build_records, source_frame
from memlog.unwrap import Unwrapper

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
    rows = {(r["worker"], r["kind"], r["step"]): r for r in tables.records.iter_rows(named=True)}
    truth = {(t["worker"], t["kind"], t["step"]): t for t in sample.truth.records}
    assert sorted(rows) == sorted(truth)
    for key, expected in truth.items():
        row = rows[key]
        assert row["line_no"] == expected["line_no"], key
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
        assert {k: event.detail.get(k) for k in printed} == typed_detail(t["kind"], printed)  # as memlog/events.py reads them


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
    (oom,) = [e for e in s.truth.events if e["kind"] == "oom"]
    assert (oom["host_used_gib"], oom["host_total_gib"], oom["used_fraction"], oom["threshold"]) == (
        "891.06", "937.50", "0.950459", "0.95")
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
    kill = [e for e in tables.events if e.kind in ("oom", "worker_died")]
    assert {e.worker for e in kill} == {"WorkerDict pid=4125, ip=10.0.0.3"}
    assert {e.after_step for e in kill} == {9}


def test_fr3_oom_is_attributed_to_the_killed_worker_during_step_8(tmp_path):
    s = _sample("easyr1/fr3_geometry3k_host_stairs_raykill.log")
    tables, _ = parse_sources([str(_write_to(tmp_path, s))], SPECS)
    (oom,) = tables.events_of("oom")
    assert oom.worker == "WorkerDict pid=3322" and oom.after_step == 7
    assert oom.detail["top_memory_users"][0] == {"pid": "3323", "mem_gib": "110.59",
                                                 "command": "ray::WorkerDict.actor_rollout_update_actor"}


# -- unwrapping: the Ray examples of log-formats.md §3.1, §3.2 and §3.7 -----------------------------


UNWRAP = Unwrapper(p for spec in SPECS for p in spec.logger_prefixes)


def unwrapped(line: str) -> dict:
    return UNWRAP(pl.DataFrame({"line_no": [1], "text": [line]})).row(0, named=True)


@pytest.mark.parametrize(
    ("line", "actor", "pid", "ip", "text"),
    [
        ("\x1b[36m(WorkerDict pid=3048142, ip=10.0.0.2)\x1b[0m INFO 03-01 12:00:00 [gpu_worker.py:232] Available KV cache memory: 13.48 GiB",
         "WorkerDict", 3048142, "10.0.0.2", "INFO 03-01 12:00:00 [gpu_worker.py:232] Available KV cache memory: 13.48 GiB"),
        ("\x1b[36m(TaskRunner pid=247607)\x1b[0m step:1 - actor/pg_loss:-0.0036 - …", "TaskRunner", 247607, None,
         "step:1 - actor/pg_loss:-0.0036 - …"),
        ("(task_name pid=12345, ip=10.0.0.2) msg", "task_name", 12345, "10.0.0.2", "msg"),
        ("(pid=12345) msg", None, 12345, None, "msg"),
        # Old Ray (<= ~2.3) adds DIM before the colour; syslog captures show the escapes as `#033[`.
        ("\x1b[2m\x1b[36m(pid=22967)\x1b[0m Running step 0:   7%", None, 22967, None, "Running step 0:   7%"),
        ("#033[2m#033[33m(raylet)#033[0m [2024-05-02 03:04:05,678 E 2211 2211] (raylet) node_manager.cc:3084: 2 Workers",
         "raylet", None, None, "2 Workers"),
        ("(raylet, ip=10.0.0.5) [2024-05-02 03:04:05,678 E 2211 2211] (raylet) node_manager.cc:3084: 2 Workers",
         "raylet", None, "10.0.0.5", "2 Workers"),
        ("\x1b[36m(autoscaler +1m2s)\x1b[0m Tip: use `ray status` to view detailed cluster status.",
         "autoscaler +1m2s", None, None, "Tip: use `ray status` to view detailed cluster status."),
        ("\x1b[33m(raylet)\x1b[0m ", "raylet", None, None, ""),
    ],
)
def test_ray_prefixes_unwrap_into_actor_pid_ip(line, actor, pid, ip, text):
    row = unwrapped(line)
    assert (row["actor"], row["pid"], row["ip"], row["text"]) == (actor, pid, ip, text)


@pytest.mark.parametrize(
    ("line", "count", "text"),
    [
        ("\x1b[36m(WorkerDict pid=3048150, ip=10.0.0.3)\x1b[0m some repeated message\x1b[32m [repeated 7x across cluster]\x1b[0m",
         7, "some repeated message"),
        # The first summary of a driver carries Ray's notice, inside the same colour.
        ("\x1b[36m(WorkerDict pid=3327)\x1b[0m Loading model weights took 15.6200 GB\x1b[32m [repeated 7x across cluster] "
         "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
         "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication for more "
         "options.)\x1b[0m", 7, "Loading model weights took 15.6200 GB"),
        # Ray 2.10's notice points at another page.
        ("(pid=77) x [repeated 2x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
         "deduplication, or see https://docs.ray.io/en/master/ray-observability/ray-logging.html#log-deduplication for "
         "more options.)", 2, "x"),
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
    records, _ = parse_line(SPECS, "\x1b[36m(WorkerDict pid=4125, ip=10.0.0.3)\x1b[0m DEBUG:2025-06-03 07:45:58,175:dp actor "
                            "After update_policy, memory allocated (GB): 21.51, memory reserved (GB): 31.27, device memory "
                            "used/total (GB): 40.17/79.11\x1b[32m [repeated 15x across cluster]\x1b[0m")
    (row,) = records
    assert (row["pid"], row["ip"], row["repeated"], row["mem_reserved_gib"], row["ts"]) == (
        4125, "10.0.0.3", 15, 31.27, "2025-06-03 07:45:58,175")


def test_a_yaml_block_interrupted_by_its_own_worker_ends_there():
    """A Runner line that is no `key: value` closes its block: later look-alikes are not metrics."""
    block = "\n".join([
        "(Runner pid=5) Step 4", "(Runner pid=5) perf:", "(Runner pid=5)   cpu_memory_used_gb: 100.5",
        "(WorkerDict pid=9) perf: interleaved lines of others do not end it",
        "(Runner pid=5)   max_memory_allocated_gb: 30.25",
        "(Runner pid=5) Running step:   7%|▋         | 4/60 [09:51<2:18:00, 147.86s/it]",
        "(Runner pid=5)   max_memory_reserved_gb: 99.0",
    ])
    records, _ = parse_line(SPECS, block)
    (row,) = [r for r in records if r["actor"] == "Runner"]
    assert (row["step"], row["host_mem_used_gib"], row["mem_max_allocated_gib"], row["mem_max_reserved_gib"]) == (
        4, 100.5, 30.25, None)


# -- detection, forcing, several files --------------------------------------------------------------


def test_forcing_a_format_keeps_rays_events_and_drops_the_others_records(tmp_path):
    s = _sample("easyr1/fr3_geometry3k_host_stairs_raykill.log")
    path = str(_write_to(tmp_path, s))
    tables, _ = parse_sources([path], select_specs(load_specs(), "easyr1"))
    assert tables.formats == {"easyr1": len(s.truth.records)} and tables.events_of("oom")
    with pytest.raises(NoRecordsError, match=r"tried: verl\)"):
        analyze([path], format="verl")


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


# -- the spec keys of multi-line formats ------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"x.yaml": "name: x\nblock_parser: missing.py\n"}, "no such Python file in"),
        ({"x.yaml": "name: x\nblock_parser: {options: 1}\n"}, "give the module file"),
        ({"x.yaml": "name: x\nblock_parser: b.py\n", "b.py": "def create(options):\n    raise ValueError('boom')\n"},
         "cannot load (ValueError: boom)"),
        ({"x.yaml": "name: x\nblock_parser: {module: b.py, metrics: {perf/x: host_gib}}\n",
          "b.py": "from pathlib import Path\nimport importlib.util\n"
                  "spec = importlib.util.spec_from_file_location('e', Path(__file__).parent / 'easyr1_blocks.py')\n"
                  "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\ncreate = mod.create\n",
          "easyr1_blocks.py": None},
         "columns ['host_gib'] are not canonical"),
        ({"x.yaml": "name: x\nevents:\n  - {name: e, event: oom, literal: a, regex: a, continuation: {detail: t}}\n"},
         "`continuation` needs `detail:` and `regex:`"),
        ({"x.yaml": "name: x\nevents:\n  - {name: e, event: oom, literal: a, regex: a, continuation: {detail: t, regex: '(?<=x)y'}}\n"},
         "continuation: invalid"),
    ],
)
def test_invalid_multiline_keys_are_rejected_with_a_reason(tmp_path, files, message):
    from memlog.errors import FormatSpecError
    from memlog.formats import builtin_dir, load_spec

    for name, body in files.items():
        (tmp_path / name).write_text(body if body is not None else (builtin_dir() / name).read_text())
    with pytest.raises(FormatSpecError, match=re.escape(message)):
        load_spec(tmp_path / "x.yaml", plugins=True)


def test_a_users_block_parser_runs_from_a_trusted_plugins_folder(tmp_path):
    """A user format can bring its own block parser, from a folder trusted with --plugins-dir."""
    from memlog.formats import builtin_dir

    (tmp_path / "yaml_blocks.py").write_text((builtin_dir() / "easyr1_blocks.py").read_text())
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nblock_parser: {module: yaml_blocks.py, start_literal: 'Iteration ', start: '^Iteration (\\d+)$', "
        "metrics: {mem/host: host_mem_used_gib}}\n"
    )
    log = tmp_path / "run.log"
    log.write_text("Iteration 1\nmem:\n  host: 10.5\nIteration 2\nmem:\n  host: 11.0\n")
    tables, _ = parse_sources([str(log)], select_specs(load_specs(plugin_dirs=[tmp_path]), "mine"))
    assert tables.records.select("step", "host_mem_used_gib").rows() == [(1, 10.5), (2, 11.0)]


def test_a_user_spec_can_name_a_shipped_block_parser_without_trusting_anything(tmp_path):
    """`--formats-dir` and config folders run no code of their own, but reuse what memlog ships."""
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nblock_parser: {module: easyr1_blocks.py, start_literal: 'Iteration ', start: '^Iteration (\\d+)$', "
        "metrics: {mem/host: host_mem_used_gib}}\n"
    )
    log = tmp_path / "run.log"
    log.write_text("Iteration 1\nmem:\n  host: 10.5\nIteration 2\nmem:\n  host: 11.0\n")
    tables, _ = parse_sources([str(log)], select_specs(load_specs([tmp_path]), "mine"))
    assert tables.records.select("step", "host_mem_used_gib").rows() == [(1, 10.5), (2, 11.0)]
