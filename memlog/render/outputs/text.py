"""Terminal output: the verdict first, a chart of memory (and loss) per rank, then each finding
with its evidence and what to check."""

from __future__ import annotations

import textwrap

from memlog.render.outputs import RenderOptions
from memlog.render.safety import ascii_text, no_workflow_commands, safe
from memlog.render.shared import by_severity, evidence_summary, restarts_sentence, workers_phrase_of
from memlog.report.report import Report, source_damage

WIDTH = 100  # without a terminal to size by (cli._width)
COLOURS = {"error": "\x1b[31m", "warning": "\x1b[33m", "info": "\x1b[36m", "bold": "\x1b[1m", "reset": "\x1b[0m"}


def _wrapper(width: int):
    """Wraps at spaces only: a path (`multinode/gpu-node-01.rank1.log:6`) is never cut at a hyphen
    or inside, so it stays copyable (a path longer than the width gets a line of its own)."""

    def wrap(text: str, indent: str) -> str:
        wrapped = textwrap.fill(safe(text), width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False, break_long_words=False)
        return no_workflow_commands(wrapped)  # a wrap may start a line with `::`

    return wrap


def render_text(report: Report, colour: bool = False, chart: bool = True, ascii_only: bool = False, width: int = WIDTH) -> str:
    """`ascii_only`: the stdout encoding is not UTF-8 (box drawing and log text become ASCII).
    `width`: the terminal's columns; every line fits them but a single path longer than that."""
    c = COLOURS if colour else dict.fromkeys(COLOURS, "")
    _wrap = _wrapper(width)
    out = [c["bold"] + _wrap(f"memlog verdict: {report.headline.headline}", "") + c["reset"]]
    restarts = restarts_sentence(report.coverage)
    if restarts:
        out.append(_wrap(restarts, ""))
    out.append("")
    if chart:
        from memlog.render.chart import render_chart

        drawn = render_chart(report, width=width, colour=colour, ascii_only=ascii_only)
        if drawn:
            out += [drawn, ""]
    for f in by_severity(report):
        tag = f"{c[f.severity]}{f.severity.upper():<7}{c['reset']} {f.rule}"
        out.append(tag)
        out.append(_wrap(f.message, "  "))
        evidence = evidence_summary(f.evidence)
        if evidence:
            out.append(_wrap(f"evidence: {evidence}", "  "))
        if f.lines:
            out.append(_wrap("lines: " + ", ".join(f"{s}:{n}" for s, n in f.lines), "  "))
        for hint in f.hints:
            out.append(_wrap(f"check: {hint}", "  "))
        out.append("")
    for skip in report.skipped:
        out.append(_wrap(f"skipped {skip['rule']}: {skip['reason']}", ""))
    cov = report.coverage
    formats = ", ".join(f"{name} ({n})" for name, n in cov["formats"].items())
    steps = f", steps {cov['steps'][0]}-{cov['steps'][1]}" if cov.get("steps") else ""
    out.append(
        _wrap(
            f"read {cov['lines_read']:,} lines from {len(cov['sources'])} source(s); {cov['records']:,} step records "
            f"[{formats}], {workers_phrase_of(cov)}{steps}, {cov['events']} event(s)",
            "",
        )
    )
    for guessed in cov.get("guessed", ()):
        said = f"guessed {guessed['mapping']}" if guessed.get("mapping") else f"not read: {guessed.get('weak')}"
        out.append(_wrap(f"{guessed['source']}: no format spec claims its lines; read by the {guessed['reader']} reader, {said}", ""))
    for source in cov["sources"]:
        damage = source_damage(source)
        if damage:
            out.append(_wrap(f"{source['name']}: {damage}", ""))
    text = "\n".join(out) + "\n"
    return ascii_text(text) if ascii_only else text


def render(report: Report, options: RenderOptions) -> str:
    return render_text(report, options.colour, options.chart, options.ascii_only, options.width or WIDTH)
