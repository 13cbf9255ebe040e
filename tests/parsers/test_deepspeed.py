"""DeepSpeed (parsers/deepspeed.yaml): parsing the DeepSpeed sample logs (bare, under the HF Trainer,
and inside Open-Reasoner-Zero's Ray actors) gives exactly the generator's ground truth, whose step
rules the generator's merge_readings implements; verdicts are sane; `formats check` reports every
format a sample uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.base.columns import ALL_VALUE_COLUMNS
from memlog.base.events import typed_detail
from memlog.cli import app
from memlog.engine.api import analyze, parse_sources
from memlog.parse.catalog import load_specs
from tests.samplegen import build_all
from tests.samplegen.deepspeed import merge_readings, reading

SAMPLES = [s for s in build_all() if s.path.startswith("deepspeed/")]
SPECS = list(load_specs().values())
# Detail fields the generator records per event kind (the rest of an event's detail is not compared).
EVENT_FIELDS = {
    "version": ("framework", "version", "git_hash", "git_branch"),
    "overflow": ("loss_scale", "new_loss_scale"),
    "alloc_retries": ("new_retries",),
    "oom": ("tried", "capacity", "free"),
    "exception": ("exception",),
}
runner = CliRunner()


def _write(sample, directory: Path) -> Path:
    path = directory / Path(sample.path).name
    path.write_bytes(sample.text.encode())
    return path


@pytest.fixture(scope="module", params=SAMPLES, ids=[s.path for s in SAMPLES])
def parsed(request, tmp_path_factory):
    sample = request.param
    path = _write(sample, tmp_path_factory.mktemp("s"))
    tables, _ = parse_sources([str(path)], SPECS)
    return sample, tables, path


def _as_read(record: dict) -> tuple:
    """A record as (worker, kind, step, reading, its non-null values), values to 12 significant digits."""
    values = tuple(sorted((c, float(f"{record[c]:.12g}")) for c in ALL_VALUE_COLUMNS if record.get(c) is not None))
    return record["worker"], record["kind"], record["step"], record["reading"], values


def test_every_record_with_exact_values(parsed):
    """One record per line read, with exactly the values the generator printed on it."""
    sample, tables, _ = parsed
    got = sorted(map(_as_read, tables.records.iter_rows(named=True)), key=str)
    assert got == sorted(map(_as_read, sample.truth.records), key=str)


def test_events_on_their_lines(parsed):
    sample, tables, _ = parsed
    for kind, fields in EVENT_FIELDS.items():
        typed = [(e["line_no"], typed_detail(kind, {f: e.get(f) for f in fields})) for e in sample.truth.events if e["kind"] == kind]
        expected = sorted((line, tuple(detail.get(f) for f in fields)) for line, detail in typed)
        got = sorted((e.line_no, tuple(e.detail.get(f) for f in fields)) for e in tables.events if e.kind == kind)
        assert got == expected, kind
    # ... and nothing beyond what the generator put there (restarts would mean a step went back).
    assert {e.kind for e in tables.events} <= set(EVENT_FIELDS)


def _sample(name: str):
    return next(s for s in SAMPLES if s.path == f"deepspeed/{name}.log")


def by_step(records: list[dict]) -> list[dict]:
    """The readings of each (worker, kind, step) merged, each value its last: the state a step ends in."""
    merged: dict[tuple, dict] = {}
    for r in sorted(records, key=lambda r: r["reading"]):
        merged.setdefault((r["worker"], r["kind"], r["step"]), {}).update({k: v for k, v in r.items() if v is not None})
    return sorted(merged.values(), key=lambda r: (r["worker"], r["kind"], r["step"]))


def test_orz_workers_are_the_ray_actors_and_the_driver():
    sample = _sample("fr4_orz_offload_leak")
    workers = {r["worker"] for r in sample.truth.records}
    # The reference model never steps: its init readings join the source's first step.
    assert workers == {"PolicyRayActorBase pid=2841", "CriticRayActorBase pid=2912", "RefRayActorBase pid=2770", "main"}
    policy = [r for r in by_step(sample.truth.records) if r["worker"].startswith("Policy") and "mem_allocated_gib" in r]
    steps = [r["step"] for r in policy]
    assert steps == list(range(0, 2401, 100)), "init (step 0) then every 100 optimizer steps"
    rises = [b["mem_allocated_gib"] - a["mem_allocated_gib"] for a, b in zip(policy[1:], policy[2:])]
    assert all(1.1 < d < 1.6 for d in rises), rises
    losses = [r for r in by_step(sample.truth.records) if r["worker"] == "main"]
    assert [r["step"] for r in losses] == list(range(1, 201)), "ORZ status dicts numbered per PPO iteration"


def test_fragmentation_sample_reserved_rises_allocated_flat():
    sample = _sample("memory_breakdown_fragmentation")
    train = [r for r in by_step(sample.truth.records) if r["step"] >= 1]
    assert len({r["mem_allocated_gib"] for r in train[:-1]}) == 1
    reserved = [r["mem_reserved_gib"] for r in train]
    assert reserved == sorted(reserved) and reserved[-1] - reserved[0] > 10


def test_hf5_sample_numbers_steps_by_its_loss_dicts():
    sample = _sample("healthy_hf5_bare_memory")
    assert [r["step"] for r in by_step(sample.truth.records)] == list(range(1, 61))
    assert "[INFO]" not in sample.text and "MA 5.87 GB         Max_MA" in sample.text


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.path for s in SAMPLES])
def test_verdict_is_sane(sample, tmp_path):
    """Field report 4: the ORZ run leaks (allocated creeps); reserved growing over flat allocated
    is fragmentation, not a leak; the healthy runs are not leaks either."""
    report = analyze([str(_write(sample, tmp_path))])
    if "orz_offload_leak" in sample.path:
        assert report.verdict == "leak"
        assert "oom" in {f.rule for f in report.findings}
    else:
        assert report.verdict != "leak"


def test_merge_readings_follows_the_same_rules():
    readings = [
        reading("w", mem_allocated_gib=1.0),
        reading("w", ordinal=True, loss=2.0),
        reading("w", mem_allocated_gib=3.0),
        reading("v", mem_allocated_gib=9.0),
    ]
    assert merge_readings(readings) == [
        {"worker": "w", "kind": "train", "step": 1, "reading": 0, "mem_allocated_gib": 1.0},
        {"worker": "w", "kind": "train", "step": 1, "reading": 0, "loss": 2.0},
        {"worker": "w", "kind": "train", "step": 1, "reading": 1, "mem_allocated_gib": 3.0},
        {"worker": "v", "kind": "train", "step": 1, "reading": 0, "mem_allocated_gib": 9.0},
    ]


def test_formats_check_sample_log_reports_every_format_it_uses(parsed):
    sample, tables, path = parsed
    result = runner.invoke(app, ["formats", "check", str(path)])
    assert result.exit_code == 0
    for name, count in tables.formats.items():
        assert f"{name}: {count:,} step record" in result.stdout
