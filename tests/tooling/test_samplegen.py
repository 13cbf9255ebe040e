"""The sample-log generator: committed logs match it, it is deterministic, and its
ground truth agrees with independent checks on the text. Files in sample_logs/ the
generator does not write are hand-written samples: they need only their golden."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.samplegen import build_all, write_all
from tests.samples import sample_logs

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_LOGS = REPO_ROOT / "sample_logs"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:")

SAMPLES = build_all()
IDS = [s.path for s in SAMPLES]
# The checks below that re-read torchtitan's step lines apply to the torchtitan samples only;
# other formats' generators are checked against memlog's parse in tests/parsers/.
TITAN = [s for s in SAMPLES if s.path.startswith("torchtitan/")]
TITAN_IDS = [s.path for s in TITAN]

# A substring every line carrying an event of that kind contains.
EVENT_MARKERS = {
    "capacity": " capacity: ",
    "model_memory": " memory usage for model: ",
    "alloc_retries": " memory allocation retries.",
    "oom_count": " OOM errors thrown.",
    "oom": "torch.OutOfMemoryError: CUDA out of memory.",
    "pp_loss_not_visible": "Pipeline Parallel loss is not visible.",
}


def physical_lines(text: str) -> list[str]:
    """Lines as numbered in the truth: split on \\n only (a \\r stays inside its line)."""
    assert text.endswith("\n")
    return text[:-1].split("\n")


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_committed_log_matches_generator(sample):
    path = SAMPLE_LOGS / sample.path
    assert path.exists(), f"{path} missing: run `python -m tests.samplegen`"
    assert path.read_bytes() == sample.text.encode("utf-8"), f"{path} differs from the generator: run `python -m tests.samplegen`"


def hand_written() -> list[str]:
    """Sample logs the generator does not write (hand-written or real logs)."""
    on_disk = {p.relative_to(SAMPLE_LOGS).as_posix() for p in sample_logs()}
    return sorted(on_disk - set(IDS))


def test_hand_written_sample_logs_need_only_their_golden(tmp_path):
    from tests.engine.test_golden import golden_path

    for name in hand_written():
        assert golden_path(SAMPLE_LOGS / name).exists(), f"hand-written sample_logs/{name} needs its golden"
    # The generator leaves files it does not write alone.
    (tmp_path / "torchtitan").mkdir()
    mine = tmp_path / "torchtitan" / "hand_written.log"
    mine.write_bytes(b"by hand\n")
    write_all(tmp_path)
    assert mine.read_bytes() == b"by hand\n"


def test_building_twice_gives_identical_bytes_and_truth():
    again = build_all()
    assert [s.path for s in again] == IDS
    for first, second in zip(SAMPLES, again):
        assert first.text == second.text
        assert first.truth == second.truth
        assert first.description == second.description


def test_write_all_keeps_bytes_exactly(tmp_path):
    written = write_all(tmp_path)
    assert len(written) == len(SAMPLES)
    for sample in SAMPLES:
        data = (tmp_path / sample.path).read_bytes()
        assert data == sample.text.encode("utf-8")
    assert any(b"\r" in (tmp_path / s.path).read_bytes() for s in SAMPLES)
    assert all(b"\x1b[" in (tmp_path / s.path).read_bytes() for s in TITAN)


@pytest.mark.parametrize("sample", SAMPLES, ids=IDS)
def test_sample_is_small_and_described(sample):
    assert len(sample.text.encode("utf-8")) < 300_000
    assert sample.description.endswith(".") and "\n" not in sample.description
    if sample in TITAN:
        assert sample.truth.capacity_gib == 79.11


@pytest.mark.parametrize("sample", TITAN, ids=TITAN_IDS)
def test_record_count_matches_step_lines(sample):
    lines = [ANSI.sub("", line) for line in physical_lines(sample.text)]
    train_lines = [line for line in lines if "step:" in line and "validate step:" not in line]
    validate_lines = [line for line in lines if "validate step:" in line]
    kinds = [r["kind"] for r in sample.truth.records]
    assert kinds.count("train") == len(train_lines)
    assert kinds.count("validate") == len(validate_lines)


@pytest.mark.parametrize("sample", TITAN, ids=TITAN_IDS)
def test_records_agree_with_the_text_in_order(sample):
    """Re-read rank, step, loss and memory from each step line with a simple regex."""
    step_re = re.compile(r"(validate )?step:\s*(\d+)\s+loss:\s*(-?[\d.]+).*?memory:\s*([\d.]+)GiB\(([\d.]+)%\)")
    parsed = []
    for line in physical_lines(sample.text):
        plain = ANSI.sub("", line)
        m = step_re.search(plain)
        if m:
            rank = RANK_PREFIX.match(plain)
            parsed.append(
                {
                    "rank": int(rank.group(1)) if rank else None,
                    "step": int(m.group(2)),
                    "kind": "validate" if m.group(1) else "train",
                    "loss": float(m.group(3)),
                    "mem_peak_reserved_gib": float(m.group(4)),
                    "mem_peak_reserved_pct": float(m.group(5)),
                }
            )
    records = [{k: r[k] for k in parsed[0]} for r in sample.truth.records]
    assert records == parsed


@pytest.mark.parametrize("sample", TITAN, ids=TITAN_IDS)
def test_memory_percent_is_of_capacity(sample):
    cap = sample.truth.capacity_gib
    for r in sample.truth.records:
        # both printed values are rounded to 0.01
        assert abs(r["mem_peak_reserved_pct"] - 100 * r["mem_peak_reserved_gib"] / cap) < 0.012, r


@pytest.mark.parametrize("sample", TITAN, ids=TITAN_IDS)
def test_events_point_at_their_lines(sample):
    lines = physical_lines(sample.text)
    for ev in sample.truth.events:
        line = lines[ev["line_no"] - 1]
        assert EVENT_MARKERS[ev["kind"]] in line, (ev, line)
        if ev["rank"] is not None:
            assert line.startswith(f"[rank{ev['rank']}]:"), (ev, line)
    # ... and every rank-prefixed line with a marker is an event
    for kind, marker in EVENT_MARKERS.items():
        expected = [i + 1 for i, line in enumerate(lines) if marker in line and RANK_PREFIX.match(line)]
        got = [ev["line_no"] for ev in sample.truth.events if ev["kind"] == kind]
        assert got == expected, kind


def test_only_known_event_kinds_and_record_keys():
    allowed = {"rank", "step", "kind", "loss", "grad_norm", "mem_peak_reserved_gib", "mem_peak_reserved_pct", "tps", "tflops", "mfu_pct"}
    for sample in TITAN:
        for r in sample.truth.records:
            assert set(r) <= allowed, r
            assert isinstance(r["tps"], int)
        for ev in sample.truth.events:
            assert ev["kind"] in EVENT_MARKERS


def _sample(name: str):
    return next(s for s in SAMPLES if s.path == f"torchtitan/{name}.log")


def test_fr1_leak_until_oom_on_every_rank():
    s = _sample("fr1_pp2_ep2_leak_oom")
    steps = sorted({r["step"] for r in s.truth.records})
    assert steps == [1, 2, 3, 4, 5, 6]
    for rank in range(4):
        mem = [r["mem_peak_reserved_gib"] for r in s.truth.records if r["rank"] == rank]
        deltas = [b - a for a, b in zip(mem, mem[1:])]
        assert all(9.3 < d < 9.7 for d in deltas), (rank, deltas)
        losses = {r["loss"] for r in s.truth.records if r["rank"] == rank}
        assert (losses == {-1.0}) == (rank in (0, 1))
    assert sorted(ev["rank"] for ev in s.truth.events if ev["kind"] == "oom") == [0, 1, 2, 3]
    assert "grad_norm" not in s.truth.records[0] and "tflops" in s.truth.records[0]
    assert not [ev for ev in s.truth.events if ev["kind"] == "pp_loss_not_visible"]


def test_fr2_every_tenth_step_on_rank0_in_2024_format():
    s = _sample("fr2_logfreq_creep")
    assert [r["step"] for r in s.truth.records] == [1] + list(range(10, 1001, 10))
    assert {r["rank"] for r in s.truth.records} == {0}
    assert set(s.truth.records[0]) == {"rank", "step", "kind", "loss", "mem_peak_reserved_gib", "mem_peak_reserved_pct", "tps", "mfu_pct"}
    mem = [r["mem_peak_reserved_gib"] for r in s.truth.records]
    assert 33.9 < mem[0] < 34.3 and 41.6 < mem[1] < 42.0 and 44.4 < mem[-1] < 45.0
    assert "[titan]" not in s.text


def test_fr5_plateau_stages_and_validation():
    s = _sample("fr5_pp8_warmup_plateau")
    train = [r for r in s.truth.records if r["kind"] == "train"]
    val = [r for r in s.truth.records if r["kind"] == "validate"]
    assert len(train) == 240 and sorted(r["rank"] for r in val) == list(range(8))
    assert {r["step"] for r in val} == {25}
    for r in train:
        assert (r["loss"] == -1.0) == (r["rank"] < 4)
        assert "grad_norm" in r


def test_fr5_two_points_warns_about_rank4():
    s = _sample("fr5_two_points")
    assert [(r["rank"], r["step"], r["loss"], r["mem_peak_reserved_gib"]) for r in s.truth.records] == [(0, 1, -1.0, 19.5), (0, 10, -1.0, 33.8)]
    assert [ev["loss_rank"] for ev in s.truth.events if ev["kind"] == "pp_loss_not_visible"] == [4]


def test_stable_newest_flat_with_cumulative_retries():
    s = _sample("stable_newest")
    assert len(s.truth.records) == 82
    assert all(r["mfu_pct"] is None for r in s.truth.records)
    retries = [ev for ev in s.truth.events if ev["kind"] == "alloc_retries"]
    assert len(retries) == 11 and {(ev["rank"], ev["count"]) for ev in retries} == {(1, 2)}
    for rank, level in ((0, 23.41), (1, 23.38)):
        mem = [r["mem_peak_reserved_gib"] for r in s.truth.records if r["rank"] == rank]
        assert max(abs(m - level) for m in mem) <= 0.02 + 1e-9
