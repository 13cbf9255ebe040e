"""The Report as a JSON document: its contract (Report.to_json), with every non-finite number made
JSON. `analyze -o json` prints it (memlog/render/outputs/json.py); the guard writes it beside the run
(memlog/guard), so it lives below both.

NaN and infinity are not JSON: such a value becomes null, and `non_finite` lists where and what it
was, so a null that means "not computable" can be told from one that means "not available".
"""

from __future__ import annotations

import math
from typing import Any

from memlog.report.report import Report


def finite(value: Any, path: str = "$", replaced: list[dict[str, str]] | None = None) -> Any:
    """`value` with every NaN/inf replaced by None; each replacement is noted in `replaced`."""
    if isinstance(value, float) and not math.isfinite(value):
        if replaced is not None:
            replaced.append({"path": path, "value": repr(value)})
        return None
    if isinstance(value, dict):
        return {str(k): finite(v, f"{path}.{k}", replaced) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, f"{path}[{i}]", replaced) for i, v in enumerate(value)]
    return value


def report_document(report: Report) -> dict[str, Any]:
    """The report's JSON document: finite numbers only, `non_finite` saying where others were."""
    replaced: list[dict[str, str]] = []
    document = finite(report.to_json(), replaced=replaced)
    if replaced:
        document["non_finite"] = replaced
    return document
