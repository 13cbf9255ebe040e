"""The reading plan: what every command reads a log with, built once from its options.

The options a command that reads takes are one group (ReadingOptions: `--format`, `--formats-dir`,
`--plugins-dir`, `--config`, declared once in memlog/commands/common.py); the plan turns them into
the format specs, the wrappers (built-in, plus each user folder's `wrappers/`), what of each record
is kept, and whether the generic reader guesses where no spec reads a line. analyze, watch,
series, plot, compare, scan and `formats check` all read through a plan (memlog/engine/reader.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from memlog.base.config import Config
from memlog.base.errors import MemlogError
from memlog.engine.options import ReadingOptions
from memlog.parse.catalog import load_specs, load_wrappers
from memlog.parse.chunks import ChunkParser
from memlog.parse.formats import FormatSpec
from memlog.parse.wrappers import WrapperSpec
from memlog.read.source import CHUNK_BYTES
from memlog.tables.records import Keep


def select_specs(specs: dict[str, FormatSpec], forced: str | Sequence[str] | None) -> list[FormatSpec]:
    """All specs, or only the forced ones (names, or one string of comma-separated names) plus the
    event-only specs (OOM errors and crashes are framework-independent)."""
    if not forced:
        return list(specs.values())
    names = [n.strip() for part in ([forced] if isinstance(forced, str) else forced) for n in part.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise MemlogError(f"unknown format{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (known: {', '.join(sorted(specs))})")
    return [s for s in specs.values() if s.name in names or not s.records]


@dataclass(frozen=True)
class ReadingPlan:
    """How the inputs are read (module docstring). `keep`: what of each record is kept (analyze:
    the judged columns, condensed; series: everything). `generic`: the generic reader guesses where
    no spec reads a line (not when a format was forced). `observe`: sees every pattern's matches per
    chunk (`formats check`). `chunk_bytes`: how much is read at a time (reports do not depend on it)."""

    specs: tuple[FormatSpec, ...]
    wrappers: tuple[WrapperSpec, ...]
    keep: Keep = field(default_factory=Keep)
    generic: bool = True
    config: Config = field(default_factory=Config)
    observe: Callable[[pl.DataFrame, list[tuple]], None] | None = None
    chunk_bytes: int = CHUNK_BYTES

    @classmethod
    def of(
        cls,
        options: ReadingOptions = ReadingOptions(),
        *,
        config: Config | None = None,
        keep: Keep | None = None,
        observe: Callable | None = None,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> ReadingPlan:
        """The plan for `options` (`config`: already loaded, else loaded from options.config)."""
        config = config if config is not None else options.loaded_config()
        dirs = [*config.formats_dirs, *options.formats_dirs]
        specs = select_specs(load_specs(dirs, options.plugins_dirs), options.format)
        wrappers = load_wrappers((*dirs, *options.plugins_dirs))
        return cls(tuple(specs), tuple(wrappers), keep or Keep(), not options.format, config, observe, chunk_bytes)

    def with_keep(self, keep: Keep) -> ReadingPlan:
        return replace(self, keep=keep)

    def parser(self) -> ChunkParser:
        """A chunk parser of this plan's specs and wrappers: one per source read at a time."""
        return ChunkParser(self.specs, self.observe, self.wrappers, self.keep.values)
