"""Multi-line formats: block parsers (the Python escape hatch) and event continuations.

Line patterns judge one line at a time. Two things in real logs span several lines:

- a *block* printed by one call: EasyR1's per-step YAML (`Step N`, then one `key: value` per line,
  every line with its own Ray prefix). A spec names a Python block parser in its own folder,
  `block_parser: {module: easyr1_blocks.py, <options>}`, and the parser reads the block;
- a message whose first line matched an event pattern and whose detail goes on below it: Ray's
  `Top 10 memory users:` table under the memory-monitor message. The event pattern's
  `continuation: {detail: NAME, regex: ..., max_lines: N}` collects those lines into the detail.

Both only look near a trigger, so the hot path stays vectorised: a block parser is fed the rows
within its `max_lines` after each line holding one of its start literals (the window is computed
with polars over the chunk; Python only walks the rows inside it), and a continuation reads at most
`max_lines` rows after each matched event. Both carry over chunk boundaries, so a block or a table
split between two chunks still parses; state is per source (`finish()` at the end of each).

A block parser module defines `create(options) -> parser`, and the parser has:
  start_literals  literals marking a block's first line (they also join the literal pre-filter),
  max_lines       rows after a start line that may still belong to its block,
  columns         the canonical columns its records may carry,
  prepare(rows)   optional: rows (unwrapped, as `feed` gets them but for `window_start`) -> a frame
                  of columns of its own, one row per row (what each line says on its own, such as
                  its key and value), which `feed` then gets instead of `text`. It must keep no
                  state: it runs where chunks are scanned, on several threads at once, so that
                  `feed`, which runs one chunk at a time, does less,
  feed(rows)      rows: polars frame of unwrapped window rows in file order (line_no, text or the
                  columns `prepare` made, actor, pid, ip, rank, ts, and `window_start`: true on the
                  first row after rows the parser did not see, so blocks open before it must end)
                  -> records: a list of record dicts, or a polars frame with a column per record
                  key (no dict per row to build),
  finish()        end of the source -> records of blocks still open,
  open_since()    optional: the first line of a block it holds back (may still end in a record),
                  or None; without it, every line since the first it was fed counts as open.
A record dict has `step`, optionally `kind` ("train"), line_no/actor/pid/ip/rank/ts of its first
line, and canonical column values.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from memlog.base.columns import is_known_column
from memlog.base.content import content_dir
from memlog.base.errors import FormatSpecError, regex_problem

WORKER_KEYS = ("node", "actor", "pid", "ip", "rank")
RECORD_SCHEMA: dict[str, pl.DataType] = {
    "line_no": pl.Int64, "node": pl.String, "actor": pl.String, "pid": pl.Int64, "ip": pl.String, "rank": pl.Int64,
    "ts": pl.String, "step": pl.Int64, "kind": pl.String,
}


# -- block parsers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockParserSpec:
    """A spec's `block_parser:`: the module file and the options handed to its `create()`."""

    path: Path
    options: dict[str, Any]
    create: Callable[[dict[str, Any]], Any] = field(repr=False, compare=False)
    start_literals: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()

    def new(self) -> Any:
        return self.create(dict(self.options))


def load_block_parser(spec_path: Path, raw: Any, plugins: bool = False) -> BlockParserSpec:
    """`block_parser: NAME.py` or `{module: NAME.py, ...options}`: a block parser memlog ships (any
    spec may name one), or, when the spec's folder was given as trusted plugins (`plugins`), a
    Python file in that folder. A spec never runs code from anywhere else: a config file or a
    `--formats-dir` folder can only reuse what ships."""
    where = f"{spec_path.name}: block_parser"
    options = {"module": raw} if isinstance(raw, str) else raw
    if not isinstance(options, dict) or not isinstance(options.get("module"), str):
        raise FormatSpecError(f"{where}: give the module file, `block_parser: NAME.py` or `{{module: NAME.py, ...}}`")
    options = dict(options)
    path = _block_parser_file(where, spec_path, options.pop("module"), plugins)
    try:
        module_spec = importlib.util.spec_from_file_location(f"memlog_parsers.{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        create = module.create
        probe = create(dict(options))
        start_literals = tuple(probe.start_literals)
        columns = tuple(probe.columns)
        max_lines = int(probe.max_lines)
    except FormatSpecError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken parser file is its author's to fix
        raise FormatSpecError(f"{where}: {path.name}: cannot load ({type(exc).__name__}: {exc})") from None
    if not start_literals or not all(isinstance(s, str) and s for s in start_literals) or max_lines < 1:
        raise FormatSpecError(f"{where}: {path.name}: needs non-empty start_literals and max_lines >= 1")
    unknown = [c for c in columns if not is_known_column(c)]
    if unknown:
        raise FormatSpecError(f"{where}: {path.name}: columns {unknown} are not canonical (see memlog/base/columns.py)")
    return BlockParserSpec(path, options, create, start_literals, columns)


def shipped_block_parsers() -> list[str]:
    return sorted(p.name for p in content_dir("parsers").glob("*.py") if not p.name.startswith("_"))


def _block_parser_file(where: str, spec_path: Path, name: str, plugins: bool) -> Path:
    if Path(name).name != name or not name.endswith(".py") or name.startswith("."):
        raise FormatSpecError(f"{where}: `module` is a file name such as NAME.py, not a path: {name!r}")
    if plugins:
        folder = spec_path.parent.resolve()
        local = spec_path.parent / name
        if local.is_file() and local.resolve().parent == folder:  # a symlink out of the folder is not in it
            return local
    if name in shipped_block_parsers():
        return content_dir("parsers") / name
    if plugins:
        raise FormatSpecError(f"{where}: {name}: no such Python file in {spec_path.parent} (or shipped with memlog)")
    raise FormatSpecError(
        f"{where}: {name}: not a block parser memlog ships ({', '.join(shipped_block_parsers())}); a Python file of "
        "your own runs only from a folder given with --plugins-dir (trusted code, never from a config file)"
    )


def within_reach(start_rows: pl.Series, reach: int) -> pl.Expr:
    """Rows of a chunk (`_row`) less than `reach` rows after one of `start_rows`, which are in."""
    row = pl.col("_row")
    since_start = row - pl.when(row.is_in(start_rows.implode())).then(row).forward_fill()
    return (since_start < reach).fill_null(False)


class BlockFeeder:
    """Feeds one source's chunks to one block parser: the rows near its start lines, in order."""

    def __init__(self, spec: BlockParserSpec, format_name: str):
        self.parser = spec.new()
        self.format_name = format_name
        self.max_lines = int(self.parser.max_lines)
        self.parts: Callable[[pl.DataFrame], pl.DataFrame] | None = getattr(self.parser, "prepare", None)
        self.carry = 0  # rows at the start of the next chunk still inside the last window
        self.first_fed: int | None = None

    def near(self, start_rows: pl.Series) -> pl.Expr:
        """The rows of a chunk `feed` may read, whatever the chunks before it held: those within
        `max_lines` of a start line, and as many at its top (a block from the chunk before)."""
        return within_reach(start_rows, self.max_lines) | (pl.col("_row") < self.max_lines)

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Unwrapped rows as `feed` hands them to the parser: the columns its `prepare` makes in place
        of the text (which they were read from), so that rows waiting to be fed hold no text twice."""
        if self.parts is None:
            return rows
        return rows.drop("text").hstack(self.parts(rows))

    def feed(
        self, lines: pl.DataFrame, start_rows: pl.Series, unwrap: Callable[[pl.DataFrame], pl.DataFrame],
        near: pl.DataFrame | None = None,
    ) -> pl.DataFrame | None:
        """lines: the whole chunk with `_row`; start_rows: `_row` of the lines holding a start literal;
        near: the rows `near` picks out, unwrapped and prepared already (where chunks are scanned in
        parallel), or None: the window is then unwrapped and prepared here."""
        carry, height = self.carry, lines.height
        last_start = start_rows.max() if len(start_rows) else None
        self.carry = max(carry - height, self.max_lines - (height - last_start) if last_start is not None else 0, 0)
        if last_start is None and carry == 0:
            return None
        row = pl.col("_row")
        in_window = within_reach(start_rows, self.max_lines) | (row < carry)
        # A jump in row numbers means rows the parser did not see: blocks open before it end there.
        # A line unwrapping cut in two (another rank's line glued into it) is one row number twice:
        # its pieces take its flag.
        continued = (row == 0) & pl.lit(carry > 0)
        jump = row.diff()
        window_start = pl.when(jump == 0).then(None).otherwise((jump != 1).fill_null(True) & ~continued).forward_fill()
        if near is not None:
            window = near.filter(in_window).with_columns(window_start=window_start)
        else:
            window = self.prepare(unwrap(lines.filter(in_window).with_columns(window_start=window_start)))
        if self.first_fed is None and window.height:
            self.first_fed = int(window["line_no"][0])
        return self._frame(self.parser.feed(window))

    def finish(self) -> pl.DataFrame | None:
        return self._frame(self.parser.finish())

    def open_since(self) -> int | None:
        """The first line whose block may still come out as a record (see the parser's open_since)."""
        ask = getattr(self.parser, "open_since", None)
        return ask() if ask is not None else self.first_fed

    def _frame(self, rows: list[dict[str, Any]] | pl.DataFrame) -> pl.DataFrame | None:
        if len(rows) == 0:
            return None
        columns = {**RECORD_SCHEMA, **{c: pl.Float64 for c in self.parser.columns}}
        if isinstance(rows, pl.DataFrame):
            frame = rows.select(pl.col(k).cast(t) if k in rows.columns else pl.lit(None, dtype=t).alias(k) for k, t in columns.items())
        else:
            frame = pl.DataFrame([{k: r.get(k) for k in columns} for r in rows], schema=columns)
        return frame.with_columns(
            pl.col("kind").fill_null("train"), format=pl.lit(self.format_name), pattern=pl.lit(f"{self.format_name}/block"), inherited=pl.lit(False)
        )


# -- event continuations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Continuation:
    """Lines below a matched event that belong to its message (a table), kept in its detail."""

    detail: str  # detail key receiving the list of rows
    regex: str  # one continuation line; its named groups are the keys of each row
    max_lines: int  # rows after the event line to look at

    @staticmethod
    def load(where: str, raw: Any) -> Continuation:
        if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("detail", "regex")):
            raise FormatSpecError(f"{where}: `continuation` needs `detail:` and `regex:`")
        try:
            max_lines = int(raw.get("max_lines", 12))
            pl.Series(["x"]).str.extract_groups(raw["regex"])
        except Exception as exc:  # noqa: BLE001 - any compile error is the spec author's to fix
            raise FormatSpecError(f"{where}: continuation: invalid ({regex_problem(exc)})") from None
        return Continuation(raw["detail"], raw["regex"], max(1, max_lines))


@dataclass
class _Pending:
    """One event whose continuation lines are still being read (possibly in the next chunk)."""

    event: dict[str, Any]
    continuation: Continuation
    scanned: int = 0
    rows: list[dict[str, str]] = field(default_factory=list)
    done: bool = False

    def read(self, following: pl.DataFrame) -> None:
        """Take continuation rows from `following` (unwrapped lines after the event, in order).

        Lines of other workers are skipped (Ray interleaves them); lines before the first match
        (a table header) are skipped; the first non-matching line after a match ends it."""
        if following.is_empty():
            return
        parts = following.with_columns(_c=pl.col("text").str.extract_groups(f"(?P<_whole>{self.continuation.regex})"))
        for row in parts.iter_rows(named=True):
            if self.scanned >= self.continuation.max_lines:
                break
            self.scanned += 1
            if any(row[k] != self.event[k] for k in WORKER_KEYS):
                continue
            found = row["_c"]
            if found["_whole"] is not None:
                self.rows.append({k: v for k, v in found.items() if k != "_whole"})
            elif self.rows:
                self.done = True
                break
        self.done = self.done or self.scanned >= self.continuation.max_lines

    def finished_event(self) -> dict[str, Any]:
        detail = json.loads(self.event["detail"]) if self.event["detail"] else {}
        if self.rows:
            detail[self.continuation.detail] = self.rows
        return {**self.event, "detail": json.dumps(detail)}


class Continuations:
    """Completes one source's events that have continuation lines, across chunk boundaries."""

    def __init__(self) -> None:
        self.pending: list[_Pending] = []

    def add(self, hits: pl.DataFrame, continuation: Continuation, lines: pl.DataFrame, unwrap) -> list[dict[str, Any]]:
        """hits: event rows (with `_row`) of one pattern; lines: the whole chunk. Returns finished events."""
        finished = []
        events = list(hits.iter_rows(named=True))
        # One unwrap for the lines after all of them; a line may follow two events.
        slices = [lines.slice(e["_row"] + 1, continuation.max_lines).with_columns(_hit=pl.lit(i)) for i, e in enumerate(events)]
        following = unwrap(pl.concat(slices)).partition_by("_hit", as_dict=True, include_key=False)
        for i, event in enumerate(events):
            pending = _Pending(event, continuation)
            pending.read(following.get((i,), pl.DataFrame()))
            if pending.done:
                finished.append(pending.finished_event())
            else:
                self.pending.append(pending)
        return finished

    def resume(self, lines: pl.DataFrame, unwrap) -> list[dict[str, Any]]:
        """Continue events cut by the previous chunk's end with the start of this chunk."""
        finished, still = [], []
        for pending in self.pending:
            pending.read(unwrap(lines.slice(0, pending.continuation.max_lines - pending.scanned)))
            (finished if pending.done else still).append(pending)
        self.pending = still
        return [p.finished_event() for p in finished]

    def open_since(self) -> int | None:
        """The first line of an event still reading its continuation lines."""
        return min((int(p.event["line_no"]) for p in self.pending), default=None)

    def finish(self) -> list[dict[str, Any]]:
        finished = [p.finished_event() for p in self.pending]
        self.pending = []
        return finished
