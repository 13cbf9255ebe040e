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


def schema(
    kind: Annotated[SchemaKind, typer.Option("--kind", help="report: `analyze -o json`; scan: `scan -o json`; compare: `compare -o json`.")] = SchemaKind.report,
) -> None:
    """Print the JSON Schema of `memlog analyze -o json` (--kind: of scan's or compare's)."""
    sys.stdout.write(json.dumps(schema_of(kind.value), indent=2, ensure_ascii=False) + "\n")
