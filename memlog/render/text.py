"""Terminal output: the verdict first, then each finding with its evidence and what to check."""

from __future__ import annotations

import textwrap

from memlog.render import safe
from memlog.report import Report

WIDTH = 100
VERDICT_TEXT = {
    "leak": "LEAK: memory keeps growing; the run will run out of memory",
    "warmup-plateau": "WARMUP PLATEAU: memory rose in the first steps, then stayed flat (normal)",
    "stable": "STABLE: memory is flat",
    "pp-sentinel-loss": "PIPELINE-PARALLEL SENTINEL LOSS: the negative loss is a placeholder (normal)",
    "inconclusive": "INCONCLUSIVE: the log does not decide it",
}
COLOURS = {"error": "\x1b[31m", "warning": "\x1b[33m", "info": "\x1b[36m", "bold": "\x1b[1m", "reset": "\x1b[0m"}
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(safe(text), WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")


def _evidence_line(evidence: dict) -> str | None:
    observed = evidence.get("observed") or {}
    parts = [f"{k}={v}" for k, v in observed.items() if v is not None and not isinstance(v, (dict, list))]
    if evidence.get("capacity_gib"):
        parts.append(f"capacity={evidence['capacity_gib']} GiB ({evidence.get('capacity_from')})")
    return ", ".join(parts) if parts else None


def render_text(report: Report, colour: bool = False) -> str:
    c = COLOURS if colour else dict.fromkeys(COLOURS, "")
    out = [f"{c['bold']}memlog verdict: {VERDICT_TEXT[report.verdict]}{c['reset']}", ""]
    for f in sorted(report.findings, key=lambda f: SEVERITY_ORDER[f.severity]):
        tag = f"{c[f.severity]}{f.severity.upper():<7}{c['reset']} {f.rule}"
        out.append(tag)
        out.append(_wrap(f.message, "  "))
        evidence = _evidence_line(f.evidence)
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
            f"[{formats}], {len(cov['workers'])} worker(s){steps}, {cov['events']} event(s)",
            "",
        )
    )
    for source in cov["sources"]:
        problems = []
        if source["truncated_lines"]:
            problems.append(f"{source['truncated_lines']} over-long lines cut")
        if source["replaced_bytes"]:
            problems.append(f"{source['replaced_bytes']} undecodable bytes replaced")
        if source["damaged"]:
            problems.append(f"stopped early: {source['damaged']}")
        if problems:
            out.append(_wrap(f"{source['name']}: " + "; ".join(problems), ""))
    return "\n".join(out) + "\n"
