"""Compare: has memory regressed between two runs (an upgrade, a config change)?

Each run (one or more files or directories) is analysed as `analyze` does; their memory series
are then aligned:
- by worker: the same rank (or pipeline stage: ranks are compared with the same rank), else the
  same worker label; a run with a single series on each side pairs those two;
- by step: levels and peaks are measured on the steps both runs logged (the common range), past
  the later of the two warmups; growth rates, warmups and projections are each run's own, as
  `analyze` judged them.

Per pair: plateau level (median past the warmup), peak, growth rate, steps to capacity, warmup
length; the loss over the common steps where both log it ("same work, more memory" vs "different
work"). The verdict is `regression` when any pair's level or peak rose by more than
`fail_on_increase_pct` of BASE's (and `min_change_gib`), when NEW leaks where BASE did not, or when
both leak and NEW grows faster by more than `max_rate_increase_pct`; `improvement` when nothing
regressed and something fell as much, or a leak is gone; `same` otherwise. Thresholds are named,
defaulted and overridable (`compare:` in the --config file; --fail-on-increase).

Runs that cannot be aligned (no memory series on a side, no rank in common, different memory
measures, no common steps) raise CompareError: exit 2, with the reason.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlog.base.errors import MemlogError
from memlog.base.phrases import gib, rounded
from memlog.engine.options import ReadingOptions
from memlog.judge.rulekit import Finding, Threshold, resolve_thresholds
from memlog.report.report import Report, SeriesView, finding_json

SCHEMA_VERSION = 1

THRESHOLDS = (
    Threshold(
        "fail_on_increase_pct", 3.0, "%", "a rank's plateau level or peak higher in NEW by more than this share of BASE's is a regression (--fail-on-increase)"
    ),
    Threshold("min_change_gib", 0.25, "GiB", "a difference in level or peak smaller than this is the same, whatever its share (allocator rounding, noise)"),
    Threshold("improvement_pct", 3.0, "%", "a rank's level or peak lower in NEW by more than this share of BASE's is an improvement"),
    Threshold("max_rate_increase_pct", 50.0, "%", "both runs leak: NEW's growth rate higher than BASE's by more than this is a regression"),
    Threshold("loss_diff_pct", 5.0, "%", "mean losses over the common steps differing by more than this: the runs may not do the same work"),
    Threshold("min_common_points", 3, "points", "readings each run needs on the common steps of a rank to compare it"),
)

VERDICTS = ("regression", "improvement", "same")


class CompareError(MemlogError):
    """The runs cannot be aligned: exit 2, with the reason."""


def resolve(overrides: Mapping[str, Any], fail_on_increase: float | None = None) -> dict[str, float]:
    values = resolve_thresholds("compare", THRESHOLDS, overrides)
    if fail_on_increase is not None:
        values["fail_on_increase_pct"] = fail_on_increase
    return values


@dataclass
class Side:
    """One run's numbers for one aligned series."""

    label: str
    metric: str
    points: int
    level_gib: float
    peak_gib: float
    rate_gib_per_step: float | None
    warmup_until_step: int | None
    steps_to_capacity: float | None
    capacity_gib: float | None
    leaks: bool

    @property
    def rate(self) -> float:
        """Growth per step; 0 where none was fitted."""
        return self.rate_gib_per_step or 0

    def to_json(self) -> dict[str, Any]:
        return {
            "series": self.label,
            "metric": self.metric,
            "points": self.points,
            "level_gib": rounded(self.level_gib),
            "peak_gib": rounded(self.peak_gib),
            "rate_gib_per_1k_steps": rounded(self.rate_gib_per_step * 1000 if self.rate_gib_per_step is not None else None, 4),
            "warmup_until_step": self.warmup_until_step,
            "steps_to_capacity": rounded(self.steps_to_capacity, 0),
            "capacity_gib": rounded(self.capacity_gib),
            "leaks": self.leaks,
        }


@dataclass
class Pair:
    subject: str
    worker: str  # "rank3" or the worker label
    rank: int | None
    base: Side
    new: Side

    @property
    def level_change_gib(self) -> float:
        return self.new.level_gib - self.base.level_gib

    @property
    def peak_change_gib(self) -> float:
        return self.new.peak_gib - self.base.peak_gib

    def to_json(self) -> dict[str, Any]:
        def pct(change: float, of: float) -> float | None:
            return rounded(100 * change / of, 2) if of > 0 else None

        return {
            "subject": self.subject,
            "worker": self.worker,
            "rank": self.rank,
            "base": self.base.to_json(),
            "new": self.new.to_json(),
            "diff": {
                "level_gib": rounded(self.level_change_gib),
                "level_pct": pct(self.level_change_gib, self.base.level_gib),
                "peak_gib": rounded(self.peak_change_gib),
                "peak_pct": pct(self.peak_change_gib, self.base.peak_gib),
                "rate_gib_per_1k_steps": rounded(1000 * ((self.new.rate_gib_per_step or 0) - (self.base.rate_gib_per_step or 0)), 4),
            },
        }


def _finding(rule: str, severity: str, subject: str, message: str, evidence: dict[str, Any]) -> Finding:
    """A difference that counts, as a finding like `analyze`'s (rule, severity, subject, message,
    evidence), so renderers and readers of either treat it the same way."""
    return Finding(rule, severity, message, evidence, subject=subject)


@dataclass
class Comparison:
    verdict: str
    findings: list[Finding]
    pairs: list[Pair]
    common_steps: tuple[int, int]
    base: Report
    new: Report
    base_inputs: list[str]
    new_inputs: list[str]
    loss: dict[str, Any] | None
    thresholds: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def fails(self) -> bool:
        return self.verdict == "regression"

    def to_json(self) -> dict[str, Any]:
        def run(report: Report, inputs: list[str]) -> dict[str, Any]:
            cov = report.coverage
            return {
                "inputs": inputs,
                "verdict": report.verdict,
                "steps": cov.get("steps"),
                "ranks": cov.get("ranks"),
                "workers": cov.get("workers"),
                "records": cov.get("records"),
            }

        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "compare",
            "verdict": self.verdict,
            "findings": [finding_json(f) for f in self.findings],
            "base": run(self.base, self.base_inputs),
            "new": run(self.new, self.new_inputs),
            "common_steps": list(self.common_steps),
            "pairs": [p.to_json() for p in self.pairs],
            "loss": self.loss,
            "notes": self.notes,
            "thresholds": self.thresholds,
        }


# -- alignment -----------------------------------------------------------------------------------


def _memory_views(report: Report) -> dict[tuple[str, str], SeriesView]:
    """Memory series by (subject, worker): a rank's last segment (where the run is now)."""
    views: dict[tuple[str, str], SeriesView] = {}
    for view in report.series:
        if view.subject in ("device", "host") and view.values:
            views[(view.subject, f"rank{view.rank}" if view.rank is not None else view.label)] = view
    return views


def _loss_views(report: Report) -> dict[str, SeriesView]:
    return {f"rank{v.rank}" if v.rank is not None else v.label: v for v in report.series if v.subject == "loss" and v.values}


def _aligned(base: dict, new: dict) -> list[tuple[tuple[str, str], SeriesView, SeriesView]]:
    common = [key for key in base if key in new]
    if common:
        return [(key, base[key], new[key]) for key in common]
    for subject in ("device", "host"):  # one series on each side: the same process, named differently
        b = [k for k in base if k[0] == subject]
        n = [k for k in new if k[0] == subject]
        if len(b) == 1 and len(n) == 1:
            return [(b[0], base[b[0]], new[n[0]])]
    return []


def _leaking(report: Report) -> set[str]:
    return {label for f in report.findings if f.verdict is not None and f.verdict.name == "leak" for label in f.series}


def _window(view: SeriesView, lo: float, hi: float, after: float | None) -> list[float]:
    inside = [v for s, v in zip(view.steps, view.values) if lo <= s <= hi and math.isfinite(v)]
    past = [v for s, v in zip(view.steps, view.values) if lo <= s <= hi and (after is None or s > after) and math.isfinite(v)]
    return past if len(past) >= 3 else inside


def _side(view: SeriesView, values: list[float], leaking: set[str]) -> Side:
    slope = view.fit.slope if view.fit else None
    to_capacity = None
    if slope and slope > 0 and view.capacity_gib and view.fit:
        last = view.steps[-1]
        to_capacity = max(0.0, (view.capacity_gib - view.fit.at(last)) / slope)
    return Side(
        view.label,
        view.metric,
        len(values),
        statistics.median(values),
        max(values),
        slope,
        view.knee_step,
        to_capacity,
        view.capacity_gib,
        view.label in leaking,
    )


def _cannot(reason: str) -> CompareError:
    return CompareError(f"cannot compare the runs: {reason}")


def _describe(views: dict) -> str:
    return ", ".join(sorted(k[1] for k in views)[:8]) + (" ..." if len(views) > 8 else "")


def compare_reports(base: Report, new: Report, thresholds: dict[str, float], base_inputs: Sequence[str] = (), new_inputs: Sequence[str] = ()) -> Comparison:
    t = thresholds
    base_views, new_views = _memory_views(base), _memory_views(new)
    for name, views in (("BASE", base_views), ("NEW", new_views)):
        if not views:
            raise _cannot(f"{name} has no memory series (verdict {(base if name == 'BASE' else new).verdict})")
    aligned = _aligned(base_views, new_views)
    if not aligned:
        raise _cannot(f"no rank or worker in common (BASE: {_describe(base_views)}; NEW: {_describe(new_views)})")
    metrics = {(b.metric, n.metric) for _, b, n in aligned if b.metric != n.metric}
    if metrics:
        base_metric, new_metric = sorted(metrics)[0]
        raise _cannot(f"they log different memory measures (BASE {base_metric}, NEW {new_metric}): compare runs that log the same one")
    base_leaks, new_leaks = _leaking(base), _leaking(new)
    pairs, notes, skipped_pairs = [], [], []
    lows, highs = [], []
    for (subject, worker), b, n in aligned:
        lo, hi = max(b.steps[0], n.steps[0]), min(b.steps[-1], n.steps[-1])
        warm = max((k for k in (b.knee_step, n.knee_step) if k is not None), default=None)
        bv, nv = _window(b, lo, hi, warm), _window(n, lo, hi, warm)
        if hi < lo or min(len(bv), len(nv)) < t["min_common_points"]:
            skipped_pairs.append(f"{worker} (BASE steps {b.steps[0]:g}-{b.steps[-1]:g}, NEW {n.steps[0]:g}-{n.steps[-1]:g})")
            continue
        lows.append(lo)
        highs.append(hi)
        rank = b.rank if b.rank is not None else n.rank
        pairs.append(Pair(subject, worker, rank, _side(b, bv, base_leaks), _side(n, nv, new_leaks)))
    if not pairs:
        raise _cannot(f"no common steps with {int(t['min_common_points'])}+ readings on each side: {'; '.join(skipped_pairs[:4])}")
    if skipped_pairs:
        notes.append(f"not compared, too few common steps: {', '.join(skipped_pairs[:6])}")
    missing = sorted({k[1] for k in base_views} - {k[1] for k in new_views})
    extra = sorted({k[1] for k in new_views} - {k[1] for k in base_views})
    if len(aligned) > 1 or len(base_views) == len(new_views) == 1:
        if extra:
            notes.append(f"NEW has {len(extra)} worker(s) BASE lacks: {', '.join(extra[:8])}")
    common = (int(min(lows)), int(max(highs)))
    for name, report in (("BASE", base), ("NEW", new)):
        steps = report.coverage.get("steps")
        if steps and (steps[0] < common[0] or steps[1] > common[1]):
            notes.append(f"{name} logged steps {steps[0]}-{steps[1]}; levels and peaks are compared on steps {common[0]}-{common[1]}")
    loss = _loss(base, new, common, t)
    findings = _findings(pairs, t, missing, loss)
    regressed = any(f.severity == "error" for f in findings)
    improved = any(f.rule in ("level-decrease", "peak-decrease", "leak-gone") for f in findings)
    verdict = "regression" if regressed else "improvement" if improved else "same"
    return Comparison(verdict, findings, pairs, common, base, new, list(base_inputs), list(new_inputs), loss, dict(t), notes)


def _by(diff_pct: float | None) -> str:
    """` by +12.5%`, or nothing where no share can be given (a mean of zero, a non-finite one)."""
    return f" by {diff_pct:+}%" if diff_pct is not None else ""


def _loss(base: Report, new: Report, common: tuple[int, int], t) -> dict[str, Any] | None:
    b_views, n_views = _loss_views(base), _loss_views(new)
    means_b, means_n = [], []
    for key in set(b_views) & set(n_views):
        bv = [v for s, v in zip(b_views[key].steps, b_views[key].values) if common[0] <= s <= common[1] and math.isfinite(v)]
        nv = [v for s, v in zip(n_views[key].steps, n_views[key].values) if common[0] <= s <= common[1] and math.isfinite(v)]
        if bv and nv:
            means_b.append(statistics.fmean(bv))
            means_n.append(statistics.fmean(nv))
    if not means_b:
        return None
    b, n = statistics.fmean(means_b), statistics.fmean(means_n)
    # A share of a zero mean is no number: equal means are the same work, unequal ones are not.
    diff_pct = 100 * (n - b) / abs(b) if b else (0.0 if n == b else None)
    return {
        "base_mean": rounded(b),
        "new_mean": rounded(n),
        "diff_pct": rounded(diff_pct, 2),
        "same_work": diff_pct is not None and abs(diff_pct) <= t["loss_diff_pct"],
    }


def _findings(pairs: list[Pair], t, missing: list[str], loss: dict | None) -> list[Finding]:
    findings: list[Finding] = []

    def group(rule: str, severity: str, chosen: list[Pair], text, measure: str) -> None:
        if not chosen:
            return
        worst = max(chosen, key=lambda p: abs(getattr(p, measure)))
        subject = worst.subject
        message = text(worst) + (f" (and {len(chosen) - 1} more worker(s))" if len(chosen) > 1 else "")
        findings.append(
            _finding(
                rule,
                severity,
                subject,
                message,
                {
                    "observed": {
                        "workers": len(chosen),
                        "worst": worst.worker,
                        "base_gib": rounded(getattr(worst.base, measure.split("_")[0] + "_gib")),
                        "new_gib": rounded(getattr(worst.new, measure.split("_")[0] + "_gib")),
                        "change_gib": rounded(getattr(worst, measure)),
                    },
                    "thresholds": dict(t),
                    "ranks": sorted({p.rank for p in chosen if p.rank is not None}),
                    "workers": [p.worker for p in chosen][:16],
                },
            )
        )

    def beyond(change: float, of: float, pct: float) -> bool:
        return abs(change) >= t["min_change_gib"] and of > 0 and abs(change) >= of * pct / 100

    for measure, what in (("level_change_gib", "level"), ("peak_change_gib", "peak")):
        base_of = lambda p, w=what: getattr(p.base, f"{w}_gib")
        up = [p for p in pairs if getattr(p, measure) > 0 and beyond(getattr(p, measure), base_of(p), t["fail_on_increase_pct"])]
        down = [p for p in pairs if getattr(p, measure) < 0 and beyond(getattr(p, measure), base_of(p), t["improvement_pct"])]
        name = "plateau level" if what == "level" else "peak"
        group(
            f"{what}-increase",
            "error",
            up,
            lambda p, n=name, w=what: (
                f"{p.subject.capitalize()} memory {n} on {p.worker} rose {gib(getattr(p.base, f'{w}_gib'))} -> {gib(getattr(p.new, f'{w}_gib'))} "
                f"(+{100 * (getattr(p.new, f'{w}_gib') / getattr(p.base, f'{w}_gib') - 1):.1f}%, over {t['fail_on_increase_pct']:g}%)"
            ),
            measure,
        )
        group(
            f"{what}-decrease",
            "info",
            down,
            lambda p, n=name, w=what: (
                f"{p.subject.capitalize()} memory {n} on {p.worker} fell {gib(getattr(p.base, f'{w}_gib'))} -> {gib(getattr(p.new, f'{w}_gib'))} "
                f"({100 * (getattr(p.new, f'{w}_gib') / getattr(p.base, f'{w}_gib') - 1):.1f}%)"
            ),
            measure,
        )
    new_leaks = [p for p in pairs if p.new.leaks and not p.base.leaks]
    if new_leaks:
        p = new_leaks[0]
        when = (
            f"; at this rate it reaches {gib(p.new.capacity_gib)} in ~{p.new.steps_to_capacity:,.0f} steps"
            if p.new.steps_to_capacity is not None and p.new.capacity_gib is not None
            else ""
        )
        findings.append(
            _finding(
                "new-leak",
                "error",
                p.subject,
                (
                    f"NEW leaks where BASE did not: {p.subject} memory on {', '.join(q.worker for q in new_leaks[:8])} grows "
                    f"{gib((p.new.rate_gib_per_step or 0) * 1000)} per 1k steps (BASE {gib((p.base.rate_gib_per_step or 0) * 1000)}){when}"
                ),
                {
                    "observed": {
                        "workers": len(new_leaks),
                        "new_rate_gib_per_1k_steps": rounded((p.new.rate_gib_per_step or 0) * 1000),
                        "base_rate_gib_per_1k_steps": rounded((p.base.rate_gib_per_step or 0) * 1000),
                        "new_steps_to_capacity": rounded(p.new.steps_to_capacity, 0),
                    },
                    "thresholds": dict(t),
                    "ranks": sorted({q.rank for q in new_leaks if q.rank is not None}),
                },
            )
        )
    faster = [p for p in pairs if p.new.leaks and p.base.leaks and p.base.rate > 0 and p.new.rate > p.base.rate * (1 + t["max_rate_increase_pct"] / 100)]
    if faster:  # both rates are fitted and positive here: `rate` is the fitted one
        p = max(faster, key=lambda q: q.new.rate / q.base.rate)
        findings.append(
            _finding(
                "rate-increase",
                "error",
                p.subject,
                (
                    f"Both runs leak, NEW faster: {p.worker} grows {gib(p.new.rate * 1000)} per 1k steps, BASE "
                    f"{gib(p.base.rate * 1000)} (over +{t['max_rate_increase_pct']:g}%)"
                ),
                {
                    "observed": {
                        "workers": len(faster),
                        "base_rate_gib_per_1k_steps": rounded(p.base.rate * 1000),
                        "new_rate_gib_per_1k_steps": rounded(p.new.rate * 1000),
                    },
                    "thresholds": dict(t),
                    "ranks": sorted({q.rank for q in faster if q.rank is not None}),
                },
            )
        )
    gone = [p for p in pairs if p.base.leaks and not p.new.leaks]
    if gone:
        findings.append(
            _finding(
                "leak-gone",
                "info",
                gone[0].subject,
                f"BASE leaked and NEW does not on {', '.join(p.worker for p in gone[:8])}",
                {"observed": {"workers": len(gone)}, "thresholds": dict(t), "ranks": sorted({p.rank for p in gone if p.rank is not None})},
            )
        )
    if missing:
        findings.append(
            _finding(
                "missing-workers",
                "warning",
                "run",
                f"NEW has no memory readings of {len(missing)} worker(s) BASE has ({', '.join(missing[:8])}): only the workers both runs have are compared",
                {"observed": {"missing": missing[:64]}, "thresholds": dict(t), "ranks": []},
            )
        )
    if loss is not None and not loss["same_work"]:
        findings.append(
            _finding(
                "loss-differs",
                "warning",
                "loss",
                (
                    f"The mean loss over the common steps differs{_by(loss['diff_pct'])} (BASE {loss['base_mean']}, NEW {loss['new_mean']}): "
                    "the runs may not do the same work, so a memory difference may come from the work, not the upgrade"
                ),
                {"observed": loss, "thresholds": dict(t), "ranks": []},
            )
        )
    severity = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: severity[f.severity])


def compare(
    base_inputs: Sequence[str],
    new_inputs: Sequence[str],
    *,
    options: ReadingOptions = ReadingOptions(),
    config=None,
    fail_on_increase: float | None = None,
    capacity_gib: float | None = None,
) -> Comparison:
    """Both runs read and judged as `analyze` reads and judges them (the same reading options),
    then compared. `config`: loaded already, else options.config's."""
    from memlog.engine.api import analyze

    config = config if config is not None else options.loaded_config()
    thresholds = resolve(config.compare, fail_on_increase)
    reports = []
    for name, inputs in (("BASE", base_inputs), ("NEW", new_inputs)):
        try:
            reports.append(analyze(list(inputs), options=options, config=config, capacity_gib=capacity_gib))
        except MemlogError as exc:
            raise CompareError(f"{name} ({', '.join(inputs)}): {exc}") from None
    return compare_reports(reports[0], reports[1], thresholds, base_inputs, new_inputs)
