"""render(): a Report in the output format asked for. Each renderer is imported only when asked
for (plotext and pygal cost tens of milliseconds); they all build on the helpers in
memlog/render/__init__.py, so this, their one entry point, sits above them.
"""

from __future__ import annotations

from typing import Any

from memlog.report.report import Report

OUTPUTS = ("text", "json", "markdown", "github", "sarif", "junit", "html")


def render(report: Report, output: str, **options: Any) -> str:
    if output == "json":
        from memlog.render.json_out import render_json

        return render_json(report)
    if output == "text":
        from memlog.render.text import render_text

        return render_text(report, **options)
    if output == "markdown":
        from memlog.render.markdown import render_markdown

        return render_markdown(report, **options)
    if output == "github":
        from memlog.render.github import render_github

        return render_github(report, **options)
    if output == "sarif":
        from memlog.render.sarif import render_sarif

        return render_sarif(report)
    if output == "junit":
        from memlog.render.junit import render_junit

        return render_junit(report, **options)
    if output == "html":
        from memlog.render.html import render_html

        return render_html(report)
    raise ValueError(f"unknown output format {output!r}")
