"""What a rule file in `rules/` is made of, and how rules are found and run.

A rule file defines `RULE = Rule(...)`: a stable kebab-case id (the file's stem, with `-` for
`_`), a severity, what it means and does not mean, named thresholds with defaults (overridable from
the config file), examples, and a `check(ctx, t)` function that returns findings (built with
`RULE.finding(...)`) or raises `Skip(reason)`. A rule also declares how it relates to the rest, so
that nothing central names a rule:

- `verdict=`: the headline its findings imply, with a rank; the report's headline is the
  highest-ranked verdict among the findings (report.headline);
- `after=`: the rules whose findings it reads; rules run in an order that respects these;
- `decides=True`: its findings settle the memory series they name (a later rule asks
  `ctx.decided(series)`: a plateau is only a plateau where no leak was found);
- `marks=`: how charts draw the series it names (e.g. "placeholder": not a real value).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The face a rule file imports (rules/*.py import nothing else of memlog): what rules are made of
# (above), the shape of a series and its projection, the vocabularies and the shared wording.
from memlog.base.columns import MEMORY_COLUMNS, Measure
from memlog.base.content import content_dir
from memlog.base.errors import ConfigError, MemlogError
from memlog.base.events import keyboard_interrupt, memory_words, ray_death_cause, restarted_after
from memlog.base.limits import MAX_DEVICE_GIB, MAX_HOST_GIB
from memlog.base.phrases import duration, gib, quote, rounded, step_word, workers_phrase
from memlog.judge.known_issues import known_issues
from memlog.judge.projection import project
from memlog.judge.shapes import shape_of
from memlog.tables.series import SeriesKey

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


__all__ = [
    "Example",
    "Finding",
    "Rule",
    "Skip",
    "Threshold",
    "Verdict",
    "INCONCLUSIVE",
    "SEVERITY_RANK",
    "MEMORY_COLUMNS",
    "MAX_DEVICE_GIB",
    "MAX_HOST_GIB",
    "Measure",
    "SeriesKey",
    "duration",
    "gib",
    "keyboard_interrupt",
    "known_issues",
    "memory_words",
    "project",
    "quote",
    "ray_death_cause",
    "restarted_after",
    "rounded",
    "shape_of",
    "step_word",
    "workers_phrase",
]


class Skip(Exception):
    """Raised by a rule that cannot judge this run; the reason goes into the report."""


@dataclass(frozen=True)
class Threshold:
    """A named threshold of a rule, overridable from the config. The values a config may give are
    bounded by the unit (UNIT_BOUNDS: a count is a whole number of at least 1, a p-value or share
    lies in [0, 1], a size or a percentage is not negative), or by `low`/`high` where given."""

    name: str
    default: float | int
    unit: str
    description: str
    low: float | None = None
    high: float | None = None

    def bounds(self) -> tuple[float | None, float | None, bool]:
        """(lowest, highest, whole number) a config may set."""
        low, high, whole = UNIT_BOUNDS.get(self.unit, (None, None, False))
        return (low if self.low is None else self.low), (high if self.high is None else self.high), whole

    def checked(self, value: Any) -> float | int:
        """`value` as the rule reads it; a ValueError says what is allowed (Rule.resolve names the rule)."""
        low, high, whole = self.bounds()
        what = f"threshold {self.name} counts {self.unit}: " if whole else f"threshold {self.name} must be "
        if whole and value != int(value):
            raise ValueError(f"{what}a whole number, got {value!r:.40}")
        if (low is not None and value < low) or (high is not None and value > high):
            allowed = f"from {low:g} to {high:g}" if low is not None and high is not None else f"at least {low:g}" if low is not None else f"at most {high:g}"
            raise ValueError(f"{what}{allowed}, got {value!r:.40}")
        return int(value) if whole else value


# What a threshold's unit allows (lowest, highest, whole number): a rule counting zero points or a
# p-value above 1 is no threshold, and a count of 0 made rules read the first of no readings.
COUNTS = ("points", "readings", "steps", "cycles", "peaks", "retries", "records")
UNIT_BOUNDS: dict[str, tuple[float | None, float | None, bool]] = {
    **dict.fromkeys(COUNTS, (1, None, True)),
    **dict.fromkeys(("p", "share", "fraction"), (0.0, 1.0, False)),
    **dict.fromkeys(("GiB", "%", "sigmas", "ratio"), (0.0, None, False)),
}


def resolve_thresholds(owner: str, thresholds: Iterable[Threshold], overrides: Mapping[str, Any]) -> dict[str, float | int]:
    """The defaults of `thresholds` with a config's `overrides`, each checked (Threshold.checked);
    `owner` ("rule memory-leak", "compare") starts every error message."""
    from memlog.base.config import finite_number

    declared = {t.name: t for t in thresholds}
    values = {name: t.default for name, t in declared.items()}
    for name, value in overrides.items():
        if name not in declared:
            raise ConfigError(f"{owner}: unknown threshold {name!r} (known: {', '.join(values)})")
        if not finite_number(value):
            raise ConfigError(f"{owner}: threshold {name} must be a number, got {value!r:.40}")
        try:
            values[name] = declared[name].checked(value)
        except ValueError as exc:
            raise ConfigError(f"{owner}: {exc}") from None
    return values


@dataclass(frozen=True)
class Verdict:
    """A headline a rule's findings imply. The highest `rank` among the findings wins; a verdict that
    explains an error (a leak, an OOM) must outrank every calm one (tests/judge/test_rules.py checks)."""

    name: str  # the JSON `verdict`
    rank: int
    headline: str  # "LEAK: memory keeps growing; ..."; the text before ": " is the short name
    calm: bool = False  # says the run is fine (stable, warmup, a placeholder loss)

    @property
    def title(self) -> str:
        return self.headline.partition(": ")[0]

    @property
    def meaning(self) -> str:
        return self.headline.partition(": ")[2]


# What the report says when no finding implies a verdict.
INCONCLUSIVE = Verdict("inconclusive", 0, "INCONCLUSIVE: the log does not decide it")


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
    # Declared by the rule (not serialised): the headline it implies, whether it settles the memory
    # series it names, and how charts mark them.
    verdict: Verdict | None = field(default=None, compare=False)
    decides: bool = field(default=False, compare=False)
    marks: str | None = field(default=None, compare=False)

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
    verdict: Verdict | None = None
    after: tuple[str, ...] = ()
    decides: bool = False
    marks: str | None = None
    examples: tuple[str | Example, ...] = ()
    path: Path | None = None

    def resolve(self, overrides: Mapping[str, Any]) -> dict[str, float | int]:
        return resolve_thresholds(f"rule {self.id}", self.thresholds, overrides)

    def finding(
        self,
        t: Mapping[str, float | int],
        message: str,
        *,
        subject: str,
        series: Iterable[str] = (),
        ranks: Iterable[int | None] = (),
        observed: Mapping[str, Any] | None = None,
        evidence: Mapping[str, Any] | None = None,
        hints: Iterable[str] = (),
        lines: Iterable[tuple[str, int]] = (),
        severity: str | None = None,
        implies_verdict: bool = True,
    ) -> Finding:
        """A finding of this rule, with what every finding carries: the rule's id, severity, verdict
        and marks, its thresholds and the ranks it is about in the evidence. `observed` comes first
        in the evidence (the numbers renderers summarise), the rule's own `evidence` keys after.
        `implies_verdict`: False for a finding that implies none (what it saw did not end the run)."""
        body: dict[str, Any] = {}
        extra = dict(evidence or {})
        for key in ("metric", "measures", "compared_with", "pattern"):  # what is measured, before the numbers
            if key in extra:
                body[key] = extra.pop(key)
        if observed is not None:
            body["observed"] = dict(observed)
        if "confidence" in extra:
            body["confidence"] = extra.pop("confidence")
        body["thresholds"] = dict(t)
        tail: dict[str, Any] = {k: extra.pop(k) for k in ("series", "series_count", "readings", "events") if k in extra}  # per-series detail last
        body.update(extra)
        body["ranks"] = sorted({r for r in ranks if r is not None})
        body.update(tail)
        return Finding(
            rule=self.id,
            severity=severity or self.severity,
            message=message,
            evidence=body,
            hints=list(hints),
            subject=subject,
            series=list(series),
            lines=list(lines),
            verdict=self.verdict if implies_verdict else None,
            decides=self.decides,
            marks=self.marks,
        )

    def help(self, markdown: bool = False) -> str:
        """The one help text of the rule (`memlog rules explain`, SARIF's rule help)."""
        strong = (lambda s: f"**{s}**") if markdown else (lambda s: s)
        code = (lambda s: f"`{s}`") if markdown else (lambda s: s)
        parts = [self.summary, self.explanation, f"{strong('Does not mean:')} {self.not_meaning}"]
        if self.verdict is not None:
            parts.append(
                f"{strong('Headline:')} its findings make the verdict {code(self.verdict.name)} "
                f"({self.verdict.headline}) unless a finding of higher rank outranks it (rank {self.verdict.rank})."
            )
        if self.thresholds:
            rows = [f"{t.name} = {t.default:g} {t.unit}".rstrip() + f": {t.description}" for t in self.thresholds]
            heading = f"{strong('Thresholds')} (override in the {code('--config')} file under {code('rules: {' + self.id + ': {...}}')}):"
            parts.append(heading + "\n" + "\n".join((f"- {code(r)}" if markdown else f"  {r}") for r in rows))
        if self.examples:
            parts.append(strong("Examples:") + "\n" + "\n".join(f"{'-' if markdown else '  -'} {e}" for e in self.examples))
        return "\n\n".join(parts)


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
    """Every rule of `rules/`, in an order where each runs after the rules it reads (`after=`);
    among rules free to run, errors first, then by id."""
    rules = [_load_rule_once(p) for p in sorted(content_dir("rules").glob("*.py")) if not p.name.startswith("_")]
    ids = [r.id for r in rules]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise MemlogError(f"duplicate rule ids: {sorted(duplicates)}")
    return run_order(rules)


def run_order(rules: list[Rule]) -> list[Rule]:
    by_id = {r.id: r for r in rules}
    for rule in rules:
        unknown = [a for a in rule.after if a not in by_id]
        if unknown:
            raise MemlogError(f"rule {rule.id} runs after unknown rules {unknown}")
    done: list[Rule] = []
    waiting = list(rules)
    while waiting:
        ready = [r for r in waiting if all(a in {d.id for d in done} for a in r.after)]
        if not ready:
            raise MemlogError(f"rules wait on each other: {sorted(r.id for r in waiting)}")
        chosen = min(ready, key=lambda r: (-SEVERITY_RANK[r.severity], r.id))
        done.append(chosen)
        waiting.remove(chosen)
    return done


def declared_verdicts(rules: Iterable[Rule]) -> list[Verdict]:
    """Every verdict the rules can imply, highest rank first, then inconclusive."""
    found = {r.verdict.name: r.verdict for r in rules if r.verdict is not None}
    return sorted(found.values(), key=lambda v: -v.rank) + [INCONCLUSIVE]


def headline(findings: Iterable[Finding]) -> Verdict:
    """The highest-ranked verdict the findings imply; inconclusive when none implies one."""
    return max((f.verdict for f in findings if f.verdict is not None), key=lambda v: v.rank, default=INCONCLUSIVE)


def rules_listing() -> list[str]:
    """`memlog rules list`: a line per rule, in the order they run."""
    return [f"{rule.id:<18} {rule.severity:<8} {rule.summary}" for rule in load_rules()]


def explain(rule_id: str) -> str:
    """`memlog rules explain ID`: the rule's id and severity, then its one help text."""
    rules = {r.id: r for r in load_rules()}
    if rule_id not in rules:
        raise MemlogError(f"unknown rule {rule_id!r} (known: {', '.join(rules)})")
    rule = rules[rule_id]
    return f"{rule.id} ({rule.severity})\n\n{rule.help()}"
