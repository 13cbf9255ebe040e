"""`memlog series`: the parsed step records as CSV, JSON or Parquet (memlog.engine.api.parsed_records)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from memlog.base.errors import MemlogError
from memlog.commands.common import Debug, guard, reads
from memlog.engine.options import ReadingOptions


class SeriesOutput(str, Enum):
    csv = "csv"
    json = "json"
    parquet = "parquet"


@reads
def series(
    log: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files, folders of them; - for stdin.")],
    reading: ReadingOptions,
    output: Annotated[SeriesOutput, typer.Option("-o", "--output")] = SeriesOutput.csv,
    readings: Annotated[bool, typer.Option("--readings", help="One row per line read (a step's several readings apart) instead of one per step.")] = False,
    debug: Debug = False,
) -> None:
    """Print the parsed step records, one row per (source, worker, step) with its fields merged, header first."""
    from memlog.engine.api import parsed_records
    from memlog.render.safety import safe, safe_json

    def action():
        records = parsed_records(log, reading, readings=readings)
        if output is SeriesOutput.parquet:
            if sys.stdout.isatty():
                raise MemlogError("parquet is binary: redirect stdout to a file")
            records.write_parquet(sys.stdout.buffer)
        elif output is SeriesOutput.json:
            sys.stdout.write(safe_json(records.write_json()) + "\n")
        else:
            sys.stdout.write(safe(records.write_csv()))  # a file name can hold escape sequences

    guard(debug, action)
