"""`memlog scan`: judge every run under some paths, one row per run (locally or as Ray tasks)."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
import typer.core

from memlog.base.errors import MemlogError
from memlog.commands.common import (
    EXIT_FINDING,
    EXIT_OK,
    CapacityOption,
    Debug,
    FailOn,
    append_step_summary,
    ascii_only,
    emit,
    fitted_width,
    guard,
    reads,
)  # fmt: skip
from memlog.engine.options import ReadingOptions


class ScanOutput(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    csv = "csv"
    github = "github"


class ScanCommand(typer.core.TyperCommand):
    """`--ray` with an optional ADDRESS (memlog.scan.on_ray.ray_option_args)."""

    def parse_args(self, ctx, args):
        from memlog.scan.on_ray import ray_option_args

        return super().parse_args(ctx, ray_option_args(args))


@reads
def scan(
    paths: Annotated[list[str], typer.Argument(metavar="PATH...", help="Folders of runs, run folders, log files, or URLs (s3://, gs:// with fsspec).")],
    reading: ReadingOptions,
    output: Annotated[ScanOutput, typer.Option("-o", "--output", help="Output format.")] = ScanOutput.text,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when a run has a finding at least this severe.")] = FailOn.error,
    jobs: Annotated[Optional[int], typer.Option("--jobs", help="Runs judged at once (worker processes; default: one per core).", min=1, max=1024)] = None,
    run_glob: Annotated[
        Optional[str], typer.Option("--run-glob", help="Every file or folder under PATH matching this glob is a run (instead of the layout rule; ** recurses).")
    ] = None,
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            metavar="[ADDRESS]",
            help="Judge the runs as Ray tasks (pip install 'memlog\\[ray]'); ADDRESS: auto, ray://head:10001, head:6379; none: ray.init()'s default.",
        ),
    ] = None,
    capacity: CapacityOption = None,
    prometheus_textfile: Annotated[
        Optional[Path],
        typer.Option(
            "--prometheus-textfile",
            metavar="FILE",
            help="Also write the runs' metrics (verdict, growth, projected OOM) for node_exporter's textfile collector; needs memlog\\[prometheus].",
        ),
    ] = None,
    debug: Debug = False,
) -> None:
    """Judge every run under the paths, one row per run, worst first (memlog/scan/runs.py: what a run is)."""
    from memlog.render.fleet import ScanProgress, render_fleet
    from memlog.scan.fleet import ScanOptions, fails
    from memlog.scan.fleet import scan as run_scan
    from memlog.scan.runs import find_runs

    def action():
        if ray is not None and jobs is not None:
            raise MemlogError("--jobs is for the local scan; with --ray the cluster's CPUs decide")
        runs = find_runs(paths, run_glob)
        if not runs:
            raise MemlogError(f"no runs under {', '.join(paths)}" + (f" match --run-glob {run_glob!r}" if run_glob else " (no log files)"))
        options = ScanOptions(reading, reading.loaded_config(), capacity)
        progress = ScanProgress()
        try:
            fleet = run_scan(runs, options, jobs=jobs, ray_address=ray, on_row=progress, fail_on=fail_on.value)
        finally:
            progress.finish()
        rendering: dict[str, bool | str | int | None] = {"ascii_only": ascii_only(), "width": fitted_width(None)} if output is ScanOutput.text else {}
        if output is ScanOutput.github:
            rendering = {"workspace": os.environ.get("GITHUB_WORKSPACE")}
        emit(render_fleet(fleet, output.value, **rendering))
        if prometheus_textfile is not None:
            write_textfile(prometheus_textfile, fleet.rows)
        if output is ScanOutput.github and os.environ.get("GITHUB_STEP_SUMMARY"):
            append_step_summary(render_fleet(fleet, "markdown"))
        if not fleet.readable:
            raise MemlogError(f"none of the {len(fleet.rows)} run(s) could be read (first: {fleet.rows[0]['run']}: {fleet.rows[0]['error']})")
        return fleet

    fleet = guard(debug, action)
    raise typer.Exit(EXIT_FINDING if any(fails(row, fail_on.value) for row in fleet.rows) else EXIT_OK)


def write_textfile(path: Path, rows: list[dict]) -> None:
    """The rows' metrics in the text exposition format, written whole then renamed into place (the
    textfile collector must never read half a file)."""
    try:
        from memlog.render.prometheus import fleet_exposition

        text = fleet_exposition([(str(row["run"]), row) for row in rows])
    except ImportError:
        raise MemlogError("--prometheus-textfile needs the extra: pip install 'memlog[prometheus]'") from None
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    except OSError as exc:
        raise MemlogError(f"--prometheus-textfile {path}: cannot write ({exc.strerror or exc})") from None
