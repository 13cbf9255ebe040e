"""The progress bar (rich.progress): only on a terminal, only for large inputs, cleared at the end,
and rich.progress imported only when a bar is drawn."""

from __future__ import annotations

import gzip
import io
import re
import subprocess
import sys

from memlog.engine.api import parse_sources
from memlog.parse.catalog import load_specs
from memlog.render import progress as progress_module
from memlog.render.progress import Progress
from tests.render_samples import ROOT, TORCHTITAN_LEAK


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run(inputs, stream, monkeypatch, threshold):
    monkeypatch.setattr(progress_module, "THRESHOLD_BYTES", threshold)
    monkeypatch.setattr(progress_module, "MIN_INTERVAL_S", 0.0)
    bar = Progress(inputs, stream=stream)
    parse_sources(inputs, list(load_specs().values()), bar)
    bar.finish()
    return stream.getvalue()


def _cleared(out: str) -> bool:
    """After the cursor is shown again, only cursor-up, erase-line and carriage returns: the bar's
    lines are erased and the report starts on a clean line."""
    tail = out.rpartition("\x1b[?25h")[2]
    return "\x1b[2K" in tail and re.fullmatch(r"(?:\r|\n|\x1b\[1A|\x1b\[2K)*", tail) is not None


def test_shown_on_a_terminal_past_the_threshold_and_cleared(monkeypatch):
    out = _run([str(TORCHTITAN_LEAK)], Terminal(), monkeypatch, threshold=1)
    assert f"memlog: reading {TORCHTITAN_LEAK.name}" in out and "100%" in out
    assert "0:00:00" in out  # the time left, once all is read
    assert _cleared(out)


def test_silent_for_small_inputs_or_when_not_a_terminal(monkeypatch):
    assert _run([str(TORCHTITAN_LEAK)], Terminal(), monkeypatch, threshold=50 * 1024 * 1024) == ""
    assert _run([str(TORCHTITAN_LEAK)], io.StringIO(), monkeypatch, threshold=1) == ""


def test_gzip_shows_the_amount_read(monkeypatch, tmp_path):
    packed = tmp_path / "run.log.gz"
    packed.write_bytes(gzip.compress(TORCHTITAN_LEAK.read_bytes()))
    out = _run([str(packed)], Terminal(), monkeypatch, threshold=1)
    assert "memlog: reading run.log.gz" in out and "/? kB" in out and "%" not in out  # read so far, of an unknown total
    assert _cleared(out)


def test_a_file_name_is_shown_as_it_is_never_as_markup_or_escapes(monkeypatch, tmp_path):
    odd = tmp_path / "[bold]r\x1bun.log"
    odd.write_bytes(TORCHTITAN_LEAK.read_bytes())
    out = _run([str(odd)], Terminal(), monkeypatch, threshold=1)
    assert "memlog: reading [bold]r?un.log" in out and "\x1bun" not in out


def test_rich_progress_is_imported_only_to_draw_a_bar():
    """Start-up stays light: a run that draws no bar (under the threshold, or not on a terminal)
    never imports rich.progress (~30 ms)."""
    code = (
        "import sys\n"
        "from memlog.engine.api import analyze\n"
        "from memlog.render.progress import Progress\n"
        f"bar = Progress([{str(TORCHTITAN_LEAK)!r}], enabled=True)\n"
        f"analyze([{str(TORCHTITAN_LEAK)!r}], progress=bar)\n"
        "bar.finish()\n"
        "assert 'rich.progress' not in sys.modules, 'rich.progress imported without a bar to draw'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
