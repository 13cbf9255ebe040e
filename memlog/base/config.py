"""The optional YAML config file: threshold overrides per rule, capacity, extra format folders.

    rules:
      memory-leak: {min_growth_gib: 0.2}
    capacity_gib: 80
    formats_dirs: [./my_formats]
    compare: {fail_on_increase_pct: 5}     # memlog compare's thresholds (memlog/compare/regression.py)

Read with yaml.safe_load only: a config can never construct Python objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memlog.base.errors import ConfigError
from memlog.base.yamlfile import YamlFileError, read_yaml

KEYS = {"rules", "capacity_gib", "formats_dirs", "compare"}
MIN_CAPACITY_GIB, MAX_CAPACITY_GIB = 0.001, 1e6  # as --capacity (memlog/cli.py)


def finite_number(value: Any) -> bool:
    """A threshold or capacity a user wrote: an int or float (not a bool) that is finite. A YAML
    integer of 400 digits is an int no float holds: math.isfinite itself overflows on it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


@dataclass
class Config:
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    capacity_gib: float | None = None
    formats_dirs: list[Path] = field(default_factory=list)
    compare: dict[str, Any] = field(default_factory=dict)


def load_config(path: str | None) -> Config:
    if path is None:
        return Config()
    try:
        raw = read_yaml(path)
    except YamlFileError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config ({exc})") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path}: invalid YAML ({first})") from None
    if raw is None:
        return Config()
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a mapping")
    unknown = set(raw) - KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(map(str, unknown))} (known: {sorted(KEYS)})")
    rules = raw.get("rules") or {}
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise ConfigError(f"{path}: `rules` maps rule ids to mappings of threshold: value")
    capacity = raw.get("capacity_gib")
    # The bounds of --capacity: a YAML integer of 400 digits is no float, and overflows later.
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not MIN_CAPACITY_GIB <= capacity <= MAX_CAPACITY_GIB):
        raise ConfigError(f"{path}: capacity_gib must be a positive number of GiB up to {MAX_CAPACITY_GIB:g}, got {capacity!r:.40}")
    capacity = float(capacity) if capacity is not None else None
    dirs = raw.get("formats_dirs") or []
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError(f"{path}: formats_dirs must be a list of paths")
    compare = raw.get("compare") or {}
    if not isinstance(compare, dict):
        raise ConfigError(f"{path}: `compare` maps threshold names to values")
    base = Path(path).parent
    return Config(rules=rules, capacity_gib=capacity, formats_dirs=[base / d for d in dirs], compare=compare)
