"""NeMo lines (parsers/nemo.yaml; NeMo's logger header is parsers/wrappers/nemo.yaml), with the format
strings of NeMo's source (more-formats.md §4: ``nemo/lightning/pytorch/callbacks/progress_printer.py``,
``nemo/utils/formatters/base.py``)."""

from __future__ import annotations

from datetime import datetime


def format_metric(metric: str, val: float) -> str:
    """ProgressPrinter.format_string: a whole float as an int, anything else ``{val:.4}``."""
    if isinstance(val, float) and val.is_integer():
        return f" | {metric}: {int(val)}"
    return f" | {metric}: {val:.4}"


def progress_line(*, epoch: int, iteration: int, total: int, metrics: dict[str, float]) -> str:
    """ProgressPrinter.on_train_batch_end (HEAD): ``Training epoch E, iteration {n-1}/{total-1}`` then
    every logged metric (floats: Lightning casts logged tensors to float32 first, see ``f32``)."""
    return f"Training epoch {epoch}, iteration {iteration}/{total}" + "".join(format_metric(k, v) for k, v in metrics.items())


def validation_progress(n: int, total: int, sanity: bool = False) -> str:
    """ProgressPrinter.on_validation_batch_end."""
    return ("Sanity checking " if sanity else "") + f"Validation: iteration {n}/{total}"


def f32(value: float) -> float:
    """A value as Lightning logs it: through a float32 tensor."""
    import struct

    return struct.unpack("f", struct.pack("f", value))[0]


def log_header(dt: datetime, level: str, where: str) -> str:
    """NeMo's logging formatter: ``[NeMo I 2025-01-01 12:00:00 file:12] ``."""
    return f"[NeMo {level} {dt:%Y-%m-%d %H:%M:%S} {where}] "
