"""JSON output and the data commands: schema-valid for every sample, no NaN/inf, series formats."""

from __future__ import annotations

import io
import json
import math

import jsonschema
import polars as pl
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.render.outputs.json import render_json
from memlog.report.report import SCHEMA_VERSION
from tests.render_samples import SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report

runner = CliRunner()
SCHEMA = json.loads(runner.invoke(app, ["schema"]).stdout)


def _strict(text: str):
    def reject(value):
        raise ValueError(f"non-JSON number {value}")

    return json.loads(text, parse_constant=reject)


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_every_sample_validates(log):
    report = _strict(render_json(sample_report(log)))
    jsonschema.validate(report, SCHEMA)
    assert report["schema_version"] == SCHEMA_VERSION
    assert "non_finite" not in report


def test_non_finite_values_become_null_with_a_reason():
    report = sample_report(TORCHTITAN_LEAK)
    finding = report.findings[0]
    saved = finding.evidence
    finding.evidence = {**saved, "observed": {**saved["observed"], "ratio": math.inf, "other": [math.nan]}}
    try:
        document = _strict(render_json(report))
    finally:
        finding.evidence = saved
    jsonschema.validate(document, SCHEMA)
    observed = document["findings"][0]["evidence"]["observed"]
    assert observed["ratio"] is None and observed["other"] == [None]
    assert {"path": "$.findings[0].evidence.observed.ratio", "value": "inf"} in document["non_finite"]
    assert {"path": "$.findings[0].evidence.observed.other[0]", "value": "nan"} in document["non_finite"]


def test_schema_command_prints_the_packaged_schema():
    assert SCHEMA["properties"]["schema_version"]["const"] == SCHEMA_VERSION


@pytest.mark.parametrize("output", ["csv", "json", "parquet"])
def test_series_formats(output):
    log = str(TORCHTITAN_LEAK)
    result = runner.invoke(app, ["series", log, "-o", output])
    assert result.exit_code == 0, result.stderr
    if output == "csv":
        frame = pl.read_csv(io.StringIO(result.stdout))
    elif output == "json":
        frame = pl.DataFrame(_strict(result.stdout))
    else:
        frame = pl.read_parquet(io.BytesIO(result.stdout_bytes))
    assert {"source", "worker", "step", "line_no"} <= set(frame.columns)
    assert frame.height == sample_report(TORCHTITAN_LEAK).coverage["records"]
