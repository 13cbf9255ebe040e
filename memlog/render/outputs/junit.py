"""JUnit XML for CI systems that read test reports (GitLab, Jenkins, Buildkite): one test case per
rule. A rule whose findings are at or above --fail-on fails; a rule that found something below it
passes with the finding in system-out; a rule that could not judge the run is skipped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from memlog import __version__
from memlog.judge.rulekit import SEVERITY_RANK
from memlog.render.outputs import RenderOptions
from memlog.render.safety import safe
from memlog.render.shared import evidence_summary
from memlog.report.report import Report

# XML 1.0 cannot carry these at all, not even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    return _NOT_XML.sub("?", safe(text))


def _describe(finding) -> str:
    parts = [f"[{finding.severity}] {finding.message}"]
    evidence = evidence_summary(finding.evidence)
    if evidence:
        parts.append(f"evidence: {evidence}")
    if finding.lines:
        parts.append("lines: " + ", ".join(f"{s}:{n}" for s, n in finding.lines))
    parts += [f"check: {h}" for h in finding.hints]
    return _xml("\n".join(parts))


def render_junit(report: Report, fail_on: str = "error") -> str:
    rule_ids = [r.id for r in report.rules] or list(report.thresholds)
    rule_ids += sorted({f.rule for f in report.findings} - set(rule_ids))
    skipped = {s["rule"]: s["reason"] for s in report.skipped}
    sources = ", ".join(s["name"] for s in report.coverage.get("sources") or [])
    suite = ET.Element("testsuite", name="memlog", hostname="memlog")
    properties = ET.SubElement(suite, "properties")
    for name, value in (("verdict", report.verdict), ("memlog_version", __version__), ("sources", sources), ("fail_on", fail_on)):
        ET.SubElement(properties, "property", name=name, value=_xml(value))
    failures = skips = 0
    for rule_id in rule_ids:
        # The class names the rule, not the verdict: CI test history follows a test case across runs.
        case = ET.SubElement(suite, "testcase", classname=f"memlog.{rule_id}", name=rule_id, time="0")
        found = [f for f in report.findings if f.rule == rule_id]
        anchors = [a for f in found for a in f.lines]
        if anchors:
            case.set("file", _xml(anchors[0][0]))
            case.set("line", str(anchors[0][1]))
        failing = [f for f in found if fail_on != "never" and SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on]]
        if failing:
            failures += 1
            failure = ET.SubElement(case, "failure", message=_xml(failing[0].message[:500]), type=failing[0].severity)
            failure.text = "\n\n".join(_describe(f) for f in found)
        elif found:
            ET.SubElement(case, "system-out").text = "\n\n".join(_describe(f) for f in found)
        elif rule_id in skipped:
            skips += 1
            ET.SubElement(case, "skipped", message=_xml(skipped[rule_id]))
    for key, count in (("tests", len(rule_ids)), ("failures", failures), ("errors", 0), ("skipped", skips)):
        suite.set(key, str(count))
    root = ET.Element("testsuites", name="memlog", tests=str(len(rule_ids)), failures=str(failures), errors="0", skipped=str(skips))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render(report: Report, options: RenderOptions) -> str:
    return render_junit(report, options.fail_on)
