"""Golden verdicts: every sample log's report, in compact form, against a reviewed snapshot.

Regenerate after a deliberate change with `MEMLOG_UPDATE_GOLDEN=1 pytest tests/engine/test_golden.py`,
then review the diff: each snapshot is a claim about what a maintainer would say about that run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.report.schemas import report_schema
from tests.samples import sample_logs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_LOGS = sample_logs()
GOLDEN = ROOT / "tests" / "golden"
SCHEMA = report_schema()
runner = CliRunner()


def golden_path(log: Path) -> Path:
    return GOLDEN / (log.relative_to(ROOT / "sample_logs").as_posix().replace("/", "__") + ".json")


def compact(report: dict) -> dict:
    """What a golden pins: the verdict, which rules fired on what, their key numbers, and coverage."""
    return {
        "verdict": report["verdict"],
        "findings": [
            {
                "rule": f["rule"],
                "severity": f["severity"],
                "subject": f["subject"],
                "ranks": f["evidence"].get("ranks", f["evidence"].get("sentinel_ranks")),
                "observed": f["evidence"]["observed"],
            }
            for f in report["findings"]
        ],
        "records": report["coverage"]["records"],
        "formats": report["coverage"]["formats"],
        "ranks": report["coverage"]["ranks"],
        "event_counts": report["coverage"]["event_counts"],
    }


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=[p.relative_to(ROOT / "sample_logs").as_posix() for p in SAMPLE_LOGS])
def test_sample_log_matches_its_golden_verdict(log: Path):
    result = runner.invoke(app, ["analyze", str(log), "-o", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    path = golden_path(log)
    if os.environ.get("MEMLOG_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(compact(report), indent=2, ensure_ascii=False) + "\n")
    assert path.exists(), f"no golden verdict for {log.name}: write one (see module docstring) and review it"
    assert compact(report) == json.loads(path.read_text())


def test_every_golden_has_its_sample_log():
    expected = {golden_path(p).name for p in SAMPLE_LOGS}
    assert {p.name for p in GOLDEN.glob("*.json")} <= expected
