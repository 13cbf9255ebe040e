"""The `memlog` command: the typer app, assembled from the commands in memlog/commands/ (one module
each, a thin layer over memlog.engine.api and memlog.render). Data on stdout, diagnostics on stderr.

Exit codes: 0 judged, nothing at or above --fail-on; 1 a finding at or above it; 2 could not
judge (usage error, unreadable input, no records, internal error). A crash is never a verdict.
"""

from __future__ import annotations

import gc
import io
import os
import sys
from typing import Annotated

import typer

from memlog.base.errors import MemlogError
from memlog.commands import analyze, compare, plot, scan, schema, series, watch
from memlog.commands.common import EXIT_CANNOT_JUDGE, EXIT_FINDING, EXIT_OK, fail_line
from memlog.commands.formats import formats_app
from memlog.commands.rules import rules_app
from memlog.commands.snapshot import snapshot_app

__all__ = ["EXIT_CANNOT_JUDGE", "EXIT_FINDING", "EXIT_OK", "app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Read large-model training logs and say whether memory is leaking, warming up, or fine.",
)
app.add_typer(formats_app, name="formats")
app.add_typer(rules_app, name="rules")
app.add_typer(snapshot_app, name="snapshot")
app.command()(analyze.analyze)
app.command(cls=scan.ScanCommand)(scan.scan)
app.command()(watch.watch)
app.command()(compare.compare)
app.command()(series.series)
app.command()(plot.plot)
app.command()(schema.schema)


def _version(value: bool) -> None:
    if value:
        from memlog import __version__

        typer.echo(f"memlog {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print memlog's version and exit.")] = False,
) -> None:
    """Read large-model training logs and say whether memory is leaking, warming up, or fine."""


def _usage_error(exc) -> None:
    """A usage error (bad option value, missing argument, unknown option) in the one line the other
    errors use, not click's boxed help: the README promises `memlog: error: ...` and exit 2."""
    message = " ".join(exc.format_message().split())
    if getattr(exc, "ctx", None) is not None:
        message += f" (see `{exc.ctx.command_path} --help`)"
    fail_line(message)


def _closed(stream) -> bool:
    """A standard stream the shell closed: None, or a file object whose descriptor is closed or
    not writable (Python may have reused a closed descriptor 2 for a file it opened to read)."""
    if stream is None:
        return True
    try:
        import fcntl
    except ImportError:  # not POSIX: trust the stream
        return False
    try:
        flags = fcntl.fcntl(stream.fileno(), fcntl.F_GETFL)
    except (AttributeError, io.UnsupportedOperation):
        return False  # not backed by a descriptor (a test runner's buffer): usable
    except (OSError, ValueError):
        return True
    return flags & os.O_ACCMODE == os.O_RDONLY


class OutputError(MemlogError, OSError):
    """Standard output cannot be written (a full disk, a quota, an I/O error)."""

    def __str__(self) -> str:
        return str(self.strerror)


class _CheckedStdout(io.RawIOBase):
    """File descriptor 1, whose write errors are one line (a MemlogError, which every command's
    guard prints as `memlog: error: ...`, exit 2) instead of an internal error. A broken pipe stays
    BrokenPipeError (`| head`: not an error). After the first failure the rest is dropped, so that
    flushing at exit does not fail again with Python's own message."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd, self.failed = fd, False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        if self.failed:
            return len(data)
        try:
            return os.write(self._fd, data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.failed = True
            raise OutputError(exc.errno, f"cannot write to standard output ({exc.strerror or exc})") from None


def _checked_stdout() -> None:
    """sys.stdout over _CheckedStdout, with the encoding, error handler and buffering it had."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return  # not a real descriptor (a test runner's buffer): nothing to check
    stream.flush()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_CheckedStdout(fd)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(stream.line_buffering),
        write_through=getattr(stream, "write_through", False),
    )


def _flushed() -> None:
    try:
        sys.stdout.flush()
    except OutputError as exc:
        fail_line(str(exc))


def main() -> None:
    # A closed stream (`>&-`, `2>&-`) is None in Python: messages to a closed stderr go nowhere
    # (the exit code still says what happened); a report with no stdout is one line and exit 2.
    if _closed(sys.stderr):
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    if _closed(sys.stdout):
        fail_line("standard output is closed: there is nowhere to write to (redirect it to a file instead)")
    _checked_stdout()
    try:
        # Not standalone: click would print its own (boxed, several lines) usage errors and exit.
        code = app(standalone_mode=False, prog_name="memlog")
        _flushed()  # a full disk shows when the buffered output is written: before the exit code is final
        raise SystemExit(code if isinstance(code, int) else EXIT_OK)
    except typer.Abort:
        fail_line("interrupted")
    except typer.TyperException as exc:  # click's exceptions (typer vendors click)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `memlog` or `memlog rules` alone: the help
            # typer printed it on stdout already (building the exception renders it); the error
            # line says what is missing, as every usage error does.
            context = getattr(exc, "ctx", None)  # (click's UsageError carries it; typer's type does not say so)
            commands = ", ".join(getattr(getattr(context, "command", None), "commands", {}) or ())
            where = getattr(context, "command_path", "memlog")
            fail_line(f"missing command{': one of ' + commands if commands else ''} (see `{where} --help`)")
        if not hasattr(exc, "format_message"):
            raise
        _usage_error(exc)
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error of ours.
        sys.stderr.close()
        raise SystemExit(EXIT_OK) from None
    finally:
        # The process ends next. Spare the interpreter's last garbage collections the walk over
        # every object polars, typer and pydantic created: 0.05-0.1 s of a run on a small log.
        gc.freeze()


if __name__ == "__main__":
    main()
