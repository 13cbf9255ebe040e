"""The JSON Schemas of memlog's JSON outputs, shipped in memlog/report/schema/. The report's has the
verdicts the rules declare filled in, so that a rule with a new verdict is one file (the schema
follows it); the others (scan's, compare's, snapshot's, the guard's report file) are printed as shipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlog.judge.rulekit import declared_verdicts, load_rules

SCHEMA_DIR = Path(__file__).parent / "schema"
REPORT_SCHEMA = SCHEMA_DIR / "report.schema.json"
KINDS = ("report", "scan", "compare", "snapshot", "guard")  # analyze, scan, compare, snapshot -o json; the guard's file


def report_schema() -> dict[str, Any]:
    schema = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    schema["properties"]["verdict"]["enum"] = [v.name for v in declared_verdicts(load_rules())]
    return schema


def schema_of(kind: str = "report") -> dict[str, Any]:
    """The schema of one command's `-o json` (KINDS)."""
    if kind == "report":
        return report_schema()
    if kind not in KINDS:
        raise ValueError(f"unknown schema kind {kind!r} (known: {', '.join(KINDS)})")
    return json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text(encoding="utf-8"))
