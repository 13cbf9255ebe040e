"""Launcher and logger wrappers are data (parsers/wrappers/*.yaml): each spec's samples unwrap to
their text and fields, specs are validated at load, and a user's wrapper is one file."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from memlog.base.errors import FormatSpecError
from memlog.parse.catalog import load_specs, load_wrappers
from memlog.parse.formats import all_logger_prefixes
from memlog.parse.unwrap import Unwrapper, sample_mismatches
from memlog.parse.wrappers import WRAPPER_FIELDS, load_wrapper
from memlog.read.source import Source, read_chunks
from tests.samples import sample_logs

WRAPPERS = load_wrappers()


@pytest.mark.parametrize("wrapper", WRAPPERS, ids=[w.name for w in WRAPPERS])
def test_each_wrappers_samples_unwrap_as_declared(wrapper):
    assert wrapper.samples and wrapper.description
    assert sample_mismatches(wrapper, WRAPPERS) == []


def unwrap(*lines: str) -> list[dict]:
    return Unwrapper([], WRAPPERS)(pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "text": list(lines)})).to_dicts()


def test_any_stack_comes_off_outermost_first():
    row = unwrap("> [pod/job-worker-1/pytorch] 2025-03-04T10:11:12.048213300Z  3: [default2]:[rank10]: step 30 loss 2.1")[0]
    assert row["text"] == "step 30 loss 2.1"
    # The pod names the node; srun's task (one torchrun per task) is kept beside it, not dropped.
    assert (row["node"], row["rank"]) == ("job-worker-1/task3", 2)


def test_a_node_named_outside_srun_labels_keeps_the_tasks_apart():
    """journald's host (or an outer srun) over srun's labels under torchrun: two tasks' [rank0] lines
    are two workers, never copies of one."""
    for outer in ("Sep 12 02:00:00 node01 python3[4242]: ", " 0: ", "worker-0: "):
        first, second = unwrap(f"{outer}0: [rank0]:step 1", f"{outer}1: [rank0]:step 1")
        assert first["rank"] == second["rank"] == 0
        assert first["node"] != second["node"] and first["node"].endswith("task0") and second["node"].endswith("task1")


def test_the_innermost_wrapper_names_the_process():
    row = unwrap("Mar 04 10:11:12 gpu-a07 python3[40121]: (WorkerDict pid=7, ip=10.0.0.3) x")[0]
    assert (row["node"], row["actor"], row["pid"], row["ip"], row["text"]) == ("gpu-a07", "WorkerDict", 7, "10.0.0.3", "x")


def test_srun_task_is_the_rank_alone_and_the_node_under_torchrun():
    alone, under = unwrap("12: hello", " 1: [rank3]:hello")
    assert (alone["rank"], alone["node"]) == (12, None)
    assert (under["rank"], under["node"]) == (3, "task1")


def test_words_that_look_like_a_host_label_stay():
    for line in ("step: 3 loss: 1.0", "Traceback: x", "loss: 0.5", "INFO | step 3"):
        assert unwrap(line)[0]["text"] == line


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_user_wrapper_is_one_file(tmp_path):
    write(tmp_path / "wrappers" / "gutter.yaml", "name: gutter\nprefix: '\\[(?P<pid>\\d+)\\] '\nsamples:\n  - {line: '[80746] x', text: x, pid: 80746}\n")
    wrappers = load_wrappers((tmp_path,))
    assert "gutter" in {w.name for w in wrappers}
    row = Unwrapper([], wrappers)(pl.DataFrame({"line_no": [1], "text": ["[80746] [rank0]:step: 1"]})).row(0, named=True)
    assert (row["pid"], row["rank"], row["text"]) == (80746, 0, "step: 1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: w\n", "needs a `prefix:` or `suffix:`"),
        ("name: w\nprefix: '(?P<user>x) '\nsamples: [{line: 'x y', text: y}]\n", "not wrapper fields"),
        ("name: w\nprefix: '(?<=a)b'\nsamples: [{line: 'x', text: x}]\n", "invalid regex"),
        ("name: w\nprefix: 'x '\n", "`samples` must list at least one"),
        ("name: w\nprefix: 'x '\ncolour: red\nsamples: [{line: 'x', text: x}]\n", "unknown keys ['colour']"),
    ],
)
def test_invalid_wrapper_specs_are_refused_with_a_reason(tmp_path, text, message):
    with pytest.raises(FormatSpecError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_wrapper(write(tmp_path / "w.yaml", text))


def test_wrapper_fields_are_the_identity_columns():
    assert {"node", "rank", "actor", "pid", "ip", "ts"} <= set(WRAPPER_FIELDS)


def test_prefix_groups_read_once_per_distinct_prefix_are_those_of_each_line(monkeypatch, tmp_path):
    """Unwrapper._read_prefix reads a wrapper prefix's groups once per distinct (prefix, next
    character): every sample log, and lines whose prefixes differ only after the prefix's end, must
    unwrap exactly as when each line's groups are read on its own, and as when the lines with a
    prefix are read apart from those without or together with them. A user's wrapper whose groups
    depend on the character after the prefix (`\\b`): `w7 x` names the node, `w7x` the actor."""
    write(
        tmp_path / "wrappers" / "edge.yaml",
        "name: edge\nprefix: '(?:(?P<node>w\\d)\\b|(?P<actor>w\\d))'\n"
        "samples:\n  - {line: 'w7 x', text: x, indent: 1, node: w7}\n  - {line: 'w7x', text: x, actor: w7}\n",
    )
    unwrapper = Unwrapper(all_logger_prefixes(load_specs().values()), load_wrappers((tmp_path,)))
    lines = [chunk for sample in sample_logs() for chunk in read_chunks(Source(str(sample)))]
    tricky = ["[rank0]:step 1", "[rank0]: step 1", "[rank0]:", "0: x", "0:x", "10: y", "stdout: [rank1]:z", "stdout:", "(Runner pid=1) a", "w7 x", "w7x", "w7"]
    lines.append(pl.DataFrame({"line_no": list(range(1, 4 * len(tricky) + 1)), "text": tricky * 4}))
    by_distinct = [unwrapper(chunk) for chunk in lines]
    monkeypatch.setattr("memlog.parse.unwrap.DISTINCT_PREFIXES", 0.0)  # every line read on its own
    for chunk, mine in zip(lines, by_distinct):
        assert mine.equals(unwrapper(chunk), null_equal=True)
    assert sum(chunk.height for chunk in lines) > 10_000
    # Lines with a prefix read apart from the others (the unprefixed put back in order), or all together.
    for share in (0.0, 1.01):
        monkeypatch.setattr("memlog.parse.unwrap.PREFIXED_APART", share)
        for chunk, mine in zip(lines, by_distinct):
            assert mine.equals(unwrapper(chunk), null_equal=True)


def test_pieces_after_a_carriage_return_keep_the_label_of_their_line():
    """A launcher labels the physical line it relays; reading cuts it at `\\r` (a progress bar), and
    every piece is still that node's: its own Ray prefix names its process, the line's the node."""
    unwrap = Unwrapper([])  # the built-in wrappers
    lines = pl.DataFrame(
        {
            "line_no": [1, 2, 2, 2, 3, 3],
            "text": [
                "gpu-a07: (Runner pid=5121) actor:",
                "gpu-a07: Running step:  2%|#  | 1/40",
                "\x1b[36m(Runner pid=5121)\x1b[0m Step 1",
                "gpu-a07: (Runner pid=5121) Step 2",  # labelled itself: left as it is
                "(Runner pid=9) no label on this line",
                "Step 3",
            ],
        }
    )
    carried = unwrap.with_line_prefixes(lines)
    assert carried["text"].to_list()[2] == "gpu-a07: \x1b[36m(Runner pid=5121)\x1b[0m Step 1"
    assert carried["text"].to_list()[3] == "gpu-a07: (Runner pid=5121) Step 2"
    assert carried["text"].to_list()[5] == "(Runner pid=9) Step 3"  # the process's own tqdm line
    assert unwrap.with_line_prefixes(carried).equals(carried)  # twice is once
    read = unwrap(carried).select("node", "actor", "pid", "text").rows()
    assert read[2] == ("gpu-a07", "Runner", 5121, "Step 1")
    whole_lines = lines.filter(pl.col("line_no") == 1)
    assert unwrap.with_line_prefixes(whole_lines) is whole_lines  # no line cut: nothing to do
