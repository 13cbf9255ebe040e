"""A progress line on stderr while reading large inputs (only on a terminal, only past ~50 MB).

The reader calls it once per chunk (tens of MB), so it adds nothing per line. Plain files show a
percentage of their size on disk; stdin and gzip (whose decompressed size is unknown) show the
amount read so far.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from memlog.reading import Source

THRESHOLD_BYTES = 50 * 1024 * 1024
BAR_WIDTH = 30
MIN_INTERVAL_S = 0.1


def _size(spec: str) -> int | None:
    if spec == "-":
        return None
    try:
        return os.path.getsize(spec)
    except OSError:
        return None


def _mb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


class Progress:
    def __init__(self, inputs: list[str], stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.sizes = {spec: _size(spec) for spec in inputs}
        self.total = sum(s for s in self.sizes.values() if s)
        self.done: dict[str, int] = {}
        self.gzipped: set[str] = set()
        self.shown = False
        self.last = 0.0

    def __call__(self, source: Source) -> None:
        if not self.enabled:
            return
        self.done[source.spec] = source.stats.bytes_read
        if source.stats.gzip:
            self.gzipped.add(source.spec)
        read = sum(self.done.values())
        if read < THRESHOLD_BYTES and self.total < THRESHOLD_BYTES:
            return
        now = time.monotonic()
        if now - self.last < MIN_INTERVAL_S:
            return
        self.last = now
        self.stream.write("\r" + self.line(source) + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def line(self, source: Source) -> str:
        size = self.sizes.get(source.spec)
        known = size and not source.stats.gzip
        name = os.path.basename(source.name)[:40]
        if not known:
            return f"memlog: reading {name}: {_mb(source.stats.bytes_read)}"
        # Percent of the plain files' size on disk (a gzip's decompressed size is not known ahead).
        plain = {spec: size for spec, size in self.sizes.items() if size and spec not in self.gzipped}
        total = sum(plain.values())
        fraction = min(1.0, sum(self.done.get(spec, 0) for spec in plain) / total) if total else 0.0
        filled = int(fraction * BAR_WIDTH)
        return f"memlog: reading {name} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%} of {_mb(total)}"

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
