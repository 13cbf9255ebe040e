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


class Output(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"
    junit = "junit"
    html = "html"


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
    output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.text,
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
    from memlog.render.outputs import render

    def action():
        bar = progress(logs)
        try:
            report = run_analysis(logs, options=reading, capacity_gib=capacity, progress=bar)
        finally:
            bar.finish()
        report.command = command_line(
            "analyze", logs,
            {"-o": output if output is not Output.text else None, **reading.flags(),
             "--capacity": capacity, "--fail-on": fail_on if fail_on is not FailOn.error else None},
        )  # fmt: skip
        if output in (Output.markdown, Output.github, Output.html):
            from memlog.report.excerpt import attach_log_lines

            attach_log_lines(report)
        options: dict = {}
        if output is Output.text:
            options = {"colour": colour(), "chart": chart, "ascii_only": ascii_only(), "width": fitted_width(width)}
        elif output is Output.github:
            options = {"workspace": os.environ.get("GITHUB_WORKSPACE")}
        elif output is Output.junit:
            options = {"fail_on": fail_on.value}
        emit(render(report, output.value, **options))
        if output is Output.github and os.environ.get("GITHUB_STEP_SUMMARY"):
            from memlog.render.markdown import render_markdown

            append_step_summary(render_markdown(report))
        warn_damaged(report)
        return report

    report = guard(debug, action)
    raise typer.Exit(EXIT_FINDING if report.fails(fail_on.value) else EXIT_OK)
