"""`memlog schema`: the JSON Schema of the JSON report."""

from __future__ import annotations

import sys
from pathlib import Path

SCHEMA = Path(__file__).parent.parent / "schema" / "report.schema.json"


def schema() -> None:
    """Print the JSON Schema of `memlog analyze -o json`."""
    sys.stdout.write(SCHEMA.read_text(encoding="utf-8"))
