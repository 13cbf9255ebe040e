"""EasyR1's lines (parsers/easyr1.yaml): the console logger's ``Step N`` + YAML block, the file
logger's experiment_log.jsonl line, and the per-phase device-memory print."""

from __future__ import annotations

import json

import yaml

from .pytorch import H100_GIB


def float_repr(x: float) -> str:
    """EasyR1's yaml float representer (verl/utils/py_functional.py): 3 decimals, or ``1.0e-06``."""
    text = str(x)
    if "e" in text:
        return text.replace("e", ".0e", 1) if "." not in text else text
    return str(round(x, 3))


class _Dumper(yaml.Dumper):
    pass


_Dumper.add_representer(float, lambda d, x: d.represent_scalar("tag:yaml.org,2002:float", float_repr(x)))


def yaml_lines(data: dict) -> list[str]:
    """convert_dict_to_str: ``yaml.dump(data, indent=2)`` (keys sorted) with EasyR1's float representer."""
    return yaml.dump(data, Dumper=_Dumper, indent=2).rstrip("\n").split("\n")


def unflatten(metrics: dict[str, object]) -> dict:
    """``{"actor/pg_loss": x}`` -> ``{"actor": {"pg_loss": x}}``, as the loggers nest the metrics."""
    tree: dict = {}
    for key, value in metrics.items():
        node = tree
        *parents, leaf = key.split("/")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return tree


def step_block(step: int, metrics: dict[str, object]) -> list[str]:
    """ConsoleLogger.log: ``Step N`` then the flat metrics, nested, as YAML (one print per line under Ray)."""
    return [f"Step {step}", *yaml_lines(unflatten(metrics))]


def config_block(config: dict) -> list[str]:
    """The config the Tracker prints when fit() starts."""
    return ["Config", *yaml_lines(config)]


def jsonl_line(step: int, metrics: dict[str, object]) -> str:
    """FileLogger: one experiment_log.jsonl line, floats un-rounded."""
    return json.dumps({"step": step, **unflatten(metrics)})


def gpu_memory(phase: str, used_gib: float, total_gib: float = H100_GIB) -> str:
    """print_gpu_memory_usage (verl/utils/model_utils.py), rank 0: the whole device's used memory."""
    return f"{phase}: {used_gib:.2f} GB / {total_gib:.2f} GB."
