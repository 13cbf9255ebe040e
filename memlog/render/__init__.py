"""Renderers: each turns a Report into one output format. They compute nothing of their own."""

from __future__ import annotations

import re

from memlog.report import Report

# Log text was cleaned when read; this is the last line of defence for anything printed.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    return _UNSAFE.sub("?", text)


def render(report: Report, output: str, **options) -> str:
    if output == "json":
        from memlog.render.json_out import render_json

        return render_json(report)
    if output == "text":
        from memlog.render.text import render_text

        return render_text(report, **options)
    raise ValueError(f"unknown output format {output!r}")
