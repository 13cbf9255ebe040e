"""OpenRLHF / Open-Reasoner-Zero lines (parsers/openrlhf.yaml): loguru's head on the driver's lines."""

from __future__ import annotations

from datetime import datetime


def loguru_line(dt: datetime, where: str, msg: str, level: str = "INFO") -> str:
    """loguru's default format: ``2025-02-27 08:14:05.871 | INFO     | orz.ppo.trainer:train:190 - msg``;
    ORZ's status is ``repr(dict)``."""
    stamp = dt.strftime("%Y-%m-%d %H:%M:%S") + f".{dt.microsecond // 1000:03d}"
    return f"{stamp} | {level:<8} | {where} - {msg}"
