"""`memlog plot`: chart a metric per worker against step (memlog.render.chart)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memlog.commands.common import CapacityOption, Debug, ascii_only, colour, emit, fitted_width, guard, progress, reads
from memlog.engine.options import ReadingOptions


@reads
def plot(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files (plain or gzip), folders of them; - for stdin.")],
    reading: ReadingOptions,
    metric: Annotated[
        Optional[str],
        typer.Option("--metric", help="memory, device, host, loss, or a column name (see `memlog series`). Default: memory and loss."),
    ] = None,
    rank: Annotated[Optional[int], typer.Option("--rank", help="Only this rank (on every node).")] = None,
    node: Annotated[
        Optional[str], typer.Option("--node", help="Only this node's workers: its label (node1, task1), its number, or the host name or IP the log gives it.")
    ] = None,
    actor: Annotated[Optional[str], typer.Option("--actor", help="Only this Ray actor (its name, e.g. WorkerDict).")] = None,
    worker: Annotated[
        Optional[str],
        typer.Option("--worker", help="Only this worker: its label as reports print it, or a glob ('node01/*', '*rank3*')."),
    ] = None,
    capacity: CapacityOption = None,
    width: Annotated[Optional[int], typer.Option("--width", help="Width in columns (default: the terminal's).", min=60, max=400)] = None,
    debug: Debug = False,
) -> None:
    """Chart a metric per rank against step, with the knee, tail fit and capacity line the rules used."""
    from memlog.engine.api import analyze as run_analysis
    from memlog.render.chart import plot_filter, plot_panels, render_chart

    def action():
        subjects, column = plot_panels(metric)
        bar = progress(logs)
        try:
            report = run_analysis(logs, options=reading, capacity_gib=capacity, progress=bar, chart_metric=column)
        finally:
            bar.finish()
        only = plot_filter(report, subjects, metric, logs, rank=rank, node=node, actor=actor, worker=worker)
        drawn = render_chart(report, width=fitted_width(width), colour=colour(), ascii_only=ascii_only(), subjects=subjects, only=only)
        emit(drawn + "\n")

    guard(debug, action)
