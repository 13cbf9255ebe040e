"""JSON output: the Report's contract, always valid JSON (no NaN/inf)."""

from __future__ import annotations

import json
import math
from typing import Any

from memlog.report import Report


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render_json(report: Report) -> str:
    return json.dumps(_finite(report.to_json()), indent=2, allow_nan=False, ensure_ascii=False) + "\n"
