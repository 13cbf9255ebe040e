"""GitHub Actions output (`-o github`): the verdict line, then one workflow command per finding
(memlog/render/workflow.py)."""

from __future__ import annotations

from memlog.render.outputs import RenderOptions
from memlog.render.shared import by_severity
from memlog.render.workflow import annotation
from memlog.report.report import Report


def render_github(report: Report, workspace: str | None = None) -> str:
    out = [f"memlog verdict: {report.headline.headline}"]
    out += [annotation(f, workspace) for f in by_severity(report)]
    return "\n".join(out) + "\n"


QUOTES_LOG_LINES = True  # the evidence lines, read back from the logs


def render(report: Report, options: RenderOptions) -> str:
    return render_github(report, options.workspace)
