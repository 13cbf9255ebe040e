"""The Report: everything memlog concluded about a run. JSON is its contract; the text, markdown
and GitHub renderers only format it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memlog import __version__
from memlog.rulekit import Finding

SCHEMA_VERSION = 1
VERDICTS = ("leak", "warmup-plateau", "stable", "pp-sentinel-loss", "inconclusive")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


def headline_verdict(findings: list[Finding]) -> str:
    """leak > pp-sentinel-loss > warmup-plateau > stable > inconclusive (DESIGN.md)."""
    fired = {f.rule for f in findings}
    for rule, verdict in (
        ("memory-leak", "leak"),
        ("pp-sentinel-loss", "pp-sentinel-loss"),
        ("warmup-plateau", "warmup-plateau"),
        ("stable-memory", "stable"),
    ):
        if rule in fired:
            return verdict
    return "inconclusive"


@dataclass
class Report:
    verdict: str
    findings: list[Finding]
    skipped: list[dict[str, str]]
    coverage: dict[str, Any]
    thresholds: dict[str, dict[str, float | int]]
    command: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def worst_severity(self) -> str | None:
        return max((f.severity for f in self.findings), key=SEVERITY_RANK.__getitem__, default=None)

    def fails(self, fail_on: str) -> bool:
        if fail_on == "never":
            return False
        return any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on] for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "memlog_version": __version__,
            "verdict": self.verdict,
            "findings": [
                {
                    "rule": f.rule,
                    "severity": f.severity,
                    "subject": f.subject,
                    "message": f.message,
                    "evidence": f.evidence,
                    "hints": f.hints,
                    "lines": [{"source": s, "line": n} for s, n in f.lines],
                }
                for f in self.findings
            ],
            "skipped": self.skipped,
            "coverage": self.coverage,
            "thresholds": self.thresholds,
        }
