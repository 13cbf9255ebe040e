"""`memlog compare`'s outputs: text, JSON, markdown (to paste into an upgrade PR), GitHub
annotations. They format a Comparison (memlog/compare/regression.py) and compute nothing of their own."""

from __future__ import annotations

import json
import textwrap

from memlog.base.phrases import gib
from memlog.compare.regression import Comparison, Pair
from memlog.render.safety import safe, safe_json, valid_text
from memlog.render.workflow import escape_data, escape_property
from memlog.report.document import finite

HEADLINES = {
    "regression": "REGRESSION: NEW uses more memory than BASE",
    "improvement": "IMPROVEMENT: NEW uses less memory than BASE",
    "same": "SAME: memory is the same within the thresholds",
}
LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _g(value: float | None) -> str:
    return "-" if value is None else gib(value)


def _pct(change: float, of: float) -> str:
    return f"{100 * change / of:+.1f}%" if of else "-"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{gib(value * 1000)}/1k"


def _to_capacity(value: float | None) -> str:
    return "never" if value is None else f"~{value:,.0f}"


def _row(p: Pair, short: bool = False) -> list[str]:
    """A worker's figures as the table's cells: `BASE -> NEW` with units, or `short`
    (`BASE>NEW`, GiB and the arrows said once in the headers: SHORT_COLUMNS)."""
    b, n = p.base, p.new
    arrow = ">" if short else " -> "
    level = (lambda v: "-" if v is None else f"{v:.2f}") if short else _g
    rate = (lambda v: "-" if v is None else f"{v * 1000:.2f}") if short else _rate

    def pair(show, old, new) -> str:
        return f"{show(old)}{arrow}{show(new)}"

    def share(change: float, of: float) -> str:
        return f" {_pct(change, of)}" if short else f" ({_pct(change, of)})"

    return [
        p.worker + ("" if p.subject == "device" else f" ({p.subject})"),
        pair(level, b.level_gib, n.level_gib) + share(p.level_change_gib, b.level_gib),
        pair(level, b.peak_gib, n.peak_gib) + share(p.peak_change_gib, b.peak_gib),
        pair(rate, b.rate_gib_per_step, n.rate_gib_per_step),
        pair(_to_capacity, b.steps_to_capacity, n.steps_to_capacity),
        pair(lambda v: "-" if v is None else str(v), b.warmup_until_step, n.warmup_until_step),
        pair(lambda leaks: "leak" if leaks else "no", b.leaks, n.leaks),
    ]


COLUMNS = ["worker", "plateau level", "peak", "growth rate", "steps to capacity", "warmup until step", "leak"]


def _runs(c: Comparison) -> list[str]:
    out = []
    for name, report, inputs in (("BASE", c.base, c.base_inputs), ("NEW", c.new, c.new_inputs)):
        cov = report.coverage
        steps = f"steps {cov['steps'][0]}-{cov['steps'][1]}" if cov.get("steps") else "no steps"
        out.append(f"{name}: {', '.join(inputs)}: {report.verdict}, {len(cov['workers'])} worker(s), {steps}")
    return out


def _loss(c: Comparison) -> str:
    if c.loss is None:
        return "loss: not logged by both runs"
    verdict = "same work" if c.loss["same_work"] else "different work?"
    diff = f"{c.loss['diff_pct']:+}%" if c.loss["diff_pct"] is not None else "no share of a zero mean"
    return f"loss over the common steps: BASE {c.loss['base_mean']}, NEW {c.loss['new_mean']} ({diff}: {verdict})"


# The table in short, for a terminal too narrow for the one above: GiB and the arrows said once.
SHORT_COLUMNS = ["worker", "level GiB", "peak GiB", "GiB/1k steps", "to capacity", "warmup", "leak"]


def _stacked(row: list[str]) -> str:
    """A short row as one sentence: the worker, then each figure named."""
    return f"{row[0]}: " + ", ".join(f"{name} {cell}" for name, cell in zip(SHORT_COLUMNS[1:], row[1:]))


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def render_compare_text(c: Comparison, width: int | None = None) -> str:
    """`width`: the terminal's columns (None: as wide as the table is). A table too wide for them is
    printed in short (BASE>NEW in each cell), and the sentences around it are wrapped."""
    head = [
        f"memlog compare: {HEADLINES[c.verdict]}",
        "",
        *_runs(c),
        f"compared on steps {c.common_steps[0]}-{c.common_steps[1]}, {len(c.pairs)} worker(s)",
        "",
    ]
    table = _table([COLUMNS] + [_row(p) for p in c.pairs[:64]])
    if width is not None and max(len(line) for line in table) > width:
        short = [_row(p, short=True) for p in c.pairs[:64]]
        table = _table([SHORT_COLUMNS] + short) + ["(each cell: BASE>NEW)"]
        if max(len(line) for line in table) > width:  # a worker's figures as a sentence of their own
            table = [line for row in short for line in _wrapped([_stacked(row)], width)] + ["(each figure: BASE>NEW)"]
    if len(c.pairs) > 64:
        table.append(f"... and {len(c.pairs) - 64} more workers (see -o json)")
    tail = ["", *(f"{f.severity.upper():<7} {f.rule}: {f.message}" for f in c.findings), *(f"note: {n}" for n in c.notes), _loss(c)]
    out = [*_wrapped(head, width), *(safe(line) for line in table), *_wrapped(tail, width)]
    return "\n".join(out) + "\n"


def _wrapped(lines: list[str], width: int | None) -> list[str]:
    """Sentences wrapped at `width`, their next lines indented (a path longer than that stays whole)."""
    out = []
    for line in (safe(line) for line in lines):
        if width is None or len(line) <= width:
            out.append(line)
        else:
            out += textwrap.wrap(line, width, subsequent_indent="        ", break_long_words=False, break_on_hyphens=False) or [line]
    return out


def _cell(text: str) -> str:
    """Markdown table cell or list item: log-derived text made inert as in the analyze report
    (pipes, HTML, markdown, and no @mention, #123 or GH-123 that GitHub would link)."""
    from memlog.render.outputs.markdown import md_text

    return md_text(text.replace("->", "→"))


def render_compare_markdown(c: Comparison) -> str:
    out = [f"### memlog compare: {HEADLINES[c.verdict]}", ""]
    out += [f"- {_cell(line)}" for line in _runs(c)]
    out.append(f"- compared on steps {c.common_steps[0]}-{c.common_steps[1]}, {len(c.pairs)} worker(s)")
    out.append(f"- {_cell(_loss(c))}")
    out.append("")
    out.append("| " + " | ".join(COLUMNS) + " |")
    out.append("|" + "---|" * len(COLUMNS))
    out += ["| " + " | ".join(_cell(cell) for cell in _row(p)) + " |" for p in c.pairs[:64]]
    if c.findings or c.notes:
        out.append("")
    out += [f"- **{f.severity}** `{f.rule}`: {_cell(f.message)}" for f in c.findings]
    out += [f"- note: {_cell(n)}" for n in c.notes]
    thresholds = ", ".join(f"`{k}={v:g}`" for k, v in c.thresholds.items())
    out += ["", f"<sub>thresholds: {thresholds} (override: `compare:` in `--config`, `--fail-on-increase`)</sub>"]
    return "\n".join(out) + "\n"


def render_compare_github(c: Comparison) -> str:
    out = [f"memlog verdict: {HEADLINES[c.verdict]} (memlog compare)"]  # the first line, as analyze's
    for f in c.findings:
        out.append(f"::{LEVEL[f.severity]} title={escape_property(f'memlog compare {f.rule}')}::{escape_data(f.message)}")
    return "\n".join(out) + "\n"


def render_compare_json(c: Comparison) -> str:
    return safe_json(json.dumps(finite(c.to_json()), indent=2, allow_nan=False, ensure_ascii=False)) + "\n"


def render_comparison(c: Comparison, output: str, width: int | None = None) -> str:
    """`width`: the terminal's columns, for the text output."""
    if output == "text":
        rendered = render_compare_text(c, width)
    else:
        rendered = {"json": render_compare_json, "markdown": render_compare_markdown, "github": render_compare_github}[output](c)
    return valid_text(rendered)  # whatever a renderer missed: still UTF-8
