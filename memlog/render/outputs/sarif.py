"""SARIF 2.1.0 for code-scanning style consumers: one rule per memlog rule (with its help text), one
result per finding, anchored to the log line of its evidence.

GitHub code scanning requires a physical location for every result: a finding that cites no line
is anchored at line 1 of the first input. Skipped rules are reported as tool notifications.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from memlog import __version__
from memlog.render.outputs import RenderOptions
from memlog.render.safety import safe, safe_json
from memlog.report.document import finite
from memlog.report.report import Report

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
INFORMATION_URI = "https://pypi.org/project/memlog/"


def artifact_location(source: str) -> dict[str, str]:
    if source == "<stdin>":
        return {"uri": "stdin"}
    if os.path.isabs(source):
        return {"uri": PurePosixPath(source.replace(os.sep, "/")).as_uri()}
    return {"uri": quote(source.replace(os.sep, "/")), "uriBaseId": "%SRCROOT%"}


def _location(source: str, line: int, index: int | None = None) -> dict[str, Any]:
    location: dict[str, Any] = {"physicalLocation": {"artifactLocation": artifact_location(source), "region": {"startLine": max(1, line)}}}
    if index is not None:
        location["id"] = index
    return location


def _rule(rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": "".join(part.capitalize() for part in rule.id.split("-")),
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": {"text": rule.help(), "markdown": rule.help(markdown=True)},
        "defaultConfiguration": {"level": LEVEL[rule.severity]},
        "properties": {"tags": ["memlog", "training-log"]},
    }


def render_sarif(report: Report) -> str:
    rules = list(report.rules)
    known = {r.id for r in rules}
    index = {r.id: i for i, r in enumerate(rules)}
    sources = [s["name"] for s in report.coverage.get("sources") or []] or ["<stdin>"]
    results = []
    for f in report.findings:
        anchors = f.lines or [(sources[0], 1)]
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": LEVEL[f.severity],
            "message": {"text": safe(f.message)},
            "locations": [_location(*anchors[0])],
            "partialFingerprints": {"memlogFinding/v1": hashlib.sha256("\0".join([f.rule, f.subject, *sorted(f.series)]).encode()).hexdigest()[:32]},
            "properties": {"subject": f.subject, "series": f.series[:32], "evidence": f.evidence, "hints": f.hints},
        }
        if f.rule in known:
            result["ruleIndex"] = index[f.rule]
        if len(anchors) > 1:
            result["relatedLocations"] = [_location(s, n, i) for i, (s, n) in enumerate(anchors[1:], start=1)]
        results.append(result)
    notifications = [
        {
            "level": "note",
            "message": {"text": safe(f"{skip['rule']} skipped: {skip['reason']}")},
            "associatedRule": {"id": skip["rule"], **({"index": index[skip["rule"]]} if skip["rule"] in index else {})},
        }
        for skip in report.skipped
    ]
    run = {
        "tool": {
            "driver": {
                "name": "memlog",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule(r) for r in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": True,
                **({"commandLine": report.command} if report.command else {}),
                "toolExecutionNotifications": notifications,
            }
        ],
        "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The directory memlog ran in; relative input paths start there."}}},
        "results": results,
        "properties": {"verdict": report.verdict},
    }
    document = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return safe_json(json.dumps(finite(document), indent=2, allow_nan=False, ensure_ascii=False)) + "\n"


def render(report: Report, options: RenderOptions) -> str:
    return render_sarif(report)
