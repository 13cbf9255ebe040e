"""In a real browser: the Mermaid block of the issue markdown rendered by the real Mermaid library,
and the HTML report opened, screenshotted and validated.

Needs Debian's `chromium` and the node packages of tests/browser (`npm ci` there: the pinned
Mermaid, and the W3C Nu HTML checker, which also needs `java`). Without them these tests are
skipped, saying what is missing; `.ci/run` installs them and sets MEMLOG_REQUIRE_BROWSER=1, which
turns a missing piece into a failure. MEMLOG_SCREENSHOTS=DIR keeps the screenshots there.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.render.mermaid import PALETTE
from memlog.render.outputs.markdown import render_markdown
from tests.browser.chromium import Chromium, find_chromium
from tests.browser.png import png_stats
from tests.render.test_render_mermaid import HOSTILE, many_ranks, mermaid_blocks, parse_block
from tests.render_samples import ROOT, SAMPLE_IDS, SAMPLE_LOGS, TORCHTITAN_LEAK, sample_report

BROWSER_DIR = Path(__file__).parents[1] / "browser"
MERMAID_JS = BROWSER_DIR / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
VNU_JAR = BROWSER_DIR / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"
REQUIRED = bool(os.environ.get("MEMLOG_REQUIRE_BROWSER"))
SCREENSHOT_LOGS = [
    "torchtitan/fr1_pp2_ep2_leak_oom.log",
    "torchtitan/fr5_pp8_warmup_plateau.log",
    "easyr1/fr3_geometry3k_host_stairs_raykill.log",
]
WIDTH = 1200


def need(found, reason: str) -> None:
    if not found:
        if REQUIRED:
            pytest.fail(f"{reason} (MEMLOG_REQUIRE_BROWSER is set)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    need(executable, "no Chromium found (apt-get install chromium, or MEMLOG_CHROMIUM=/path/to/chrome)")
    with Chromium(executable, width=WIDTH, height=900) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def mermaid_page(tmp_path_factory):
    need(shutil.which("node") or MERMAID_JS.exists(), "node is not installed (Mermaid comes from the npm registry)")
    need(MERMAID_JS.exists(), f"Mermaid is not installed: run `npm ci` in {BROWSER_DIR.relative_to(ROOT)}")
    page = tmp_path_factory.mktemp("mermaid") / "mermaid.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>mermaid</title>'
        f'<script src="{MERMAID_JS.resolve().as_uri()}"></script></head>'
        '<body style="margin:0;background:#fff"><div id="chart"></div></body></html>',
        encoding="utf-8",
    )
    return page


def render_mermaid_in(browser: Chromium, page: Path, block: str) -> str:
    """The SVG Mermaid draws for `block`; a parse or render error raises."""
    browser.open(page.as_uri())
    return browser.evaluate(
        "(async () => {"
        "  mermaid.initialize({startOnLoad: false, securityLevel: 'strict'});"
        f"  const {{svg}} = await mermaid.render('memlog-chart', {json.dumps(block)});"
        "  document.getElementById('chart').innerHTML = svg;"
        "  return svg;"
        "})()"
    )


def assert_no_mermaid_error(svg: str) -> None:
    """An xychart, not Mermaid's error picture (its style sheet names .error-icon either way)."""
    assert 'aria-roledescription="xychart"' in svg, svg[:300]
    assert 'class="error-icon"' not in svg and 'class="error-text"' not in svg and "Syntax error in text" not in svg


def blocks_to_render():
    cases = []
    for log, log_id in zip(SAMPLE_LOGS, SAMPLE_IDS):
        blocks = mermaid_blocks(render_markdown(sample_report(log)))
        if blocks:
            cases.append(pytest.param(lambda blocks=blocks: blocks[0], id=log_id))

    def hostile():
        report = copy.copy(sample_report(TORCHTITAN_LEAK))
        report.series = [copy.copy(v) for v in report.series]
        for view in report.series:
            view.label = HOSTILE + view.label
        return mermaid_blocks(render_markdown(report))[0]

    cases.append(pytest.param(hostile, id="hostile-labels"))
    return cases


@pytest.mark.parametrize("make_block", blocks_to_render())
def test_mermaid_renders_the_block(browser, mermaid_page, make_block):
    block = make_block()
    parsed = parse_block(block)
    svg = render_mermaid_in(browser, mermaid_page, block)
    assert_no_mermaid_error(svg)
    # One drawn line per `line` of the block, in the colours the sentence under it names.
    assert len(re.findall(r'class="line-plot-\d+"', svg)) == len(parsed["lines"])
    strokes = set(re.findall(r'stroke="(#[0-9a-fA-F]{6})"', svg))
    workers = len(parsed["lines"]) - ("capacity" in dict(parsed["lines"]))
    assert {colour for _, colour in PALETTE[:workers]} <= {s.lower() for s in strokes}
    box = browser.evaluate("(() => { const r = document.querySelector('#chart svg').getBoundingClientRect(); return [r.width, r.height]; })()")
    assert box[0] > 200 and box[1] > 150
    assert browser.problems() == []


def test_mermaid_renders_the_64_rank_chart(browser, mermaid_page, tmp_path):
    markdown = render_markdown(many_ranks(tmp_path))
    block = mermaid_blocks(markdown)[0]
    svg = render_mermaid_in(browser, mermaid_page, block)
    assert_no_mermaid_error(svg)
    assert len(re.findall(r'class="line-plot-\d+"', svg)) == len(parse_block(block)["lines"])
    if os.environ.get("MEMLOG_SCREENSHOTS"):
        out = Path(os.environ["MEMLOG_SCREENSHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        browser.screenshot(out / "mermaid_64_ranks.png")


def html_page(log: str, directory: Path) -> Path:
    result = CliRunner().invoke(app, ["analyze", str(ROOT / "sample_logs" / log), "-o", "html"])
    assert result.exit_code in (0, 1), result.stderr
    page = directory / (Path(log).stem + ".html")
    page.write_text(result.stdout, encoding="utf-8")
    return page


@pytest.mark.parametrize("log", SCREENSHOT_LOGS)
def test_the_html_report_in_chromium(browser, log, tmp_path):
    page = html_page(log, tmp_path)
    browser.open(page.as_uri())
    out = Path(os.environ.get("MEMLOG_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    png = out / (page.stem + ".png")
    data = browser.screenshot(png)
    stats = png_stats(data)
    assert stats.width == WIDTH and stats.height > 1500, stats
    assert len(data) > 50_000, len(data)
    assert stats.colours > 100 and 0.03 < stats.non_white_share < 0.9, stats  # not blank, not a solid block
    # The charts were laid out: each figure's SVG has lines with a size.
    figures = browser.evaluate(
        "[...document.querySelectorAll('figure > svg')].map(s => "
        "[s.getBoundingClientRect().width, s.getBoundingClientRect().height, s.querySelectorAll('path.line.reactive').length])"
    )
    assert figures and all(w > 600 and h > 200 and lines > 0 for w, h, lines in figures), figures
    assert browser.evaluate("document.querySelector('header.verdict h1').textContent").startswith("memlog verdict: ")
    assert browser.problems() == []  # no request left the page, no console error


def test_the_html_report_is_valid_html5(tmp_path):
    """The W3C Nu HTML Checker (vnu.jar, from the npm registry) finds no error and no warning."""
    java = shutil.which("java")
    need(java, "java is not installed (the Nu HTML Checker runs on it)")
    need(VNU_JAR.exists(), f"the Nu HTML Checker is not installed: run `npm ci` in {BROWSER_DIR.relative_to(ROOT)}")
    pages = [html_page(log, tmp_path) for log in SCREENSHOT_LOGS]
    result = subprocess.run([java, "-jar", str(VNU_JAR), *map(str, pages)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), result.stderr[-3000:]
