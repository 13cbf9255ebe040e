"""`memlog compare`: the memory regression between two runs."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from memlog.commands.common import EXIT_FINDING, EXIT_OK, CapacityOption, Debug, FormatOpt, FormatsDir, PluginsDir, emit, guard


class CompareOutput(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"


def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help="The reference run: a log file, a directory of logs, or a quoted glob.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The run to judge against it, the same way.")],
    output: Annotated[CompareOutput, typer.Option("-o", "--output", help="Output format (markdown: to paste into a PR).")] = CompareOutput.text,
    fail_on_increase: Annotated[Optional[float], typer.Option("--fail-on-increase", metavar="PCT", help="Exit 1 when a rank's plateau level or peak rises by more than PCT% (default 3).", min=0, max=1000)] = None,
    format: FormatOpt = None,
    config: Annotated[Optional[str], typer.Option("--config", help="YAML config: threshold overrides (compare: {...}), capacity.")] = None,
    capacity: CapacityOption = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    debug: Debug = False,
) -> None:
    """Memory regression between two runs: per rank level, peak, growth, steps to capacity; exit 1 on a regression."""
    from memlog.compare.regression import compare as run_compare
    from memlog.base.config import load_config
    from memlog.render.compare import render_comparison

    def action():
        comparison = run_compare(
            [base], [new], config=load_config(config), fail_on_increase=fail_on_increase, format=format, capacity_gib=capacity,
            formats_dirs=formats_dir or (), plugins_dirs=plugins_dir or (),
        )
        emit(render_comparison(comparison, output.value))
        return comparison

    comparison = guard(debug, action)
    raise typer.Exit(EXIT_FINDING if comparison.fails() else EXIT_OK)
