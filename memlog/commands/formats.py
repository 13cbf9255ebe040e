"""`memlog formats list|show|check|guess|test`: the log formats memlog reads (memlog.parse.formats)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from memlog.base.errors import MemlogError
from memlog.commands.common import EXIT_FINDING, EXIT_OK, Debug, FormatsDir, PluginsDir, guard, reads
from memlog.engine.options import ReadingOptions
from memlog.render.safety import safe

formats_app = typer.Typer(no_args_is_help=True, help="The log formats memlog reads.")


@formats_app.command("list")
def formats_list(formats_dir: FormatsDir = None, plugins_dir: PluginsDir = None, debug: Debug = False) -> None:
    """List the formats memlog knows."""
    from memlog.parse.catalog import load_specs

    def action():
        for spec in load_specs(formats_dir or (), plugins_dir or ()).values():
            # A user spec's name, title and path are its author's text: one inert line each.
            typer.echo(safe(" ".join(spec.listing().splitlines())))

    guard(debug, action)


@formats_app.command("show")
def formats_show(name: str, formats_dir: FormatsDir = None, plugins_dir: PluginsDir = None, debug: Debug = False) -> None:
    """Show one format spec."""
    from memlog.parse.catalog import load_specs

    def action():
        specs = load_specs(formats_dir or (), plugins_dir or ())
        if name not in specs:
            raise MemlogError(f"unknown format {name!r} (known: {', '.join(sorted(specs))})")
        sys.stdout.write(safe(specs[name].path.read_text(encoding="utf-8", errors="replace")))  # a user's file: inert

    guard(debug, action)


@formats_app.command("check")
@reads
def formats_check(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log files (plain or gzip), folders of them; - for stdin.")],
    reading: ReadingOptions,
    debug: Debug = False,
) -> None:
    """How many lines each format's patterns match, the records found, and where near misses stop matching."""
    from memlog.engine.formatcheck import check_formats, render_check
    from memlog.render.safety import safe

    def action():
        sys.stdout.write(safe(render_check(check_formats(logs, reading))))  # file names can hold escapes

    guard(debug, action)


@formats_app.command("guess")
def formats_guess(
    log: Annotated[str, typer.Argument(metavar="LOG", help="A log no format reads; - for stdin.")],
    name: Annotated[Optional[str], typer.Option("--name", help="The new format's name (default: guessed-<file name>).")] = None,
    formats_dir: FormatsDir = None,
    debug: Debug = False,
) -> None:
    """Print the format spec the generic reader guesses for LOG (YAML with samples), to edit and keep."""
    from memlog.parse.catalog import load_specs, load_wrappers
    from memlog.parse.generic.reader import guess_spec_text
    from memlog.render.safety import safe

    def action():
        specs = list(load_specs(formats_dir or ()).values())
        sys.stdout.write(safe(guess_spec_text(log, specs, load_wrappers(tuple(formats_dir or ())), name)))

    guard(debug, action)


@formats_app.command("test")
def formats_test(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A folder of format specs (and wrappers/ specs).")],
    plugins: Annotated[bool, typer.Option("--plugins", help="Trust the folder's Python block parsers (runs its code).")] = False,
    debug: Debug = False,
) -> None:
    """Check a folder's format and wrapper specs against their own samples (exit 1 if any fails)."""
    from memlog.parse.catalog import test_folder
    from memlog.render.safety import safe

    def action():
        results = test_folder(folder, plugins)
        if not results:
            raise MemlogError(f"{folder}: no *.yaml format specs (or wrappers/*.yaml) in it")
        for path, problems in results:
            typer.echo(safe(f"{'ok  ' if not problems else 'FAIL'} {path}"))
            for problem in problems:
                typer.echo(safe(f"     {problem}"))
        return sum(bool(p) for _, p in results)

    failed = guard(debug, action)
    raise typer.Exit(EXIT_FINDING if failed else EXIT_OK)
