"""The JSON Schema of the JSON report: the file shipped in memlog/schema/, with the verdicts the
rules declare filled in, so that a rule with a new verdict is one file (the schema follows it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlog.rulekit import declared_verdicts, load_rules

REPORT_SCHEMA = Path(__file__).parent / "schema" / "report.schema.json"


def report_schema() -> dict[str, Any]:
    schema = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    schema["properties"]["verdict"]["enum"] = [v.name for v in declared_verdicts(load_rules())]
    return schema
