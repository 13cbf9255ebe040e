"""The records table: what `analyze` keeps of each record (tables.Keep) must not change any record."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.base import events
from memlog.base.columns import JUDGED_COLUMNS
from memlog.base.keys import group_key
from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs
from memlog.tables import records
from memlog.tables.records import Keep, build_records, compact_records, with_seconds
from tests.samples import sample_logs

SPECS = list(load_specs().values())
SAMPLES = [str(p) for p in sample_logs()]
IDENTITY = ["source", "worker", "kind", "segment", "step", "line_no", "rank", "actor", "pid", "ip", "format", "repeated"]


def _as_text(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col(pl.Categorical).cast(pl.String))


@pytest.mark.parametrize("chunk_bytes", [4096, 8 << 20])
def test_judged_records_are_the_full_records_narrowed(chunk_bytes):
    # All samples at once (several sources, multi-line blocks, restarts), in chunks small enough
    # that blocks and merged step lines cross chunk boundaries.
    full, _ = parse_sources(SAMPLES, SPECS, chunk_bytes=chunk_bytes)
    # (each line's record: a step's several lines merged is records.step_rows', tested on its own)
    judged, _ = parse_sources(SAMPLES, SPECS, chunk_bytes=chunk_bytes, keep=dataclasses.replace(Keep.judged("tps"), per_step=False))
    assert full.records.height > 1000
    assert "ts" not in judged.records.columns and "ts" in full.records.columns
    same = [*IDENTITY, *JUDGED_COLUMNS, "tps"]
    expected = _as_text(with_seconds(full.records).select(*same, "_seconds"))
    assert _as_text(judged.records.select(*same, "_seconds")).equals(expected)
    assert judged.records["_seconds"].drop_nulls().len() > 500  # timestamps really parsed
    # What analyze does not read is absent, not wrong: null throughout.
    assert judged.records["lr"].null_count() == judged.records.height
    assert full.records["lr"].null_count() < full.records.height
    assert [e.to_json() for e in judged.events] == [e.to_json() for e in full.events]


def test_records_are_in_line_order_per_source_and_steps_ascend_per_worker():
    records, _ = parse_sources(SAMPLES, SPECS, chunk_bytes=4096)
    records = records.records
    assert records["source"].cast(pl.String).to_list() == sorted(records["source"].cast(pl.String).to_list())
    # (a progress bar's drawings split at `\r` are readings of one physical line, which numbers them all)
    assert records.select((pl.col("line_no").diff().over("source").fill_null(1) >= 0).all()).item()
    keys = ["source", "worker", "kind", "segment"]
    # Steps never go down within a segment (several lines may read one step).
    assert records.select((pl.col("step").diff().over(keys).fill_null(1) >= 0).all()).item()


def test_a_chunk_leaves_out_the_columns_it_never_fills_and_the_table_has_them_back():
    rows = pl.DataFrame(
        {
            "line_no": [3, 1],
            "actor": [None, None],
            "pid": [None, None],
            "ip": [None, None],
            "rank": [0, 0],
            "ts": ["2025-03-04 17:22:10,931", None],
            "step": [2, 1],
            "loss": [1.5, 2.0],
            "tps": [None, None],
            "mem_reserved_gib": [4.0, None],
            "format": ["torchtitan"] * 2,
            "kind": ["train"] * 2,
        },
        schema_overrides={"actor": pl.String, "pid": pl.Int64, "ip": pl.String, "tps": pl.Float64},
    )
    chunk = compact_records("run.log", [rows], Keep.judged())
    assert not {"actor", "pid", "ip", "tps", "ts"} & set(chunk.columns)
    assert chunk["worker"].dtype == pl.Categorical and chunk["_seconds"].null_count() == 1
    records = build_records([chunk])
    assert records["line_no"].to_list() == [1, 3]  # out-of-order rows (a multi-line block) sorted
    assert {"actor", "pid", "ip", "tps"} <= set(records.columns)
    assert records["pid"].null_count() == 2 and records["mem_reserved_gib"].to_list() == [None, 4.0]


def test_group_key_groups_rows_as_the_columns_do():
    frame = pl.DataFrame(
        {"source": ["a.log", "b.log", "a.log", "b.log", "a.log"], "worker": ["rank1", "rank1", "rank10", "rank1", "rank1"], "segment": [0, 3, 0, 3, 1]}
    ).with_columns(pl.col("source", "worker").cast(pl.Categorical))
    keys = ["source", "worker", "segment"]
    expected = frame.select(pl.int_range(pl.len()).over(keys).alias("i"), pl.len().over(keys).alias("n"))
    key = group_key(frame, keys)
    assert "as_struct" not in str(key)  # packed into one integer
    assert frame.select(pl.int_range(pl.len()).over(key).alias("i"), pl.len().over(key).alias("n")).equals(expected)
    # What cannot be packed is grouped by the columns themselves.
    assert "as_struct" in str(group_key(frame.with_columns(pl.col("source").cast(pl.String)), keys))
    assert "as_struct" in str(group_key(frame.with_columns(segment=pl.lit(-1)), keys))


RAY_PID_ON_TWO_NODES = """\
(TaskRunner pid=100) step:1 - actor/pg_loss:0.1 - perf/max_memory_allocated_gb:10.0 - perf/max_memory_reserved_gb:12.0 - perf/cpu_memory_used_gb:30.0
(WorkerDict pid=3611, ip=10.0.0.9) dp actor After update_policy, memory allocated (GB): 20.13, memory reserved (GB): 31.54, device memory used/total (GB): 33.02/79.11
(WorkerDict pid=3611, ip=10.0.0.3) dp actor After update_policy, memory allocated (GB): 20.13, memory reserved (GB): 31.54, device memory used/total (GB): 33.02/79.11
(TaskRunner pid=100) step:2 - actor/pg_loss:0.1 - perf/max_memory_allocated_gb:10.0 - perf/max_memory_reserved_gb:12.0 - perf/cpu_memory_used_gb:30.0
(raylet, ip=10.0.0.3) Memory on the node (IP: 10.0.0.3, ID: abc) where the task (actor ID: 8a, name=hyfD5YWorkerDict_0:1:WorkerDict.__init__, pid=3611, memory used=68.73GB) was running was 304.56GB / 314.66GB (0.967883), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 55)
"""


def test_a_pid_under_two_labels_is_named_as_the_first_label_in_sorted_order_not_in_line_order(tmp_path):
    # The records are in line order now; the pid's label must not follow it (10.0.0.9 comes first).
    log = tmp_path / "ray.log"
    log.write_text(RAY_PID_ON_TWO_NODES)
    tables, _ = parse_sources([str(log)], SPECS, keep=Keep.judged())
    assert [(e.kind, e.worker, e.after_step) for e in tables.events] == [("oom", "WorkerDict pid=3611, ip=10.0.0.3", 2)]


def test_events_find_their_last_step_when_the_label_codes_cannot_be_packed(monkeypatch):
    # Label codes grow with every distinct string a process has seen; past 64 bits the as-of join
    # goes by the columns themselves (polars cannot join as-of by a struct) with the same answers.
    packed, _ = parse_sources(SAMPLES, SPECS, keep=Keep.judged())
    monkeypatch.setattr(events, "packed_key", lambda frame, columns: None)
    unpacked, _ = parse_sources(SAMPLES, SPECS, keep=Keep.judged())
    assert sum(e.after_step is not None for e in packed.events) > 20
    assert [e.to_json() for e in unpacked.events] == [e.to_json() for e in packed.events]
    assert unpacked.records.equals(packed.records)


_HELD_ROWS = """
import gc, sys
import polars as pl
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import ChunkParser
from memlog.tables.records import detached

EVENT = "[rank0]:[titan] 2025-03-04 17:22:10,931 - root - INFO - CUDA capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory"
parser = ChunkParser(load_specs().values())

def anon_mib():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["RssAnon"].split()[0]) / 1024

def chunk(n):  # ~3.5 MiB of step lines (which the parser unwraps too), its line 7 an event line
    step = "[rank0]:[titan] 2025-03-04 17:22:10,931 - root - INFO - step: {}  loss:  7.4512  memory: 52.33GiB(55.08%)  chunk {}"
    return pl.DataFrame({"line_no": range(20_000), "text": [EVENT if i == 7 else step.format(i, n) for i in range(20_000)]})

def held_growth(keep):
    keep(chunk(-1))  # whatever the first call allocates for good (the parser's regexes) is not counted
    held, before = [], anon_mib()
    for n in range(20):  # one row of each of 20 chunks held
        held.append(keep(chunk(n)))
        gc.collect()
    assert all(frame["text"][0].endswith("79.11GiB memory") for frame in held)
    return anon_mib() - before

def filtered(lines):
    return lines.filter(pl.col("line_no") == 7)

def parsed(lines):  # the event rows the parser hands out
    (events,) = parser.absorb(parser.scan(lines)).events
    return events

print(held_growth(filtered), held_growth(lambda lines: detached(filtered(lines))), held_growth(parsed))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RssAnon from /proc")
def test_rows_held_from_a_chunk_do_not_keep_its_text():
    """Event rows are held to the end of the input (analyze) or of the run (watch); a row filtered out
    of a chunk shares the chunk's string buffers, so the parser hands its event rows out detached.
    Measured in a fresh process whose allocator returns freed pages at once."""
    env = {**os.environ, "_RJEM_MALLOC_CONF": "narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0"}
    out = subprocess.run([sys.executable, "-c", _HELD_ROWS], capture_output=True, text=True, env=env, check=True).stdout
    shared, copied, parsed = map(float, out.split())  # MiB held by 20 rows kept from 20 chunks
    assert shared > 40, f"polars no longer shares a filtered row's buffers ({shared:.0f} MiB held): detached may be dropped"
    assert copied < 8, f"detached rows still hold their chunks: {copied:.0f} MiB for 20 rows"
    # The parser itself keeps a few MiB over 20 chunks (~6); its event rows holding the chunks' text: ~29.
    assert parsed < 15, f"the event rows the parser hands out hold their chunks: {parsed:.0f} MiB for 20 chunks"


def test_rows_in_line_order_are_the_sorted_rows():
    """records._in_line_order copies column by column, sorting only the sources that need it: the
    same rows, columns and order as concatenating and sorting by source and line."""
    import random

    from memlog.tables.records import _in_line_order

    rng = random.Random(5)
    for _ in range(30):
        frames = []
        for _ in range(rng.randint(1, 6)):
            source, n = rng.choice("abc"), rng.randint(1, 40)
            lines = rng.sample(range(1000), n) if rng.random() < 0.5 else sorted(rng.sample(range(1000), n))
            columns = {"source": [source] * n, "line_no": lines, "loss": [rng.random() for _ in range(n)]}
            if rng.random() < 0.5:
                columns["mem_reserved_gib"] = [rng.choice([None, 1.5]) for _ in range(n)]
            frames.append(pl.DataFrame(columns).with_columns(pl.col("source").cast(pl.Categorical)))
        expected = pl.concat(frames, how="diagonal_relaxed").with_row_index("_i")
        expected = expected.sort(pl.col("source").cast(pl.String), "line_no", "_i").drop("_i")
        got = _in_line_order(list(frames))
        assert got.equals(expected)
        assert all(got[c].n_chunks() == 1 for c in got.columns)


def test_timestamps_read_by_the_common_shape_as_by_the_general_one():
    """records._seconds reads `YYYY-MM-DD HH:MM:SS,mmm` by a fixed format and every other shape the
    general way: on timestamps of every shape (fractions of 0-7 digits, `.` or `,`, a `T`, digits
    unpadded, days and hours out of range, garbage), mixed with the common one, the seconds are those
    the general way alone reads."""
    import random

    from memlog.tables.records import _seconds

    rng = random.Random(5)

    def stamp() -> str | None:
        if rng.random() < 0.05:
            return None
        y, mo, d, h, mi, s = rng.randint(1970, 2100), rng.randint(0, 13), rng.randint(0, 32), rng.randint(0, 25), rng.randint(0, 60), rng.randint(0, 61)
        pad = (lambda v: f"{v:02d}") if rng.random() < 0.9 else str
        fraction = "" if rng.random() < 0.1 else rng.choice(",.") + "".join(rng.choice("0123456789") for _ in range(rng.choice([0, 1, 2, 3, 3, 3, 4, 6, 7])))
        text = f"{y}-{pad(mo)}-{pad(d)}{rng.choice(' T') if rng.random() < 0.2 else ' '}{pad(h)}:{pad(mi)}:{pad(s)}{fraction}"
        return text + rng.choice(["", "", "", "x", " "]) if rng.random() < 0.1 else text

    general = (
        pl.col("ts")
        .str.replace(",", ".", literal=True)
        .str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
        .dt.epoch("ms")
        / 1000
    )
    for mixed in (0.0, 0.5, 0.99):  # share of the common shape
        rows = pl.DataFrame(
            {"ts": [f"2025-09-12 01:02:{rng.randint(0, 59):02d},{rng.randint(0, 999):03d}" if rng.random() < mixed else stamp() for _ in range(3000)]},
            schema={"ts": pl.String},
        )
        mine = _seconds(rows)
        assert mine.to_list() == rows.select(general)["ts"].to_list()
        assert mine.drop_nulls().len() > 1000


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=5), st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=2**31))
def test_copies_that_never_cross_keep_the_numbers_of_their_size(copies, steps, seed):
    """A collided worker's copies that stay apart (levels further apart than their wander) keep the
    number their size gave them at the first step, in whatever order their lines come and though some
    steps miss a copy (ordering by size at each step renumbered the others there)."""
    rng = random.Random(seed)
    rows = []
    for step in range(1, steps + 1):
        present = [c for c in range(copies) if step == 1 or rng.random() > 0.1] or [0]
        rng.shuffle(present)  # the order their lines come in at a step is any
        rows += [(step, 10.0 * (c + 1) + 0.01 * step * (c % 2) + rng.uniform(-0.5, 0.5), c) for c in present]
    frame = pl.DataFrame(
        {
            "_i": list(range(len(rows))),
            "source": "a",
            "worker": "rank0",
            "kind": "train",
            "segment": 0,
            "pattern": "p",
            "step": [r[0] for r in rows],
            "_value": [r[1] for r in rows],
        }
    )
    got = records._tracked_copies(frame)
    assert all(copy == c + 1 for (_, _, c), copy in zip(rows, got))  # the lowest level is #1, and so on


def _collided(rows: list[tuple[str, int, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": "s",
            "worker": [r[0] for r in rows],
            "kind": "train",
            "segment": 0,
            "pattern": "p",
            "step": [r[1] for r in rows],
            "loss": [r[2] for r in rows],
            "collided": True,
        }
    )


COLLIDED_AT_STEP = ["source", "worker", "kind", "segment", "step", "pattern"]


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=2, max_value=4), st.integers(min_value=2, max_value=30), st.integers(min_value=0, max_value=2**31), st.booleans())
def test_copies_followed_are_taken_by_size_only_where_following_gives_that(copies, steps, seed, gaps):
    """Copies told apart (here every worker's: the threshold lowered) get the numbers following them
    gives, whether records._copies takes them by size in polars (where following them would number
    them so) or follows them in Python: levels 10 GiB apart, one copy rising or falling through its
    neighbours, steps that miss a copy."""
    rng = random.Random(seed)
    rise = [rng.choice([0.0, 0.05, -0.05]) for _ in range(copies)]
    rise[rng.randrange(copies)] = rng.choice([0.0, 0.4, -0.4, 1.0])
    rows = []
    for worker in ("a", "b"):
        for step in range(1, steps + 1):
            present = [c for c in range(copies) if not gaps or step == 1 or rng.random() > 0.15]
            rng.shuffle(present)
            rows += [(worker, step, round(20 + 10 * c + rise[c] * step + rng.choice([0.0, 0.01, -0.01]), 2)) for c in present]
    frame = _collided(rows)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(records, "COPIES_APART", -1e300)
        got = records._copies(frame, COLLIDED_AT_STEP)["_copy"].to_list()
    followed = frame.with_row_index("_i").select("_i", *(k for k in COLLIDED_AT_STEP if k != "step"), "step", _value=pl.col("loss"))
    assert got == records._tracked_copies(followed)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=8), st.integers(min_value=2, max_value=30), st.integers(min_value=0, max_value=2**31))
def test_copies_that_mingle_are_numbered_by_size_at_each_step(copies, steps, seed):
    """Copies whose readings mingle (one level, each step's readings in any order) say nothing of which
    is which: each step's readings are numbered by size, as before copies were followed."""
    rng = random.Random(seed)
    rows = [("a", step, round(31.6 + rng.uniform(-0.05, 0.05), 3)) for step in range(1, steps + 1) for _ in range(copies)]
    got = records._copies(_collided(rows), COLLIDED_AT_STEP)["_copy"].to_list()
    by_size = _collided(rows).select(pl.col("loss").rank("ordinal").over("step").cast(pl.Int64))["loss"].to_list()
    assert got == by_size
