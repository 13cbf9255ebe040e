"""The generic reader, round 2 (issue 35): several line shapes per step, sparse CSV rows, progress
bars, and frameworks no spec reads, each as its sample log in sample_logs/generic/ prints it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze

ROOT = Path(__file__).resolve().parent.parent
GENERIC = ROOT / "sample_logs" / "generic"
runner = CliRunner()


def _memory_read(report) -> set[str]:
    return {c["column"] for g in report.coverage.get("guessed", []) for c in g.get("columns", []) if c["column"].endswith("_gib")}


# (sample log, verdict a maintainer gives it, a memory column it must be judged on)
VERDICTS = [
    ("nanogpt_iter_then_memory_line_leak.log", "leak", "mem_allocated_gib"),
]


@pytest.mark.parametrize(("log", "verdict", "column"), VERDICTS, ids=[v[0] for v in VERDICTS])
def test_each_framework_is_read_and_judged(log, verdict, column):
    report = analyze([str(GENERIC / log)])
    assert report.verdict == verdict, [f.message for f in report.findings]
    assert column in _memory_read(report), report.coverage.get("guessed")
    if verdict == "leak":
        (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
        assert column in leak.message or column in str(leak.evidence), leak.message


def test_two_shapes_of_one_step_are_two_patterns_joined_by_the_step():
    """nanoGPT's `iter N: loss ...` and a memory line `iter N: mem alloc ...` after it share their
    head: each is read by its own pattern, and both land on step N."""
    report = analyze([str(GENERIC / "nanogpt_iter_then_memory_line_leak.log")])
    assert "memory-not-read" not in {f.rule for f in report.findings}
    (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
    assert leak.evidence["observed"]["from_step"] == 0 and leak.evidence["observed"]["to_step"] == 1490


def test_formats_test_fails_a_guessed_spec_that_reads_none_of_the_memory_it_names(tmp_path):
    """The spec the reader once guessed for that log: one pattern requiring `loss`, so its memory
    fields never match; its samples (loss lines) passed. Now `formats test` says so."""
    folder = tmp_path / "formats"
    folder.mkdir()
    number = r"(?P<{0}>[-+]?(?:\d+(?:\.\d*)?|\.\d+))"
    (folder / "guessed.yaml").write_text(
        "name: guessed-nanogpt\ntitle: guessed\ndescription: guessed\nrecords:\n"
        "- name: line\n  kind: train\n  literal: ':'\n"
        "  regex: '^\\s*iter\\s+(?P<step>\\d+).*?loss'\n"
        f"  fields:\n  - 'loss\\s*{number.format('loss')}'\n  - 'mem\\s+alloc\\s*{number.format('mem_allocated_gib')}'\n"
        "  units: {mem_allocated_gib: GB}\n"
        "samples:\n- line: 'iter 10: loss 10.9138, time 116.55ms, mfu 29.10%'\n  record: {step: 10, loss: 10.9138}\n"
    )
    tested = runner.invoke(app, ["formats", "test", str(folder)])
    assert tested.exit_code == 1 and "names memory (mem_allocated_gib)" in tested.output, tested.output
