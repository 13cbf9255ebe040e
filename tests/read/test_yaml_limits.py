"""Configs and specs are loaded with limits (issue 40): an alias bomb small enough to pass the alias
count, nesting deep enough to crash the YAML composer, and samples of the wrong type are each one
line naming the file (and the key), exit 2; never MemoryError, RecursionError, AttributeError or a
crashed interpreter. Cases that would take the old code's memory or stack run in a child process
with an address-space limit."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.base import yamlfile
from memlog.cli import app
from tests.synthetic import torchtitan_lines

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


def laughs(levels: int = 9) -> str:
    """Billion laughs in flow style: nine aliases of nine aliases..., 81 aliases (fewer than
    MAX_YAML_ALIASES) standing for 9**9 strings."""
    ladder = ['&a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    ladder += [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "[" + ", ".join(ladder) + "]"


def nested(depth: int, opening: str = "[", closing: str = "]", inner: str = "") -> str:
    return opening * depth + inner + closing * depth


def flat_log(tmp_path: Path) -> Path:
    path = tmp_path / "flat.log"
    path.write_text("\n".join(torchtitan_lines({0: [30.0 + 0.01 * (i % 3) for i in range(12)]}, capacity=79.11)) + "\n")
    return path


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def run_child(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlog", *args], capture_output=True, text=True, timeout=300, cwd=REPO, preexec_fn=_limited)


def one_line(returncode: int, stderr: str) -> str:
    assert returncode == 2, (returncode, stderr[-2000:])
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memlog: error: "), stderr[-2000:]
    assert "internal error" not in lines[0]
    return lines[0]


# --- the reader itself: every limit found before a node is built --------------------------------


def test_an_alias_bomb_under_the_alias_count_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(f"rules:\n  memory-leak:\n    min_growth_gib: {laughs()}\n")
    assert laughs().count("*") < yamlfile.MAX_YAML_ALIASES
    with pytest.raises(yamlfile.YamlFileError, match="aliases expand to more than 1,000,000 values"):
        yamlfile.read_yaml(path)


def test_aliases_that_expand_a_little_are_read(tmp_path):
    path = tmp_path / "shared.yaml"
    path.write_text(f"a: {laughs(levels=3)}\nb: [*a2, *a2]\n")
    document = yamlfile.read_yaml(path)
    assert len(document["b"]) == 2 and len(document["b"][0]) == 9


@pytest.mark.parametrize("opening, closing, inner", [("[", "]", ""), ("{a: ", "}", "1")])
def test_deep_nesting_is_refused_before_it_is_composed(tmp_path, opening, closing, inner):
    path = tmp_path / "deep.yaml"
    path.write_text("rules: " + nested(50_000, opening, closing, inner) + "\n")
    with pytest.raises(yamlfile.YamlFileError, match=f"nested more than {yamlfile.MAX_YAML_DEPTH} levels deep"):
        yamlfile.read_yaml(path)


def test_nesting_up_to_the_limit_is_read(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + nested(yamlfile.MAX_YAML_DEPTH - 1, inner="1") + "\n")
    value, depth = yamlfile.read_yaml(path), 0  # the top mapping is the first level
    while not isinstance(value, int):
        value, depth = (value["x"] if isinstance(value, dict) else value[0]), depth + 1
    assert depth == yamlfile.MAX_YAML_DEPTH


def test_invalid_yaml_keeps_the_loaders_own_message(tmp_path, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_text("rules: [1, 2\n")
    with pytest.raises(Exception) as raised:
        yamlfile.read_yaml(path)
    assert "while parsing a flow sequence" in str(raised.value)


# --- through the command line -------------------------------------------------------------------


def test_config_alias_bomb_is_one_line(tmp_path):
    config = tmp_path / "bomb.yaml"
    config.write_text(f"rules:\n  memory-leak:\n    min_growth_gib: {laughs()}\n")
    proc = run_child("analyze", "--config", str(config), str(flat_log(tmp_path)))
    assert one_line(proc.returncode, proc.stderr).startswith(f"memlog: error: {config}: its aliases expand to more than")


def test_spec_alias_bomb_is_one_line(tmp_path):
    specs = tmp_path / "formats"
    specs.mkdir()
    (specs / "bomb.yaml").write_text(f"name: bomb\ndescription: {laughs()}\nrecords: []\n")
    proc = run_child("analyze", "--formats-dir", str(specs), str(flat_log(tmp_path)))
    assert "bomb.yaml: cannot read format spec (its aliases expand to more than" in one_line(proc.returncode, proc.stderr)


@pytest.mark.parametrize("opening, closing, inner", [("[", "]", ""), ("{a: ", "}", "1")])
def test_config_nested_50_000_deep_is_one_line(tmp_path, opening, closing, inner):
    config = tmp_path / "deep.yaml"
    config.write_text("rules: " + nested(50_000, opening, closing, inner) + "\n")
    proc = run_child("analyze", "--config", str(config), str(flat_log(tmp_path)))
    assert one_line(proc.returncode, proc.stderr) == (
        f"memlog: error: {config}: nested more than {yamlfile.MAX_YAML_DEPTH} levels deep (line 1), not a config or spec"
    )


def test_spec_nested_50_000_deep_is_one_line(tmp_path):
    specs = tmp_path / "formats"
    specs.mkdir()
    (specs / "deep.yaml").write_text("name: deep\nrecords: " + nested(50_000) + "\n")
    proc = run_child("formats", "list", "--formats-dir", str(specs))
    assert f"deep.yaml: cannot read format spec (nested more than {yamlfile.MAX_YAML_DEPTH} levels deep" in one_line(proc.returncode, proc.stderr)


SPEC_HEAD = "name: mine\nrecords:\n  - name: r\n    literal: 'step'\n    regex: 'step (?P<step>\\d+)'\nsamples:\n"


@pytest.mark.parametrize(
    "samples, message",
    [
        ("  - 5\n", "samples entry 1: must be a mapping with `line:` (and `record:`, `event:` or `nothing:`), got int"),
        ("  - [a, b]\n", "samples entry 1: must be a mapping with `line:` (and `record:`, `event:` or `nothing:`), got list"),
        ("  - {line: 'step 1'}\n  - {line: 3}\n", "samples entry 2: `line` must be the text of a log line"),
        ("  - {record: {step: 1}}\n", "samples entry 1: `line` must be the text of a log line"),
        ("  - {line: 'step 1', record: 5}\n", "samples entry 1: `record` must be a mapping of column: value, got int"),
        ("  - {line: 'step 1', event: [1]}\n", "samples entry 1: `event` must be a mapping of column: value, got list"),
        ("  - {line: 'step 1', nothing: 'yes'}\n", "samples entry 1: `nothing` must be true or false, got str"),
        ("  - {line: 'step 1', expect: {step: 1}}\n", "samples entry 1: unknown keys ['expect'] (known: line, record, event, nothing)"),
    ],
)
def test_spec_samples_of_the_wrong_type_name_the_entry_and_key(tmp_path, samples, message):
    specs = tmp_path / "formats"
    specs.mkdir()
    (specs / "mine.yaml").write_text(SPEC_HEAD + samples)
    for args in (
        ["analyze", "--formats-dir", str(specs), str(flat_log(tmp_path))],
        ["formats", "list", "--formats-dir", str(specs)],
        ["formats", "check", "--formats-dir", str(specs), str(flat_log(tmp_path))],
    ):
        result = runner.invoke(app, args)
        assert one_line(result.exit_code, result.stderr) == f"memlog: error: mine.yaml: {message}"
