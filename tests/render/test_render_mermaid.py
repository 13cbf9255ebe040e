"""The Mermaid chart of the issue markdown: a valid xychart-beta block, inert whatever the log holds,
at most MAX_LINES workers with the ones findings name first, and a sentence saying what is drawn.
(tests/render/test_browser.py renders it with the real Mermaid library.) Also the sparklines under it."""

from __future__ import annotations

import copy
import random
import re

import pytest

from memlog.engine.api import analyze
from memlog.render.mermaid import MAX_LINES, MAX_POINTS, chart_data, fill, mermaid_text, render_mermaid, step_grid
from memlog.render.outputs.markdown import LIMIT, render_markdown
from memlog.report.report import SeriesView
from tests.render.test_render_markdown import assert_inert
from tests.render_samples import SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report
from tests.synthetic import torchtitan_lines

NUMBER = r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)"
QUOTED = r'"[^"\n]*"'
LINE = re.compile(rf"  line {QUOTED} \[{NUMBER}(?:, {NUMBER})*\]")
HOSTILE = 'rank0 "] \n``` <script>alert(1)</script> %%{init}%% #35; [x](y) {a} \u202e \x1b[31m'
LEAKING = (13, 42)


def mermaid_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```mermaid\n(.*?)\n```$", markdown, re.S | re.M)


def parse_block(block: str) -> dict:
    """The block, checked line by line against the xychart-beta grammar memlog uses; its parts."""
    lines = block.split("\n")
    assert lines[0] == "---" and "xychart-beta" in lines, block[:300]
    config_end = lines.index("---", 1)
    assert re.fullmatch(r'      plotColorPalette: "#[0-9a-f]{6}(?:, #[0-9a-f]{6})*"', lines[config_end - 1])
    body = lines[config_end + 1 :]
    assert body[0] == "xychart-beta"
    assert re.fullmatch(rf"  title {QUOTED}", body[1]), body[1]
    x_axis = re.fullmatch(rf'  x-axis "(?:step|reading)" ({NUMBER}) --> ({NUMBER})', body[2])
    y_axis = re.fullmatch(rf"  y-axis {QUOTED} ({NUMBER}) --> ({NUMBER})", body[3])
    assert x_axis and y_axis, body[2:4]
    series = []
    for line in body[4:]:
        assert LINE.fullmatch(line), line[:200]
        label = re.match(rf"  line ({QUOTED})", line).group(1)[1:-1]
        values = [float(v) for v in re.findall(NUMBER, line[line.index("[") :])]
        series.append((label, values))
    palette = re.findall(r"#[0-9a-f]{6}", lines[config_end - 1])
    assert len(palette) == len(series)
    return {"x": tuple(map(float, x_axis.groups())), "y": tuple(map(float, y_axis.groups())), "lines": series}


def many_ranks(tmp_path, leaking=LEAKING, ranks=64, steps=200):
    """A 64-rank run (8 nodes x 8 GPUs, each node at its own level) where two ranks leak."""
    rng = random.Random(7)
    memory = {}
    for rank in range(ranks):
        base = 30 + (rank // 8) * 0.8 + rng.random()
        if rank in leaking:
            memory[rank] = [base + 0.05 * i for i in range(steps)]
        else:
            memory[rank] = [base + rng.gauss(0, 0.02) for _ in range(steps)]
    log = tmp_path / "run.log"
    log.write_text("\n".join(torchtitan_lines(memory, capacity=79.11)) + "\n")
    return analyze([str(log)])


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_every_sample_gives_a_valid_block_on_a_common_grid(log):
    report = sample_report(log)
    markdown = render_markdown(report)
    blocks = mermaid_blocks(markdown)
    chart = chart_data(report)
    assert len(blocks) == (chart is not None)
    if chart is None:
        return
    parsed = parse_block(blocks[0])
    x_low, x_high = parsed["x"]
    # Mermaid spaces the points by adding the width to the start: it must land on the end exactly.
    assert x_low + (chart.count - 1) * chart.width == x_high
    for label, values in parsed["lines"]:
        assert len(values) == chart.count, label
        assert all(parsed["y"][0] <= v <= parsed["y"][1] for v in values)
    assert len(parsed["lines"]) <= MAX_LINES + 1  # the workers, and the capacity line
    assert "Lines, in the order drawn: " in markdown
    assert len(markdown) < LIMIT
    assert_inert(markdown)


def test_the_leaking_ranks_of_64_are_drawn_first(tmp_path):
    report = many_ranks(tmp_path)
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert sorted(leak.series) == [f"rank{r}" for r in LEAKING]
    markdown = render_markdown(report)
    parsed = parse_block(mermaid_blocks(markdown)[0])
    labels = [label for label, _ in parsed["lines"]]
    assert labels[:2] == ["rank13", "rank42"]
    assert labels[-1] == "capacity"
    workers = labels[:-1]
    assert len(workers) <= MAX_LINES and len(set(workers)) == len(workers)
    # The rest: lowest, median and highest by level (the nodes sit at different levels).
    assert workers[2] in {f"rank{r}" for r in range(8)} and workers[4] in {f"rank{r}" for r in range(56, 64)}
    sentence = next(line for line in markdown.splitlines() if line.startswith("Lines, in the order drawn: "))
    assert sentence.startswith("Lines, in the order drawn: red rank13 (memory-leak), blue rank42 (memory-leak), green rank")
    assert "(lowest)" in sentence and "(median)" in sentence and "(highest)" in sentence
    assert f"{64 - len(workers)} more ranks not drawn" in sentence
    assert "grey: the 79.11 GiB device capacity" in sentence
    # The leaking lines climb; 200 steps became at most MAX_POINTS points.
    rising = dict(parsed["lines"])["rank13"]
    assert len(rising) <= MAX_POINTS and rising[-1] - rising[0] > 9


def test_more_named_series_than_lines_are_spread_over_their_levels_beside_a_calm_one(tmp_path):
    report = many_ranks(tmp_path, leaking=tuple(range(0, 64, 4)))
    chart = chart_data(report)
    assert len(chart.lines) == MAX_LINES
    assert [line.why for line in chart.lines] == ["memory-leak"] * (MAX_LINES - 1) + ["calm"]
    assert int(chart.lines[-1].view.label.removeprefix("rank")) % 4 != 0
    assert chart.hidden == 64 - MAX_LINES


def test_a_two_node_job_draws_a_calm_rank_of_the_other_node_beside_the_leaking_node(tmp_path):
    """One node's 8 ranks leak, the other's are flat: the chart shows the contrast, in every format."""
    report = many_ranks(tmp_path, leaking=tuple(range(8, 16)), ranks=16)
    chart = chart_data(report)
    calm = [line.view.label for line in chart.lines if line.why == "calm"]
    assert len(calm) == 1 and int(calm[0].removeprefix("rank")) < 8
    assert len([line for line in chart.lines if line.why == "memory-leak"]) == MAX_LINES - 1
    from memlog.render.outputs.html import render_html
    from memlog.render.outputs.text import render_text

    assert f"{calm[0]} (calm)" in render_text(report, width=120)
    assert f"{calm[0]} (calm)" in render_html(report)


def test_every_rank_is_drawn_when_they_fit():
    report = sample_report(TORCHTITAN_LEAK)  # 4 ranks, all leaking
    chart = chart_data(report)
    assert [line.view.label for line in chart.lines] == ["rank0", "rank1", "rank2", "rank3"]
    assert chart.hidden == 0 and chart.capacity == 79.11
    assert "not drawn" not in render_markdown(report).split("Lines, in the order drawn", 1)[1].split("\n")[0]


def test_log_labels_cannot_break_the_block_or_the_markdown():
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    report.series = [copy.copy(v) for v in report.series]
    for view in report.series:
        view.label = HOSTILE + view.label
    markdown = render_markdown(report)
    block = mermaid_blocks(markdown)[0]
    parsed = parse_block(block)
    for label, _ in parsed["lines"][:-1]:
        assert re.fullmatch(r"[\w .,:/+=()@?~-]*", label), label
    for bad in ('"]', "%%", "#35;", "<script", "`", "{", "\x1b", "\u202e"):
        assert bad not in block
    assert_inert(markdown)
    assert "&lt;script&gt;" in markdown.split("Lines, in the order drawn: ", 1)[1]  # the sentence escapes for markdown


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rank3", "rank3"),
        ("WorkerDict pid=3322 [floor]", "WorkerDict pid=3322 (floor)"),
        ('a"b', "a?b"),
        ("a\nb\r\nc", "a b c"),
        ("%%{init: x}%%", "??(init: x)??"),
        ("x" * 60, "x" * 39 + "~"),
    ],
)
def test_mermaid_text(text, expected):
    assert mermaid_text(text) == expected


@pytest.mark.parametrize(
    "low, high, whole", [(1, 6, True), (1, 1000, True), (0, 2400, True), (3, 7_000_003, True), (0, 0.67, False), (1, 9, False), (0.5, 1.25, False)]
)
def test_the_grid_is_exact_in_floating_point(low, high, whole):
    start, width, count = step_grid(low, high, MAX_POINTS, whole)
    assert 2 <= count <= MAX_POINTS
    assert start <= low and start + (count - 1) * width >= high
    position = start
    for i in range(count):  # as Mermaid computes the positions: by repeated addition
        assert position == start + i * width
        position += width
    if whole:
        assert width == int(width) >= 1


def test_fill_interpolates_inside_and_holds_outside():
    assert fill([None, 1.0, None, 3.0, None]) == ([1.0, 1.0, 2.0, 3.0, 3.0], True)
    assert fill([1.0, 2.0]) == ([1.0, 2.0], False)
    assert fill([None, None]) == ([], False)


def test_a_series_that_logged_only_part_of_the_run_is_said_to_be_held(tmp_path):
    report = sample_report(TORCHTITAN_LEAK)
    report = copy.copy(report)
    late = copy.copy(report.series[0])
    late.label, late.steps, late.values = "late", [4.0, 5.0, 6.0], [30.0, 31.0, 32.0]
    report.series = [late, *report.series[1:]]
    chart = chart_data(report)
    assert next(line for line in chart.lines if line.view.label == "late").held
    assert "late is held flat where it logged nothing" in render_markdown(report)


def test_no_block_without_two_steps():
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    report.series = [SeriesView("device", "rank0", 0, "mem_peak_reserved_gib", [5.0], [30.0])]
    assert chart_data(report) is None
    assert "```mermaid" not in render_markdown(report)


def test_the_block_is_plain_text_and_small(tmp_path):
    block = render_mermaid(chart_data(many_ranks(tmp_path)))
    assert len(block) < 6000
    assert block.isascii()


# -- sparklines ----------------------------------------------------------------------------------


def test_a_warmup_with_spikes_is_not_drawn_as_a_solid_bar():
    """Each mark is its bucket's mean, so one spike per bucket no longer fills the row; the row
    states the lowest and highest reading, which the mean hides."""
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    steps = [float(s) for s in range(1, 961)]
    values = [10 + min(s, 200) / 10 + (20 if s % 20 == 0 else 0) for s in steps]
    report.series = [SeriesView("device", "rank0", 0, "mem_peak_reserved_gib", steps, values)]
    markdown = render_markdown(report)
    row = next(line for line in markdown.splitlines() if line.startswith("rank0  "))
    marks = re.search(r"[▁▂▃▄▅▆▇█]+", row).group()
    assert marks[0] in "▁▂" and marks[-1] == "█" and marks.count("█") < len(marks)
    assert "10.10–50.00" in row  # lowest and highest reading
