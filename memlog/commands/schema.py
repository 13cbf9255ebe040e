"""`memlog schema`: the JSON Schema of a command's JSON output (analyze's report by default)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from typing import Annotated

import typer

from memlog.report.schemas import schema_of


class SchemaKind(str, Enum):
    report = "report"
    scan = "scan"
    compare = "compare"
    snapshot = "snapshot"
    guard = "guard"


def schema(
    kind: Annotated[
        SchemaKind,
        typer.Option("--kind", help="report: `analyze -o json`; scan, compare, snapshot: their `-o json`; guard: the guard's memlog-guard-rank<R>.json."),
    ] = SchemaKind.report,
) -> None:
    """Print the JSON Schema of `memlog analyze -o json` (--kind: of another command's, or the guard's file)."""
    sys.stdout.write(json.dumps(schema_of(kind.value), indent=2, ensure_ascii=False) + "\n")
