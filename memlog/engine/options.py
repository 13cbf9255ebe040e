"""The reading options a command takes: light to import (the command line builds them before it
reads anything), turned into a reading plan by memlog/engine/plan.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memlog.base.config import Config, load_config


@dataclass(frozen=True)
class ReadingOptions:
    """The reading options as a command was given them (any command that reads takes all four)."""

    format: tuple[str, ...] = ()  # parse only these formats (names, or NAME,NAME)
    formats_dirs: tuple[Path, ...] = ()  # extra folders of format specs (and their `wrappers/`)
    plugins_dirs: tuple[Path, ...] = ()  # folders whose Python block parsers may run (trusted)
    config: str | None = None  # the YAML config: thresholds, capacity, more format folders

    def loaded_config(self) -> Config:
        return load_config(self.config)

    def flags(self) -> dict[str, object]:
        """The options as command-line flags (commands.common.command_line)."""
        return {
            "--format": list(self.format) or None,
            "--config": self.config,
            "--formats-dir": [str(d) for d in self.formats_dirs],
            "--plugins-dir": [str(d) for d in self.plugins_dirs],
        }
