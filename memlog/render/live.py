"""What `memlog watch` prints as it judges (memlog/watch/watch.py computes; this only formats).

- On a terminal: one status area (verdict, per-worker level and rate, when a leak reaches capacity),
  redrawn in place at each judgement (at most once per --interval, 1 s by default; tests/watch/test_watch.py
  checks it on a pseudo-terminal).
- Piped text: one line per change of verdict or finding, with the time.
- `jsonl`: one JSON object per change, `analyze -o json`'s document plus `watch` (what changed,
  the early warning); the last object has `"event": "final"`.
- `github`: a workflow command per new finding (annotations), the verdict as a notice when it changes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from memlog.base.phrases import gib
from memlog.render.safety import ascii_text, safe, safe_json
from memlog.render.shared import by_severity
from memlog.render.workflow import annotation, escape_data
from memlog.report.document import finite
from memlog.report.report import Report
from memlog.watch.document import watch_document
from memlog.watch.watch import Change, changes, early_warning

MAX_ROWS = 8  # workers shown in the status area; the rest are counted


def _clock() -> str:
    return time.strftime("%H:%M:%S")


def _duration(seconds: float) -> str:
    from memlog.base.phrases import duration

    return duration(seconds)


def _warning_text(w: dict) -> str:
    text = (
        f"reaches {gib(w['capacity_gib'])} at step ~{round(w['capacity_step']):,}"
        if w.get("capacity_gib")
        else f"capacity at step ~{round(w['capacity_step']):,}"
    )
    return text + _when(w)


def _short_warning(w: dict) -> str:
    """The early warning in few words, for a narrow terminal: the step, and when."""
    return f"OOM at step ~{round(w['capacity_step']):,}" + _when(w)


def _when(w: dict) -> str:
    """When an early warning's capacity is reached, by the clock, where that is known."""
    if not w.get("capacity_at"):
        return ""
    if w.get("capacity_in_seconds") is None:  # an old log replayed: its own clock, nothing counted down
        return f", ~{w['capacity_at']} (log's clock)"
    return f", ~{w['capacity_at']} (in {_duration(w['capacity_in_seconds'])})"


def status_lines(report: Report, width: int = 100) -> list[str]:
    """The status area: verdict, one row per device (else host) series, the early warning, findings.
    A row whose early warning would not fit `width` has it on a line of its own: the time to the
    OOM is what the area is for, so it is never the part cut."""
    cov = report.coverage
    steps = f"steps {cov['steps'][0]:,}-{cov['steps'][1]:,}" if cov.get("steps") else "no steps yet"
    state = report.extra.get("watch") or {}
    pace = state.get("steps_per_second")
    lines = [
        f"memlog watch · {len(cov['sources'])} source(s), {cov['lines_read']:,} lines, {steps}"
        + (f", {pace:.2f} steps/s" if pace else "")
        + f" · judged {_clock()}",
        f"verdict: {report.headline.headline}",
    ]
    warnings = {w["series"]: w for w in early_warning(report)}
    views = [v for v in report.series if v.subject == "device"] or [v for v in report.series if v.subject == "host"]
    for view in views[:MAX_ROWS]:
        level = view.values[-1] if view.values else float("nan")
        rate = f"{'+' if view.fit.slope >= 0 else '-'}{gib(abs(view.fit.slope))}/step" if view.fit else "rate n/a"
        row = f"  {view.label:<14} {gib(level):>10}  {rate:>16}"
        warning = _warning_text(warnings[view.label]) if view.label in warnings else None
        if warning and len(row) + 2 + len(warning) > width:
            lines += [row, f"      -> {_short_warning(warnings[view.label])}"]
            continue
        lines.append(row + (f"  {warning}" if warning else ""))
    if len(views) > MAX_ROWS:
        lines.append(f"  ... and {len(views) - MAX_ROWS} more")
    for f in by_severity(report):
        lines.append(f"{f.severity.upper():<7} {f.rule}: {f.message}")
    return [safe(line) for line in lines]


class LiveOutput:
    """Writes what each judgement changed, in the chosen mode; `final` writes the closing verdict."""

    def __init__(
        self, mode: str, write: Callable[[str], None], *, terminal: bool = False, width: int = 100, ascii_only: bool = False, workspace: str | None = None
    ) -> None:
        self.mode, self.write, self.terminal, self.width = mode, write, terminal and mode == "text", width
        self.ascii_only, self.workspace = ascii_only, workspace
        self.previous: Report | None = None
        self.drawn = 0  # status lines on screen

    def update(self, report: Report) -> None:
        change = changes(self.previous, report)
        self.previous = report
        if self.terminal:
            self._redraw(status_lines(report, self.width))
        elif change is not None:
            self.write(self._change(change))

    def final(self, report: Report, why: str) -> None:
        """The verdict when watching ends: `why` is stopped (--exit-on), interrupted, ended."""
        if self.mode == "jsonl":
            self.write(_json_line(report, "final", None, why))
            return
        if self.mode == "github":
            from memlog.render.outputs.github import render_github

            self.write(render_github(report, workspace=self.workspace))
            return
        if self.terminal:
            self._redraw([])
        from memlog.render.outputs.text import render_text

        self.write(f"\n[{_clock()}] watch {why}\n" if not self.terminal else "")
        self.write(render_text(report, chart=False, ascii_only=self.ascii_only, width=self.width))

    def _redraw(self, lines: list[str]) -> None:
        lines = [line if len(line) <= self.width else line[: self.width - 1] + "…" for line in lines]
        text = (f"\x1b[{self.drawn}F\x1b[J" if self.drawn else "") + "".join(line + "\n" for line in lines)
        self.drawn = len(lines)
        self.write(ascii_text(text) if self.ascii_only else text)

    def _change(self, change: Change) -> str:
        if self.mode == "jsonl":
            return _json_line(change.report, "change", change, None)
        if self.mode == "github":
            return _github(change, self.workspace)
        return _text(change)


def _steps(report: Report) -> str:
    steps = report.coverage.get("steps")
    return f"step {steps[1]:,}" if steps else "no step yet"


def _text(change: Change) -> str:
    report, stamp = change.report, f"[{_clock()}] {_steps(change.report)}:"
    out = []
    if change.verdict_changed:
        was = f" (was {change.previous_verdict})" if change.previous_verdict else ""
        out.append(f"{stamp} verdict {report.verdict}{was}: {report.headline.meaning}")
    for f in change.new:
        out.append(f"{stamp} + {f.severity} {f.rule}: {f.message}")
    for rule, subject, severity in change.gone:
        out.append(f"{stamp} - {severity} {rule} ({subject}): no longer found")
    for w in early_warning(report) if any(f.verdict and f.verdict.name == "leak" for f in change.new) else []:
        out.append(f"{stamp} ! {w['series']} {_warning_text(w)}")
    return "".join(safe(line) + "\n" for line in out)


def _json_line(report: Report, event: str, change: Change | None, why: str | None) -> str:
    return safe_json(json.dumps(finite(watch_document(report, event, change, why)), allow_nan=False, ensure_ascii=False)) + "\n"


def _github(change: Change, workspace: str | None) -> str:
    out = []
    if change.verdict_changed:
        out.append(f"::notice title=memlog watch::{escape_data(f'{_steps(change.report)}: verdict {change.report.headline.headline}')}")
    out += [annotation(f, workspace) for f in change.new]
    return "".join(line + "\n" for line in out)
