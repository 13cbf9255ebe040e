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


def axolotl_memory(*, active: float, allocated: float, reserved: float, keys: str = "v0.13") -> dict[str, float]:
    """axolotl's memory keys, added to the logs dict by AxolotlTrainer.log before Trainer.log prints it
    (more-formats.md §5.1), ``round(x, 2)`` GiB: ``"v0.12"`` (``memory/max_mem_active(gib)``, peaks
    since the process started) or ``"v0.13"`` (``memory/max_active (GiB)``, peaks since the last log)."""
    names = {
        "v0.12": ("memory/max_mem_active(gib)", "memory/max_mem_allocated(gib)", "memory/device_mem_reserved(gib)"),
        "v0.13": ("memory/max_active (GiB)", "memory/max_allocated (GiB)", "memory/device_reserved (GiB)"),
    }[keys]
    return dict(zip(names, (round(active, 2), round(allocated, 2), round(reserved, 2))))


def axolotl_log(dt: datetime, level: str, name: str, func: str, line: int, pid: int, msg: str) -> str:
    """axolotl's logger: ``[%(asctime)s] [%(levelname)s] [%(name)s.%(funcName)s:%(lineno)d] [PID:%(process)d] ``."""
    return f"[{dt:%Y-%m-%d %H:%M:%S},{dt.microsecond // 1000:03d}] [{level}] [{name}.{func}:{line}] [PID:{pid}] {msg}"
