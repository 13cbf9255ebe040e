"""JSON output: the Report's contract (memlog/report/document.py), always valid JSON, through the
output-safety layer."""

from __future__ import annotations

import json

from memlog.render.outputs import RenderOptions
from memlog.render.safety import safe_json
from memlog.report.document import finite, report_document
from memlog.report.report import Report

__all__ = ["finite", "render_json"]


def render_json(report: Report) -> str:
    return safe_json(json.dumps(report_document(report), indent=2, allow_nan=False, ensure_ascii=False)) + "\n"


def render(report: Report, options: RenderOptions) -> str:
    return render_json(report)
