"""`memlog watch`: follow growing logs and judge the run as steps arrive (memlog.watch.watch follows and
judges; memlog.render.live prints)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any

import typer

from memlog.commands.common import CapacityOption, Debug, FailOn, ascii_only, emit, fitted_width, guard, reads, safe, terminal
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
    output: Annotated[
        WatchOutput, typer.Option("-o", "--output", help="text: a live status on a terminal, a line per change when piped; jsonl: a JSON object per change.")
    ] = WatchOutput.text,
    exit_on: Annotated[ExitOn, typer.Option("--exit-on", help="Exit 1 as soon as a leak (or any error finding) is found.")] = ExitOn.never,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="On Ctrl-C, SIGTERM or the end of a pipe: exit 1 when a finding is at least this severe.")
    ] = FailOn.error,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between judgements, at least.", min=0.1, max=3600)] = 1.0,
    capacity: CapacityOption = None,
    metrics_port: Annotated[
        str | None,
        typer.Option(
            "--metrics-port",
            metavar="[ADDR:]PORT",
            help="Serve Prometheus metrics of the judgement (memory, growth, projected OOM, verdict) here; needs memlog\\[prometheus].",
        ),
    ] = None,
    notify: Annotated[
        str | None,
        typer.Option(
            "--notify",
            metavar="URL",
            help="POST a JSON message (Slack-compatible) when the verdict turns to one an error finding implies (a leak, an out-of-memory error, a dead run), or the projected OOM comes within --notify-horizon.",
        ),
    ] = None,
    notify_horizon: Annotated[float, typer.Option("--notify-horizon", metavar="SECONDS", help="How near a projected OOM is told (--notify).", min=0)] = 3600.0,
    run: Annotated[str | None, typer.Option("--run", help="The run's name in metrics and messages (default: the first log's name).")] = None,
    debug: Debug = False,
) -> None:
    """Follow growing logs (like tail -F) and judge the run as steps arrive; warn before the OOM."""

    def action():
        return run_watch(
            logs,
            reading,
            output=output.value,
            exit_on=exit_on.value,
            fail_on=fail_on.value,
            interval=interval,
            capacity_gib=capacity,
            write=emit,
            terminal=terminal(),
            ascii_only=ascii_only(),
            notice=lambda message: typer.echo(f"memlog: {safe(message)}", err=True),
            alerts=Alerts(metrics_port, notify, notify_horizon, run or run_name(logs)),
        )

    raise typer.Exit(guard(debug, action))


class Alerts:
    """Where watch's judgements go besides its output: a Prometheus endpoint and a webhook."""

    def __init__(self, metrics_port: str | None = None, notify: str | None = None, horizon: float = 3600.0, run: str = "run") -> None:
        self.metrics_port, self.notify, self.horizon, self.run = metrics_port, notify, horizon, run
        self.latest: list = []  # (run, report, seconds to OOM per series): what a scrape serves
        self.notifier: Any = None  # a memlog.watch.notify.Notifier, imported only when asked for
        self.server: Any = None  # prometheus_client's server, likewise

    def start(self, notice: Callable[[str], None]) -> None:
        from memlog.base.errors import InputError

        if self.metrics_port:
            try:
                from prometheus_client import start_http_server
            except ImportError:
                raise InputError("--metrics-port needs the extra: pip install 'memlog[prometheus]'") from None
            from memlog.render.prometheus import registry_of

            address, _, port = self.metrics_port.rpartition(":")
            if not port.isdigit():
                raise InputError(f"--metrics-port {self.metrics_port!r}: expected PORT or ADDR:PORT")
            try:
                self.server, _ = start_http_server(int(port), address or "0.0.0.0", registry=registry_of(lambda: self.latest))
            except OSError as exc:
                raise InputError(f"--metrics-port {self.metrics_port}: cannot listen ({exc.strerror or exc})") from None
        if self.notify:
            from memlog.watch.notify import Notifier

            try:
                self.notifier = Notifier(self.notify, self.run, horizon_seconds=self.horizon, notice=notice)
            except ValueError as exc:
                raise InputError(str(exc)) from None

    def judged(self, report) -> None:
        from memlog.watch.watch import early_warning

        seconds = {w["series"]: w["capacity_in_seconds"] for w in early_warning(report) if w["series"] is not None}
        self.latest = [(self.run, report, seconds)]
        if self.notifier is not None:
            self.notifier.consider(report, seconds)

    def stop(self) -> None:
        if self.notifier is not None:
            self.notifier.close(wait=5.0)  # what is queued gets a moment to go, never more
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def run_name(logs: list[str]) -> str:
    """A run's default name: its first log's file name (or its folder's, for a directory)."""
    first = logs[0] if logs else "run"
    return "stdin" if first == "-" else os.path.basename(os.path.normpath(first)) or first


def run_watch(
    inputs: list[str],
    reading: ReadingOptions = ReadingOptions(),
    *,
    output: str = "text",
    exit_on: str = "never",
    fail_on: str = "error",
    interval: float = 1.0,
    capacity_gib: float | None = None,
    write: Callable[[str], None] | None = None,
    terminal: bool = False,
    ascii_only: bool = False,
    notice: Callable[[str], None] = lambda message: None,
    stop_after: float | None = None,
    alerts: Alerts | None = None,
) -> int:
    """`memlog watch`: follow, judge, print; the exit code (1: --exit-on fired, or at the end a
    finding at --fail-on (Ctrl-C, SIGTERM, a pipe's end); 0 otherwise; nothing read at all is an error, exit 2)."""
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
        out = LiveOutput(output, flushed, terminal=terminal, width=fitted_width(None), ascii_only=ascii_only, workspace=os.environ.get("GITHUB_WORKSPACE"))

        alerts = alerts or Alerts()
        alerts.start(notice)

        def on_report(report) -> bool:
            out.update(report)
            alerts.judged(report)
            return should_exit(report, exit_on)

        try:
            report, why = watch_loop(watcher, on_report, stop=stop, stop_after=stop_after)
            if report is None:
                raise no_records_error(watcher)
            alerts.judged(report)  # the closing judgement too
            out.final(report, why)
        finally:
            alerts.stop()
    if why == "stopped":
        notice(f"watch: stopping (--exit-on {exit_on}): {report.headline.headline}")
        return 1
    return 1 if report.fails(fail_on) else 0
