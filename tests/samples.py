"""The sample logs: every file under sample_logs/ except README.md files, which document a folder's
fixtures (where each was modelled from, the verdict a maintainer would give)."""

from __future__ import annotations

from pathlib import Path

SAMPLE_ROOT = Path(__file__).resolve().parent.parent / "sample_logs"


def sample_logs() -> list[Path]:
    return sorted(p for p in SAMPLE_ROOT.rglob("*") if p.is_file() and p.name != "README.md")
