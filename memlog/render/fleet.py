"""Renderings of a scan (memlog.scan.fleet.Fleet): one row per run, worst first, and the fleet summary.

They compute nothing: every figure is a field of the rows or of `Fleet.summary()`. Run names,
paths, messages and errors come from file names and logs, so each format makes them inert in its
own way: `safe()` for the terminal, markdown escaping, JSON escapes, CSV quoting with formula
cells neutralised, GitHub's workflow-command escapes.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from typing import Any

from memlog.render.safety import ascii_text, safe, safe_json, valid_text
from memlog.scan.fleet import Fleet, fails

FLEET_OUTPUTS = ("text", "json", "markdown", "csv", "github")
HEADERS = ("run", "verdict", "worst finding", "ranks", "steps", "growth (GiB/1k steps)", "projected OOM", "path")
MAX_NAME = 48  # text table: longer run names are cut in the middle (the path column has it whole)
# A cell a spreadsheet would run as a formula (OWASP "CSV injection"): written with a leading '.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _steps(row: dict[str, Any]) -> str:
    return f"{row['steps'][0]}-{row['steps'][1]}" if row["steps"] else ""


def _growth(row: dict[str, Any]) -> str:
    growth = row["growth_gib_per_1k_steps"]
    return f"{growth:,.4g}" if growth is not None else ""


def _oom(row: dict[str, Any]) -> str:
    projected = row["projected_oom"]
    if not projected:
        return ""
    step = f"step ~{projected['step']:,.0f}"
    return f"{step} ({projected['at']})" if projected.get("at") else step


def _verdict(row: dict[str, Any]) -> str:
    return "unreadable" if row["error"] else row["verdict"]


def _worst(row: dict[str, Any]) -> str:
    worst = row["worst"]
    return f"{worst['rule']} ({worst['severity']})" if worst else ""


def cells(row: dict[str, Any]) -> list[str]:
    """A row as the table columns (HEADERS), unescaped."""
    return [row["run"], _verdict(row), _worst(row), str(row["ranks"]) if not row["error"] else "", _steps(row), _growth(row), _oom(row), row["path"]]


def summary_line(fleet: Fleet) -> str:
    s = fleet.summary()
    counts = ", ".join(f"{n} {verdict}" for verdict, n in s["verdicts"].items()) or "none judged"
    line = f"{s['runs']} run{'s' if s['runs'] != 1 else ''}: {counts}"
    if s["unreadable"]:
        line += f"; {s['unreadable']} could not be read"
    return line


def verdict_line(fleet: Fleet) -> str:
    """The first line of `-o github`, as analyze's: `memlog verdict: ` and the worst verdict of any
    run (UNREADABLE when none could be judged), then what the scan found."""
    verdicts = list(fleet.summary()["verdicts"])
    worst = verdicts[0] if verdicts else "unreadable"
    return f"memlog verdict: {worst.upper()}: {safe(summary_line(fleet))} (memlog scan)"


def _failing_line(fleet: Fleet) -> str:
    s = fleet.summary()
    if s["fail_on"] == "never":
        return ""
    return f"{s['failing']} run{'s' if s['failing'] != 1 else ''} with a finding at or above {s['fail_on']} (--fail-on)"


def _short(name: str, limit: int = MAX_NAME) -> str:
    """A name cut in the middle to `limit` characters (both ends tell runs apart)."""
    return name if len(name) <= limit else name[: limit // 2 - 1] + "…" + name[-(limit // 2) :]


# What a narrow terminal gives up, first to last (run, verdict and ranks always stay): the path
# (the run's name is its path under the folder given), the worst finding (the verdict says its
# kind), then the growth and OOM in short (their headers, the OOM's date), then the run names cut
# in the middle (to MIN_NAME at least), then the projected OOM, the growth and the steps.
DROPPED_FIRST = (7, 2, "short", "names", 6, 5, 4)
SHORT_HEADERS = {5: "GiB/1k steps", 6: "OOM at step"}
MIN_NAME = 16


def render_fleet_text(fleet: Fleet, ascii_only: bool = False, width: int | None = None) -> str:
    """The fleet as a table that fits `width` columns (None: as wide as it is): what a narrow
    terminal cannot hold is left out (DROPPED_FIRST), and a line says what."""
    out = [*_wrapped(f"memlog scan: {summary_line(fleet)}", width), ""]
    table = [list(HEADERS)] + [[safe(c) for c in cells(r)] for r in fleet.rows]
    for row in table[1:]:
        row[0] = _short(row[0])
    shown = list(range(len(HEADERS)))

    def total() -> int:
        return sum(max(len(r[i]) for r in table) for i in shown) + 2 * (len(shown) - 1)

    dropped, short = [], False
    for step in DROPPED_FIRST:
        if width is None or total() <= width:
            break
        if step == "short":
            for column, header in SHORT_HEADERS.items():
                table[0][column] = header
            for row, run in zip(table[1:], fleet.rows):
                row[6] = f"~{run['projected_oom']['step']:,.0f}" if run["projected_oom"] else ""
            dropped.append("the projected OOM's time")
            short = True
        elif step == "names":
            _cut_names(table, total() - width)
        else:
            assert isinstance(step, int)
            shown.remove(step)
            dropped.append(HEADERS[step])
    right = {3, 5, 6} if short else {3, 5}  # numbers align right (the OOM too once it is a step alone)
    widths = {i: max(len(r[i]) for r in table) for i in shown}
    for row in table:
        parts = [row[i].rjust(widths[i]) if i in right else row[i].ljust(widths[i]) for i in shown]
        out.append("  ".join(parts).rstrip())
    if dropped:
        out += _wrapped(f"(not shown at {width} columns: {', '.join(dropped)}; -o json or a wider terminal shows them)", width)
    unreadable = [r for r in fleet.rows if r["error"]]
    if unreadable:
        out += ["", "could not be read:"]
        out += [line for r in unreadable for line in _wrapped(f"  {safe(r['run'])}: {safe(r['error'])}", width, "    ")]
    s = fleet.summary()
    out.append("")
    if s["leaking"]:
        out += _wrapped("leaking: " + ", ".join(safe(_leaking(row)) for row in fleet.rows if row["verdict"] == "leak"), width)
    failing = _failing_line(fleet)
    if failing:
        out.append(failing)
    text = "\n".join(out).rstrip("\n") + "\n"
    return ascii_text(text) if ascii_only else text


def _leaking(row: dict[str, Any]) -> str:
    """A leaking run, and its leaking workers where it has several (`job (rank2, rank5)`)."""
    workers = row.get("leaking") or []
    if row["ranks"] <= 1 or not workers:
        return row["run"]
    shown = ", ".join(workers[:4]) + (f", +{len(workers) - 4}" if len(workers) > 4 else "")
    return f"{row['run']} ({shown})"


def _cut_names(table: list[list[str]], excess: int) -> None:
    """The run names (first column) cut in the middle by `excess` characters, to MIN_NAME at least."""
    room = max(MIN_NAME, max(len(r[0]) for r in table) - excess)
    for row in table[1:]:
        row[0] = _short(row[0], room)


def _wrapped(line: str, width: int | None, indent: str = "  ") -> list[str]:
    """A line wrapped at `width`, its next lines indented (a name or path longer than that stays
    whole, on a line of its own)."""
    if width is None or len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=indent, break_long_words=False, break_on_hyphens=False, drop_whitespace=True) or [
        line
    ]


def render_fleet_json(fleet: Fleet) -> str:
    from memlog.report.document import finite

    return safe_json(json.dumps(finite(fleet.to_json()), indent=2, allow_nan=False, ensure_ascii=False)) + "\n"


def render_fleet_markdown(fleet: Fleet) -> str:
    """A summary to paste into a report: the counts per verdict, the runs that leak, the table."""
    from memlog.render.outputs.markdown import md_text

    s = fleet.summary()
    out = [f"**memlog scan**: {md_text(summary_line(fleet))}", ""]
    if s["verdicts"] or s["unreadable"]:
        out += ["| Verdict | Runs |", "|---|---:|"]
        out += [f"| {md_text(verdict)} | {n} |" for verdict, n in s["verdicts"].items()]
        if s["unreadable"]:
            out.append(f"| unreadable | {s['unreadable']} |")
        out.append("")
    if s["leaking"]:
        out += ["Leaking: " + ", ".join(md_text(name) for name in s["leaking"]), ""]
    out.append("| " + " | ".join(h[0].upper() + h[1:] for h in HEADERS) + " |")
    out.append("|" + "|".join("---:" if i in (3, 5) else "---" for i in range(len(HEADERS))) + "|")
    for row in fleet.rows:
        values = cells(row)
        if row["error"]:
            values[2] = row["error"]
        out.append("| " + " | ".join(md_text(v, 300) for v in values) + " |")
    failing = _failing_line(fleet)
    if failing:
        out += ["", md_text(failing)]
    return "\n".join(out) + "\n"


CSV_COLUMNS = (
    "run", "verdict", "severity", "worst_rule", "worst_severity", "worst_message", "ranks", "first_step", "last_step",
    "growth_gib_per_1k_steps", "projected_oom_step", "projected_oom_at", "fails", "path", "error",
)  # fmt: skip


def _csv_cell(value: Any) -> Any:
    """Numbers stay numbers; text is made inert: controls replaced, a leading formula character
    escaped with a ' (as spreadsheets themselves write a literal)."""
    if value is None or isinstance(value, (bool, int, float)):
        return "" if value is None else value
    text = safe(str(value))
    return "'" + text if text.startswith(FORMULA_START) else text


def render_fleet_csv(fleet: Fleet) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in fleet.rows:
        worst = row["worst"] or {}
        projected = row["projected_oom"] or {}
        steps = row["steps"] or [None, None]
        values = [
            row["run"], _verdict(row), row["severity"], worst.get("rule"), worst.get("severity"), worst.get("message"),
            None if row["error"] else row["ranks"], steps[0], steps[1], row["growth_gib_per_1k_steps"], projected.get("step"),
            projected.get("at"), str(fails(row, fleet.fail_on)).lower(), row["path"], row["error"],
        ]  # fmt: skip
        writer.writerow([_csv_cell(v) for v in values])
    return buffer.getvalue()


def render_fleet_github(fleet: Fleet, workspace: str | None = None) -> str:
    """One workflow annotation per run that needs a look (a warning or error finding, or unreadable),
    on the log line of its worst finding; calm runs are only counted in the first line."""
    from memlog.render.workflow import annotation_path, escape_data, escape_property

    level = {"error": "error", "warning": "warning"}
    out = [verdict_line(fleet)]
    for row in fleet.rows:
        props, body = [], ""
        if row["error"]:
            kind, title, body = "warning", f"memlog scan: {row['run']} could not be read", row["error"]
        elif row["severity"] in level:
            worst = row["worst"]
            kind, title, body = level[row["severity"]], f"memlog scan: {row['run']}: {row['verdict']}", f"{worst['rule']}: {worst['message']}"
            if worst.get("source") and worst["source"] != "<stdin>":
                props += [f"file={escape_property(annotation_path(worst['source'], workspace))}", f"line={worst['line']}"]
        else:
            continue
        props.append(f"title={escape_property(title)}")
        out.append(f"::{kind} {','.join(props)}::{escape_data(body)}")
    return "\n".join(out) + "\n"


def render_fleet(fleet: Fleet, output: str, **options: Any) -> str:
    renderers = {
        "text": render_fleet_text, "json": render_fleet_json, "markdown": render_fleet_markdown,
        "csv": render_fleet_csv, "github": render_fleet_github,
    }  # fmt: skip
    if output not in renderers:
        raise ValueError(f"unknown scan output format {output!r}")
    return valid_text(renderers[output](fleet, **options))  # whatever a renderer missed: still UTF-8


class ScanProgress:
    """Rows as they come back, counted on one stderr line (only on a terminal): a long scan shows
    that it moves and what it has found so far."""

    def __init__(self, stream=None, enabled: bool | None = None):
        import sys

        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.leaks = self.unreadable = 0
        self.shown = False

    def __call__(self, row: dict[str, Any], done: int, total: int) -> None:
        self.leaks += row["verdict"] == "leak"
        self.unreadable += bool(row["error"])
        if not self.enabled:
            return
        self.stream.write(f"\rmemlog: scanned {done}/{total} runs ({self.leaks} leak, {self.unreadable} unreadable)\x1b[K")
        self.stream.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
