"""The `memlog` command: a thin typer app over memlog.api. Data on stdout, diagnostics on stderr.

Exit codes: 0 judged, nothing at or above --fail-on; 1 a finding at or above it; 2 could not
judge (usage error, unreadable input, no records, internal error). A crash is never a verdict.
"""

from __future__ import annotations

import gc
import io
import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
import typer.core

from memlog.errors import MemlogError
from memlog.names import shown

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Read large-model training logs and say whether memory is leaking, warming up, or fine.",
)
formats_app = typer.Typer(no_args_is_help=True, help="The log formats memlog reads.")
rules_app = typer.Typer(no_args_is_help=True, help="The rules that judge a run.")
app.add_typer(formats_app, name="formats")
app.add_typer(rules_app, name="rules")

EXIT_OK, EXIT_FINDING, EXIT_CANNOT_JUDGE = 0, 1, 2


def _finite(value: float | None) -> float | None:
    """typer's range check lets NaN through (every comparison with it is false)."""
    if value is not None and value != value:
        raise typer.BadParameter(f"{value} is not a number of GiB")
    return value


# One --capacity for analyze, scan and plot.
CapacityOption = Annotated[Optional[float], typer.Option(
    "--capacity", help="Device memory capacity in GiB, where the log does not say.", min=0.001, max=1e6,
    callback=_finite)]  # the bounds of a config's capacity_gib (memlog.config; not imported here: it loads PyYAML)


class Output(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"
    junit = "junit"
    html = "html"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    never = "never"


class SeriesOutput(str, Enum):
    csv = "csv"
    json = "json"
    parquet = "parquet"


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


def _fail(message: str) -> None:
    from memlog.render import safe  # file names and log text can hold escape sequences

    typer.echo(f"memlog: error: {safe(message)}", err=True)
    raise typer.Exit(EXIT_CANNOT_JUDGE)


def _guard(debug: bool, action):
    """Run `action`; any failure becomes one line on stderr and exit code 2."""
    try:
        return action()
    except (typer.Exit, BrokenPipeError):
        raise
    except MemlogError as exc:
        if debug:
            traceback.print_exc()
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted")
    except (SystemExit, GeneratorExit):
        raise
    # BaseException: a panic inside polars (pyo3's PanicException) is not an Exception.
    except BaseException as exc:  # noqa: BLE001 - a crash must still be one clear line and exit 2
        if debug:
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        _fail(f"internal error: {type(exc).__name__}: {first} (run with --debug for a traceback)")


def _warn_damaged(report) -> None:
    """A partly unreadable input is analysed, and says so on stderr: one line per damaged source."""
    from memlog.render import safe
    from memlog.report import source_damage

    for source in report.coverage["sources"]:
        damage = source_damage(source)
        if damage:
            typer.echo(f"memlog: warning: {safe(source['name'])}: {damage}; analysed what was readable", err=True)


def _colour() -> bool:
    """NO_COLOR (non-empty) wins, then FORCE_COLOR (non-empty); otherwise colour on a real terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


# Text output fits the terminal: COLUMNS, then the size of the terminal on stdout (or stderr, when
# stdout is piped into a pager), never below MIN_WIDTH; without a terminal (a CI log, a file),
# DEFAULT_WIDTH. Very wide terminals get MAX_AUTO_WIDTH: a 300-column chart is no easier to read.
MIN_WIDTH, DEFAULT_WIDTH, MAX_AUTO_WIDTH = 60, 100, 160


def _width(explicit: int | None) -> int:
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


def _ascii_only() -> bool:
    """stdout cannot take UTF-8 (e.g. LANG=C on an old system): box drawing and log text become ASCII."""
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("_", "-")
    return encoding not in ("utf-8", "utf8", "utf-16", "utf-32")


def _emit(text: str) -> None:
    """Machine formats are UTF-8 whatever the locale (JSON, SARIF and XML readers expect it); text
    output follows the terminal, with its ASCII fallback, so it never meets an encoding error."""
    if _ascii_only() and hasattr(sys.stdout, "buffer"):
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text)


def _command_line(command: str, args: list[str], options: dict[str, object]) -> str:
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


def _progress(logs: list[str]):
    from memlog.render.progress import Progress

    return Progress(logs)


def _write_step_summary(report) -> None:
    """In GitHub Actions, the markdown report goes to the job summary too (appended, as GitHub expects)."""
    from memlog.render.markdown import render_markdown

    if os.environ.get("GITHUB_STEP_SUMMARY"):
        _append_step_summary(render_markdown(report))


def _append_step_summary(markdown: str) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as summary:
            summary.write(markdown + "\n")
    except OSError as exc:
        typer.echo(f"memlog: warning: cannot write GITHUB_STEP_SUMMARY ({exc.strerror or exc})", err=True)


@app.command()
def analyze(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files (plain or gzip); - for stdin.")],
    output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.text,
    format: FormatOpt = None,
    config: Annotated[Optional[str], typer.Option("--config", help="YAML config: threshold overrides, capacity.")] = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is at least this severe.")] = FailOn.error,
    capacity: CapacityOption = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    chart: Annotated[bool, typer.Option("--chart/--no-chart", help="Text output: draw memory and loss per rank against step.")] = True,
    width: Annotated[Optional[int], typer.Option("--width", help="Text output: width in columns (default: the terminal's).", min=60, max=400)] = None,
    debug: Debug = False,
) -> None:
    """Judge a run: leak, warmup plateau, stable, or pipeline-parallel sentinel loss."""
    from memlog.api import analyze as run_analysis
    from memlog.config import load_config
    from memlog.render import render

    def action():
        progress = _progress(logs)
        try:
            report = run_analysis(
                logs, format=format, config=load_config(config), capacity_gib=capacity, formats_dirs=formats_dir or (),
                plugins_dirs=plugins_dir or (), progress=progress,
            )
        finally:
            progress.finish()
        report.command = _command_line(
            "analyze", logs,
            {"-o": output if output is not Output.text else None, "--format": format, "--config": config,
             "--capacity": capacity, "--fail-on": fail_on if fail_on is not FailOn.error else None,
             "--formats-dir": [str(d) for d in formats_dir or []], "--plugins-dir": [str(d) for d in plugins_dir or []]},
        )  # fmt: skip
        if output in (Output.markdown, Output.github, Output.html):
            from memlog.excerpt import attach_log_lines

            attach_log_lines(report)
        options: dict = {}
        if output is Output.text:
            options = {"colour": _colour(), "chart": chart, "ascii_only": _ascii_only(), "width": _width(width)}
        elif output is Output.github:
            options = {"workspace": os.environ.get("GITHUB_WORKSPACE")}
        elif output is Output.junit:
            options = {"fail_on": fail_on.value}
        _emit(render(report, output.value, **options))
        if output is Output.github:
            _write_step_summary(report)
        _warn_damaged(report)
        return report

    report = _guard(debug, action)
    raise typer.Exit(EXIT_FINDING if report.fails(fail_on.value) else EXIT_OK)


class ScanOutput(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    csv = "csv"
    github = "github"


class _ScanCommand(typer.core.TyperCommand):
    """`--ray` with an optional ADDRESS (memlog.scan_ray.ray_option_args)."""

    def parse_args(self, ctx, args):
        from memlog.scan_ray import ray_option_args

        return super().parse_args(ctx, ray_option_args(args))


@app.command(cls=_ScanCommand)
def scan(
    paths: Annotated[list[str], typer.Argument(metavar="PATH...", help="Folders of runs, run folders, log files, or URLs (s3://, gs:// with fsspec).")],
    output: Annotated[ScanOutput, typer.Option("-o", "--output", help="Output format.")] = ScanOutput.text,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="Exit 1 when a run has a finding at least this severe.")] = FailOn.error,
    jobs: Annotated[Optional[int], typer.Option("--jobs", help="Runs judged at once (worker processes; default: one per core).", min=1, max=1024)] = None,
    run_glob: Annotated[Optional[str], typer.Option("--run-glob", help="Every file or folder under PATH matching this glob is a run (instead of the layout rule; ** recurses).")] = None,
    ray: Annotated[Optional[str], typer.Option("--ray", metavar="[ADDRESS]", help="Judge the runs as Ray tasks (pip install 'memlog[ray]'); ADDRESS: auto, ray://head:10001, head:6379; none: ray.init()'s default.")] = None,
    format: FormatOpt = None,
    config: Annotated[Optional[str], typer.Option("--config", help="YAML config: threshold overrides, capacity.")] = None,
    capacity: CapacityOption = None,
    debug: Debug = False,
) -> None:
    """Judge every run under the paths, one row per run, worst first (memlog/runs.py: what a run is)."""
    from memlog.config import load_config
    from memlog.render.fleet import ScanProgress, render_fleet
    from memlog.runs import find_runs
    from memlog.scan import ScanOptions, fails
    from memlog.scan import scan as run_scan

    def action():
        if ray is not None and jobs is not None:
            raise MemlogError("--jobs is for the local scan; with --ray the cluster's CPUs decide")
        runs = find_runs(paths, run_glob)
        if not runs:
            raise MemlogError(f"no runs under {', '.join(paths)}" + (f" match --run-glob {run_glob!r}" if run_glob else " (no log files)"))
        options = ScanOptions(tuple(format or ()), load_config(config), capacity)
        progress = ScanProgress()
        try:
            fleet = run_scan(runs, options, jobs=jobs, ray_address=ray, on_row=progress, fail_on=fail_on.value)
        finally:
            progress.finish()
        rendering = {"ascii_only": _ascii_only()} if output is ScanOutput.text else {}
        if output is ScanOutput.github:
            rendering = {"workspace": os.environ.get("GITHUB_WORKSPACE")}
        _emit(render_fleet(fleet, output.value, **rendering))
        if output is ScanOutput.github and os.environ.get("GITHUB_STEP_SUMMARY"):
            _append_step_summary(render_fleet(fleet, "markdown"))
        if not fleet.readable:
            raise MemlogError(f"none of the {len(fleet.rows)} run(s) could be read (first: {fleet.rows[0]['run']}: {fleet.rows[0]['error']})")
        return fleet

    fleet = _guard(debug, action)
    raise typer.Exit(EXIT_FINDING if any(fails(row, fail_on.value) for row in fleet.rows) else EXIT_OK)


class WatchOutput(str, Enum):
    text = "text"
    jsonl = "jsonl"
    github = "github"


class ExitOn(str, Enum):
    leak = "leak"
    error = "error"
    never = "never"


@app.command()
def watch(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files, directories or globs to follow (need not exist yet); - for a pipe.")],
    output: Annotated[WatchOutput, typer.Option("-o", "--output", help="text: a live status on a terminal, a line per change when piped; jsonl: a JSON object per change.")] = WatchOutput.text,
    exit_on: Annotated[ExitOn, typer.Option("--exit-on", help="Exit 1 as soon as a leak (or any error finding) is found.")] = ExitOn.never,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", help="On Ctrl-C or the end of a pipe: exit 1 when a finding is at least this severe.")] = FailOn.error,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between judgements, at least.", min=0.1, max=3600)] = 1.0,
    format: FormatOpt = None,
    config: Annotated[Optional[str], typer.Option("--config", help="YAML config: threshold overrides, capacity.")] = None,
    capacity: CapacityOption = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    debug: Debug = False,
) -> None:
    """Follow growing logs (like tail -F) and judge the run as steps arrive; warn before the OOM."""
    from memlog.watch import run_watch

    def action():
        return run_watch(
            logs, output=output.value, exit_on=exit_on.value, fail_on=fail_on.value, interval=interval, format=format,
            config=config, capacity_gib=capacity, formats_dirs=formats_dir or (), plugins_dirs=plugins_dir or (),
            write=_emit, terminal=sys.stdout.isatty() and os.environ.get("TERM") != "dumb", ascii_only=_ascii_only(),
            notice=lambda message: typer.echo(f"memlog: {_safe(message)}", err=True),
        )

    raise typer.Exit(_guard(debug, action))


def _safe(text: str) -> str:
    from memlog.render import safe

    return safe(text)


class CompareOutput(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    github = "github"


@app.command()
def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help="The reference run: a log file, a directory of logs, or a quoted glob.")],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The run to judge against it, the same way.")],
    output: Annotated[CompareOutput, typer.Option("-o", "--output", help="Output format (markdown: to paste into a PR).")] = CompareOutput.text,
    fail_on_increase: Annotated[Optional[float], typer.Option("--fail-on-increase", metavar="PCT", help="Exit 1 when a rank's plateau level or peak rises by more than PCT% (default 3).", min=0, max=1000)] = None,
    format: FormatOpt = None,
    config: Annotated[Optional[str], typer.Option("--config", help="YAML config: threshold overrides (compare: {...}), capacity.")] = None,
    capacity: CapacityOption = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    debug: Debug = False,
) -> None:
    """Memory regression between two runs: per rank level, peak, growth, steps to capacity; exit 1 on a regression."""
    from memlog.compare import compare as run_compare
    from memlog.config import load_config
    from memlog.render.compare import render_comparison

    def action():
        comparison = run_compare(
            [base], [new], config=load_config(config), fail_on_increase=fail_on_increase, format=format, capacity_gib=capacity,
            formats_dirs=formats_dir or (), plugins_dirs=plugins_dir or (),
        )
        _emit(render_comparison(comparison, output.value))
        return comparison

    comparison = _guard(debug, action)
    raise typer.Exit(EXIT_FINDING if comparison.fails() else EXIT_OK)


@app.command()
def series(
    log: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files; - for stdin.")],
    output: Annotated[SeriesOutput, typer.Option("-o", "--output")] = SeriesOutput.csv,
    format: FormatOpt = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    debug: Debug = False,
) -> None:
    """Print the parsed step records, one row per (source, worker, step), header first."""
    import polars as pl

    from memlog.api import nothing_found, parse_sources, select_specs
    from memlog.errors import NoRecordsError
    from memlog.formats import load_specs
    from memlog.render import safe, safe_json

    def action():
        specs = select_specs(load_specs(formats_dir or (), plugins_dir or ()), format)
        tables, sources = parse_sources(log, specs, generic=not format)
        if tables.records.is_empty():
            raise NoRecordsError(nothing_found(sources, specs))
        records = tables.records.select([c for c in tables.records.columns if tables.records[c].null_count() < tables.records.height or c in ("rank", "step")])
        records = records.sort("source", "worker", "kind", maintain_order=True).with_columns(pl.col(pl.Categorical).cast(pl.String))
        if output is SeriesOutput.parquet:
            if sys.stdout.isatty():
                raise MemlogError("parquet is binary: redirect stdout to a file")
            records.write_parquet(sys.stdout.buffer)
        elif output is SeriesOutput.json:
            sys.stdout.write(safe_json(records.write_json()) + "\n")
        else:
            sys.stdout.write(safe(records.write_csv()))  # a file name can hold escape sequences

    _guard(debug, action)


PLOT_SUBJECTS = {"memory": ("device", "host"), "device": ("device",), "host": ("host",), "loss": ("loss",)}


@app.command()
def plot(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files (plain or gzip); - for stdin.")],
    metric: Annotated[
        Optional[str],
        typer.Option("--metric", help="memory, device, host, loss, or a column name (see `memlog series`). Default: memory and loss."),
    ] = None,
    rank: Annotated[Optional[int], typer.Option("--rank", help="Only this rank (on every node).")] = None,
    node: Annotated[Optional[str], typer.Option("--node", help="Only this node's workers (the name or IP the log gives it).")] = None,
    actor: Annotated[Optional[str], typer.Option("--actor", help="Only this Ray actor (its name, e.g. WorkerDict).")] = None,
    worker: Annotated[
        Optional[str],
        typer.Option("--worker", help="Only this worker: its label as reports print it, or a glob ('node01/*', '*rank3*')."),
    ] = None,
    format: FormatOpt = None,
    capacity: CapacityOption = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    width: Annotated[Optional[int], typer.Option("--width", help="Width in columns (default: the terminal's).", min=60, max=400)] = None,
    debug: Debug = False,
) -> None:
    """Chart a metric per rank against step, with the knee, tail fit and capacity line the rules used."""
    from memlog.api import analyze as run_analysis
    from memlog.columns import ALL_VALUE_COLUMNS

    def action():
        column = None
        if metric is not None and metric not in PLOT_SUBJECTS:
            if metric not in ALL_VALUE_COLUMNS:
                raise MemlogError(f"unknown metric {metric!r} (use one of: {', '.join(dict.fromkeys([*PLOT_SUBJECTS, *ALL_VALUE_COLUMNS]))})")
            column = metric
        progress = _progress(logs)
        try:
            report = run_analysis(
                logs, format=format, capacity_gib=capacity, formats_dirs=formats_dir or (), plugins_dirs=plugins_dir or (),
                progress=progress, chart_metric=column,
            )
        finally:
            progress.finish()
        subjects = ("metric",) if column else PLOT_SUBJECTS.get(metric or "", ("device", "host", "loss"))
        shown = [v for v in report.series if v.subject in subjects]
        if not shown:
            raise MemlogError(f"no {metric or 'memory or loss'} values in {', '.join(logs)}")
        chosen = {"rank": rank, "node": node, "actor": actor, "worker": worker}
        chosen = {k: v for k, v in chosen.items() if v is not None}

        def only(view) -> bool:
            return view.matches(**chosen)

        if chosen and not any(only(v) for v in shown):
            asked = " and ".join(f"{k} {v}" for k, v in chosen.items())
            labels = list(dict.fromkeys(v.label for v in shown))
            listed = ", ".join(labels[:12]) + (f" and {len(labels) - 12} more" if len(labels) > 12 else "")
            raise MemlogError(f"no {asked} in the {metric or 'charted'} series (workers: {listed})")
        from memlog.render.chart import render_chart

        ascii_only = _ascii_only()
        drawn = render_chart(report, width=_width(width), colour=_colour(), ascii_only=ascii_only, subjects=subjects, only=only if chosen else None)
        _emit(drawn + "\n")

    _guard(debug, action)


@app.command()
def schema() -> None:
    """Print the JSON Schema of `memlog analyze -o json`."""
    sys.stdout.write((Path(__file__).parent / "schema" / "report.schema.json").read_text(encoding="utf-8"))


@formats_app.command("list")
def formats_list(formats_dir: FormatsDir = None, plugins_dir: PluginsDir = None, debug: Debug = False) -> None:
    """List the formats memlog knows."""
    from memlog.formats import load_specs

    from memlog.render import safe

    def action():
        for spec in load_specs(formats_dir or (), plugins_dir or ()).values():
            kinds = f"{len(spec.records)} record and {len(spec.events)} event patterns"
            # A user spec's name, title and path are its author's text: one inert line each.
            line = f"{spec.name:<12} {spec.title} ({kinds}) - {shown(str(spec.path))}"
            typer.echo(safe(" ".join(line.splitlines())))

    _guard(debug, action)


@formats_app.command("show")
def formats_show(name: str, formats_dir: FormatsDir = None, plugins_dir: PluginsDir = None, debug: Debug = False) -> None:
    """Show one format spec."""
    from memlog.formats import load_specs
    from memlog.render import safe

    def action():
        specs = load_specs(formats_dir or (), plugins_dir or ())
        if name not in specs:
            raise MemlogError(f"unknown format {name!r} (known: {', '.join(sorted(specs))})")
        sys.stdout.write(safe(specs[name].path.read_text(encoding="utf-8", errors="replace")))  # a user's file: inert

    _guard(debug, action)


@formats_app.command("check")
def formats_check(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files (plain or gzip); - for stdin.")],
    format: FormatOpt = None,
    formats_dir: FormatsDir = None,
    plugins_dir: PluginsDir = None,
    debug: Debug = False,
) -> None:
    """How many lines each format's patterns match, the records found, and where near misses stop matching."""
    from memlog.api import select_specs
    from memlog.formatcheck import check_formats, render_check
    from memlog.formats import load_specs
    from memlog.render import safe

    def action():
        specs = select_specs(load_specs(formats_dir or (), plugins_dir or ()), format)
        sys.stdout.write(safe(render_check(check_formats(logs, specs))))  # file names can hold escapes

    _guard(debug, action)


@formats_app.command("guess")
def formats_guess(
    log: Annotated[str, typer.Argument(metavar="LOG", help="A log no format reads; - for stdin.")],
    name: Annotated[Optional[str], typer.Option("--name", help="The new format's name (default: guessed-<file name>).")] = None,
    formats_dir: FormatsDir = None,
    debug: Debug = False,
) -> None:
    """Print the format spec the generic reader guesses for LOG (YAML with samples), to edit and keep."""
    from memlog.formats import load_specs
    from memlog.generic.reader import guess_spec_text
    from memlog.render import safe
    from memlog.wrappers import load_wrappers

    def action():
        specs = list(load_specs(formats_dir or ()).values())
        sys.stdout.write(safe(guess_spec_text(log, specs, load_wrappers(tuple(formats_dir or ())), name)))

    _guard(debug, action)


@formats_app.command("test")
def formats_test(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A folder of format specs (and wrappers/ specs).")],
    plugins: Annotated[bool, typer.Option("--plugins", help="Trust the folder's Python block parsers (runs its code).")] = False,
    debug: Debug = False,
) -> None:
    """Check a folder's format and wrapper specs against their own samples (exit 1 if any fails)."""
    from memlog.formats import test_folder
    from memlog.render import safe

    def action():
        results = test_folder(folder, plugins)
        if not results:
            raise MemlogError(f"{folder}: no *.yaml format specs (or wrappers/*.yaml) in it")
        for path, problems in results:
            typer.echo(safe(f"{'ok  ' if not problems else 'FAIL'} {path}"))
            for problem in problems:
                typer.echo(safe(f"     {problem}"))
        return sum(bool(p) for _, p in results)

    failed = _guard(debug, action)
    raise typer.Exit(EXIT_FINDING if failed else EXIT_OK)


@rules_app.command("list")
def rules_list(debug: Debug = False) -> None:
    """List the rules, in the order they run."""
    from memlog.rulekit import load_rules

    def action():
        for rule in load_rules():
            typer.echo(f"{rule.id:<18} {rule.severity:<8} {rule.summary}")

    _guard(debug, action)


@rules_app.command("explain")
def rules_explain(rule_id: Annotated[str, typer.Argument(metavar="ID")], debug: Debug = False) -> None:
    """What a rule checks, its thresholds, examples, and what it does not mean."""
    from memlog.rulekit import load_rules

    def action():
        rules = {r.id: r for r in load_rules()}
        if rule_id not in rules:
            raise MemlogError(f"unknown rule {rule_id!r} (known: {', '.join(rules)})")
        rule = rules[rule_id]
        typer.echo(f"{rule.id} ({rule.severity})\n\n{rule.help()}")

    _guard(debug, action)


def _version(value: bool) -> None:
    if value:
        from memlog import __version__

        typer.echo(f"memlog {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print memlog's version and exit.")
    ] = False,
) -> None:
    """Read large-model training logs and say whether memory is leaking, warming up, or fine."""


def _usage_error(exc) -> None:
    """A usage error (bad option value, missing argument, unknown option) in the one line the other
    errors use, not click's boxed help: the README promises `memlog: error: ...` and exit 2."""
    message = " ".join(exc.format_message().split())
    if getattr(exc, "ctx", None) is not None:
        message += f" (see `{exc.ctx.command_path} --help`)"
    _fail_line(message)


def _fail_line(message: str) -> None:
    from memlog.render import safe

    sys.stderr.write(f"memlog: error: {safe(message)}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_CANNOT_JUDGE)


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


def main() -> None:
    # A closed stream (`>&-`, `2>&-`) is None in Python: messages to a closed stderr go nowhere
    # (the exit code still says what happened); a report with no stdout is one line and exit 2.
    if _closed(sys.stderr):
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    if _closed(sys.stdout):
        _fail_line("standard output is closed: there is nowhere to write to (redirect it to a file instead)")
    try:
        # Not standalone: click would print its own (boxed, several lines) usage errors and exit.
        code = app(standalone_mode=False, prog_name="memlog")
        raise SystemExit(code if isinstance(code, int) else EXIT_OK)
    except typer.Abort:
        _fail_line("interrupted")
    except typer.TyperException as exc:  # click's exceptions (typer vendors click)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `memlog` or `memlog rules` alone: the help
            sys.stdout.write(exc.ctx.get_help() + "\n")
            raise SystemExit(EXIT_CANNOT_JUDGE) from None
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
