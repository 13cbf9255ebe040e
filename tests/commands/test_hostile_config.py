"""Hostile and broken input, config files: a missing or wrong file, key, type, threshold or YAML
tag, a YAML bomb, is refused in one line (exit 2), and nothing in a config runs. Shared helpers:
tests/hostile.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from memlog.base import config as config_module
from memlog.cli import app
from tests.hostile import analyze, cannot_judge, flat_lines, runner, write


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


def config_error(flat_log: Path, tmp_path: Path, text: str) -> tuple[str, Path]:
    cfg = write(tmp_path / "memlog.yaml", text)
    return cannot_judge(analyze(flat_log, "--config", cfg)), cfg


def test_config_missing(tmp_path, flat_log):
    cfg = tmp_path / "nope.yaml"
    assert cannot_judge(analyze(flat_log, "--config", cfg)) == f"memlog: error: {cfg}: config file not found"


def test_config_invalid_yaml(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "rules: [unclosed\n  capacity_gib: 80\n")
    assert re.fullmatch(rf"memlog: error: {re.escape(str(cfg))}: invalid YAML \(.+\)", line), line


def test_config_not_a_mapping(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "- rules\n- capacity_gib\n")
    assert line == f"memlog: error: {cfg}: the config must be a mapping"


def test_config_unknown_keys(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "colour: red\ncapacity_gib: 80\n")
    assert line == f"memlog: error: {cfg}: unknown keys ['colour'] (known: {sorted(config_module.KEYS)})"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("capacity_gib: eighty", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got 'eighty'"),
        ("capacity_gib: .inf", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got inf"),
        ("capacity_gib: -80", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got -80"),
        ("capacity_gib: true", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got True"),
        # found by scripts/fuzz.py: an integer too large for a float overflowed deep in the analysis
        ("capacity_gib: " + "1" + "0" * 400, "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got " + "1" + "0" * 39),
        ("capacity_gib: .nan", "{cfg}: capacity_gib must be a positive number of GiB up to 1e+06, got nan"),
        ("rules: [memory-leak]", "{cfg}: `rules` maps rule ids to mappings of threshold: value"),
        ("rules: {memory-leak: 5}", "{cfg}: `rules` maps rule ids to mappings of threshold: value"),
        ("formats_dirs: 5", "{cfg}: formats_dirs must be a list of paths"),
        ("rules: {memory-leak: {min_growth_gib: fast}}", "rule memory-leak: threshold min_growth_gib must be a number, got 'fast'"),
        ("rules: {memory-leak: {min_growth_gib: .nan}}", "rule memory-leak: threshold min_growth_gib must be a number, got nan"),
        ("rules: {memory-leak: {min_growth_gib: .inf}}", "rule memory-leak: threshold min_growth_gib must be a number, got inf"),
        ("rules: {no-such-rule: {x: 1}}", "config names unknown rules: ['no-such-rule']"),
    ],
)
def test_config_wrong_types(tmp_path, flat_log, text, message):
    line, cfg = config_error(flat_log, tmp_path, text + "\n")
    assert line == "memlog: error: " + message.format(cfg=cfg)


def test_config_unknown_threshold(tmp_path, flat_log):
    line, _ = config_error(flat_log, tmp_path, "rules: {memory-leak: {bogus: 1}}\n")
    assert line.startswith("memlog: error: rule memory-leak: unknown threshold 'bogus' (known: ")


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "{{rules: !!python/object/apply:os.system ['touch {marker}']}}",
        "!!python/name:os.system",
        "!!python/object:memlog.base.config.Config {{capacity_gib: 80}}",
        "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
    ],
)
def test_config_yaml_tags_are_rejected_and_never_run(tmp_path, flat_log, tag):
    marker = tmp_path / "pwned"
    line, cfg = config_error(flat_log, tmp_path, tag.format(marker=marker) + "\n")
    assert re.fullmatch(rf"memlog: error: {re.escape(str(cfg))}: invalid YAML \(.*python.*\)", line), line
    assert not marker.exists()


def test_the_config_file_has_no_way_to_trust_plugins(tmp_path, flat_log):
    line, cfg = config_error(flat_log, tmp_path, "plugins_dirs: [plugins]\n")
    assert "unknown keys ['plugins_dirs']" in line


def test_yaml_bombs_and_endless_configs_fail_in_one_line(tmp_path):

    log = Path(__file__).resolve().parents[2] / "sample_logs" / "torchtitan" / "fr5_two_points.log"
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        "rules:\n  memory-leak: &a {x: [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n"
        + "".join(f"k{i}: &k{i} [*{'a' if i == 0 else f'k{i - 1}'}, *{'a' if i == 0 else f'k{i - 1}'}]\n" for i in range(150))
    )
    specs = tmp_path / "formats"
    specs.mkdir()
    (specs / "big.yaml").write_text("name: big\n" + "#" * (2 * 1024 * 1024) + "\n")
    for args, why in ((["--config", "/dev/zero"], "is a device"), (["--config", str(bomb)], "aliases"), (["--formats-dir", str(specs)], "larger than")):
        result = subprocess.run([sys.executable, "-m", "memlog", "analyze", *args, str(log)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and why in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["rules:\n  memory-leak: {min_growth_gib: %s}\n", "compare: {fail_on_increase_pct: %s}\n"])
def test_a_threshold_too_large_for_a_float_is_a_config_error(tmp_path, flat_log, where):
    """Found by scripts/fuzz.py: math.isfinite(10**400) raises OverflowError (an internal error)."""
    cfg = write(tmp_path / "memlog.yaml", where % ("1" + "0" * 400))
    if where.startswith("compare"):
        result = runner.invoke(app, ["compare", str(flat_log), str(flat_log), "--config", str(cfg)])
    else:
        result = analyze(flat_log, "--config", cfg)
    line = cannot_judge(result)
    assert "must be a number, got 1000000000000000000000000000000000000000" in line and len(line) < 300, line
