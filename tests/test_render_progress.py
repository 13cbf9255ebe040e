"""The progress line: only on a terminal, only for large inputs, cleared at the end."""

from __future__ import annotations

import gzip
import io

from memlog.api import parse_sources
from memlog.catalog import load_specs
from memlog.render import progress as progress_module
from memlog.render.progress import Progress

from tests.render_samples import TORCHTITAN_LEAK


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


def test_shown_on_a_terminal_past_the_threshold_and_cleared(monkeypatch):
    out = _run([str(TORCHTITAN_LEAK)], Terminal(), monkeypatch, threshold=1)
    assert "memlog: reading" in out and "100%" in out
    assert out.endswith("\r\x1b[K")


def test_silent_for_small_inputs_or_when_not_a_terminal(monkeypatch):
    assert _run([str(TORCHTITAN_LEAK)], Terminal(), monkeypatch, threshold=50 * 1024 * 1024) == ""
    assert _run([str(TORCHTITAN_LEAK)], io.StringIO(), monkeypatch, threshold=1) == ""


def test_gzip_shows_the_amount_read(monkeypatch, tmp_path):
    packed = tmp_path / "run.log.gz"
    packed.write_bytes(gzip.compress(TORCHTITAN_LEAK.read_bytes()))
    out = _run([str(packed)], Terminal(), monkeypatch, threshold=1)
    assert "memlog: reading run.log.gz: " in out and "%" not in out
