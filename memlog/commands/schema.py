"""`memlog schema`: the JSON Schema of the JSON report."""

from __future__ import annotations

import json
import sys

from memlog.reportschema import report_schema


def schema() -> None:
    """Print the JSON Schema of `memlog analyze -o json`."""
    sys.stdout.write(json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n")
