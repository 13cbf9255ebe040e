"""`memlog series`: the parsed step records as CSV, JSON or Parquet (memlog.engine.api.parsed_records)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from memlog.commands.common import Debug, FormatOpt, FormatsDir, PluginsDir, guard
from memlog.base.errors import MemlogError


class SeriesOutput(str, Enum):
    csv = "csv"
    json = "json"
    parquet = "parquet"


def series(
    log: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files; - for stdin.")],
    output: Annotated[SeriesOutput, typer.Option("-o", "--output")] = SeriesOutput.csv,
    format: FormatOpt = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    debug: Debug = False,
) -> None:
    """Print the parsed step records, one row per (source, worker, step), header first."""
    from memlog.engine.api import parsed_records, select_specs
    from memlog.parse.catalog import load_specs
    from memlog.render.safety import safe, safe_json

    def action():
        specs = select_specs(load_specs(formats_dir or (), plugins_dir or ()), format)
        records = parsed_records(log, specs, generic=not format)
        if output is SeriesOutput.parquet:
            if sys.stdout.isatty():
                raise MemlogError("parquet is binary: redirect stdout to a file")
            records.write_parquet(sys.stdout.buffer)
        elif output is SeriesOutput.json:
            sys.stdout.write(safe_json(records.write_json()) + "\n")
        else:
            sys.stdout.write(safe(records.write_csv()))  # a file name can hold escape sequences

    guard(debug, action)
