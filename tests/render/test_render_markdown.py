"""Issue-ready markdown: bounded, inert whatever the log holds, and rendering as intended."""

from __future__ import annotations

import copy
import re

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze
from memlog.engine.excerpt import attach_log_lines
from memlog.judge.rulekit import Finding
from memlog.render.outputs.markdown import LIMIT, ZWSP, code_block, md_text, render_markdown
from tests.render_samples import SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report
from tests.synthetic import torchtitan_lines

runner = CliRunner()
HOSTILE = "GH-123 gh-7 @octocat <script>alert(1)</script> </details> ``` | #12 *bold* [x](javascript:alert(1)) \x1b[31mred\x1b[0m &amp;"
OUR_HTML = re.compile(r"\s*(?:<details><summary>[A-Za-z0-9 ()]+</summary>|</details>)\s*")
MENTION = re.compile(r"@\w")
ISSUE_REF = re.compile(r"#\d|(?<![\w-])gh-\d", re.IGNORECASE)


def parse(markdown: str):
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)


def walk(tokens):
    for token in tokens:
        yield token
        yield from walk(token.children or [])


def assert_inert(markdown: str) -> None:
    """Only our own <details>/<summary> as HTML; no mention, issue reference or escape sequence
    outside code; the structure is what we wrote (one table, code blocks closed)."""
    assert "\x1b" not in markdown
    tokens = list(walk(parse(markdown)))
    for token in tokens:
        if token.type in ("html_block", "html_inline"):
            assert OUR_HTML.fullmatch(token.content), token.content
        if token.type == "text":
            assert not MENTION.search(token.content), token.content
            assert not ISSUE_REF.search(token.content), token.content
        if token.type == "link_open":
            pytest.fail(f"a link was rendered: {token.attrs}")
    assert sum(t.type == "table_open" for t in tokens) <= 1


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_every_sample_renders_bounded_and_inert(log):
    markdown = render_markdown(sample_report(log))
    assert len(markdown) < LIMIT
    assert markdown.startswith("**memlog verdict: ")
    assert "<details><summary>Environment</summary>" in markdown
    assert_inert(markdown)


def test_the_evidence_lines_are_quoted_by_line_number(tmp_path):
    lines = torchtitan_lines({0: [20 + 2 * i for i in range(10)]}, capacity=79.11)
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)])
    attach_log_lines(report)
    markdown = render_markdown(report)
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    for source, line in leak.lines:
        assert report.log_lines[(source, line)] == lines[line - 1]
        assert f"{line}  {lines[line - 1]}" in markdown
    assert "<details><summary>Log lines behind the findings" in markdown


def test_log_content_cannot_break_out(tmp_path):
    """Hostile text in file names, log lines and messages stays text: no HTML, mention or link."""
    lines = torchtitan_lines({0: [20 + 2 * i for i in range(10)]}, capacity=79.11)
    oom = "[rank0]:[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free. "
    names = [tmp_path / "@octocat <b>x<b> #12 |a|.log", tmp_path / "second ``` run.log"]
    for name in names:
        name.write_text("\n".join(lines + [oom + HOSTILE]) + "\n")
    report = analyze([str(n) for n in names])
    attach_log_lines(report)
    assert any(HOSTILE.split("\x1b")[0] in text for text in report.log_lines.values())
    report.findings[0].message = HOSTILE
    report.findings[0].hints = [HOSTILE]
    for view in report.series:
        view.label = "@octocat <i>" + view.label
    markdown = render_markdown(report)
    assert_inert(markdown)
    assert "````" in markdown  # the fence outgrew the ``` inside the log line


def test_md_text_escapes():
    assert md_text("<b>") == "&lt;b&gt;"
    assert md_text("a|b") == "a\\|b"
    assert "@octocat" not in md_text("hi @octocat") and "octocat" in md_text("hi @octocat")
    assert "#12" not in md_text("see #12")
    for ref in ("GH-123", "gh-123", "Gh-9"):
        assert ref not in md_text(f"fixed in {ref}, see ({ref})") and ref.replace("-", ZWSP + "-") in md_text(ref)
    assert md_text("SIGH-1 high-5 ugh-2") == "SIGH-1 high-5 ugh-2"  # only a whole word GH-n links
    assert md_text("x" * 50, limit=10) == "x" * 9 + "…"
    assert "\n" not in md_text("two\nlines")


def test_code_block_fence_is_longer_than_any_backtick_run():
    block = code_block(["a ````` b"])
    assert block.startswith("``````text\n") and block.endswith("\n``````")


def test_huge_reports_stay_under_the_limit():
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    report.findings = [
        Finding(
            "memory-leak",
            "error",
            "x" * 5000 + " @octocat",
            {"observed": {f"k{i}": i for i in range(200)}},
            ["h" * 2000] * 5,
            lines=[("a.log", n) for n in range(1, 5)],
        )
        for _ in range(500)
    ]
    report.log_lines = {("a.log", n): "y" * 300 for n in range(1, 41)}
    report.coverage = {**report.coverage, "sources": [{"name": f"s{i}.log", "lines": 1} for i in range(5000)]}
    markdown = render_markdown(report)
    assert len(markdown) < LIMIT
    assert markdown.startswith("**memlog verdict: ") and "<details><summary>Environment</summary>" in markdown
    assert "and 4,990 more" in markdown
    assert_inert(markdown)


def test_ten_thousand_sources_stay_under_the_limit():
    """A directory of 10,000 per-rank logs or 10,000 file arguments: the command, the source
    list, the damaged and guessed lines are each bounded, however long each path is."""
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    deep = "/".join(["very-deep-folder"] * 240)  # a path near PATH_MAX (4 KiB)
    names = [f"{deep}/rank{i}.log" for i in range(10_000)]
    report.command = "memlog analyze " + " ".join(names) + " -o markdown"
    report.coverage = {
        **report.coverage,
        "sources": [{"name": n, "lines": 3, "damaged": "read error (Input/output error)", "first_damaged_line": 4} for n in names],
        "guessed": [{"source": n, "reader": "kv", "mapping": "m" * 3000} for n in names],
        "formats": {f"format-{i}-" + "f" * 50: 1 for i in range(2000)},
    }
    markdown = render_markdown(report)
    assert len(markdown) < LIMIT, len(markdown)
    assert "and 9,990 more" in markdown and "rank0.log" in markdown
    assert "<details><summary>Environment</summary>" in markdown
    assert_inert(markdown)


def test_cli_markdown_names_the_command(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("\n".join(torchtitan_lines({0: [30.0] * 12})) + "\n")
    result = runner.invoke(app, ["analyze", str(log), "-o", "markdown", "--fail-on", "warning"])
    assert result.exit_code == 0
    assert f"memlog analyze {log} -o markdown --fail-on warning" in result.stdout


def test_from_stdin_the_evidence_lines_are_quoted_as_from_a_file(tmp_path):
    """stdin cannot be read twice: the copy kept while reading it (memlog/read/spool.py) gives the report
    the same evidence lines, the step line and the OOM line, as the file would."""
    lines = torchtitan_lines({0: [20 + 2 * i for i in range(10)]}, capacity=79.11)
    oom = "[rank0]:[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.02 GiB is free."
    result = runner.invoke(app, ["analyze", "-", "-o", "markdown"], input="\n".join(lines + [oom]) + "\n")
    assert result.exit_code == 1
    assert f"{len(lines) + 1}  {oom}" in result.stdout
    assert f"{len(lines)}  {lines[-1]}" in result.stdout
    assert "memlog analyze - -o markdown" in result.stdout
