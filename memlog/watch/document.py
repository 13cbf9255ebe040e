"""watch's JSON: each judgement as `analyze -o json`'s document plus `watch`, what watching adds
(the event, what changed since the last judgement, the early warning, why it ended). Built here,
where watching is; the jsonl output only serialises it (memlog/render/live.py)."""

from __future__ import annotations

import time
from typing import Any

from memlog.report.report import Report
from memlog.watch.watch import Change, early_warning


def watch_document(report: Report, event: str, change: Change | None, why: str | None) -> dict[str, Any]:
    """`event`: "change" or "final"; `change`: since the last judgement (None at the end); `why`:
    why watching ended (stopped, interrupted, ended)."""
    document = report.to_json()
    watch = {"event": event, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(report.extra.get("watch") or {})}
    if change is not None:
        watch["previous_verdict"] = change.previous_verdict
        watch["new"] = [{"rule": f.rule, "subject": f.subject, "severity": f.severity} for f in change.new]
        watch["gone"] = [{"rule": r, "subject": s, "severity": v} for r, s, v in change.gone]
    if why is not None:
        watch["ended"] = why
    watch["early_warning"] = early_warning(report)
    document["watch"] = watch
    return document
