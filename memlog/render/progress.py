"""A progress bar on stderr while reading large inputs (only on a terminal, only past ~50 MB):
rich.progress (installed with typer) draws it, with the amount read, the rate and, where the
size is known, the percentage and the time left.

The reader calls it once per chunk (tens of MB), so it adds nothing per line. Plain files show
their progress through the files' size on disk; when an input's size is not known ahead (stdin,
or a gzip, whose decompressed size is not), the bar shows the amount read so far and the rate.

rich.progress is imported when the bar is first drawn, never at start-up. Measured on this
project's 2-core machine (busy with other jobs at the time): `python -X importtime -c 'import
rich.progress'` 28-31 ms cumulative (131 ms on a cold first run), +34 ms of CPU over a bare
interpreter. Paid at every start, that is a tenth of the 0.3 s a whole run on a 1 MB log may take;
paid when drawing, only runs reading 50 MB or more on a terminal pay it, and reading 50 MB takes
0.25-0.8 s (benchmarks/README.md: 4.8-17 s per GiB). Drawing costs 50 ms the first time (the
import and the display's start) and 2.3 ms a redraw (the hand-rolled line it replaced: 0.005 ms),
at most every MIN_INTERVAL_S, in practice once per chunk. tests/render/test_render_progress.py checks
that a run drawing no bar never imports rich.progress.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, TextIO

from memlog.read.source import Source
from memlog.render.safety import safe

if TYPE_CHECKING:
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

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


class Progress:
    def __init__(self, inputs: list[str], stream: TextIO | None = None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.sizes = {spec: _size(spec) for spec in inputs}
        self.total = sum(s for s in self.sizes.values() if s)
        self.done: dict[str, int] = {}
        self.gzipped: set[str] = set()
        self.bar: Bar | None = None  # from the first time it is shown
        self.task: TaskID | None = None
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
        self.show(source, read)

    def known_total(self) -> int | None:
        """The bytes there are to read, when every input's size is known ahead (plain files)."""
        if self.gzipped or any(size is None for size in self.sizes.values()):
            return None
        return self.total

    def show(self, source: Source, read: int) -> None:
        description = f"memlog: reading {safe(os.path.basename(source.name))[:40]}"
        total = self.known_total()
        if self.bar is None:
            self.bar = self._start()
        elif self.task is not None and total is None and self.bar.tasks[0].total is not None:  # a gzip among the inputs: no percentage after all
            self.bar.remove_task(self.task)
            self.task = None
        if self.task is None:
            self.task = self.bar.add_task(description, total=total, completed=min(read, total or read))
        self.bar.update(self.task, description=description, completed=min(read, total or read))
        self.bar.refresh()

    def _start(self) -> Bar:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, TaskProgressColumn, TextColumn, TimeRemainingColumn, TransferSpeedColumn
        from rich.progress import Progress as Bar

        bar = Bar(
            TextColumn("{task.description}", markup=False),  # a file name is not rich markup
            BarColumn(bar_width=BAR_WIDTH),
            TaskProgressColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(file=self.stream),
            auto_refresh=False,  # redrawn from __call__, at most every MIN_INTERVAL_S: no thread of its own
            transient=True,  # cleared when done: the report follows on a clean screen
            redirect_stdout=False,
            redirect_stderr=False,
        )
        bar.start()
        return bar

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
            self.task = None
