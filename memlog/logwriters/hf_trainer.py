"""Hugging Face transformers' lines (parsers/hf_trainer.yaml): the Trainer's logs dicts, its own
logger, the example scripts' logger and the final metrics table."""

from __future__ import annotations

from datetime import datetime


def log_dict(logs: dict) -> str:
    """transformers 4.x: the logs dict printed as is (``{'loss': 1.2345, 'grad_norm': 0.87, ...}``)."""
    return repr(logs)


def log_dict_v5(logs: dict) -> str:
    """transformers 5.x: every float formatted ``.4g`` and so quoted by the dict's repr."""
    return repr({k: f"{v:.4g}" if isinstance(v, float) else v for k, v in logs.items()})


def logger_line(ts: str, level: str, where: str, msg: str) -> str:
    """transformers' handler in the example scripts: ``[INFO|trainer.py:2243] 2024-10-02 14:01:41,220 >> msg``."""
    return f"[{level}|{where}] {ts} >> {msg}"


def script_line(dt: datetime, level: str, name: str, msg: str) -> str:
    """The example scripts' logging.basicConfig: ``10/02/2024 14:01:12 - WARNING - __main__ - msg``."""
    return f"{dt:%m/%d/%Y %H:%M:%S} - {level} - {name} - {msg}"


def metrics_line(key: str, value: str) -> str:
    """Trainer.log_metrics: one ``  key  = value`` row under ``***** train metrics *****``."""
    return f"  {key:<24} = {value:>10}"
