"""The guard inside a run (memlog/guard/guard.py), on injected readings (ReplayReader) and a fake clock:
what it decides and when, the cadence of its judgements, the file it writes, and the culprits it
names from two allocator snapshots. No test here needs torch; the frameworks' callbacks and the
agreement across processes have tests of their own (test_guard_hf.py, test_guard_lightning.py,
test_guard_distributed.py)."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.guard import Guard, Reading, ReplayReader
from memlog.guard import guard as guard_module
from memlog.guard.agree import Agreed
from memlog.guard.readings import GIB, CudaReader, HostReader
from memlog.guard.snapshot import load_snapshot
from tests.guard_readings import Clock, healthy, leaking
from tests.logwriters import snapshots

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
SCHEMAS = {kind: json.loads(runner.invoke(app, ["schema", "--kind", kind]).stdout) for kind in ("guard", "report", "snapshot")}


def run(guard: Guard, clock: Clock, steps: int, seconds_per_step: float = 1.0, settle: bool = False) -> list:
    """The loop: train, step the guard; stops when told. The decisions, one per step."""
    decisions = []
    for step in range(1, steps + 1):
        clock.now += seconds_per_step
        decisions.append(guard.step(step))
        if settle:
            guard.settle()
        if decisions[-1].should_stop:
            break
    return decisions


def acted(decisions: list) -> list[tuple[int, str]]:
    return [(d.step, d.action) for d in decisions if d.action != "continue"]


def test_a_leak_is_warned_then_stopped_before_the_projected_oom(tmp_path):
    clock = Clock()
    guard = Guard(leaking(), report_dir=tmp_path, background=False, clock=clock)
    decisions = run(guard, clock, 2000)
    (warned, _), (stopped, _) = acted(decisions)
    assert [a for _, a in acted(decisions)] == ["warn", "stop"]
    assert 60 < warned <= 90  # a leak from step 60, found within a judgement or two
    full = 360  # 20 GiB + 0.2 GiB/step from step 60 reaches 80 GiB at step 360
    assert full - 200 - guard.every // 5 <= stopped <= full - 200, stopped  # within_steps=200 before it, in time to act
    last = decisions[-1]
    assert last.should_save and last.should_stop and last.by_rank == 0 and last.verdict == "leak"
    assert abs(last.projected_oom_step - full) < 5 and "projected OOM at step" in last.reason
    assert guard.step(stopped + 1).should_stop  # a loop that goes on is told again
    guard.close()
    document = json.loads(guard.path.read_text())
    assert [a["action"] for a in document["guard"]["actions"]] == ["warn", "stop"] and document["report"]["verdict"] == "leak"


def test_a_healthy_run_near_its_capacity_is_never_stopped(tmp_path):
    clock = Clock()
    guard = Guard(healthy(), report_dir=tmp_path, background=False, clock=clock)
    decisions = run(guard, clock, 3000)
    guard.close()
    assert acted(decisions) == [] and len(decisions) == 3000
    assert guard.report.verdict == "warmup-plateau" and guard.judgements >= 3000 // guard.every
    assert json.loads(guard.path.read_text())["guard"]["decision"]["action"] == "continue"


def test_a_long_warmup_towards_the_capacity_is_at_most_warned_of(caplog):
    """A rise that bends over ~150 steps towards 70 of 80 GiB reads as a leak until it bends, with
    an OOM projected ever further off: it may be warned of (and the warning withdrawn), never
    saved or stopped for."""
    clock = Clock()
    with caplog.at_level(logging.WARNING, logger="memlog.guard"):
        decisions = run(Guard(healthy(warmup=50.0), report_dir=None, background=False, clock=clock), clock, 1000)
    assert len(decisions) == 1000 and not any(d.should_save for d in decisions)
    assert [a for _, a in acted(decisions)] == ["warn"] and "the leak found before is no longer found" in caplog.text


def test_policies_checkpoint_once_and_warn_instead_of_stopping(tmp_path):
    clock = Clock()
    decisions = run(Guard(leaking(), on_leak="checkpoint", report_dir=None, background=False, clock=clock), clock, 400)
    actions = acted(decisions)
    assert [a for _, a in actions] == ["checkpoint", "stop"]
    assert decisions[actions[0][0] - 1].should_save and not decisions[actions[0][0] - 1].should_stop
    assert not decisions[actions[0][0]].should_save  # one checkpoint, not one per step
    clock = Clock()
    decisions = run(Guard(leaking(), on_leak="continue", on_oom="warn", report_dir=None, background=False, clock=clock), clock, 400)
    assert [a for _, a in acted(decisions)] == ["warn"] and len(decisions) == 400


def test_thresholds_and_capacity_are_the_engines(tmp_path):
    """The guard judges with memlog's rules and config (one engine): a config that asks for more
    growth than the run shows finds no leak; without a capacity there is nothing to project."""
    config = tmp_path / "memlog.yaml"
    config.write_text("rules:\n  memory-leak: {min_growth_gib: 1000}\n")
    clock = Clock()
    assert acted(run(Guard(leaking(), config=str(config), report_dir=None, background=False, clock=clock), clock, 350)) == []
    clock = Clock()
    blind = run(Guard(leaking(capacity=None), report_dir=None, background=False, clock=clock), clock, 350)
    assert [a for _, a in acted(blind)] == ["warn"]  # a leak, but no capacity to reach
    clock = Clock()
    told = run(Guard(leaking(capacity=None), capacity_gib=80.0, report_dir=None, background=False, clock=clock), clock, 350)
    assert [a for _, a in acted(told)] == ["warn", "stop"]


def judged_at(guard: Guard, clock: Clock, steps: int, seconds_per_step: float = 1.0) -> list[int]:
    """The steps at which a judgement was made."""
    found, before = [], 0
    for step in range(1, steps + 1):
        clock.now += seconds_per_step
        guard.step(step)
        if guard.judgements > before:
            found.append(step)
            before = guard.judgements
    return found


def test_judgements_come_every_n_readings_and_sooner_on_a_new_high():
    flat = ReplayReader(lambda step: Reading(allocated_gib=30.0, capacity_gib=80.0))
    clock = Clock()
    steps = judged_at(Guard(flat, report_dir=None, background=False, clock=clock), clock, 500)
    assert steps == [50, 100, 150, 200, 250, 300, 350, 400, 450, 500]
    clock = Clock()
    rising = judged_at(Guard(leaking(onset=0, rate=0.01), report_dir=None, background=False, clock=clock, on_oom="warn"), clock, 300)
    assert rising[0] == 50 and {b - a for a, b in zip(rising, rising[1:])} == {10}, rising  # new highs at every step: every 50 // 5


def test_judging_takes_at_most_a_tenth_of_the_time(monkeypatch):
    """A judgement waits REST times its own duration: one that takes 1 s, on steps of 0.1 s, leaves
    at least 90 steps between judgements even while a leak sets new highs at every step."""
    clock = Clock()
    real = guard_module.judge_held

    def slow(*args, **kwargs):
        clock.now += 1.0
        return real(*args, **kwargs)

    monkeypatch.setattr(guard_module, "judge_held", slow)
    steps = judged_at(Guard(leaking(onset=0, rate=0.01), report_dir=None, background=False, clock=clock, on_oom="warn"), clock, 600, 0.1)
    assert len(steps) >= 4 and min(b - a for a, b in zip(steps, steps[1:])) >= 90, steps


def test_judging_on_its_own_thread_decides_alike():
    clock = Clock()
    sync = acted(run(Guard(leaking(), report_dir=None, background=False, clock=clock), clock, 2000))
    clock = Clock()
    guard = Guard(leaking(), report_dir=None, background=True, clock=clock)
    threaded = acted(run(guard, clock, 2000, settle=True))  # each judgement taken up before the next step
    guard.close()
    assert [a for _, a in threaded] == [a for _, a in sync]
    assert all(0 <= t - s <= 1 for (t, _), (s, _) in zip(threaded, sync)), (threaded, sync)


def test_a_failing_judgement_never_raises_into_training(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise ValueError("a bug in a rule")

    monkeypatch.setattr(guard_module, "judge_held", broken)
    clock = Clock()
    with caplog.at_level(logging.ERROR, logger="memlog.guard"):
        decisions = run(Guard(leaking(), report_dir=None, background=True, clock=clock), clock, 300, settle=True)
    assert len(decisions) == 300 and acted(decisions) == []
    assert "judging the readings failed" in caplog.text and "a bug in a rule" in caplog.text


def test_the_file_beside_the_run_follows_the_published_schemas(tmp_path):
    clock = Clock()
    guard = Guard(leaking(), report_dir=tmp_path, background=False, clock=clock, snapshotter=LeakingAllocator(clock), snapshots=20)
    run(guard, clock, 2000)
    guard.close()
    document = json.loads((tmp_path / "memlog-guard-rank0.json").read_text())
    jsonschema.validate(document, SCHEMAS["guard"])
    jsonschema.validate(document["report"], SCHEMAS["report"])
    diff = {k: v for k, v in document["culprits"].items() if k not in ("from_step", "to_step", "snapshots")}
    jsonschema.validate({"schema_version": 1, "memlog_version": "x", "command": "diff"} | diff, SCHEMAS["snapshot"])
    assert document["guard"]["policy"] == {"on_leak": "warn", "on_oom": "stop", "within_steps": 200, "every": 50, "agree_every": 10, "snapshots": 20}


LEAK_SITE = snapshots.stack("/workspace/train.py", 88, "train_step")
MIB = 1 << 20


class LeakingAllocator:
    """Stands in for CUDA's snapshots: 500 steady sites, and a site that keeps one more 16 MiB block
    at every step, recorded only while recording is on (blocks allocated before have no stack)."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.calls, self.recording_since = clock, [], None
        self.rng = random.Random(2)
        self.steady = snapshots.steady_sites(self.rng, 500)

    def step(self) -> int:
        return round(self.clock.now - Clock().now)  # the tests move the clock 1 s per step

    def start(self) -> None:
        self.calls.append(("start", self.step()))
        self.recording_since = self.step()

    def stop(self) -> None:
        self.calls.append(("stop", self.step()))
        self.recording_since = None

    def take(self) -> dict:
        self.calls.append(("take", self.step()))
        held = self.step() - 60  # blocks kept since the leak began (leaking()'s onset)
        recorded = self.step() - self.recording_since
        unrecorded = [([], [16 * MIB] * (held - recorded))]
        return snapshots.snapshot([*self.steady, *unrecorded, (LEAK_SITE, [16 * MIB] * recorded)], self.rng)


def test_a_leak_found_turns_on_recording_and_names_the_growing_site(tmp_path, caplog):
    clock = Clock()
    allocator = LeakingAllocator(clock)
    guard = Guard(leaking(), report_dir=tmp_path, background=False, clock=clock, snapshotter=allocator, snapshots=20)
    with caplog.at_level(logging.WARNING, logger="memlog.guard"):
        decisions = run(guard, clock, 2000)
    guard.close()
    warned = acted(decisions)[0][0]
    assert [c[0] for c in allocator.calls] == ["start", "take", "take", "stop"]  # once, off again after the second snapshot
    assert [c[1] for c in allocator.calls] == [warned, warned + 1, warned + 21, warned + 21]
    culprits = guard.culprits
    top = culprits["grown"][0]
    assert top["where"] == "/workspace/train.py:88 in train_step" and top["growth_bytes"] == 20 * 16 * MIB
    assert culprits["sites_grown"] == 1  # the steady sites and the blocks kept before recording did not grow
    assert "live bytes grew by 320.0 MiB from step" in caplog.text and "train.py:88 in train_step" in caplog.text
    first, _ = (load_snapshot(p) for p in culprits["snapshots"])  # written beside the report, readable by `memlog snapshot`
    assert len(first["segments"]) > 10 and Path(culprits["snapshots"][1]).name == f"memlog-guard-rank0-step{warned + 21}.pickle"
    result = runner.invoke(app, ["snapshot", "diff", *culprits["snapshots"], "-o", "json"])
    assert json.loads(result.stdout)["grown"][0] == top


def test_no_snapshots_without_a_leak_or_when_off(tmp_path):
    clock = Clock()
    allocator = LeakingAllocator(clock)
    run(Guard(healthy(), report_dir=None, background=False, clock=clock, snapshotter=allocator), clock, 600)
    clock = Clock()
    off = LeakingAllocator(clock)
    run(Guard(leaking(), report_dir=None, background=False, clock=clock, snapshotter=off, snapshots=0), clock, 600)
    assert allocator.calls == [] and off.calls == []


class TwoRanks:
    """Rank 0 of two: what the other rank asks is given by the test; every call is recorded."""

    rank, world_size = 0, 2

    def __init__(self, other: dict[int, int]) -> None:
        self.other, self.calls = other, []

    def agree(self, level: int, projected_oom_step: float | None) -> Agreed:
        self.calls.append((level, projected_oom_step))
        theirs = self.other.get(len(self.calls) * 10, 0)  # agreement steps are 10, 20, ...
        if theirs > level:
            return Agreed(theirs, 1, 555.0)
        return Agreed(level, 0 if level else None, projected_oom_step)


def test_with_other_ranks_a_stop_is_agreed_only_at_agreement_steps():
    clock = Clock()
    other = TwoRanks({40: 3})  # at step 40 the other rank asks to stop
    decisions = run(Guard(healthy(), report_dir=None, background=False, clock=clock, agreement=other), clock, 100)
    assert len(other.calls) == 4 and acted(decisions) == [(40, "stop")]
    assert decisions[-1].by_rank == 1 and decisions[-1].reason == "rank 1 asked to stop (nearest projected OOM at step 555)"
    clock = Clock()
    mine = TwoRanks({})
    decisions = run(Guard(leaking(), report_dir=None, background=False, clock=clock, agreement=mine), clock, 2000)
    assert [a for _, a in acted(decisions)] == ["warn", "stop"] and acted(decisions)[1][0] % 10 == 0
    assert [level for level, _ in mine.calls].count(3) == 1  # asked once, at the agreement step that acted


def test_the_cuda_reader_reads_the_nested_statistics():
    stats = {"allocated_bytes": {"all": {"current": 30 * GIB, "peak": 40 * GIB}}, "reserved_bytes": {"all": {"current": 34 * GIB}}}
    reader = CudaReader(0, stats=lambda device: stats, total_bytes=80 * GIB)
    first = reader.read(1)
    assert (first.allocated_gib, first.reserved_gib, first.max_allocated_gib, first.capacity_gib) == (30.0, 34.0, 40.0, 80.0)
    stats["allocated_bytes"]["all"]["peak"] = 31 * GIB  # the loop reset peak statistics (torchtitan does at each log)
    assert reader.read(2).max_allocated_gib == 40.0  # the running maximum does not fall
    empty = CudaReader(0, stats=lambda device: {}, total_bytes=80 * GIB).read(1)  # before CUDA is initialised
    assert empty.allocated_gib is None and empty.max_allocated_gib is None and empty.capacity_gib == 80.0


def test_the_host_reader_reads_this_process():
    reading = HostReader().read(1)
    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc on this system")
    grown = bytearray(64 << 20)
    grown[::4096] = b"x" * len(grown[::4096])
    again = HostReader().read(2)
    assert 0 < reading.host_rss_gib < reading.host_total_gib
    assert again.host_rss_gib - reading.host_rss_gib > 0.04  # ~64 MiB more resident


def test_bad_options_are_refused():
    for options in ({"on_leak": "panic"}, {"every": 0}, {"within_steps": -1}, {"agree_every": 1.5}):
        with pytest.raises(ValueError):
            Guard(**options)


def test_importing_memlog_imports_no_training_framework():
    code = (
        "import sys, memlog, memlog.guard, memlog.cli; "
        "print(sorted(m for m in ('torch', 'transformers', 'lightning', 'pytorch_lightning') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_the_readme_lines_run_as_written(tmp_path):
    """The few lines README.md shows a user adding to a training script (host readings here)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Inside the run: the guard") :]
    start = section.index("```python\n") + len("```python\n")
    code = section[start : section.index("\n```", start)]
    saved: list[int] = []
    namespace = {"run_dir": tmp_path, "total_steps": 120, "train_step": lambda: None, "save_checkpoint": saved.append}
    exec(compile(code, "README.md", "exec"), namespace)
    namespace["guard"].close()
    assert namespace["guard"].readings == 120 and (tmp_path / "memlog-guard-rank0.json").exists() and saved == []
