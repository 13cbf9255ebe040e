"""verl's lines (parsers/verl.yaml): the console logger's ``step:N - key:value - ...`` line and
log_gpu_memory_usage's memory line."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .pytorch import H100_GIB


def logger_prefix(ts: str, level: str = "DEBUG") -> str:
    """verl/utils/logging_utils.py ``%(levelname)s:%(asctime)s:%(message)s``: ``DEBUG:2025-06-03 07:42:11,508:``."""
    return f"{level}:{ts}:"


def pformat_value(value: object, numpy_scalar: bool = False) -> str:
    """verl v0.5+: ``pprint.pformat(v)``; numpy 2 reprs its float scalars as ``np.float64(...)``."""
    text = repr(value)
    return f"np.float64({text})" if numpy_scalar and isinstance(value, float) else text


def step_line(step: int, metrics: Mapping[str, object], *, np_float64: Collection[str] = ()) -> str:
    """concat_dict_to_str (v0.5+): ``step:N`` then ``key:pformat(value)`` joined by `` - ``, in the
    metrics' order; the floats of the keys in ``np_float64`` are numpy scalars."""
    return " - ".join([f"step:{step}", *(f"{k}:{pformat_value(v, k in np_float64)}" for k, v in metrics.items())])


def gpu_memory_usage(head: str, *, allocated: float, reserved: float, used: float, total: float = H100_GIB) -> str:
    """log_gpu_memory_usage (v0.4+): GiB as ``.2f`` strings; used/total is the whole device."""
    return f"{head}, memory allocated (GB): {allocated:.2f}, memory reserved (GB): {reserved:.2f}, device memory used/total (GB): {used:.2f}/{total:.2f}"
