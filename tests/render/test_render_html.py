"""The HTML report: one valid, self-contained, deterministic page, inert whatever the log holds.
(tests/render/test_browser.py opens it in Chromium and takes screenshots.)"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from html.parser import HTMLParser

import html5lib
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.render.outputs.html import render_html
from memlog.report.report import SeriesView
from tests.render_samples import ROOT, SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report
from tests.synthetic import torchtitan_lines

runner = CliRunner()
SCRIPT = "<script>alert(1)</script>"
HOSTILE = f"{SCRIPT} \"quoted\" 'single' <img src=https://evil.example/x.png onerror=alert(2)> </svg></pre> ]]> <!-- & &amp;"
FETCHING_ATTRIBUTES = {"src", "href", "srcset", "poster", "data", "action", "formaction", "xlink:href", "background", "ping"}


class Elements(HTMLParser):
    """Every start tag with its attributes, as the standard library's parser sees them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def elements(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    parser.close()
    return parser


def assert_valid_and_self_contained(page: str) -> None:
    """Parses as HTML5 without a single parse error (html5lib, strict), has no script, and names
    nothing to fetch: no src, every href a link inside the page, no url() in CSS but data:."""
    assert page.startswith('<!DOCTYPE html>\n<html lang="en">')
    html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(page)
    found = elements(page)
    tags = [tag for tag, _ in found.tags]
    assert "script" not in tags and "link" not in tags and "iframe" not in tags and "img" not in tags
    for tag, attrs in found.tags:
        for name, value in attrs.items():
            if name in FETCHING_ATTRIBUTES:
                assert name == "href" and (value or "").startswith("#"), (tag, name, value)
            assert not name.startswith("on"), (tag, name)
    for css in re.findall(r"<style[^>]*>(.*?)</style>", page, re.S):
        assert "@import" not in css
        assert all(url.strip("'\"").startswith("data:") for url in re.findall(r"url\(([^)]*)\)", css)), css[:200]
    assert re.search(r"""<meta http-equiv="Content-Security-Policy" content="default-src 'none';""", page)
    assert "\x1b" not in page


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=SAMPLE_IDS)
def test_every_sample_renders_a_valid_self_contained_page(log):
    report = sample_report(log)
    page = render_html(report)
    assert_valid_and_self_contained(page)
    assert f"<h1>memlog verdict: {report.headline.title}</h1>" in page
    assert page.count('<article class="finding') == len(report.findings)
    assert len(page) < 2_000_000


def test_the_page_draws_what_the_text_chart_draws():
    page = render_html(sample_report(TORCHTITAN_LEAK))
    for legend in ("rank0", "rank3", "tail fit", "capacity 79.11 GiB", "ranks 0-1: -1 placeholder (pipeline parallel, not a loss)"):
        assert f"</svg>{legend}</li>" in page, legend
    assert page.count("<figure") == 2  # device memory and loss
    assert 'id="chart-device"' in page and 'id="chart-loss"' in page
    warmup = render_html(sample_report(ROOT / "sample_logs" / "torchtitan" / "fr5_pp8_warmup_plateau.log"))
    assert "</svg>warmup knee at step 3</li>" in warmup
    assert "The 79.11 GiB capacity is far above the chart" in warmup


def test_findings_come_with_evidence_hints_and_log_lines():
    report = sample_report(TORCHTITAN_LEAK)
    page = render_html(report)
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert "<code>slope_gib_per_step</code>" in page
    assert all(hint.replace("'", "&#x27;") in page for hint in leak.hints)
    source, line = leak.lines[0]
    text = report.log_lines[(source, line)]
    assert f"{line}  {text}" in page.replace("&#x27;", "'")
    assert "All evidence (JSON)" in page
    assert "Coverage and environment" in page


def test_a_host_leak_puts_host_memory_first():
    page = render_html(sample_report(ROOT / "sample_logs" / "easyr1" / "fr3_geometry3k_host_stairs_raykill.log"))
    assert page.index('id="chart-host"') < page.index('id="chart-device"') < page.index('id="chart-loss"')


def test_hostile_log_text_is_escaped_everywhere():
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    report.series = [copy.copy(v) for v in report.series]
    for view in report.series:
        view.label = SCRIPT + view.label
    report.findings = [copy.copy(f) for f in report.findings]
    report.findings[0].message = HOSTILE
    report.findings[0].hints = [HOSTILE]
    report.findings[0].evidence = {**report.findings[0].evidence, "observed": {"worker": HOSTILE}}
    report.log_lines = dict.fromkeys(report.log_lines, HOSTILE)
    report.command = f"memlog analyze '{HOSTILE}' -o html"
    page = render_html(report)
    assert_valid_and_self_contained(page)
    assert SCRIPT not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;rank0" in page  # a worker label, escaped
    assert "&lt;img src=https://evil.example/x.png onerror=alert(2)&gt;" in page
    # What a reader sees is the text itself.
    assert SCRIPT + "rank0" in "".join(elements(page).text)


def test_a_hostile_file_name_from_the_cli(tmp_path):
    log = tmp_path / "<script>alert(1)<svg onload=alert(2)>\x1b]0;x\x07.log"  # no '/' in a file name
    log.write_text("\n".join(torchtitan_lines({0: [20 + 2 * i for i in range(10)]}, capacity=79.11)) + "\n")
    result = runner.invoke(app, ["analyze", str(log), "-o", "html"])
    assert result.exit_code == 1, result.stderr
    page = result.stdout
    assert_valid_and_self_contained(page)
    assert "<script>alert(1)" not in page and "<svg onload" not in page
    assert "&lt;script&gt;alert(1)&lt;svg onload=alert(2)&gt;" in page
    assert "step:" in page  # the CLI read the evidence lines back for the page


def test_the_page_is_deterministic():
    report = sample_report(TORCHTITAN_LEAK)
    assert render_html(report) == render_html(report)


def test_many_workers_are_chosen_and_counted():
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    report.series = [SeriesView("device", f"rank{r}", r, "mem_peak_reserved_gib", [1.0, 2.0, 3.0], [20.0 + r, 20.5 + r, 21.0 + r]) for r in range(40)]
    page = render_html(report)
    assert_valid_and_self_contained(page)
    # ranks 0-3 (named by the findings), then the lowest, median and highest of the other 36
    assert "7 of 40 ranks drawn" in page and "33 not drawn" in page
    assert "rank4 (lowest)" in page and "rank39 (highest)" in page
    assert "rank0 (memory-leak)" in page  # the findings name ranks 0-3


def test_a_single_point_and_an_empty_series_still_render():
    report = copy.copy(sample_report(TORCHTITAN_LEAK))
    report.series = [
        SeriesView("device", "rank0", 0, "mem_peak_reserved_gib", [5.0], [30.0]),
        SeriesView("loss", "rank0", 0, "loss", [1.0, 2.0], [float("nan"), float("inf")]),
    ]
    page = render_html(report)
    assert_valid_and_self_contained(page)
    assert 'id="chart-device"' in page and 'id="chart-loss"' not in page


def test_pygal_is_imported_only_for_html():
    code = (
        "import sys\n"
        "from memlog.engine.api import analyze\n"
        "from memlog.render.outputs import render\n"
        f"report = analyze([{str(TORCHTITAN_LEAK)!r}])\n"
        "for output in ('text', 'json', 'markdown', 'github', 'sarif', 'junit'):\n"
        "    render(report, output)\n"
        "assert 'pygal' not in sys.modules, 'pygal imported without -o html'\n"
        "render(report, 'html')\n"
        "assert 'pygal' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
