"""Parameterised memory shapes over wide ranges, for detection power and false-leak rates (issue 34).

Independent of tests/scenarios.py (torchtitan logs at H100 scale): here one series per run, written
as the JSON lines a user's own loop prints (`{"step": .., "loss": .., "gpu_mem_alloc_gb": ..}`), at
any scale from a 20 MiB repro (in MiB) to an 80 GiB device or a 1 TiB host, logged every 1 to 50
steps, with white or autocorrelated noise and readings rounded as loggers round them. Each draw
knows its truth (`Draw.leak`) and the verdicts that are right for it (`Draw.accept`).

    from tests.shapes import draws, judge
    for d in draws(seed=0, count=100): print(d.name, judge(d).verdict)
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Every class the generator draws. A leak class grows by `rise` over the judged stretch; the others
# do not grow (or only towards a cap).
LEAK_CLASSES = ("linear", "late-onset", "stairs", "sawtooth-rising", "jump-then-leak")
CALM_CLASSES = ("flat", "saturating", "warmup-plateau", "sawtooth-flat", "few-points")
CLASSES = LEAK_CLASSES + CALM_CLASSES

# Which verdicts are right for a class that does not leak (a leak class must read `leak`).
CALM_VERDICTS = {
    "flat": {"stable"},
    "saturating": {"warmup-plateau", "stable"},
    "warmup-plateau": {"warmup-plateau", "stable"},
    "sawtooth-flat": {"periodic-retention", "stable"},
    "few-points": {"inconclusive", "warmup-plateau", "stable"},
}

# Where a series lives: (JSON key, unit per GiB, level range in GiB). A repro's allocated memory in
# MiB, a device in GiB, host RSS in GiB.
SCALES = (
    ("gpu_mem_alloc_mib", 1024.0, (0.01, 0.5)),
    ("gpu_mem_alloc_gb", 1.0, (2.0, 80.0)),
    ("host_mem_used_gb", 1.0, (30.0, 1000.0)),
)
INTERVALS = (1, 1, 5, 10, 50)


@dataclass(frozen=True)
class Draw:
    """One generated run: its class, the parameters it was drawn with, and its readings (GiB)."""

    shape: str
    seed: int
    steps: tuple[int, ...]
    values: tuple[float, ...]  # GiB, before rounding to the logged unit
    key: str
    per_gib: float  # logged units per GiB (1024 for MiB)
    decimals: int  # digits the logger prints
    noise_sigma: float  # GiB, of one reading
    rise: float = 0.0  # GiB, over the judged stretch (leak classes), or the warmup rise
    params: dict = field(default_factory=dict)

    @property
    def leak(self) -> bool:
        return self.shape in LEAK_CLASSES

    @property
    def level(self) -> float:
        return sorted(self.values)[len(self.values) // 2]

    @property
    def sigmas(self) -> float:
        """The rise in units of the noise of one reading (inf without noise)."""
        return self.rise / self.noise_sigma if self.noise_sigma > 0 else math.inf

    @property
    def name(self) -> str:
        return f"{self.shape}#{self.seed}"

    def accept(self) -> set[str]:
        return {"leak"} if self.leak else CALM_VERDICTS[self.shape]

    def lines(self) -> list[str]:
        out = []
        for i, (step, value) in enumerate(zip(self.steps, self.values)):
            reading = round(value * self.per_gib, self.decimals)
            out.append(json.dumps({"step": step, "loss": round(3.2 - 0.3 * math.log1p(i), 4), self.key: reading}))
        return out


def _noise(rng: random.Random, n: int, sigma: float, rho: float) -> list[float]:
    """AR(1) noise of marginal SD `sigma` (rho 0: white)."""
    out, prev = [], 0.0
    innovation = sigma * math.sqrt(1 - rho * rho)
    for i in range(n):
        prev = rng.gauss(0, sigma) if i == 0 else rho * prev + rng.gauss(0, innovation)
        out.append(prev)
    return out


def _stairs_clean(n: int, every: int, jump: float) -> list[float]:
    return [jump * (i // every) for i in range(n)]


def draw(shape: str, seed: int, *, sigmas: float | None = None, points: int | None = None) -> Draw:
    """A run of class `shape` drawn from `seed`. `sigmas` fixes a leak's rise in noise units and
    `points` the number of readings (for power curves); otherwise both are drawn where the truth is
    plain to a reader of the chart: a leak rises at least 12 noise SDs and 2 % of its level."""
    rng = random.Random(f"{shape}/{seed}")
    key, per_gib, (lo, hi) = rng.choice(SCALES)
    level = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    noise_pct = rng.choice((0.0, rng.uniform(0.01, 0.1), rng.uniform(0.1, 0.6)))
    if sigmas is not None:
        # Power curves: noise large enough that the relative gate (memory-leak's min_growth_pct) does
        # not decide instead of the noise: 2 SDs are at least 0.8 % of the level.
        noise_pct = rng.uniform(0.4, 1.0)
    sigma = level * noise_pct / 100
    rho = rng.choice((0.0, 0.0, rng.uniform(0.2, 0.7)))
    interval = rng.choice(INTERVALS)
    n = points or rng.randint(12, 400)
    params: dict = {"noise_pct": round(noise_pct, 4), "rho": round(rho, 3), "interval": interval}
    if shape == "few-points":
        n = rng.randint(2, 4)
    first = rng.choice((0, 1, interval))
    steps = [first + interval * i for i in range(n)]
    base = [0.0] * n
    rise = 0.0

    def leak_rise(stretch: int) -> float:
        """Rise over `stretch` readings: `sigmas` noise SDs, or drawn above what any reader calls clear."""
        if sigmas is not None:
            return sigmas * sigma if sigma > 0 else 0.02 * level
        floor = max(12 * sigma * math.sqrt(20 / max(min(stretch, 20), 3)), 0.02 * level)
        return floor * math.exp(rng.uniform(0, math.log(10)))

    if shape == "flat":
        pass
    elif shape == "linear":
        rise = leak_rise(n)
        base = [rise * i / (n - 1) for i in range(n)]
    elif shape == "late-onset":
        at = int(n * rng.uniform(0.2, 0.6))
        rise = leak_rise(n - at)
        base = [0.0 if i < at else rise * (i - at) / (n - 1 - at) for i in range(n)]
        params["onset_step"] = steps[at]
    elif shape == "stairs":
        every = rng.randint(3, max(3, n // 5))
        jumps = (n - 1) // every
        rise = leak_rise(n)
        base = _stairs_clean(n, every, rise / max(jumps, 1))
        params["every"] = every
    elif shape in ("sawtooth-flat", "sawtooth-rising"):
        period = rng.randint(3, 12)
        n = max(n, 8 * period)
        steps = [first + interval * i for i in range(n)]
        amplitude = level * rng.uniform(0.03, 0.4)
        base = [amplitude * (i % period) / (period - 1) for i in range(n)]
        if shape == "sawtooth-rising":
            cycles = n // period
            # A floor rising by a clear share of the climb each cycle, or `sigmas` noise SDs overall.
            rise = leak_rise(cycles) if sigmas is not None else max(amplitude * rng.uniform(0.05, 0.3), 0.02 * level) * cycles / 3
            base = [b + rise * (i // period) / max(cycles - 1, 1) for i, b in enumerate(base)]
        params.update(period=period, amplitude=round(amplitude, 6))
    elif shape == "saturating":
        # Caches filling towards a cap: cap - A e^(-t/tau), reached well before the end (5+ tau).
        tau = rng.uniform(2, 15)
        n = max(n, int(7 * tau) + 10)
        steps = [first + interval * i for i in range(n)]
        rise = level * rng.uniform(0.02, 0.6)
        base = [-rise * math.exp(-i / tau) for i in range(n)]
        params["tau_points"] = round(tau, 2)
    elif shape == "warmup-plateau":
        k = rng.randint(1, 3)
        rise = level * rng.uniform(0.05, 0.8)
        base = [-rise * (1 - i / k) if i < k else 0.0 for i in range(n)]
    elif shape == "jump-then-leak":
        at = int(n * rng.uniform(0.2, 0.5))
        jump = level * rng.uniform(0.05, 0.3)
        rise = leak_rise(n - at)
        base = [0.0 if i < at else jump + rise * (i - at) / (n - 1 - at) for i in range(n)]
        params["jump_step"] = steps[at]
    elif shape == "few-points":
        jump = level * rng.uniform(0.05, 0.6)
        at = rng.randint(1, n - 1) if n > 1 else 0
        base = [0.0 if i < at else jump for i in range(n)]
    else:
        raise ValueError(shape)
    noise = _noise(rng, n, sigma, rho)
    values = tuple(max(level + b + e, level * 0.01) for b, e in zip(base, noise))
    # Loggers print 2-4 decimals of their unit; never coarser than a tenth of the noise or of the steps.
    decimals = 2 if per_gib == 1.0 else 1
    resolution = max(sigma, min((abs(b - a) for a, b in zip(base, base[1:]) if b != a), default=sigma)) * per_gib
    while resolution > 0 and 10**-decimals > resolution / 10 and decimals < 6:
        decimals += 1
    return Draw(shape, seed, tuple(steps), values, key, per_gib, decimals, sigma, rise, params)


def draws(seed: int = 0, count: int = 1000, classes: tuple[str, ...] = CLASSES) -> list[Draw]:
    """`count` draws cycling through `classes`, seeded from `seed`."""
    return [draw(classes[i % len(classes)], seed * 1_000_003 + i) for i in range(count)]


@dataclass(frozen=True)
class Judged:
    draw: Draw
    verdict: str
    fired: tuple[str, ...]
    report: object

    @property
    def right(self) -> bool:
        return self.verdict in self.draw.accept() and (self.draw.leak == ("memory-leak" in self.fired))

    @property
    def false_leak(self) -> bool:
        return not self.draw.leak and "memory-leak" in self.fired


def judge(d: Draw, directory: Path | None = None) -> Judged:
    """Write the draw as a log and analyze it through the public API."""
    from memlog.engine.api import analyze

    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = Path(tmp) / "metrics.jsonl"
        path.write_text("\n".join(d.lines()) + "\n")
        report = analyze([str(path)])
    return Judged(d, report.verdict, tuple(f.rule for f in report.findings), report)
