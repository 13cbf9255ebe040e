"""Verdict properties over generated runs (hypothesis), independent of the bundled samples.

- A growth of clearly more than the documented minimum (memory-leak's min_growth_gib, min_growth_pct and
  min_effect) appended to any healthy run makes it a leak, on exactly the ranks that grow, with the onset
  within a few logged steps of the truth.
- The same run prefixed by a launcher, split into one file per rank, with noise lines between its lines,
  or with memory printed in MiB instead of GiB, gets the same verdict and the same findings.
- A healthy run resumed from checkpoints is never a leak.
- Verdict, exit code, text headline and markdown header agree for every report.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlog.engine.api import analyze
from memlog.judge.rulekit import load_rules
from memlog.render.outputs.markdown import render_markdown
from memlog.render.outputs.text import render_text
from tests.engine.test_metamorphic import PREFIXES
from tests.synthetic import titan_log

LEAK = {r.id: r for r in load_rules()}["memory-leak"]
MIN_GROWTH_GIB = next(t.default for t in LEAK.thresholds if t.name == "min_growth_gib")
MIN_GROWTH_PCT = next(t.default for t in LEAK.thresholds if t.name == "min_growth_pct")
MIN_EFFECT = next(t.default for t in LEAK.thresholds if t.name == "min_effect")

# Derandomized: CI sees the same examples each run; MEMLOG_PROPERTY_EXAMPLES=N explores N fresh ones.
_EXPLORE = int(os.environ.get("MEMLOG_PROPERTY_EXAMPLES", "0"))
PROPERTY = settings(max_examples=_EXPLORE or 20, deadline=None, derandomize=not _EXPLORE, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass(frozen=True)
class Healthy:
    """A healthy run's shape: per-rank levels, a warmup or not, noise relative to the level."""

    ranks: int
    interval: int
    points: int
    levels: tuple[float, ...]
    noise_pct: float
    warmup: int  # points of the rise before the plateau (0: none)
    seed: int

    def steps(self, points: int | None = None, first: int = 1) -> list[int]:
        n = points or self.points
        return [first + self.interval * k for k in range(n)]

    def values(self, rank: int, points: int | None = None, salt: int = 0) -> list[float]:
        rng = random.Random(self.seed * 1009 + rank * 31 + salt)
        level = self.levels[rank]
        out = []
        for i in range(points or self.points):
            base = level * (0.6 + 0.4 * i / self.warmup) if i < self.warmup else level
            out.append(round(base + rng.gauss(0, level * self.noise_pct / 100), 2))
        return out


healthy_runs = st.builds(
    Healthy,
    ranks=st.integers(1, 4),
    interval=st.sampled_from((1, 5, 10)),
    points=st.integers(40, 160),
    levels=st.lists(st.floats(8.0, 70.0), min_size=4, max_size=4).map(tuple),
    noise_pct=st.floats(0.02, 0.3),
    warmup=st.sampled_from((0, 0, 4, 8)),
    seed=st.integers(0, 2**16),
)


def judged(paths: list[Path]):
    report = analyze([str(p) for p in paths])
    return report, report.verdict, sorted((f.rule, f.subject, tuple(sorted(f.evidence.get("ranks", [])))) for f in report.findings)


@PROPERTY
@given(run=healthy_runs, grow_points=st.integers(20, 80), strength=st.floats(3.0, 12.0), data=st.data())
def test_growth_appended_to_a_healthy_run_is_a_leak_from_its_onset(tmp_path, run, grow_points, strength, data):
    leaking = data.draw(st.sets(st.integers(0, run.ranks - 1), min_size=1), label="leaking ranks")
    steps = run.steps(run.points + grow_points)
    onset = steps[run.points - 1]  # the last healthy step; the first grown reading is one interval later
    memory = {}
    for rank in range(run.ranks):
        values = run.values(rank, run.points + grow_points)
        if rank in leaking:
            level = run.levels[rank]
            # Several times every gate: absolute, relative, and the series' own noise.
            growth = strength * max(MIN_GROWTH_GIB, level * MIN_GROWTH_PCT / 100, MIN_EFFECT * level * run.noise_pct / 100)
            values = [round(v + growth * max(0, i - run.points + 1) / grow_points, 2) for i, v in enumerate(values)]
        memory[rank] = values
    report, verdict, _ = judged([titan_log(tmp_path / "leak.log", memory, steps)])
    assert verdict == "leak", [f.message for f in report.findings]
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert set(leak.evidence["ranks"]) == leaking
    for series in leak.evidence["series"]:
        if run.points >= 2 * grow_points:  # a long healthy stretch before the growth: its onset is found
            assert series["onset_step"] is not None, series
        if series["onset_step"] is not None:
            assert abs(series["onset_step"] - onset) <= 4 * run.interval, (series["onset_step"], onset)


def _run_lines(run: Healthy, grow: float) -> tuple[list[int], dict[int, list[float]]]:
    steps = run.steps()
    memory = {r: run.values(r) for r in range(run.ranks)}
    if grow:
        memory[0] = [round(v + grow * i / run.points, 2) for i, v in enumerate(memory[0])]
    return steps, memory


NOISE_LINES = (
    "Saving checkpoint at step 100 to /ckpt/step-100",
    "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:617: UserWarning: This DataLoader will create 16 worker processes",
    "  3%|▎         | 31/1000 [00:12<06:18,  2.56it/s]",
    "[W CUDAGuardImpl.h:118] Warning: CUDA warning: driver shutting down (function uncheckedSetDevice)",
    "wandb: Syncing run lucky-sun-42",
    "NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7",
)


@PROPERTY
@given(run=healthy_runs, grow=st.sampled_from((0.0, 0.0, 6.0)), prefix=st.sampled_from(sorted(PREFIXES)), noise_seed=st.integers(0, 1000))
def test_prefix_split_noise_and_units_change_nothing(tmp_path, run, grow, prefix, noise_seed):
    steps, memory = _run_lines(run, grow)
    base = titan_log(tmp_path / "base.log", memory, steps)
    lines = base.read_text().splitlines()
    _, verdict, findings = judged([base])

    prefixed = tmp_path / "prefixed.log"
    prefixed.write_text("".join(PREFIXES[prefix] + line + "\n" for line in lines))

    per_rank = []
    for rank in range(run.ranks):
        path = tmp_path / f"rank{rank}.log"
        path.write_text("".join(line + "\n" for line in lines if line.startswith(f"[rank{rank}]:")))
        per_rank.append(path)

    rng = random.Random(noise_seed)
    noisy = tmp_path / "noisy.log"
    noisy.write_text("".join((rng.choice(NOISE_LINES) + "\n" if rng.random() < 0.3 else "") + line + "\n" for line in lines))

    mib = tmp_path / "mib.log"
    mib.write_text("".join(re.sub(r"memory: *(\d+\.\d+)GiB", lambda m: f"memory: {float(m[1]) * 1024:.2f}MiB", line) + "\n" for line in lines))

    for variant in ([prefixed], per_rank, [noisy], [mib]):
        _, v, f = judged(variant)
        assert (v, f) == (verdict, findings), (variant[0].name, prefix)


@PROPERTY
@given(run=healthy_runs, resumes=st.integers(1, 3), data=st.data())
def test_a_healthy_run_with_resumes_is_never_a_leak(tmp_path, run, resumes, data):
    steps, memory = run.steps(), {r: run.values(r) for r in range(run.ranks)}
    for n in range(resumes):
        # Resume from a checkpoint some steps back; the new process settles at its own level.
        back = data.draw(st.integers(2, len(steps) // 3), label="points rolled back")
        first = steps[-back]
        shift = data.draw(st.floats(-0.03, 0.03), label="level shift")
        segment = run.steps(run.points, first=first)
        steps += segment
        for r in memory:
            memory[r] += [round(v * (1 + shift), 2) for v in run.values(r, run.points, salt=n + 1)]
    report, verdict, findings = judged([titan_log(tmp_path / "resumed.log", memory, steps)])
    assert verdict != "leak" and "memory-leak" not in {f[0] for f in findings}, [f.message for f in report.findings]
    assert report.coverage["event_counts"].get("restart", 0) >= resumes


SEVERITY = {"info": 0, "warning": 1, "error": 2}


@PROPERTY
@given(run=healthy_runs, grow=st.sampled_from((0.0, 2.0, 8.0)), oom=st.booleans())
def test_verdict_exit_code_headline_and_markdown_header_agree(tmp_path, run, grow, oom):
    steps, memory = _run_lines(run, grow)
    path = titan_log(tmp_path / "run.log", memory, steps)
    if oom:
        with path.open("a") as out:
            out.write(
                "[rank0]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                "capacity of 79.11 GiB of which 1.25 GiB is free.\n"
            )
    report = analyze([str(path)])
    headline = report.headline
    assert report.to_json()["verdict"] == report.verdict == headline.name
    assert render_text(report).splitlines()[0].startswith(f"memlog verdict: {headline.title}")
    assert render_markdown(report).splitlines()[0].startswith(f"**memlog verdict: {headline.title}**")
    worst = max((SEVERITY[f.severity] for f in report.findings), default=-1)
    assert report.fails("error") == (worst == 2)
    if worst >= 1:
        assert not headline.calm, (headline.name, [f.rule for f in report.findings])
    ranks = {f.verdict.name: f.verdict.rank for f in report.findings if f.verdict}
    assert headline.rank >= max(ranks.values(), default=0)
    if oom:
        assert report.verdict != "stable" and worst == 2
