"""`memlog watch`: follow growing logs and judge the run as steps arrive (memlog.watch.watch follows and
judges; memlog.render.live prints)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import Enum
from typing import Annotated

import typer

from memlog.commands.common import CapacityOption, Debug, FailOn, ascii_only, emit, guard, reads, safe, terminal
from memlog.engine.options import ReadingOptions


class WatchOutput(str, Enum):
    text = "text"
    jsonl = "jsonl"
    github = "github"


class ExitOn(str, Enum):
    leak = "leak"
    error = "error"
    never = "never"


@reads
def watch(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files, directories or globs to follow (need not exist yet); - for a pipe.")],
    reading: ReadingOptions,
    output: Annotated[WatchOutput, typer.Option("-o", "--output", help="text: a live status on a terminal, a line per change when piped; jsonl: a JSON object per change.")] = WatchOutput.text,
    exit_on: Annotated[ExitOn, typer.Option("--exit-on", help="Exit 1 as soon as a leak (or any error finding) is found.")] = ExitOn.never,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="On Ctrl-C, SIGTERM or the end of a pipe: exit 1 when a finding is at least this severe.")] = FailOn.error,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between judgements, at least.", min=0.1, max=3600)] = 1.0,
    capacity: CapacityOption = None,
    debug: Debug = False,
) -> None:
    """Follow growing logs (like tail -F) and judge the run as steps arrive; warn before the OOM."""

    def action():
        return run_watch(
            logs, reading, output=output.value, exit_on=exit_on.value, fail_on=fail_on.value, interval=interval,
            capacity_gib=capacity, write=emit, terminal=terminal(), ascii_only=ascii_only(),
            notice=lambda message: typer.echo(f"memlog: {safe(message)}", err=True),
        )

    raise typer.Exit(guard(debug, action))


def run_watch(
    inputs: list[str], reading: ReadingOptions = ReadingOptions(), *, output: str = "text", exit_on: str = "never",
    fail_on: str = "error", interval: float = 1.0, capacity_gib: float | None = None, write: Callable[[str], None] | None = None, terminal: bool = False, ascii_only: bool = False,
    notice: Callable[[str], None] = lambda message: None, stop_after: float | None = None,
) -> int:
    """`memlog watch`: follow, judge, print; the exit code (1: --exit-on fired, or at the end a
    finding at --fail-on (Ctrl-C, SIGTERM, a pipe's end); 0 otherwise; nothing read at all is an error, exit 2)."""
    import shutil

    from memlog.render.live import LiveOutput
    from memlog.watch.watch import Watcher, no_records_error, should_exit, stopped_by_signals, watch_loop

    def flushed(text: str) -> None:
        (write or sys.stdout.write)(text)  # looked up now: a closed stdout is None at import time
        sys.stdout.flush()

    # From here on, Ctrl-C and a scheduler's SIGTERM end watching once the read in progress is done:
    # the appended lines read, everything judged, the verdict printed whole, the exit by --fail-on
    # (memlog.watch.watch.StopRequest).
    with stopped_by_signals() as stop:
        watcher = Watcher(inputs, reading, capacity_gib=capacity_gib, notice=notice, interval=interval)
        out = LiveOutput(output, flushed, terminal=terminal, width=shutil.get_terminal_size().columns, ascii_only=ascii_only,
                         workspace=os.environ.get("GITHUB_WORKSPACE"))

        def on_report(report) -> bool:
            out.update(report)
            return should_exit(report, exit_on)

        report, why = watch_loop(watcher, on_report, stop=stop, stop_after=stop_after)
        if report is None:
            raise no_records_error(watcher)
        out.final(report, why)
    if why == "stopped":
        notice(f"watch: stopping (--exit-on {exit_on}): {report.headline.headline}")
        return 1
    return 1 if report.fails(fail_on) else 0
