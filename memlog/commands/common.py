"""What every command shares: exit codes, the options several commands take, the guard that turns
any failure into one line on stderr and exit 2, and how output reaches the terminal."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from memlog.base.errors import MemlogError
from memlog.base.names import shown

EXIT_OK, EXIT_FINDING, EXIT_CANNOT_JUDGE = 0, 1, 2


def _finite(value: float | None) -> float | None:
    """typer's range check lets NaN through (every comparison with it is false)."""
    if value is not None and value != value:
        raise typer.BadParameter(f"{value} is not a number of GiB")
    return value


# One --capacity for analyze, scan and plot.
CapacityOption = Annotated[
    Optional[float], typer.Option("--capacity", help="Device memory capacity in GiB, where the log does not say.", min=0.001, max=1e6, callback=_finite)
]


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    never = "never"


Debug = Annotated[bool, typer.Option("--debug", help="Show a traceback on errors.")]
FormatOpt = Annotated[
    Optional[list[str]],
    typer.Option("--format", help="Parse only these formats (repeat it, or NAME,NAME; see `memlog formats list`)."),
]
FormatsDir = Annotated[Optional[list[Path]], typer.Option("--formats-dir", help="Extra folder of YAML format specs.")]
PluginsDir = Annotated[
    Optional[list[Path]],
    typer.Option("--plugins-dir", help="Folder of format specs whose Python block parsers may run: trusted code, only for folders you trust."),
]


ConfigOpt = Annotated[Optional[str], typer.Option("--config", help="YAML config: threshold overrides, capacity, more format folders.")]


def reads(command: Callable) -> Callable:
    """A command that reads logs: its `reading` parameter becomes the reading options, declared here
    once for every such command (--format, --formats-dir, --plugins-dir, --config), and handed to it
    as one ReadingOptions (memlog/engine/plan.py), so that every command reads alike."""
    import functools
    import inspect

    from memlog.engine.options import ReadingOptions

    own = inspect.signature(command, eval_str=True)
    group = [
        inspect.Parameter("format", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=FormatOpt),
        inspect.Parameter("formats_dir", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=FormatsDir),
        inspect.Parameter("plugins_dir", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=PluginsDir),
        inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOpt),
    ]
    params = [p for p in own.parameters.values() if p.name != "reading"]
    last = [p for p in params if p.name == "debug"]  # --debug stays last in the help
    params = (
        [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params if p.name != "debug"]
        + group
        + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in last]
    )

    @functools.wraps(command)
    def with_reading(**kwargs):
        reading = ReadingOptions(
            tuple(kwargs.pop("format") or ()), tuple(kwargs.pop("formats_dir") or ()), tuple(kwargs.pop("plugins_dir") or ()), kwargs.pop("config")
        )
        return command(reading=reading, **kwargs)

    del with_reading.__wrapped__  # typer reads the signature below, not the command's own
    with_reading.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]  # inspect reads it; typing knows no such attribute
    with_reading.__annotations__ = {p.name: p.annotation for p in params}
    return with_reading


def safe(text: str) -> str:
    from memlog.render.safety import safe  # file names and log text can hold escape sequences

    return safe(text)


def fail(message: str) -> None:
    typer.echo(f"memlog: error: {safe(message)}", err=True)
    raise typer.Exit(EXIT_CANNOT_JUDGE)


def fail_line(message: str) -> None:
    """The same line outside a command (usage errors, interrupts before one runs): exit 2."""
    sys.stderr.write(f"memlog: error: {safe(message)}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_CANNOT_JUDGE)


def guard(debug: bool, action):
    """Run `action`; any failure becomes one line on stderr and exit code 2."""
    try:
        return action()
    except (typer.Exit, BrokenPipeError):
        raise
    except MemlogError as exc:
        if debug:
            traceback.print_exc()
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted")
    except (SystemExit, GeneratorExit):
        raise
    # BaseException: a panic inside polars (pyo3's PanicException) is not an Exception.
    except BaseException as exc:
        if debug:
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        fail(f"internal error: {type(exc).__name__}: {first} (run with --debug for a traceback)")


def warn_damaged(report) -> None:
    """A partly unreadable input is analysed, and says so on stderr: one line per damaged source."""
    from memlog.report.report import source_damage

    for source in report.coverage["sources"]:
        damage = source_damage(source)
        if damage:
            typer.echo(f"memlog: warning: {safe(source['name'])}: {damage}; analysed what was readable", err=True)


def terminal() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def colour() -> bool:
    """NO_COLOR (non-empty) wins, then FORCE_COLOR (non-empty); otherwise colour on a real terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return terminal()


# Text output fits the terminal: COLUMNS, then the size of the terminal on stdout (or stderr, when
# stdout is piped into a pager), never below MIN_WIDTH; without a terminal (a CI log, a file),
# DEFAULT_WIDTH, the width a terminal has unless it was made wider. Very wide terminals get MAX_AUTO_WIDTH: a 300-column chart is no easier to read.
MIN_WIDTH, DEFAULT_WIDTH, MAX_AUTO_WIDTH = 60, 80, 160


def fitted_width(explicit: int | None) -> int:
    if explicit is not None:
        return explicit
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return min(400, max(MIN_WIDTH, int(columns)))
    for stream in (sys.stdout, sys.stderr):
        try:
            return min(MAX_AUTO_WIDTH, max(MIN_WIDTH, os.get_terminal_size(stream.fileno()).columns))
        except (OSError, ValueError, AttributeError):
            continue
    return DEFAULT_WIDTH


def ascii_only() -> bool:
    """stdout cannot take UTF-8 (e.g. LANG=C on an old system): box drawing and log text become ASCII."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("_", "-")
    return encoding not in ("utf-8", "utf8", "utf-16", "utf-32")


def emit(text: str) -> None:
    """Machine formats are UTF-8 whatever the locale (JSON, SARIF and XML readers expect it); text
    output follows the terminal, with its ASCII fallback, so it never meets an encoding error."""
    if ascii_only() and hasattr(sys.stdout, "buffer"):
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text)


def command_line(command: str, args: list[str], options: dict[str, object]) -> str:
    """The command as the user could type it again, for the report's environment block."""
    import shlex

    parts = ["memlog", command, *args]
    for flag, value in options.items():
        if value is None or value is False or value == ():
            continue
        values = value if isinstance(value, list) else [value]
        for v in values:
            parts += [flag] if v is True else [flag, str(v.value if isinstance(v, Enum) else v)]
    return shown(shlex.join(parts))


def progress(logs: list[str]):
    from memlog.render.progress import Progress

    return Progress(logs)


def append_step_summary(markdown: str) -> None:
    """In GitHub Actions, the markdown report goes to the job summary too (appended, as GitHub expects)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(markdown + "\n")
    except OSError as exc:
        typer.echo(f"memlog: warning: cannot write GITHUB_STEP_SUMMARY ({exc.strerror or exc})", err=True)
