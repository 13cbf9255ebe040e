"""The two exercises of the house issue, redone on every run: a memory rule that moves the headline
is one file in rules/, and a format that names its rank is one spec file. Nothing central (engine,
headline, renderers, schema, exit code) is edited: each test adds only its file and checks that
every output agrees with it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

import memlog.judge.rulekit
from memlog.cli import app
from memlog.engine.api import analyze
from memlog.report.schemas import report_schema
from tests.synthetic import torchtitan_lines

ROOT = Path(__file__).resolve().parents[2]

SPIKE_RULE = '''"""memory-spike: one reading far above the rest of its series (the exercise of tests/parse/test_extending.py)."""

from memlog.judge.rulekit import Rule, Threshold, Verdict, gib


def check(ctx, t):
    found = []
    for series in ctx.device_series:
        values = sorted(series.values)
        median = values[len(values) // 2]
        top = max(series.values)
        if median > 0 and top > t["factor"] * median:
            label = ctx.label(series)
            found.append(RULE.finding(t, f"Memory spikes to {gib(top)} on {label}, {top / median:.1f}x its median.",
                                      subject="device", series=[label], ranks=[series.rank],
                                      observed={"peak_gib": round(top, 4), "median_gib": round(median, 4)}))
    return found


RULE = Rule(
    id="memory-spike",
    severity="error",
    summary="One reading far above the rest of its series.",
    explanation="The largest reading of a device series is more than `factor` times its median.",
    not_meaning="Not a leak: the memory comes back down.",
    thresholds=(Threshold("factor", 1.5, "x", "peak over median that fires"),),
    verdict=Verdict("memory-spike", 120, "SPIKE: one step used far more memory than the others"),
    decides=True,
    check=check,
)
'''


@pytest.fixture
def spike_rule(tmp_path, monkeypatch):
    """rules/ as shipped plus one new file, found where memlog looks for rules."""
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules, ignore=shutil.ignore_patterns("__pycache__"))
    (rules / "memory_spike.py").write_text(SPIKE_RULE)
    shipped = memlog.judge.rulekit.content_dir
    monkeypatch.setattr(memlog.judge.rulekit, "content_dir", lambda name: rules if name == "rules" else shipped(name))
    return rules


def test_a_memory_rule_that_moves_the_headline_is_one_file(tmp_path, spike_rule):
    flat = [30.0] * 40
    flat[25] = 70.0
    log = tmp_path / "run.log"
    log.write_text("\n".join(torchtitan_lines({0: flat, 1: [30.0] * 40})) + "\n")
    report = analyze([str(log)])
    assert report.verdict == "memory-spike"
    assert [f.rule for f in report.findings][0] == "memory-spike"
    runner = CliRunner()
    as_json = runner.invoke(app, ["analyze", str(log), "-o", "json"])
    assert as_json.exit_code == 1  # an error finding: exit 1, from the declaration alone
    document = json.loads(as_json.stdout)
    jsonschema.validate(document, report_schema())  # the schema lists the new verdict
    assert document["verdict"] == "memory-spike"
    text = runner.invoke(app, ["analyze", str(log), "--width", "100"]).stdout
    assert text.startswith("memlog verdict: SPIKE: one step used far more memory than the others")
    markdown = runner.invoke(app, ["analyze", str(log), "-o", "markdown"]).stdout
    assert "SPIKE" in markdown.split("\n\n", 1)[0]
    explained = runner.invoke(app, ["rules", "explain", "memory-spike"])
    assert explained.exit_code == 0 and "rank 120" in explained.stdout


RANKED_SPEC = r"""name: myframework
title: My framework
description: A trainer that prints its own rank, the exercise of tests/parse/test_extending.py.
records:
  - name: step
    kind: train
    literal: "mystep="
    regex: '^R(?P<rank>\d+) mystep=(?P<step>\d+) loss=(?P<loss>[\d.]+) mem=(?P<mem_allocated_gib>[\d.]+)G'
samples:
  - line: "R3 mystep=10 loss=2.5 mem=30.1G"
    record: {kind: train, step: 10, rank: 3, loss: 2.5, mem_allocated_gib: 30.1}
"""


def test_a_format_that_names_its_rank_is_one_file(tmp_path):
    formats = tmp_path / "formats"
    formats.mkdir()
    (formats / "myframework.yaml").write_text(RANKED_SPEC)
    lines = []
    for step in range(1, 41):
        lines += [f"R0 mystep={step} loss=2.5 mem={30 + 0.2 * step:.1f}G", f"R1 mystep={step} loss=2.5 mem=30.0G"]
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)], formats_dirs=[formats])
    assert report.coverage["formats"] == {"myframework": 80}
    assert report.coverage["ranks"] == [0, 1]
    (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
    assert leak.evidence["ranks"] == [0]  # the rank the spec named, and only the leaking one
