"""CI renderings: GitHub workflow commands (+ job summary), SARIF 2.1.0, JUnit XML."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.render.outputs.github import render_github
from memlog.render.outputs.junit import render_junit
from memlog.render.outputs.sarif import render_sarif
from memlog.render.workflow import escape_data, escape_property
from tests.render_samples import SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report
from tests.synthetic import torchtitan_lines

runner = CliRunner()
SARIF_SCHEMA = json.loads((Path(__file__).parents[1] / "schemas" / "sarif-2.1.0-subset.schema.json").read_text())
ANNOTATION = re.compile(r"^::(error|warning|notice) (?P<props>[^:]*)::(?P<message>.*)$")


@pytest.fixture
def leaking(tmp_path):
    path = tmp_path / "leak.log"
    path.write_text("\n".join(torchtitan_lines({0: [20 + 5 * i for i in range(8)]}, capacity=79.11)) + "\n")
    return path


# -- GitHub ------------------------------------------------------------------------------------


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_one_annotation_per_finding_with_file_and_line(log):
    report = sample_report(log)
    lines = render_github(report).splitlines()
    annotations = [ANNOTATION.match(line) for line in lines if line.startswith("::")]
    assert len(annotations) == len(report.findings)
    assert lines[0].startswith("memlog verdict: ")
    for match, finding in zip(annotations, sorted(report.findings, key=lambda f: {"error": 0, "warning": 1, "info": 2}[f.severity])):
        assert match is not None
        props = dict(p.split("=", 1) for p in match["props"].split(","))
        assert props["title"] == f"memlog {finding.rule}"
        if finding.lines:
            assert props["file"] == escape_property(finding.lines[0][0])
            assert props["line"] == str(finding.lines[0][1])
        assert "\n" not in match["message"]


def test_github_escaping():
    assert escape_data("100% done\nnext") == "100%25 done%0Anext"
    assert "\r" not in escape_data("a\rb") and "\n" not in escape_data("a\r\nb")
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_annotation_paths_are_relative_to_the_workspace(leaking):
    report = sample_report(TORCHTITAN_LEAK)
    workspace = str(TORCHTITAN_LEAK.parent.parent.parent)
    out = render_github(report, workspace=workspace)
    assert "file=sample_logs/" in out


def test_step_summary_is_appended(tmp_path, leaking, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = runner.invoke(app, ["analyze", str(leaking), "-o", "github"])
    assert result.exit_code == 1
    assert "::error file=" in result.stdout and ",line=" in result.stdout
    text = summary.read_text()
    assert text.startswith("earlier step\n**memlog verdict: LEAK**")
    runner.invoke(app, ["analyze", str(leaking), "-o", "github"])
    assert summary.read_text().count("**memlog verdict: LEAK**") == 2


def test_stdin_annotations_have_no_file(leaking):
    result = runner.invoke(app, ["analyze", "-", "-o", "github"], input=leaking.read_bytes())
    assert "::error title=memlog memory-leak::" in result.stdout
    assert "file=" not in result.stdout


# -- SARIF -------------------------------------------------------------------------------------


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_sarif_validates_and_anchors_results_to_evidence(log):
    report = sample_report(log)
    sarif = json.loads(render_sarif(report))
    jsonschema.validate(sarif, SARIF_SCHEMA)
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == {r.id for r in report.rules}
    assert all(r["help"]["text"] and r["fullDescription"]["text"] for r in rules)
    assert len(run["results"]) == len(report.findings)
    for result, finding in zip(run["results"], report.findings):
        assert rules[result["ruleIndex"]]["id"] == finding.rule
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == (finding.lines[0][1] if finding.lines else 1)
    skipped = {n["associatedRule"]["id"] for n in run["invocations"][0]["toolExecutionNotifications"]}
    assert skipped == {s["rule"] for s in report.skipped}


def test_sarif_uri_is_a_valid_reference_for_odd_names():
    from memlog.render.outputs.sarif import artifact_location

    assert artifact_location("logs/run 1 <a>.log") == {"uri": "logs/run%201%20%3Ca%3E.log", "uriBaseId": "%SRCROOT%"}
    assert artifact_location("/abs/run.log") == {"uri": "file:///abs/run.log"}
    assert artifact_location("<stdin>") == {"uri": "stdin"}


def test_cli_sarif(leaking):
    result = runner.invoke(app, ["analyze", str(leaking), "-o", "sarif"])
    assert result.exit_code == 1
    jsonschema.validate(json.loads(result.stdout), SARIF_SCHEMA)


# -- JUnit -------------------------------------------------------------------------------------


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_junit_has_one_case_per_rule(log):
    report = sample_report(log)
    suite = ET.fromstring(render_junit(report)).find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {r.id for r in report.rules}
    failing = {f.rule for f in report.findings if f.severity == "error"}
    assert {n for n, c in cases.items() if c.find("failure") is not None} == failing
    assert {n for n, c in cases.items() if c.find("skipped") is not None} == {s["rule"] for s in report.skipped} - {f.rule for f in report.findings}
    assert suite.get("failures") == str(len(failing))


def test_junit_follows_fail_on():
    report = sample_report(TORCHTITAN_LEAK)
    assert report.findings
    never = ET.fromstring(render_junit(report, fail_on="never"))
    assert never.find("testsuite").findall("testcase/failure") == []
    info_findings = {f.rule for f in report.findings}
    warning = ET.fromstring(render_junit(report, fail_on="warning"))
    failed = {c.get("name") for c in warning.iter("testcase") if c.find("failure") is not None}
    assert failed == {f.rule for f in report.findings if f.severity in ("warning", "error")}
    passed_with_output = {c.get("name") for c in warning.iter("testcase") if c.find("system-out") is not None}
    assert passed_with_output == info_findings - failed


def test_junit_survives_control_characters():
    report = sample_report(TORCHTITAN_LEAK)
    report = type(report)(**report.__dict__)
    report.findings = [type(f)(**{**f.__dict__, "message": "bad \x00\x1b[31m \ufffe text"}) for f in report.findings]
    ET.fromstring(render_junit(report))  # parses: nothing XML 1.0 forbids got through
