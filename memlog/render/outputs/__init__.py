"""The outputs of `memlog analyze -o NAME`, one module per output in this folder, named after it.

A module here is an output: it holds `render(report, options) -> str` (options: RenderOptions,
of which it takes what it uses) and may set `QUOTES_LOG_LINES = True` when it shows the evidence
lines read back from the logs (memlog/engine/excerpt.py). The command line's choices, the
output-safety tests and the docs list the modules found here, so a new output is one file. Each is
imported only when asked for (plotext and pygal cost tens of milliseconds).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (the command line lists the outputs before anything is read)
    from memlog.report.report import Report


@dataclass(frozen=True)
class RenderOptions:
    """What a command knows of where its output goes; each output takes what it uses."""

    colour: bool = False  # the terminal shows ANSI colours (text)
    chart: bool = True  # draw the charts (text)
    ascii_only: bool = False  # the stdout encoding is not UTF-8 (text)
    width: int | None = None  # the terminal's columns (text; None: 100)
    workspace: str | None = None  # GITHUB_WORKSPACE: annotation paths relative to it (github)
    fail_on: str = "error"  # the severity that fails the run (junit: which findings are failures)


def _found() -> tuple[str, ...]:
    """The outputs, text (the default) first, then by name."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    return tuple(sorted(names, key=lambda name: name != "text"))


OUTPUTS = _found()


def output(name: str) -> ModuleType:
    if name not in OUTPUTS:
        raise ValueError(f"unknown output format {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


def quotes_log_lines(name: str) -> bool:
    """Whether the output shows the evidence lines, which are then read back from the logs."""
    return bool(getattr(output(name), "QUOTES_LOG_LINES", False))


def render(report: Report, name: str, options: RenderOptions = RenderOptions()) -> str:
    return str(output(name).render(report, options))
