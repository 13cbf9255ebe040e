"""One reading engine: every command that reads a log reads it alike (memlog/engine/plan.py and
reader.py). Every sample log goes through analyze, series, formats check, watch, scan and compare,
and they must agree on the records read, per format, and on the verdict; a user's formats folder
with a wrapper of its own is read by every command, and every command takes the same reading
options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.base.errors import NoRecordsError
from memlog.cli import app
from memlog.compare.regression import CompareError, compare
from memlog.engine.api import analyze, parsed_records
from memlog.engine.formatcheck import check_formats
from memlog.engine.options import ReadingOptions
from memlog.scan.run import judge as judge_run
from memlog.scan.runs import find_runs
from memlog.watch.watch import Watcher
from tests.samples import sample_logs

ROOT = Path(__file__).resolve().parents[2]
LOGS = sample_logs()
runner = CliRunner()


def watched(path: str, options: ReadingOptions = ReadingOptions()):
    """What `memlog watch` judges of a finished file once it has read it all (no clock involved)."""
    watcher = Watcher([path], options)
    while watcher.poll():
        pass
    watcher.finish()  # as watch_loop does when watching ends
    return watcher.judge()


@pytest.mark.parametrize("log", LOGS, ids=[p.relative_to(ROOT / "sample_logs").as_posix() for p in LOGS])
def test_every_command_reads_a_sample_alike(log):
    path = str(log)
    report = analyze([path])
    records, formats, verdict = report.coverage["records"], report.coverage["formats"], report.verdict
    if records:
        series = parsed_records([path])
        assert series.height == records
        assert dict(series.group_by("format").len().iter_rows()) == formats
    else:  # a paste of a crash alone: judged, but no step to list
        with pytest.raises(NoRecordsError):
            parsed_records([path])
    assert check_formats([path]).records_by_format == formats
    seen = watched(path)
    assert (seen.verdict, seen.coverage["records"], seen.coverage["formats"]) == (verdict, records, formats)
    (run,) = find_runs([path])
    assert judge_run(run)["verdict"] == verdict
    try:
        both = compare([path], [path])
    except CompareError as exc:  # a log without memory readings, or too few steps, has nothing to compare
        assert "has no memory series" in str(exc) or "no common steps with 3+ readings" in str(exc)
    else:
        assert (both.base.verdict, both.new.verdict) == (verdict, verdict)


WRAPPED = "node-a|| "  # a collector of the user's own, declared in the formats folder's wrappers/


@pytest.fixture()
def user_folder(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "formats"
    (folder / "wrappers").mkdir(parents=True)
    (folder / "wrappers" / "pipes.yaml").write_text(
        "name: pipes\nprefix: '(?P<node>[a-z]+-[a-z])\\|\\| '\nsamples:\n  - {line: 'node-a|| step: 1', text: 'step: 1', node: node-a}\n"
    )
    source = ROOT / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
    log = tmp_path / "wrapped.log"
    log.write_text("".join(WRAPPED + line + "\n" for line in source.read_text().splitlines()))
    return folder, log


def test_a_user_folders_wrapper_is_read_by_every_command(user_folder):
    folder, log = user_folder
    options = ReadingOptions(formats_dirs=(folder,))
    expected = analyze([str(ROOT / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log")]).coverage["records"]
    report = analyze([str(log)], options=options)
    assert report.coverage["records"] == expected > 0
    assert parsed_records([str(log)], options).height == expected
    assert sum(check_formats([str(log)], options).records_by_format.values()) == expected
    assert watched(str(log), options).coverage["records"] == expected
    # and through the command line, each command with the same option
    for command in (["analyze", "-o", "json"], ["series", "-o", "json"], ["formats", "check"], ["scan", "-o", "json"], ["plot"]):
        result = runner.invoke(app, [*command, str(log), "--formats-dir", str(folder)])
        assert result.exit_code in (0, 1), (command, result.output)
    read = json.loads(runner.invoke(app, ["series", str(log), "--formats-dir", str(folder), "-o", "json"]).stdout)
    assert len(read) == expected


@pytest.mark.parametrize("command", [["analyze"], ["watch"], ["series"], ["plot"], ["compare", "A"], ["scan"], ["formats", "check"]])
def test_every_reading_command_takes_the_reading_options(command):
    help_text = runner.invoke(app, [*command[: 2 if command[0] == "formats" else 1], "--help"], env={"COLUMNS": "200"}).stdout
    for option in ("--format", "--formats-dir", "--plugins-dir", "--config"):
        assert option in help_text, (command, option)


def test_series_has_one_row_per_step_and_the_readings_on_request():
    """A DeepSpeed + HF Trainer log prints 2-3 lines a step: `series` merges them (each value's last
    reading), `series --readings` lists every line."""
    path = str(ROOT / "sample_logs" / "deepspeed" / "healthy_hf_trainer.log")
    merged, raw = parsed_records([path]), parsed_records([path], readings=True)
    assert merged.height == analyze([path]).coverage["records"] < raw.height
    assert merged.select("source", "worker", "kind", "segment", "step").is_unique().all()
    assert int(merged["readings"].sum()) == raw.height
    last = raw.group_by("worker", "kind", "segment", "step", maintain_order=True).agg(mem=__import__("polars").col("mem_allocated_gib").drop_nulls().last())
    assert last["mem"].to_list() == merged["mem_allocated_gib"].to_list()
