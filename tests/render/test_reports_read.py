"""Reports a person reads (issue 17): text fits the terminal, the series that matter are drawn,
the run's story is told, usage errors are one line, and the README's commands run verbatim."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze
from memlog.engine.excerpt import attach_log_lines
from memlog.render.outputs.markdown import render_markdown
from memlog.render.outputs.text import render_text
from tests.samples import sample_logs
from tests.synthetic import torchtitan_lines

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = [p.relative_to(ROOT).as_posix() for p in sample_logs()]
runner = CliRunner()
ENV = {"NO_COLOR": "1", "PYTHONPATH": str(ROOT)}


@functools.cache
def _report(relative: str):
    """A sample judged as a reader runs it: from the repository root, its path as typed."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return analyze([relative])
    finally:
        os.chdir(cwd)


# A `file:line` anchor (or a path) alone on its line may be longer than a narrow terminal: it is never cut.
_LONE_ANCHOR = re.compile(r"^\s*(?:lines: )?\S+(?::\d+)?[,:]?$")


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("sample", SAMPLES)
def test_every_line_fits_the_width(sample, width):
    text = render_text(_report(sample), width=width)
    too_long = [line for line in text.splitlines() if len(line) > width and not _LONE_ANCHOR.match(line)]
    assert not too_long, "\n".join(too_long)
    # Paths are never cut inside (at a hyphen or anywhere): each anchor printed is a whole one.
    for source, line in {a for f in _report(sample).findings for a in f.lines}:
        if f"{source}:{line}" not in text:
            assert source not in text.replace("\n", " ")


def test_the_width_comes_from_columns_and_the_option():
    sample = "sample_logs/torchtitan/fr1_pp2_ep2_leak_oom.log"
    for columns, expected in (("60", 60), ("80", 80), ("30", 60)):
        result = runner.invoke(app, ["analyze", str(ROOT / sample)], env={"COLUMNS": columns, "NO_COLOR": "1"})
        widest = max(len(line) for line in result.stdout.splitlines() if not _LONE_ANCHOR.match(line))
        assert widest <= expected and widest > expected - 15, (columns, widest)
    result = runner.invoke(app, ["analyze", str(ROOT / sample), "--width", "70"], env={"COLUMNS": "120"})
    assert max(len(line) for line in result.stdout.splitlines() if not _LONE_ANCHOR.match(line)) <= 70


def test_a_path_is_never_wrapped_at_its_hyphens(tmp_path):
    folder = tmp_path / "multinode"
    folder.mkdir()
    lines = torchtitan_lines({1: [20 + 2.0 * i for i in range(12)]}, capacity=79.1)
    log = folder / "gpu-node-01.rank1.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)])
    text = render_text(report, width=60, chart=False)
    anchors = [f"{s}:{n}" for f in report.findings for s, n in f.lines]
    assert anchors and all(anchor in text for anchor in anchors)


# -- the series that matter ---------------------------------------------------------------------

LEAKERS = (13, 50)  # node01/rank5 and node06/rank2


@functools.cache
def _cluster(tmp: str):
    """64 ranks (8 nodes x 8 ranks, a pdsh-style node prefix), two of them leaking on different nodes."""
    memory = {r: [30 + (r % 7) * 0.3 + (0.15 * i if r in LEAKERS else 0.01 * ((i * 7 + r) % 5)) for i in range(60)] for r in range(64)}
    out = []
    for line in torchtitan_lines(memory, capacity=79.1):
        match = re.match(r"\[rank(\d+)\]:", line)
        rank = int(match.group(1))
        out.append(f"gpu-node-{rank // 8:02d}: [rank{rank % 8}]:{line[match.end() :]}")
    path = Path(tmp) / "cluster.log"
    path.write_text("\n".join(out) + "\n")
    report = analyze([str(path)])
    attach_log_lines(report)
    return report


def _leaker_labels():
    return [f"gpu-node-{r // 8:02d}/rank{r % 8}" for r in LEAKERS]


def test_64_ranks_show_both_leaking_ranks_everywhere(tmp_path_factory):
    report = _cluster(str(tmp_path_factory.mktemp("cluster")))
    assert {f.rule for f in report.findings} >= {"memory-leak"}
    text = render_text(report, width=80)
    memory_panel = text.split("Loss per")[0]
    markdown = render_markdown(report)
    mermaid = markdown.split("```mermaid")[1].split("```")[0]
    sparklines = markdown.split("Device memory per rank, steps")[1].split("```")[1]
    for label in _leaker_labels():
        assert label in memory_panel, label
        assert f'line "{label}"' in mermaid, label
        assert label in sparklines, label
    # The header counts (node, rank) workers: 64 GPUs, not the 8 rank numbers.
    assert "64 ranks" in markdown.splitlines()[0]
    assert "64 ranks" in " ".join(" ".join(text.splitlines()[-2:]).split())
    # What is hidden is counted, with the command that draws it.
    assert "more ranks not drawn (memlog plot LOG --worker LABEL draws one)" in memory_panel.replace("\n    ", " ")
    from memlog.render.outputs.html import render_html

    page = render_html(report)
    assert all(label in page.split('id="chart-device"')[1].split("</figure>")[0] for label in _leaker_labels())


def test_plot_selects_by_rank_node_actor_or_worker(tmp_path_factory):
    report = _cluster(str(tmp_path_factory.mktemp("cluster")))
    views = [v for v in report.series if v.subject == "device"]
    assert len([v for v in views if v.matches(node="gpu-node-01")]) == 8
    assert len([v for v in views if v.matches(rank=5)]) == 8
    assert [v.label for v in views if v.matches(worker="gpu-node-06/rank2")] == ["gpu-node-06/rank2"]
    assert len([v for v in views if v.matches(worker="gpu-node-0[67]/*")]) == 16
    assert not [v for v in views if v.matches(actor="WorkerDict")]
    # a node by the number its label ends with, as users type it (`--node 1` for gpu-node-01)
    assert [v.label for v in views if v.matches(node="1")] == [v.label for v in views if v.matches(node="gpu-node-01")]
    assert not [v for v in views if v.matches(node="99")]


def test_per_rank_files_are_counted_as_workers(tmp_path):
    for r in range(4):  # files that do not name their rank: four workers all the same
        lines = torchtitan_lines({r: [30 + 0.001 * i for i in range(30)]}, capacity=79.1)
        (tmp_path / f"host{r}.log").write_text("\n".join(re.sub(r"^\[rank\d+\]:", "", line) for line in lines) + "\n")
    report = analyze(sorted(str(p) for p in tmp_path.glob("*.log")))
    assert len(report.coverage["workers"]) == 4
    assert "4 workers" in render_text(report, chart=False)


# -- the run's story ----------------------------------------------------------------------------


def test_restarts_are_named_once_with_their_steps(tmp_path):
    memory = {0: [30 + 0.001 * i for i in range(30)], 1: [31 + 0.001 * i for i in range(30)]}
    steps = [*range(1, 11), *range(5, 15), *range(9, 19)]  # resumed from checkpoints at steps 5 and 9
    log = tmp_path / "resumed.log"
    log.write_text("\n".join(torchtitan_lines(memory, steps=steps, capacity=79.1)) + "\n")
    report = analyze([str(log)])
    assert report.coverage["restarts"] == [5, 9]
    sentence = "The run restarted twice (from steps 5 and 9)"
    assert render_text(report, chart=False).count(sentence) == 1
    assert render_markdown(report).count(sentence) == 1


def test_the_oom_gives_its_step_range_at_the_log_interval():
    report = _report("sample_logs/megatron/mds_zero2_leak_oom.log")
    oom = next(f for f in report.findings if f.rule == "oom")
    assert re.search(r"during steps (\d+)-(\d+)", oom.message)
    first, last = map(int, re.search(r"during steps (\d+)-(\d+)", oom.message).groups())
    assert last - first + 1 == 10  # the sample logs every 10 iterations


def test_hints_name_findings_not_positions():
    for sample in SAMPLES:
        for finding in _report(sample).findings:
            for hint in finding.hints:
                assert not re.search(r"\b(findings|finding|rules?) (above|below)\b", hint), (sample, hint)


# -- the command line ---------------------------------------------------------------------------


def _memlog(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlog", *args], capture_output=True, text=True, cwd=cwd or ROOT, env={**os.environ, **ENV}, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "-o", "html2", "x.log"],
        ["analyze", "--fail-on", "info", "x.log"],
        ["analyze"],
        ["analyze", "--no-such-option", "x.log"],
        ["plot", "x.log", "--width", "10"],
        ["rules", "explain"],
        ["no-such-command"],
    ],
    ids=["bad-output", "bad-fail-on", "missing-argument", "unknown-option", "width-range", "missing-id", "unknown-command"],
)
def test_usage_errors_are_one_line_and_exit_2(args):
    result = _memlog(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("memlog: error: "), result.stderr
    assert "--help" in lines[0]


def test_version():
    from memlog import __version__

    result = _memlog("--version")
    assert result.returncode == 0 and result.stdout == f"memlog {__version__}\n"


def test_junit_classnames_are_stable_per_rule():
    import xml.etree.ElementTree as ET

    from memlog.render.outputs.junit import render_junit

    names = {}
    for sample in ("sample_logs/torchtitan/fr1_pp2_ep2_leak_oom.log", "sample_logs/torchtitan/stable_newest.log"):
        report = _report(sample)
        for case in ET.fromstring(render_junit(report)).iter("testcase"):
            names.setdefault(case.get("name"), set()).add(case.get("classname"))
    assert all(classnames == {f"memlog.{rule}"} for rule, classnames in names.items())


# -- the README's examples run verbatim ---------------------------------------------------------

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)\s*$", re.M | re.S)


def _readme_blocks():
    """The fenced blocks of README.md and of the pages of docs/ it links to."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(m.group("info").strip(), m.group("body")) for page in pages for m in _FENCE.finditer(page.read_text(encoding="utf-8"))]


def _command_blocks():
    return [body for info, body in _readme_blocks() if info in ("sh", "shell", "bash", "console") and body.lstrip().startswith("memlog")]


def test_readme_has_runnable_command_blocks():
    assert _command_blocks()


@pytest.mark.parametrize("index", range(len(_command_blocks())))
def test_readme_command_blocks_run_verbatim(index, tmp_path):
    """Each command of the block, as a reader pastes it, from a folder holding the samples."""
    (tmp_path / "sample_logs").symlink_to(ROOT / "sample_logs")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "memlog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memlog "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, **ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for command in _command_blocks()[index].splitlines():
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        assert result.returncode in (0, 1), f"{command}: exit {result.returncode}\n{result.stderr}"
        assert not result.stderr.startswith("memlog: error"), result.stderr


def test_readme_config_example_loads_and_runs(tmp_path):
    from memlog.base.config import load_config

    loaded = [(body, yaml.safe_load(body)) for info, body in _readme_blocks() if info == "yaml"]
    configs = [body for body, data in loaded if isinstance(data, dict) and {"rules", "capacity_gib"} & set(data)]
    assert configs
    for i, body in enumerate(configs):
        path = tmp_path / f"memlog{i}.yaml"
        path.write_text(body)
        config = load_config(str(path))
        assert analyze([str(ROOT / "sample_logs/torchtitan/fr2_logfreq_creep.log")], config=config).findings
