"""The CLI through typer's CliRunner: exit codes, JSON contract, errors as one line."""

from __future__ import annotations

import gzip
import json

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from tests.synthetic import torchtitan_lines

runner = CliRunner()
SCHEMA = json.loads(runner.invoke(app, ["schema"]).stdout)


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def leaking(tmp_path):
    return write(tmp_path, "leak.log", torchtitan_lines({0: [20 + 5 * i for i in range(8)]}, capacity=79.11))


@pytest.fixture
def flat(tmp_path):
    return write(tmp_path, "flat.log", torchtitan_lines({0: [30.0 + 0.01 * (i % 3) for i in range(12)]}))


def test_leak_exits_1_and_flat_exits_0(leaking, flat):
    assert runner.invoke(app, ["analyze", str(leaking)]).exit_code == 1
    assert runner.invoke(app, ["analyze", str(flat)]).exit_code == 0


def test_fail_on_never_and_warning(leaking, flat):
    assert runner.invoke(app, ["analyze", str(leaking), "--fail-on", "never"]).exit_code == 0
    assert runner.invoke(app, ["analyze", str(flat), "--fail-on", "warning"]).exit_code == 0


def test_json_is_valid_and_matches_schema(leaking):
    result = runner.invoke(app, ["analyze", str(leaking), "-o", "json"])
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["verdict"] == "leak"
    assert report["findings"][0]["evidence"]["observed"]["slope_gib_per_step"] == pytest.approx(5.0)


def test_text_starts_with_the_verdict(flat):
    result = runner.invoke(app, ["analyze", str(flat)])
    assert result.stdout.splitlines()[0].startswith("memlog verdict: STABLE")


def test_stdin_and_gzip(leaking):
    data = gzip.compress(leaking.read_bytes())
    result = runner.invoke(app, ["analyze", "-", "-o", "json"], input=data)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["verdict"] == "leak"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.log", "no such file"),
        (lambda p: p, "a directory with no log files in it"),
        (lambda p: write(p, "noise.log", ["hello", "world"]), "no training-step records found"),
        (lambda p: write(p, "empty.log", []), "no training-step records found"),
    ],
)
def test_unjudgeable_input_is_one_line_and_exit_2(tmp_path, make, message):
    result = runner.invoke(app, ["analyze", str(make(tmp_path))])
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_unknown_format_and_bad_config(tmp_path, flat):
    result = runner.invoke(app, ["analyze", str(flat), "--format", "nope"])
    assert result.exit_code == 2 and "unknown format 'nope'" in result.stderr
    cfg = write(tmp_path, "c.yaml", ["rules: {memory-leak: {min_growth_gib: fast}}"])
    result = runner.invoke(app, ["analyze", str(flat), "--config", str(cfg)])
    assert result.exit_code == 2 and "must be a number" in result.stderr
    cfg = write(tmp_path, "d.yaml", ["!!python/object/apply:os.system ['echo hi']"])
    result = runner.invoke(app, ["analyze", str(flat), "--config", str(cfg)])
    assert result.exit_code == 2 and "invalid YAML" in result.stderr


def test_config_overrides_a_threshold(tmp_path, leaking):
    cfg = write(tmp_path, "c.yaml", ["rules:", "  memory-leak: {min_growth_gib: 1000}"])
    result = runner.invoke(app, ["analyze", str(leaking), "--config", str(cfg), "-o", "json"])
    report = json.loads(result.stdout)
    assert report["thresholds"]["memory-leak"]["min_growth_gib"] == 1000
    assert report["verdict"] != "leak"


def test_rules_and_formats_commands():
    listed = runner.invoke(app, ["rules", "list"]).stdout
    for rule_id in ("memory-leak", "warmup-plateau", "stable-memory", "insufficient-data", "pp-sentinel-loss", "oom"):
        assert rule_id in listed
    explained = runner.invoke(app, ["rules", "explain", "memory-leak"]).stdout
    assert "min_growth_gib" in explained and "Does not mean" in explained
    assert runner.invoke(app, ["rules", "explain", "nope"]).exit_code == 2
    assert "torchtitan" in runner.invoke(app, ["formats", "list"]).stdout
    assert "logger_prefixes" in runner.invoke(app, ["formats", "show", "torchtitan"]).stdout


def test_series_csv_has_a_header_and_one_row_per_record(leaking):
    out = runner.invoke(app, ["series", str(leaking)]).stdout.splitlines()
    header = out[0].split(",")
    assert {"source", "worker", "step", "mem_peak_reserved_gib", "loss"} <= set(header)
    assert len(out) == 1 + 8


@pytest.mark.parametrize("command", ["analyze", "plot", "scan"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_a_capacity_that_is_no_size_is_a_usage_error(flat, command, value):
    result = runner.invoke(app, [command, "--capacity", value, str(flat)])
    assert result.exit_code == 2, result.output
    assert "--capacity" in result.output


def test_help_texts_are_complete():
    """Extras are named whole (rich markup must not eat `[ray]`), analyze says what it takes and what
    its exit codes mean."""
    wide = {"COLUMNS": "250"}
    assert "pip install 'memlog[ray]'" in runner.invoke(app, ["scan", "--help"], env=wide).stdout
    assert "needs memlog[prometheus]" in runner.invoke(app, ["watch", "--help"], env=wide).stdout
    text = runner.invoke(app, ["analyze", "--help"], env=wide).stdout
    assert "directories" in text and "Exit 0" in text and "2: could not judge" in text
