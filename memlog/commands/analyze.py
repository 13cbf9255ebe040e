"""`memlog analyze`: judge a run and print the report in one of the output formats."""

from __future__ import annotations

import os
from enum import Enum
from typing import Annotated, Optional

import typer

from memlog.commands.common import (
    EXIT_FINDING,
    EXIT_OK,
    CapacityOption,
    Debug,
    FailOn,
    append_step_summary,
    ascii_only,
    colour,
    command_line,
    emit,
    fitted_width,
    guard,
    progress,
    reads,
    warn_damaged,
)  # fmt: skip
from memlog.engine.options import ReadingOptions
from memlog.render.outputs import OUTPUTS

# The choices are the outputs found in memlog/render/outputs/ (a new output is one file there).
Output = Enum("Output", {name: name for name in OUTPUTS}, type=str)  # type: ignore[misc]  # (built from the folder)


@reads
def analyze(
    logs: Annotated[
        list[str],
        typer.Argument(
            metavar="LOG...",
            help="Log files (plain, gzip, bzip2, xz), directories of them (one run: its per-rank or per-node files), globs, URLs (s3://, gs://), TensorBoard event files; - for stdin.",
        ),
    ],
    reading: ReadingOptions,
    output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = "text",  # type: ignore[assignment]  # (typer takes the value)
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is at least this severe.")] = FailOn.error,
    capacity: CapacityOption = None,
    chart: Annotated[bool, typer.Option("--chart/--no-chart", help="Text output: draw memory and loss per rank against step.")] = True,
    width: Annotated[Optional[int], typer.Option("--width", help="Text output: width in columns (default: the terminal's).", min=60, max=400)] = None,
    debug: Debug = False,
) -> None:
    """Judge a run: leak, warmup plateau, stable, or pipeline-parallel sentinel loss.

    Exit 0: judged, no finding at --fail-on; 1: judged, a finding at --fail-on (a leak, an OOM, a
    crash); 2: could not judge (one line on stderr).
    """
    from memlog.engine.api import analyze as run_analysis
    from memlog.render.outputs import RenderOptions, quotes_log_lines, render

    name = Output(output).value

    def action():
        bar = progress(logs)
        flags = {
            "-o": name if name != "text" else None,
            **reading.flags(),
            "--capacity": capacity,
            "--fail-on": fail_on if fail_on is not FailOn.error else None,
        }
        try:
            report = run_analysis(
                logs,
                options=reading,
                capacity_gib=capacity,
                progress=bar,
                command=command_line("analyze", logs, flags),
                log_lines=quotes_log_lines(name),
                # Off unless asked: on this 2-core machine it did not win (benchmarks/README.md, issue 33 item 4).
                processes=os.environ.get("MEMLOG_PROCESSES") == "1",
            )
        finally:
            bar.finish()
        options = RenderOptions(
            colour=colour(),
            chart=chart,
            ascii_only=ascii_only(),
            width=fitted_width(width),
            workspace=os.environ.get("GITHUB_WORKSPACE"),
            fail_on=fail_on.value,
        )
        emit(render(report, name, options))
        if name == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
            append_step_summary(render(report, "markdown"))
        warn_damaged(report)
        return report

    report = guard(debug, action)
    raise typer.Exit(EXIT_FINDING if report.fails(fail_on.value) else EXIT_OK)
