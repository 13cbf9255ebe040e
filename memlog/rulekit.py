"""What a rule file in `rules/` is made of, and how rules are found and run.

A rule file defines `RULE = Rule(...)`: a stable kebab-case id, a severity, what it means and
does not mean, named thresholds with defaults (overridable from the config file), examples, and a
`check(ctx, t)` function that returns findings or raises `Skip(reason)`. Rules run in `order`;
a later rule may read the findings of earlier ones from `ctx.findings` (a plateau is only a
plateau where no leak was found).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlog.content import content_dir
from memlog.errors import ConfigError, MemlogError

SEVERITIES = ("info", "warning", "error")


class Skip(Exception):
    """Raised by a rule that cannot judge this run; the reason goes into the report."""


@dataclass(frozen=True)
class Threshold:
    name: str
    default: float | int
    unit: str
    description: str


@dataclass
class Finding:
    rule: str
    severity: str
    message: str
    evidence: dict[str, Any]
    hints: list[str] = field(default_factory=list)
    subject: str = "device"  # what the finding is about: device, host, loss, run
    series: list[str] = field(default_factory=list)  # labels of the series it is about
    lines: list[tuple[str, int]] = field(default_factory=list)  # (source, line) evidence anchors

    def __post_init__(self) -> None:
        self.lines = sorted(set(self.lines))


@dataclass(frozen=True)
class Example:
    """A worked example of a rule: what it shows, whether the rule fires on it, and the run itself.

    The run is format-free data (tests render it as a log and check `fires`): per-rank memory at
    each logged step (`memory`, torchtitan's peak-reserved reading), other canonical columns
    (`columns`: column -> rank -> values), the loss per rank, the device capacity, and raw extra
    log lines (`lines`, e.g. an OOM message)."""

    text: str
    fires: bool
    memory: Mapping[int, Sequence[float]] = field(default_factory=dict)
    steps: Sequence[int] | None = None
    columns: Mapping[str, Mapping[int, Sequence[float]]] = field(default_factory=dict)
    loss: Mapping[int, Sequence[float]] = field(default_factory=dict)
    capacity_gib: float | None = None
    lines: Sequence[str] = ()

    def __str__(self) -> str:
        return f"{'fires' if self.fires else 'silent'}: {self.text}"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    summary: str
    explanation: str
    not_meaning: str
    thresholds: tuple[Threshold, ...]
    check: Callable[..., list[Finding]]
    order: int = 50
    examples: tuple[str | Example, ...] = ()
    path: Path | None = None

    def defaults(self) -> dict[str, float | int]:
        return {t.name: t.default for t in self.thresholds}

    def resolve(self, overrides: Mapping[str, Any]) -> dict[str, float | int]:
        values = self.defaults()
        for name, value in overrides.items():
            if name not in values:
                raise ConfigError(f"rule {self.id}: unknown threshold {name!r} (known: {', '.join(values)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"rule {self.id}: threshold {name} must be a number, got {value!r}")
            values[name] = value
        return values


def _load_rule(path: Path) -> Rule:
    spec = importlib.util.spec_from_file_location(f"memlog_rules.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise MemlogError(f"{path}: cannot load rule")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rule = getattr(module, "RULE", None)
    if not isinstance(rule, Rule):
        raise MemlogError(f"{path}: a rule file must define RULE = Rule(...)")
    if rule.severity not in SEVERITIES:
        raise MemlogError(f"{path}: severity must be one of {SEVERITIES}")
    return Rule(**{**rule.__dict__, "path": path})


_LOADED: dict[tuple, Rule] = {}


def _load_rule_once(path: Path) -> Rule:
    """_load_rule, remembered while the file is unchanged (a process analysing many logs)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _LOADED:
        _LOADED[key] = _load_rule(path)
    return _LOADED[key]


def load_rules() -> list[Rule]:
    rules = [_load_rule_once(p) for p in sorted(content_dir("rules").glob("*.py")) if not p.name.startswith("_")]
    ids = [r.id for r in rules]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise MemlogError(f"duplicate rule ids: {sorted(duplicates)}")
    return sorted(rules, key=lambda r: (r.order, r.id))


# -- helpers shared by rule files: how findings name workers and numbers -------------------------


def workers_phrase(labels: list[str]) -> str:
    """'rank0-3, rank6' style: compact runs of consecutive ranks, other workers listed."""
    ranks, others = [], []
    for label in labels:
        if label.startswith("rank") and label[4:].isdigit():
            ranks.append(int(label[4:]))
        else:
            others.append(label)
    runs: list[str] = []
    for r in sorted(set(ranks)):
        if runs and runs[-1][1] == r - 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))  # type: ignore[arg-type]
    parts = [f"rank {a}" if a == b else f"ranks {a}-{b}" for a, b in runs]  # type: ignore[misc]
    return ", ".join(parts + others[:6] + ([f"and {len(others) - 6} more"] if len(others) > 6 else []))


def gib(value: float) -> str:
    return f"{value:.2f} GiB" if abs(value) >= 0.1 or value == 0 else f"{value * 1024:.1f} MiB"


def rounded(value: float | None, digits: int = 4) -> float | None:
    """Evidence numbers: finite and short, or None."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return round(value, digits)
