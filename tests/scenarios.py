"""Labelled scenarios for the rule engine: shapes x noise levels x lengths x rank counts x metric kinds.

Every scenario is seeded (its name is its seed), renders to a torchtitan-format log (lines written by
tests.logwriters), and carries
the verdict a maintainer would give it, plus the findings that must (and must not) appear. The
shapes are the ones issue 4 and the field reports name: a straight-line leak seen in 6-7 points,
slow creep under noise, stairs, sawtooth with a rising or a flat floor, warmup then plateau
(including a plateau seen in only 3-4 points), stable, too few points, restarts, running maxima
that ratchet and stop or keep climbing, one rank leaking among many, pipeline stages at different
flat levels, fragmentation (reserved rising, allocated flat), host growth with flat device memory,
corrupt readings and NaN losses.

Metric kinds: `window-peak` is torchtitan's own `memory:` field (peak reserved since the previous
log line). `current`, `running-max` and `host` have no torchtitan field, so they are printed on an
extra `memory stats step: N ...` line through torchtitan's logger, parsed by the test-only spec in
tests/scenario_formats/ (as a user's own memory monitor would print them).

Noise is Gaussian with a standard deviation relative to the level (`NOISE_SIGMA`), plus rare
allocator spikes, and values are printed with two decimals like torchtitan does.

    python -m tests.scenarios            # list the scenarios
    python -m tests.scenarios NAME       # print one scenario's log
"""

from __future__ import annotations

import hashlib
import math
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from tests.logwriters import pytorch
from tests.logwriters import torchtitan as titan

FORMATS_DIR = Path(__file__).parent / "scenario_formats"

# Noise: sigma of one reading, as a fraction of its level. "high" is several times the growth of
# one logged interval of the slowest creep below (noise > one step's growth, field report 2).
NOISE_SIGMA = {"none": 0.0, "low": 0.0005, "high": 0.002}
SPIKE_PROBABILITY = 0.02  # allocator spikes (a larger batch, a checkpoint save) on noisy series
KINDS = ("window-peak", "current", "running-max", "host")
KIND_COLUMN = {
    "window-peak": "mem_peak_reserved_gib",
    "current": "mem_allocated_gib",
    "running-max": "mem_max_allocated_gib",
    "host": "host_mem_used_gib",
}
STATS_FIELDS = {  # column -> field name on the `memory stats` line
    "mem_allocated_gib": "allocated",
    "mem_reserved_gib": "reserved",
    "mem_max_allocated_gib": "max_allocated",
    "mem_max_reserved_gib": "max_reserved",
    "host_mem_used_gib": "host_used",
}
CAPACITY_GIB = pytorch.H100_GIB  # H100 80GB as torchtitan prints it
SECONDS_PER_STEP = 1.7
START = datetime(2025, 6, 1, 8, 0, 0)

# The smallest leak the detection target covers: 0.5 % of its level per 100 steps over 200+ steps.
TARGET_LEAK_PCT_PER_100_STEPS = 0.5
TARGET_LEAK_MIN_STEPS = 200

MEMORY_RULES_THAT_MEAN_LEAK = ("memory-leak",)


# --------------------------------------------------------------------------------------------
# what a scenario is and what it expects
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    verdict: str
    rules: frozenset[str] = frozenset()  # must fire
    forbid: frozenset[str] = frozenset()  # must not fire
    leak_ranks: tuple[int, ...] | None = None  # memory-leak must name exactly these ranks
    leak_subject: str | None = None  # "device" or "host"
    leak_pattern: str | None = None  # memory-leak evidence "pattern": "stairs", "sawtooth", "line"
    leak_pct_per_100_steps: float | None = None  # leak rate, % of level per 100 steps
    leak_steps: int | None = None  # steps over which the leak is visible


@dataclass
class Segment:
    """One run (or one resumed run) of the log: steps and values per column and rank."""

    steps: list[int]
    columns: dict[str, dict[int, list[float]]]
    loss: dict[int, list[float]]
    loss_every: int  # the trainer's log_freq: loss lines at step 1 and every N-th step
    raw: dict[tuple[str, int, int], str] = field(default_factory=dict)  # (column, rank, index) -> printed text
    stepless: bool = False  # memory lines carry no step: they belong to the last step line printed


@dataclass(frozen=True)
class Scenario:
    name: str
    shape: str
    kind: str
    noise: str
    ranks: int
    points: int
    expect: Expect

    @property
    def seed(self) -> int:
        return int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:8], "big")

    def render(self) -> str:
        return render(self)


# --------------------------------------------------------------------------------------------
# series makers (values at logged points)
# --------------------------------------------------------------------------------------------


def log_steps(points: int, interval: int) -> list[int]:
    """torchtitan logs step 1 and then every `interval`-th step."""
    if interval <= 1:
        return list(range(1, points + 1))
    return [1] + [interval * k for k in range(1, points)]


def noisy(rng: random.Random, values: list[float], level: float, noise: str, spikes: bool = True) -> list[float]:
    sigma = NOISE_SIGMA[noise] * level
    out = [v + rng.gauss(0, sigma) for v in values]
    if spikes and noise != "none":
        for i in range(2, len(out)):  # never on the first points (they decide the warmup)
            if rng.random() < SPIKE_PROBABILITY:
                out[i] += level * rng.uniform(0.01, 0.03)
    return out


def running_max(values: list[float]) -> list[float]:
    out, top = [], -math.inf
    for v in values:
        top = max(top, v)
        out.append(top)
    return out


def warmup(rng: random.Random, n: int, level: float, style: str) -> list[float]:
    """Warmup then plateau at `level`: one jump, a short ramp, or a saturating curve."""
    start = level * (1 - rng.uniform(0.15, 0.6))
    if style == "jump":
        return [start] + [level] * (n - 1)
    if style == "ramp":  # a few steps, or a slow fill over up to a quarter of the run
        width = rng.choice((2, 3, max(2, int(0.25 * n))))
        return [start + (level - start) * min(i / width, 1.0) for i in range(n)]
    tau = rng.uniform(0.6, max(0.8, 0.12 * n))  # saturating: caches that fill to a cap
    return [level - (level - start) * math.exp(-i / tau) for i in range(n)]


def device_level(rng: random.Random) -> float:
    return rng.uniform(12.0, 60.0)


def host_level(rng: random.Random) -> float:
    return rng.uniform(80.0, 600.0)


def losses(rng: random.Random, n: int) -> list[float]:
    return [max(0.5, 10.5 * math.exp(-i / max(n, 1) * 1.5) + rng.gauss(0, 0.05)) for i in range(n)]


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------


def _ts(step: int) -> str:
    t = START + timedelta(seconds=30 + step * SECONDS_PER_STEP)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def _line(rank: int, step: int, msg: str) -> str:
    """A message through torchtitan's logger, teed by torchrun (tests.logwriters.torchtitan)."""
    return titan.log_line(msg, ts=_ts(step), rank=rank)


def _num(value: float) -> str:
    return f"{value:5.2f}" if math.isfinite(value) else ("nan" if value != value else ("inf" if value > 0 else "-inf"))


def memory_stats_line(step: int, fields: list[str]) -> str:
    """The test-only `memory stats` message (tests/scenario_formats/memory_stats.yaml): `name: XGiB` fields."""
    return f"memory stats step: {step:2}  " + "  ".join(fields)


def memory_reading_line(fields: list[str]) -> str:
    """The same monitor printing without a step (a hook that fires every step, the trainer logging
    every N-th): memlog gives it the step of the last step line."""
    return "memory reading:  " + "  ".join(fields)


def render_segment(seg: Segment, ranks: list[int], capacity_line: bool, capacity: float = CAPACITY_GIB) -> list[str]:
    lines = []
    if capacity_line:
        lines += [_line(r, 0, titan.capacity(pytorch.H100, capacity)) for r in ranks]
    stats_columns = [c for c in STATS_FIELDS if c in seg.columns]
    peaks = seg.columns.get("mem_peak_reserved_gib", {})
    for i, step in enumerate(seg.steps):
        for r in ranks:
            if (step == 1 or step % seg.loss_every == 0 or i == 0) and r in seg.loss:
                mem = None
                if r in peaks:  # as printed: a corrupt reading's raw text, else two decimals
                    mem = float(seg.raw.get(("mem_peak_reserved_gib", r, i), f"{peaks[r][i]:5.2f}"))
                msg = titan.step_line_2025_03(
                    step=step, loss=seg.loss[r][i], mem_gib=mem, mem_pct=None if mem is None else 100 * mem / capacity, tps=7421, tflops=341.26, mfu=34.5
                )
                lines.append(_line(r, step, msg))
            fields = [f"{STATS_FIELDS[c]}: {seg.raw.get((c, r, i), _num(seg.columns[c][r][i]))}GiB" for c in stats_columns if r in seg.columns[c]]
            if fields:
                text = memory_reading_line(fields) if seg.stepless else memory_stats_line(step, fields)
                lines.append(_line(r, step, text))
    return lines


def example_log(example) -> str:
    """A rule file's Example (memlog.judge.rulekit.Example) as a torchtitan-format log."""
    columns = {c: {r: list(v) for r, v in per.items()} for c, per in example.columns.items()}
    if not columns and not example.memory and not example.loss:
        return "\n".join(example.lines) + "\n"  # a log of raw lines only (no format memlog reads)
    if example.memory:
        columns["mem_peak_reserved_gib"] = {r: list(v) for r, v in example.memory.items()}
    ranks = sorted({r for per in columns.values() for r in per} | set(example.loss))
    n = max(len(v) for per in [*columns.values(), example.loss] for v in per.values())
    steps = list(example.steps) if example.steps else list(range(1, n + 1))
    rng = random.Random(0)
    loss = {r: list(example.loss[r]) if r in example.loss else losses(rng, n) for r in ranks}
    seg = Segment(steps, columns, loss, loss_every=1)
    lines = render_segment(seg, ranks, capacity_line=example.capacity_gib is not None, capacity=example.capacity_gib or CAPACITY_GIB)
    return "\n".join(lines + list(example.lines)) + "\n"


def render(s: Scenario) -> str:
    rng = random.Random(s.seed)
    segments, extra = BUILDERS[s.shape](rng, s)
    ranks = sorted(segments[0].loss)
    lines = []
    for n, seg in enumerate(segments):
        lines += render_segment(seg, ranks, capacity_line=(n == 0 and s.seed % 2 == 0) or extra.get("capacity_line", False))
    lines += extra.get("tail", [])
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# shape builders: (rng, scenario) -> (segments, extra)
# --------------------------------------------------------------------------------------------


def _segment(
    rng,
    s: Scenario,
    steps: list[int],
    judged: dict[int, list[float]],
    *,
    loss_every: int | None = None,
    device_flat: dict[int, float] | None = None,
    loss: dict[int, list[float]] | None = None,
    raw_kind: bool = False,
) -> Segment:
    """Put the judged values into the column of the scenario's metric kind (host: device flat beside it)."""
    columns: dict[str, dict[int, list[float]]] = {}
    if s.kind == "running-max":
        judged = {r: running_max(v) for r, v in judged.items()}
    columns[KIND_COLUMN[s.kind]] = {r: [round(x, 2) for x in v] for r, v in judged.items()}
    if s.kind == "host":
        flat = device_flat or {r: device_level(rng) for r in judged}
        columns["mem_peak_reserved_gib"] = {r: [round(x, 2) for x in noisy(rng, [flat[r]] * len(steps), flat[r], "low", spikes=False)] for r in judged}
    return Segment(steps, columns, loss or {r: losses(rng, len(steps)) for r in judged}, loss_every or _interval(steps))


def _interval(steps: list[int]) -> int:
    return steps[2] - steps[1] if len(steps) > 2 else (steps[1] if len(steps) == 2 else 1)


def _level(rng, s: Scenario) -> float:
    return host_level(rng) if s.kind == "host" else device_level(rng)


def build_stable(rng, s):
    interval = rng.choice((1, 5, 10))
    steps = log_steps(s.points, interval)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        judged[r] = noisy(rng, [level] * s.points, level, s.noise, spikes=s.kind != "running-max")
    return [_segment(rng, s, steps, judged)], {}


def build_plateau(rng, s):
    interval = rng.choice((1, 5, 10))
    steps = log_steps(s.points, interval)
    style = rng.choice(("jump", "ramp", "saturating"))
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        judged[r] = noisy(rng, warmup(rng, s.points, level, style), level, s.noise, spikes=s.kind != "running-max")
    return [_segment(rng, s, steps, judged)], {}


def build_plateau_short(rng, s):
    """A rise, then a plateau seen in only 3-4 logged points."""
    interval = rng.choice((1, 10))
    steps = log_steps(s.points, interval)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        judged[r] = noisy(rng, warmup(rng, s.points, level, "jump"), level, s.noise, spikes=False)
    return [_segment(rng, s, steps, judged)], {}


def build_creep(rng, s):
    """Slow creep under noise (field report 2), sometimes after a warmup jump."""
    steps = log_steps(s.points, _creep_interval(s.points))
    pct = _creep_pct(s)
    judged = {}
    with_warmup = rng.random() < 0.5
    for r in range(s.ranks):
        level = _level(rng, s)
        per_step = level * pct / 100 / 100
        values = [level + per_step * (st - steps[0]) for st in steps]
        if with_warmup:
            values[0] = level * (1 - rng.uniform(0.2, 0.5))
        judged[r] = noisy(rng, values, level, s.noise, spikes=s.kind != "running-max")
    return [_segment(rng, s, steps, judged)], {}


def build_late_leak(rng, s):
    """Flat (or warmed up and flat) for a while, then a leak starts (a new phase, a bad batch of code)."""
    steps = log_steps(s.points, _creep_interval(s.points))
    pct = _creep_pct(s)
    onset = steps[int(len(steps) * rng.uniform(0.2, 0.45))]
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        per_step = level * pct / 100 / 100
        judged[r] = noisy(rng, [level + per_step * max(0, st - onset) for st in steps], level, s.noise, spikes=s.kind != "running-max")
    return [_segment(rng, s, steps, judged)], {"onset": onset}


def _creep_interval(points: int) -> int:
    """Log interval that makes `points` logged points cover SPANS[points] steps."""
    return math.ceil(SPANS[points] / (points - 1))


def _creep_pct(s: Scenario) -> float:
    """Growth in % of level per 100 steps: from the detection target up to 6x it, fixed by the name."""
    return TARGET_LEAK_PCT_PER_100_STEPS * (1 + (int(hashlib.md5(s.name.encode()).hexdigest(), 16) % 1000) / 200)


def build_line_leak(rng, s):
    """Field report 1: a straight line from the first step, 6-7 points, then OOM."""
    steps = log_steps(s.points, 1)
    judged = {}
    host = s.kind == "host"
    for r in range(s.ranks):
        start = rng.uniform(150, 300) if host else rng.uniform(15, 25)
        per_step = rng.uniform(20, 60) if host else rng.uniform((CAPACITY_GIB - start) / 8, (CAPACITY_GIB - start) / 6.5)
        judged[r] = noisy(rng, [start + per_step * i for i in range(s.points)], start, s.noise, spikes=False)
    tail = []
    if not host and s.seed % 3:
        tail = [pytorch.excepthook_prefix(r) + pytorch.cuda_oom(tried="2.00 GiB", gpu=r, capacity_gib=CAPACITY_GIB, free="1.02 GiB") for r in range(s.ranks)]
    return [_segment(rng, s, steps, judged)], {"tail": tail}


def build_stairs(rng, s):
    """Field report 3: a fixed jump every few steps, flat in between."""
    every = rng.choice([e for e in (2, 3, 5, 10) if 3 * e < s.points])  # at least 3 jumps
    interval = rng.choice((1, 5))
    steps = log_steps(s.points, interval)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        jump = level * rng.uniform(0.03, 0.1)
        values = [level + jump * (i // every) for i in range(s.points)]
        judged[r] = noisy(rng, values, level, s.noise, spikes=False)
    return [_segment(rng, s, steps, judged)], {}


def _sawtooth(rng, s, rising: bool):
    """Memory retained until a flush every `period` logged points (field report 2)."""
    period = rng.choice([p for p in (4, 5, 8, 10) if 6 * p <= s.points])  # at least 6 cycles
    interval = rng.choice((1, 5))
    n = s.points
    steps = log_steps(n, interval) if interval == 1 else [interval * k for k in range(1, n + 1)]
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        amplitude = level * rng.uniform(0.03, 0.12)
        floor_rise = amplitude * rng.uniform(0.1, 0.4) if rising else 0.0  # drops stay visible
        values = [level + floor_rise * (i // period) + amplitude * (i % period) / (period - 1) for i in range(n)]
        judged[r] = noisy(rng, values, level, s.noise, spikes=False)
    # The loss is logged when the retained values are flushed: at the sawtooth's period. The
    # window-peak kind is on the loss line itself, so there both come at the memory interval.
    loss_every = interval if s.kind == "window-peak" else period * interval
    seg = _segment(rng, s, steps, judged, loss_every=loss_every)
    return [seg], {}


def build_sawtooth_flat(rng, s):
    return _sawtooth(rng, s, rising=False)


def build_sawtooth_rising(rng, s):
    return _sawtooth(rng, s, rising=True)


def build_too_few(rng, s):
    """Only step 1 and step 10 (and maybe 20): field report 5 with log_freq = 10."""
    steps = log_steps(s.points, 10)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        values = [level * (1 - rng.uniform(0.2, 0.5))] + [level + level * 0.03 * i for i in range(s.points - 1)]
        judged[r] = noisy(rng, values, level, s.noise, spikes=False)
    return [_segment(rng, s, steps, judged)], {}


def build_restart(rng, s):
    """Resumed from a checkpoint: the step counter goes back and the level differs. Never growth."""
    interval = rng.choice((1, 10))
    segments = []
    resume_at = None
    for part in range(2):
        steps = log_steps(s.points, interval)
        if resume_at is not None:  # resumed from a checkpoint: logs again from the step after it
            steps = [resume_at + interval * k for k in range(1, s.points + 1)]
        judged = {}
        for r in range(s.ranks):
            level = _level(rng, s) * (1 + 0.2 * part)
            judged[r] = noisy(rng, [level] * s.points, level, s.noise)
        segments.append(_segment(rng, s, steps, judged))
        resume_at = steps[len(steps) // 2] if rng.random() < 0.5 else 0
    return segments, {}


def build_ratchets(rng, s):
    """Running maximum over variable-size inputs: a few new peaks early, then none. Not a leak."""
    interval = rng.choice((1, 5))
    steps = log_steps(s.points, interval)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        values = [level] * s.points
        n_peaks = rng.choice((2, 3, 4))
        # New peaks in the first 40 % of the run, each 2-6 % above the previous one.
        at = sorted(rng.sample(range(1, max(3, int(0.4 * s.points))), n_peaks))
        top = level
        for i in at:
            top *= 1 + rng.uniform(0.02, 0.06)
            values[i] = top
        judged[r] = noisy(rng, values, level, s.noise, spikes=False)
    return [_segment(rng, s, steps, judged)], {}


def build_one_rank_leak(rng, s):
    """Many ranks flat, one leaking (field report 1 asks which rank grows first)."""
    span = 600
    interval = max(1, span // s.points)
    steps = log_steps(s.points, interval)
    leaking = LEAKING_RANK(s)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        values = [level] * s.points
        if r == leaking:
            per_step = level * rng.uniform(1.0, 3.0) / 100 / 100
            values = [level + per_step * (st - 1) for st in steps]
        judged[r] = noisy(rng, values, level, s.noise)
    return [_segment(rng, s, steps, judged)], {}


def LEAKING_RANK(s: Scenario) -> int:
    return s.seed % s.ranks


def build_pp_stages(rng, s):
    """Pipeline stages hold different, legitimately constant amounts; the first stage may log loss -1."""
    interval = rng.choice((1, 10))
    steps = log_steps(s.points, interval)
    first_stage = rng.uniform(20, 40)
    last_stage = first_stage * rng.choice((rng.uniform(0.6, 0.85), rng.uniform(1.15, 1.4)))
    judged = {}
    loss = {}
    for r in range(s.ranks):
        level = first_stage if r < s.ranks // 2 else last_stage
        judged[r] = noisy(rng, [level] * s.points, level, s.noise)
        loss[r] = [-1.0] * s.points if (SENTINEL(s) and r < s.ranks // 2) else losses(rng, s.points)
    return [_segment(rng, s, steps, judged, loss=loss)], {}


def SENTINEL(s: Scenario) -> bool:
    return s.seed % 2 == 1


def build_fragmentation(rng, s):
    """Reserved memory grows (cache, fragmentation) while allocated memory is flat (field report 4)."""
    span = 1000
    interval = max(1, span // s.points)
    steps = log_steps(s.points, interval)
    stairs = rng.random() < 0.4
    allocated, reserved = {}, {}
    for r in range(s.ranks):
        level = device_level(rng)
        allocated[r] = noisy(rng, [level] * s.points, level, s.noise, spikes=False)
        cache = level * rng.uniform(0.05, 0.15)
        if stairs:
            jump, every = level * rng.uniform(0.03, 0.06), rng.choice((5, 10))
            growth = [jump * (i // every) for i in range(s.points)]
        else:
            per_step = level * rng.uniform(1.0, 4.0) / 100 / 100
            growth = [per_step * (st - 1) for st in steps]
        reserved[r] = [max(a, level + cache + g + rng.gauss(0, NOISE_SIGMA[s.noise] * level)) for a, g in zip(allocated[r], growth)]
    if s.kind == "running-max":
        columns = {"mem_max_allocated_gib": allocated, "mem_max_reserved_gib": reserved}
        columns = {c: {r: running_max(v) for r, v in per.items()} for c, per in columns.items()}
    else:
        columns = {"mem_allocated_gib": allocated, "mem_reserved_gib": reserved}
    columns = {c: {r: [round(x, 2) for x in v] for r, v in per.items()} for c, per in columns.items()}
    return [Segment(steps, columns, {r: losses(rng, s.points) for r in allocated}, _interval(steps))], {}


def build_corrupt(rng, s):
    """Impossible readings (above capacity, negative, NaN) in a stable series: flagged, never a spike."""
    segments, _ = build_stable(rng, s)
    seg = segments[0]
    column = KIND_COLUMN[s.kind]
    bad = rng.sample(range(2, s.points), rng.choice((1, 2, 3)))
    for i in bad:
        r = rng.randrange(s.ranks)
        if column == "mem_peak_reserved_gib":  # torchtitan's own field: only positive numbers parse
            seg.raw[(column, r, i)] = f"{rng.uniform(200, 1_200_000):.2f}"
        else:
            seg.raw[(column, r, i)] = rng.choice((f"{-rng.uniform(0.5, 5):.2f}", "nan", f"{rng.uniform(200, 1_200_000):.2f}"))
    return segments, {"capacity_line": True}


def build_nan_loss(rng, s):
    segments, _ = build_stable(rng, s)
    seg = segments[0]
    for r in seg.loss:
        if rng.random() < 0.5 or r == 0:
            start = rng.randrange(2, s.points)
            for i in range(start, s.points if rng.random() < 0.5 else start + 1):
                seg.loss[r][i] = rng.choice((math.nan, math.inf))
    return segments, {}


def build_long_late_leak(rng, s):
    """A long run (20k to 1M steps, log_freq 1-50) healthy for most of it, then leaking for its last
    4-20 %: a leak that starts late must not drown in the long flat history."""
    interval = rng.choice([i for i in (1, 10, 50) if 20_000 <= i * s.points <= 1_000_000])
    steps = log_steps(s.points, interval)
    onset_index = int(len(steps) * (1 - LATE_TAIL_FRACTION(s)))
    onset = steps[onset_index]
    growth = rng.uniform(0.04, 0.12)  # of the level, over the leaking tail
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        per_step = level * growth / (steps[-1] - onset)
        start = warmup(rng, 4, level, "jump") if rng.random() < 0.5 else [level] * 4
        values = start + [level + per_step * max(0, st - onset) for st in steps[4:]]
        judged[r] = noisy(rng, values, level, s.noise, spikes=s.kind != "running-max")
    return [_segment(rng, s, steps, judged)], {"onset": onset}


def LATE_TAIL_FRACTION(s: Scenario) -> float:
    """The leaking share of a long run: at least 20 logged points, 4-20 % of the run."""
    share = 0.04 + (s.seed % 1000) / 1000 * 0.16
    return max(share, 20 / s.points)


def build_resume_leak(rng, s):
    """Healthy, killed, resumed from a checkpoint, and leaking since the resume: the live segment decides."""
    interval = RESUME_INTERVAL(s)
    first = log_steps(s.points, interval)
    resume_at = first[int(len(first) * rng.uniform(0.3, 0.8))]
    second = [resume_at + interval * k for k in range(1, s.points + 1)]
    pct = _creep_pct(s)
    healthy, leaking = {}, {}
    for r in range(s.ranks):
        level = _level(rng, s)
        healthy[r] = noisy(rng, [level] * s.points, level, s.noise)
        per_step = level * pct / 100 / 100
        leaking[r] = noisy(rng, [level + per_step * (st - second[0]) for st in second], level, s.noise)
    return [_segment(rng, s, first, healthy), _segment(rng, s, second, leaking)], {}


def RESUME_INTERVAL(s: Scenario) -> int:
    return (5, 10)[s.seed % 2]


def build_wander(rng, s):
    """Stable memory whose readings wander (AR(1), as allocator caches and batch sizes do): runs of
    highs and lows, no trend. A trend test that assumes independent noise calls this a leak."""
    interval = rng.choice((1, 5, 10))
    steps = log_steps(s.points, interval)
    phi = rng.uniform(0.85, 0.97)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        sigma = level * rng.uniform(0.002, 0.006) * math.sqrt(1 - phi * phi)  # stationary spread 0.2-0.6 %
        x, values = 0.0, []
        for _ in steps:
            x = phi * x + rng.gauss(0, sigma)
            values.append(level + x)
        judged[r] = values
    return [_segment(rng, s, steps, judged)], {}


def build_sparse_steps(rng, s):
    """A memory monitor printing every step without a step number; the trainer's step line only
    every 20-50 steps (DeepSpeed's steps_per_print beside see_memory_usage). Leaking or flat."""
    loss_every = rng.choice((20, 25, 50))
    steps = list(range(1, s.points + 1))
    leaking = SPARSE_LEAKS(s)
    judged = {}
    for r in range(s.ranks):
        level = _level(rng, s)
        per_step = level * 2.0 / 100 / 100 if leaking else 0.0
        judged[r] = noisy(rng, [level + per_step * (st - 1) for st in steps], level, s.noise, spikes=s.kind != "running-max")
    seg = _segment(rng, s, steps, judged, loss_every=loss_every)
    seg.stepless = True
    return [seg], {}


def SPARSE_LEAKS(s: Scenario) -> bool:
    return s.seed % 2 == 0


BUILDERS = {
    "stable": build_stable,
    "plateau": build_plateau,
    "plateau-short": build_plateau_short,
    "creep": build_creep,
    "line-leak": build_line_leak,
    "late-leak": build_late_leak,
    "stairs": build_stairs,
    "sawtooth-flat": build_sawtooth_flat,
    "sawtooth-rising": build_sawtooth_rising,
    "too-few": build_too_few,
    "restart": build_restart,
    "ratchets": build_ratchets,
    "one-rank-leak": build_one_rank_leak,
    "pp-stages": build_pp_stages,
    "fragmentation": build_fragmentation,
    "corrupt": build_corrupt,
    "nan-loss": build_nan_loss,
    "long-late-leak": build_long_late_leak,
    "resume-leak": build_resume_leak,
    "wander": build_wander,
    "sparse-steps": build_sparse_steps,
}

# Creep: logged points -> steps the run covers (so rate x steps is the visible growth).
SPANS = {40: 200, 60: 300, 100: 1000, 150: 3000}


# --------------------------------------------------------------------------------------------
# the grid
# --------------------------------------------------------------------------------------------

NOT_LEAK = frozenset({"memory-leak"})


def _expect(s_shape: str, kind: str, ranks: int, points: int, name: str) -> Expect:
    probe = Scenario(name, s_shape, kind, "none", ranks, points, Expect("?"))
    if s_shape == "stable":
        return Expect("stable", frozenset({"stable-memory"}), NOT_LEAK)
    if s_shape in ("plateau", "plateau-short", "ratchets"):
        return Expect("warmup-plateau", frozenset({"warmup-plateau"}), NOT_LEAK)
    if s_shape == "creep":
        span = _creep_interval(points) * (points - 1) - 1  # steps from step 1 to the last logged step
        return Expect(
            "leak",
            frozenset({"memory-leak"}),
            leak_ranks=tuple(range(ranks)),
            leak_subject="host" if kind == "host" else "device",
            leak_pct_per_100_steps=_creep_pct(probe),
            leak_steps=span,
        )
    if s_shape == "late-leak":  # the target counts the steps the leak itself runs (from its onset)
        return Expect("leak", frozenset({"memory-leak"}), leak_ranks=tuple(range(ranks)), leak_subject="host" if kind == "host" else "device")
    if s_shape == "line-leak":
        return Expect(
            "leak", frozenset({"memory-leak"}), leak_ranks=tuple(range(ranks)), leak_subject="host" if kind == "host" else "device", leak_pattern="line"
        )
    if s_shape == "stairs":
        return Expect(
            "leak", frozenset({"memory-leak"}), leak_ranks=tuple(range(ranks)), leak_subject="host" if kind == "host" else "device", leak_pattern="stairs"
        )
    if s_shape == "sawtooth-flat":
        return Expect("periodic-retention", frozenset({"periodic-retention"}), NOT_LEAK)
    if s_shape == "sawtooth-rising":
        return Expect(
            "leak",
            frozenset({"memory-leak"}),
            frozenset({"periodic-retention"}),
            leak_ranks=tuple(range(ranks)),
            leak_subject="host" if kind == "host" else "device",
            leak_pattern="sawtooth",
        )
    if s_shape == "too-few":
        return Expect("inconclusive", frozenset({"insufficient-data"}), NOT_LEAK)
    if s_shape == "restart":
        return Expect("stable", frozenset({"stable-memory"}), NOT_LEAK)
    if s_shape == "one-rank-leak":
        return Expect("leak", frozenset({"memory-leak"}), leak_ranks=(LEAKING_RANK(probe),), leak_subject="device")
    if s_shape == "pp-stages":
        if SENTINEL(probe):
            return Expect("pp-sentinel-loss", frozenset({"pp-sentinel-loss", "stable-memory"}), NOT_LEAK)
        return Expect("stable", frozenset({"stable-memory"}), NOT_LEAK | {"pp-sentinel-loss"})
    if s_shape == "fragmentation":
        return Expect("fragmentation", frozenset({"fragmentation", "stable-memory"}), NOT_LEAK)
    if s_shape == "corrupt":
        return Expect("stable", frozenset({"corrupt-readings", "stable-memory"}), NOT_LEAK)
    if s_shape == "nan-loss":
        return Expect("stable", frozenset({"nan-loss", "stable-memory"}), NOT_LEAK | {"pp-sentinel-loss"})
    if s_shape == "long-late-leak":
        return Expect("leak", frozenset({"memory-leak"}), leak_ranks=tuple(range(ranks)), leak_subject="host" if kind == "host" else "device")
    if s_shape == "resume-leak":  # the target counts the live segment's steps
        return Expect(
            "leak",
            frozenset({"memory-leak"}),
            leak_ranks=tuple(range(ranks)),
            leak_subject="host" if kind == "host" else "device",
            leak_pct_per_100_steps=_creep_pct(probe),
            leak_steps=RESUME_INTERVAL(probe) * (points - 1),
        )
    if s_shape == "wander":
        return Expect("stable", frozenset({"stable-memory"}), NOT_LEAK)
    if s_shape == "sparse-steps":
        if SPARSE_LEAKS(probe):
            return Expect("leak", frozenset({"memory-leak"}), leak_ranks=tuple(range(ranks)), leak_subject="host" if kind == "host" else "device")
        return Expect("stable", frozenset({"stable-memory"}), NOT_LEAK)
    raise ValueError(s_shape)


# shape -> (metric kinds, (ranks, points) variants per kind and noise level)
GRID: dict[str, tuple[tuple[str, ...], tuple[tuple[int, int], ...]]] = {
    "stable": (KINDS, ((1, 8), (2, 30), (4, 80))),
    "plateau": (KINDS, ((1, 12), (2, 40), (4, 100))),
    "plateau-short": (("window-peak", "current", "host"), ((1, 4), (2, 5))),
    "creep": (KINDS, ((1, 40), (1, 60), (2, 100), (1, 150))),
    "line-leak": (KINDS, ((1, 6), (4, 7))),
    "late-leak": (KINDS, ((1, 100), (2, 150))),
    "stairs": (("window-peak", "current", "host"), ((1, 7), (2, 12), (1, 40))),
    "sawtooth-flat": (("window-peak", "current", "host"), ((1, 48), (2, 80))),
    "sawtooth-rising": (("window-peak", "current", "host"), ((1, 48), (2, 80))),
    "too-few": (("window-peak", "current", "host"), ((1, 2), (2, 3))),
    "restart": (("window-peak", "current"), ((1, 20), (2, 40))),
    "ratchets": (("running-max",), ((1, 40), (2, 80), (1, 150))),
    "one-rank-leak": (("window-peak", "current"), ((4, 60), (8, 40))),
    "pp-stages": (("window-peak", "current"), ((2, 30), (4, 40), (8, 20))),
    "fragmentation": (("current", "running-max"), ((1, 50), (2, 100))),
    "corrupt": (("window-peak", "current"), ((1, 30), (2, 60))),
    "nan-loss": (("window-peak",), ((1, 30), (2, 40))),
    "long-late-leak": (KINDS, ((1, 400), (2, 2000), (1, 20000))),
    "resume-leak": (("window-peak", "current", "host"), ((1, 60), (2, 100))),
    "wander": (("window-peak", "current", "host"), ((1, 100), (2, 300))),
    "sparse-steps": (("current", "host"), ((1, 300), (2, 600))),
}


def scenarios(draw: int = 0) -> Iterator[Scenario]:
    """The grid; `draw` > 0 gives another seeded draw of the same grid (names end in /dN)."""
    for shape, (kinds, variants) in GRID.items():
        for kind in kinds:
            for noise in NOISE_SIGMA:
                for ranks, points in variants:
                    name = f"{shape}/{kind}/{noise}/r{ranks}/n{points}" + (f"/d{draw}" if draw else "")
                    yield Scenario(name, shape, kind, noise, ranks, points, _expect(shape, kind, ranks, points, name))


ALL = list(scenarios())


# --------------------------------------------------------------------------------------------
# judging a scenario
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    scenario: Scenario
    verdict: str
    fired: dict[str, dict]  # rule -> {"ranks": [...], "subject": ..., "pattern": ...}
    problems: list[str]
    condensed_differs: str | None = None  # how the report read in full (every step held) differs, if it does

    @property
    def verdict_ok(self) -> bool:
        return self.verdict == self.scenario.expect.verdict


def _gist(report) -> list[tuple]:
    """What a reader of the report acts on: the verdict and each finding's rule, severity, series and
    pattern. (Numbers may move by a bin: a condensed run's onset or rate is measured on its bins.)"""
    return [report.verdict] + [(f.rule, f.severity, tuple(f.series), f.evidence.get("pattern")) for f in report.findings]


def judge(s: Scenario, directory: Path, compare_full: bool = False) -> Outcome:
    """`compare_full`: also judge the log with every step held (condense=False) and note any difference
    from the condensed report (memlog/tables/condense.py must not change what a report says)."""
    from memlog.engine.api import analyze

    path = directory / (s.name.replace("/", "__") + ".log")
    path.write_text(s.render())
    report = analyze([str(path)], formats_dirs=[FORMATS_DIR])
    differs = None
    if compare_full:
        condensed, full = _gist(report), _gist(analyze([str(path)], formats_dirs=[FORMATS_DIR], condense=False))
        if condensed != full:
            differs = next(f"condensed {a!r} / full {b!r}" for a, b in zip(condensed + [None], full + [None]) if a != b)
    fired: dict[str, dict] = {}
    for f in report.findings:
        entry = fired.setdefault(f.rule, {"ranks": set(), "subjects": set(), "patterns": set()})
        entry["ranks"] |= set(f.evidence.get("ranks") or [])
        entry["subjects"].add(f.subject)
        if f.evidence.get("pattern"):
            entry["patterns"].add(f.evidence["pattern"])
    e = s.expect
    problems = []
    if report.verdict != e.verdict:
        problems.append(f"verdict {report.verdict}, expected {e.verdict}")
    problems += [f"{rule} did not fire" for rule in sorted(e.rules - set(fired))]
    problems += [f"{rule} fired" for rule in sorted(e.forbid & set(fired))]
    leak = fired.get("memory-leak")
    if leak and e.leak_ranks is not None and e.leak_subject == "device" and leak["ranks"] != set(e.leak_ranks):
        problems.append(f"memory-leak names ranks {sorted(leak['ranks'])}, expected {list(e.leak_ranks)}")
    if leak and e.leak_subject and leak["subjects"] != {e.leak_subject}:
        problems.append(f"memory-leak is about {sorted(leak['subjects'])}, expected {e.leak_subject}")
    if leak and e.leak_pattern and e.leak_pattern not in leak["patterns"]:
        problems.append(f"memory-leak pattern {sorted(leak['patterns'])}, expected {e.leak_pattern}")
    path.unlink()
    return Outcome(s, report.verdict, fired, problems, differs)


def judge_all(items: list[Scenario] | None = None, workers: int = 2, compare_full: bool = False) -> list[Outcome]:
    """Judge scenarios in `workers` processes (each writes its logs to its own temporary folder)."""
    items = ALL if items is None else items
    if workers <= 1:
        return _judge_chunk(items, compare_full)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    chunks = [items[i::workers] for i in range(workers)]
    # Spawned, not forked: polars' thread pool may hold a lock at fork time and deadlock the child.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = [o for part in pool.map(_judge_chunk, chunks, [compare_full] * workers) for o in part]
    order = {s.name: i for i, s in enumerate(items)}
    return sorted(results, key=lambda o: order[o.scenario.name])


def _judge_chunk(items: list[Scenario], compare_full: bool = False) -> list[Outcome]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return [judge(s, Path(tmp), compare_full) for s in items]


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.stdout.write(next(s for s in ALL if s.name == sys.argv[1]).render())
    else:
        for s in ALL:
            print(s.name, s.expect.verdict)
        print(len(ALL), "scenarios", file=sys.stderr)
