"""User format specs are safe to write: their samples are checked when they load, a built-in is
replaced only when the spec says so, units and who printed a line can be read from the line, and
`memlog formats test DIR` checks a folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.base.errors import FormatSpecError, MemlogError
from memlog.cli import app
from memlog.engine.api import analyze, select_specs
from memlog.parse.catalog import load_specs

runner = CliRunner()

SPEC = """
name: mine
records:
  - name: r
    literal: "train_step="
    regex: '^(?:\\[Rank (?P<rank>\\d+)\\] )?train_step=(?P<step>\\d+) mem=(?P<mem_allocated_gib>\\d+(?:\\.\\d+)?)(?P<mem_allocated_gib_unit>[KMGT]i?B)'
samples:
  - line: "train_step=5 mem=2048MiB"
    record: {step: 5, mem_allocated_gib: 2.0}
"""


def folder(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "formats"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def records(tmp_path: Path, formats: Path, lines: list[str]) -> list[tuple]:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)], formats_dirs=[formats], format="mine", condense=False)
    view = next(v for v in report.series if v.subject == "device")
    return view.values


def test_a_value_is_read_in_the_unit_the_line_prints(tmp_path):
    formats = folder(tmp_path, {"mine.yaml": SPEC})
    lines = [f"train_step={i} mem={v}" for i, v in enumerate(["2048MiB", "2GiB", "2GB", "2097152KiB", "0.001953125TiB"], start=1)]
    assert records(tmp_path, formats, lines) == [2.0] * 5


FIELD_UNITS = """
name: mine
records:
  - name: r
    literal: "train_step="
    regex: '^train_step=(?P<step>\\d+) '
    fields:
      - ' mem_gb=(?P<mem_allocated_gib>\\d+(?:\\.\\d+)?)'
      - {regex: ' mem_bytes=(?P<mem_allocated_gib>\\d+)', units: {mem_allocated_gib: bytes}}
    units: {mem_allocated_gib: GB}
samples:
  - line: "train_step=5 mem_bytes=2147483648"
    record: {step: 5, mem_allocated_gib: 2.0}
  - line: "train_step=6 mem_gb=2.0"
    record: {step: 6, mem_allocated_gib: 2.0}
"""


def test_a_field_may_carry_units_of_its_own(tmp_path):
    """One column printed in bytes by one version of a line and in GB by another."""
    formats = folder(tmp_path, {"mine.yaml": FIELD_UNITS})
    lines = [f"train_step={i} " + ("mem_bytes=2147483648" if i % 2 else "mem_gb=2.0") for i in range(1, 7)]
    assert records(tmp_path, formats, lines) == [2.0] * 6


def test_a_field_with_an_unknown_unit_is_refused(tmp_path):
    formats = folder(tmp_path, {"mine.yaml": FIELD_UNITS.replace("{mem_allocated_gib: bytes}", "{mem_allocated_gib: furlongs}")})
    with pytest.raises(FormatSpecError, match="unknown units"):
        load_specs(extra_dirs=[formats])


def test_the_line_names_its_rank_and_it_wins_over_a_prefix(tmp_path):
    formats = folder(tmp_path, {"mine.yaml": SPEC})
    log = tmp_path / "run.log"
    log.write_text("".join(f"[rank0]:[Rank {r}] train_step={s} mem=1GiB\n" for s in range(1, 4) for r in (3, 7)))
    report = analyze([str(log)], formats_dirs=[formats], format="mine")
    assert report.coverage["ranks"] == [3, 7]


def test_a_failing_sample_stops_the_run_naming_the_file_and_the_sample(tmp_path):
    formats = folder(tmp_path, {"mine.yaml": SPEC.replace("mem_allocated_gib: 2.0}", "mem_allocated_gib: 3.0}")})
    with pytest.raises(FormatSpecError, match=r"mine\.yaml: mine sample 1: mem_allocated_gib = 2\.0, expected 3\.0"):
        load_specs([formats])


def test_a_built_in_is_replaced_only_when_the_spec_says_so(tmp_path):
    shadow = "name: torchtitan\nrecords: []\n"
    with pytest.raises(FormatSpecError, match="add `replaces: torchtitan`"):
        load_specs([folder(tmp_path, {"t.yaml": shadow})])
    specs = load_specs([folder(tmp_path / "b", {"t.yaml": "replaces: torchtitan\n" + shadow})])
    assert specs["torchtitan"].records == ()


def test_formats_test_reports_every_file_and_exits_1_on_a_failure(tmp_path):
    formats = folder(
        tmp_path,
        {
            "good.yaml": SPEC,
            "bad.yaml": SPEC.replace("name: mine", "name: other").replace("step: 5", "step: 6"),
            "wrappers/gutter.yaml": "name: gutter\nprefix: '\\[(?P<pid>\\d+)\\] '\nsamples:\n  - {line: '[7] x', text: x, pid: 7}\n",
        },
    )
    result = runner.invoke(app, ["formats", "test", str(formats)])
    assert result.exit_code == 1, result.output
    assert "ok   " in result.output and "FAIL " in result.output and "other sample 1: step = 5, expected 6" in result.output
    assert "gutter.yaml" in result.output
    ok = folder(tmp_path / "ok", {"good.yaml": SPEC})
    assert runner.invoke(app, ["formats", "test", str(ok)]).exit_code == 0


def test_several_formats_can_be_forced_and_event_formats_too():
    specs = load_specs()
    assert {s.name for s in select_specs(specs, ["torchtitan", "deepspeed"]) if s.records} == {"torchtitan", "deepspeed"}
    assert {s.name for s in select_specs(specs, "torchtitan,verl") if s.records} == {"torchtitan", "verl"}
    assert {s.name for s in select_specs(specs, "ray")} >= {"ray", "pytorch"}
    with pytest.raises(MemlogError, match="unknown formats 'nope', 'nada'"):
        select_specs(specs, "nope,nada")
