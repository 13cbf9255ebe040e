"""`memlog compare`: the memory regression between two runs."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from memlog.commands.common import EXIT_FINDING, EXIT_OK, CapacityOption, Debug, emit, fitted_width, guard, reads
from memlog.engine.options import ReadingOptions


class CompareOutput(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"


@reads
def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help="The reference run: a log file, a directory of logs, or a quoted glob.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The run to judge against it, the same way.")],
    reading: ReadingOptions,
    output: Annotated[CompareOutput, typer.Option("-o", "--output", help="Output format (markdown: to paste into a PR).")] = CompareOutput.text,
    fail_on_increase: Annotated[
        Optional[float],
        typer.Option(
            "--fail-on-increase", metavar="PCT", help="Exit 1 when a rank's plateau level or peak rises by more than PCT% (default 3).", min=0, max=1000
        ),
    ] = None,
    capacity: CapacityOption = None,
    debug: Debug = False,
) -> None:
    """Memory regression between two runs: per rank level, peak, growth, steps to capacity; exit 1 on a regression."""
    from memlog.compare.regression import compare as run_compare
    from memlog.render.compare import render_comparison

    def action():
        comparison = run_compare([base], [new], options=reading, fail_on_increase=fail_on_increase, capacity_gib=capacity)
        emit(render_comparison(comparison, output.value, fitted_width(None)))
        return comparison

    comparison = guard(debug, action)
    raise typer.Exit(EXIT_FINDING if comparison.fails() else EXIT_OK)
