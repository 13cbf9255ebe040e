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
line, optionally `device` (the device it reads, where a process prints one per device), and
canonical column values. A record whose `step` is None takes the step its worker (else its source)
printed last, as a line pattern's `inherit_step` lines do.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from memlog.base.columns import is_known_column
from memlog.base.content import content_dir
from memlog.base.errors import FormatSpecError, regex_problem
from memlog.parse.unwrap import BLANKS, strip_escapes

WORKER_KEYS = ("node", "actor", "pid", "ip", "rank")
RECORD_SCHEMA: dict[str, type[pl.DataType]] = {
    "line_no": pl.Int64,
    "node": pl.String,
    "actor": pl.String,
    "pid": pl.Int64,
    "ip": pl.String,
    "rank": pl.Int64,
    "ts": pl.String,
    "step": pl.Int64,
    "kind": pl.String,
    "device": pl.String,  # the device a record of one process per device reads (`GPU0`)
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
        if module_spec is None or module_spec.loader is None:  # not for a .py path, which it always is here
            raise ImportError("no loader for the file")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        create = module.create
        probe = create(dict(options))
        start_literals = tuple(probe.start_literals)
        columns = tuple(probe.columns)
        max_lines = int(probe.max_lines)
    except FormatSpecError:
        raise
    except (Exception, SystemExit) as exc:
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
        self.start_literals = spec.start_literals
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
        self,
        lines: pl.DataFrame,
        start_rows: pl.Series,
        unwrap: Callable[[pl.DataFrame], pl.DataFrame],
        near: pl.DataFrame | None = None,
    ) -> pl.DataFrame | None:
        """lines: the whole chunk with `_row`; start_rows: `_row` of the lines holding a start literal;
        near: the rows `near` picks out, unwrapped and prepared already (where chunks are scanned in
        parallel), or None: the window is then unwrapped and prepared here."""
        carry, height = self.carry, lines.height
        last_start = cast(int, start_rows.max()) if len(start_rows) else None  # `_row`: an index, never null
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
        columns: dict[str, type[pl.DataType]] = {**RECORD_SCHEMA, **dict.fromkeys(self.parser.columns, pl.Float64)}
        if isinstance(rows, pl.DataFrame):
            frame = rows.select(pl.col(k).cast(t) if k in rows.columns else pl.lit(None, dtype=t).alias(k) for k, t in columns.items())
        else:
            frame = pl.DataFrame([{k: r.get(k) for k in columns} for r in rows], schema=columns)
        return frame.with_columns(
            pl.col("kind").fill_null("train"),
            format=pl.lit(self.format_name),
            pattern=pl.lit(f"{self.format_name}/block"),
            # A block that prints no step takes the one its worker (or the source) printed last.
            inherited=pl.col("step").is_null(),
        )


# -- event continuations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Continuation:
    """Lines below a matched event that belong to its message, in one of two shapes:

    - a table (`regex:`): rows matching the regex, kept as a list in the detail (`detail:`);
    - a block that ends at its first outdented line (`ends: outdented`): lines indented deeper
      than the event's own line belong to it, blank lines too, and the first other line of the
      same worker ends it. That line *is* the event (a Python traceback's final exception line:
      the frames above it are indented): the event moves to it, its text goes into the detail,
      and the line the block began on into `from_line`.
    """

    detail: str  # detail key receiving the list of rows, or the ending line's text
    regex: str | None  # one continuation line (tables); its named groups are the keys of each row
    max_lines: int  # rows after the event line to look at
    ends: str | None = None  # "outdented": a block ended by its first line no deeper than the event's
    # Of one worker's events in a chunk, read only its last: what the block says matters only where
    # nothing of that worker follows it (a traceback that ends a process), and a log that prints a
    # handled traceback every few lines must not cost one read per traceback.
    last_per_worker: bool = False
    # A literal that, on the line right above the event, says its block ends nothing (Python's
    # `Exception ignored in: ...` above a traceback it printed and went on from). Such an event is
    # read all the same and marked (`ends_nothing` in its detail): another pattern may read its last
    # line (crashes.yaml's exception after frames), and the mark says that line ended nothing either
    # (base/events.py keeps one event a line, the one begun first, then drops the marked).
    not_after: str | None = None

    @staticmethod
    def load(where: str, raw: Any) -> Continuation:
        if not isinstance(raw, dict) or not isinstance(raw.get("detail"), str):
            raise FormatSpecError(f"{where}: `continuation` needs `detail:`, and `regex:` or `ends: outdented`")
        ends = raw.get("ends")
        if ends not in (None, "outdented") or (ends is None) == (not isinstance(raw.get("regex"), str)):
            raise FormatSpecError(f"{where}: `continuation` needs either `regex:` (table rows) or `ends: outdented`")
        try:
            max_lines = int(raw.get("max_lines", 12))
            if ends is None:
                pl.Series(["x"]).str.extract_groups(raw["regex"])
        except Exception as exc:
            raise FormatSpecError(f"{where}: continuation: invalid ({regex_problem(exc)})") from None
        if not isinstance(raw.get("last_per_worker", False), bool):
            raise FormatSpecError(f"{where}: continuation: `last_per_worker` must be true or false")
        if raw.get("not_after") is not None and not (isinstance(raw["not_after"], str) and raw["not_after"]):
            raise FormatSpecError(f"{where}: continuation: `not_after` is a literal")
        return Continuation(raw["detail"], raw.get("regex"), max(1, max_lines), ends, bool(raw.get("last_per_worker", False)), raw.get("not_after"))


@dataclass
class _Pending:
    """One event whose continuation lines are still being read (possibly in the next chunk)."""

    event: dict[str, Any]
    continuation: Continuation
    scanned: int = 0
    rows: list[dict[str, str]] = field(default_factory=list)
    done: bool = False
    ending: dict[str, Any] | None = None  # the line that ended an outdented block
    prefix: str = ""  # what stood before the event's text on its raw line (an outdented block's rows are found by it)
    ends_nothing: bool = False  # below Continuation.not_after's literal
    start: int = 0  # the row of the current chunk to read on from

    def read(self, following: pl.DataFrame) -> None:
        """Take continuation rows from `following` (unwrapped lines after the event, in order).

        Lines of other workers are skipped (Ray interleaves them). A table: lines before the first
        match (a header) are skipped, and the first non-matching line after a match ends it. An
        outdented block: the first line of the worker that is not blank and not deeper ends it."""
        if following.is_empty():
            return
        if self.continuation.ends == "outdented":
            self._read_block(following)
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

    def _read_block(self, following: pl.DataFrame) -> None:
        """The first line of the worker that is not blank and not deeper than the event's ends it
        (the rows read are counted by the caller, Continuations._read)."""
        depth = self.event.get("indent") or 0
        same = pl.all_horizontal((pl.col(k) == self.event[k]) if self.event[k] is not None else pl.col(k).is_null() for k in WORKER_KEYS)
        ends = following.filter(same & (pl.col("text") != "") & (pl.col("indent") <= depth)).head(1)
        if ends.height:
            self.ending, self.done = ends.row(0, named=True), True

    def finished_event(self) -> dict[str, Any]:
        detail = json.loads(self.event["detail"]) if self.event["detail"] else {}
        if self.ends_nothing:
            detail["ends_nothing"] = True
        if self.rows:
            detail[self.continuation.detail] = self.rows
        if self.ending is None:
            return {**self.event, "detail": json.dumps(detail)}
        # The line that ended the block is the event; where it began is kept.
        detail[self.continuation.detail] = self.ending["text"]
        detail["from_line"] = self.event["line_no"]
        moved = {k: self.ending[k] for k in ("line_no", "text", "ts")}
        return {**self.event, **moved, "detail": json.dumps(detail)}


def _last_of_each_worker(hits: pl.DataFrame, records: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Each worker's last event of a chunk, unless a record of that worker follows it there (then
    the worker went on: its block ended nothing)."""
    # The last that ends something and the last marked (Continuation.not_after) are kept apart: the
    # marked one, at a run's exit, must not hide the traceback that ended it.
    hits = hits.unique([*WORKER_KEYS, "_ends_nothing"], keep="last", maintain_order=True)
    frames = [r.select("line_no", *(pl.col(k).cast(t) for k, t in RECORD_SCHEMA.items() if k in WORKER_KEYS)) for r in records if r.height]
    if not frames:
        return hits
    last = pl.concat(frames).group_by(list(WORKER_KEYS)).agg(_last_record=pl.col("line_no").max())
    typed = hits.with_columns(pl.col(k).cast(RECORD_SCHEMA[k]) for k in WORKER_KEYS)
    joined = typed.join(last, on=list(WORKER_KEYS), how="left", nulls_equal=True, maintain_order="left")
    return hits.filter(joined["_last_record"].is_null() | (joined["_last_record"] < joined["line_no"]))


def _raw_prefix(raw: str, text: str) -> str:
    """What stood before a line's unwrapped text in the raw line: its wrappers and indentation."""
    at = raw.rfind(text) if text else -1
    return raw[:at] if at > 0 else ""


# Rows after an event read at first; more, a window at a time, only for the few that need them (a
# traceback runs on for a few dozen lines, a table for a dozen).
FIRST_WINDOW = 256


class Continuations:
    """Completes one source's events that have continuation lines, across chunk boundaries."""

    def __init__(self) -> None:
        self.pending: list[_Pending] = []

    def add(self, hits: pl.DataFrame, continuation: Continuation, lines: pl.DataFrame, unwrap, records: Sequence[pl.DataFrame] = ()) -> list[dict[str, Any]]:
        """hits: event rows (with `_row`) of one pattern; lines: the whole chunk; records: the chunk's
        record rows (for `last_per_worker`). Returns finished events."""
        raw = lines["text"]
        if continuation.not_after is not None:
            above = raw.gather((hits["_row"].cast(pl.Int64) - 1).clip(lower_bound=0))
            hits = hits.with_columns(_ends_nothing=above.str.contains(continuation.not_after, literal=True) & (hits["_row"] > 0))
        else:
            hits = hits.with_columns(_ends_nothing=pl.lit(False))
        if continuation.last_per_worker:
            hits = _last_of_each_worker(hits, records)
        pending = []
        for event in hits.iter_rows(named=True):
            prefix = _raw_prefix(raw[event["_row"]], event["text"]) if continuation.ends else ""
            nothing = bool(event.pop("_ends_nothing"))
            pending.append(_Pending(event, continuation, prefix=prefix, ends_nothing=nothing, start=event["_row"] + 1))
        return self._read(pending, lines, unwrap)

    def resume(self, lines: pl.DataFrame, unwrap) -> list[dict[str, Any]]:
        """Continue events cut by the previous chunk's end with the start of this chunk."""
        carried, self.pending = self.pending, []
        for p in carried:
            p.start = 0
        return self._read(carried, lines, unwrap)

    def _read(self, pending: list[_Pending], lines: pl.DataFrame, unwrap) -> list[dict[str, Any]]:
        """Read the events' lines in `lines` from their `start`, in rounds of windows for all events
        still open at once: FIRST_WINDOW rows, then four times as many, and so on. Returns the
        finished events; the others wait for the next chunk.

        Unwrapping costs per call more than per row, so the rows of all events are unwrapped in one
        call per round; an outdented block's rows, which are its worker's only, are first looked for
        by the prefix its raw line began with (`[rank0]:`, a Ray prefix with its colours), and need
        no unwrapping at all where that prefix marks the worker's lines (not a timestamp)."""
        window = FIRST_WINDOW
        while True:
            open_ = [p for p in pending if not p.done and p.start < lines.height]
            if not open_:
                break
            slices = [
                lines.slice(p.start, min(window, p.continuation.max_lines - p.scanned)).with_columns(_hit=pl.lit(i, dtype=pl.UInt32))
                for i, p in enumerate(open_)
            ]
            rows = pl.concat(slices)
            unwrapping = self._by_prefix(open_, rows, window)
            if unwrapping:
                wanted = pl.Series(list(unwrapping), dtype=pl.UInt32)
                following = unwrap(rows.filter(pl.col("_hit").is_in(wanted.implode()))).partition_by("_hit", as_dict=True, include_key=False)
                for i in unwrapping:
                    open_[i].read(following.get((i,), rows.clear().drop("_hit")))
            for p, part in zip(open_, slices):
                p.start += part.height
                if p.continuation.ends:  # (a table counts the rows it reads itself)
                    p.scanned += part.height
                    p.done = p.done or p.scanned >= p.continuation.max_lines
            window *= 4
        finished = [p.finished_event() for p in pending if p.done]
        self.pending += [p for p in pending if not p.done]
        return finished

    @staticmethod
    def _by_prefix(open_: list[_Pending], rows: pl.DataFrame, window: int) -> list[int]:
        """Read the outdented blocks whose rows their raw prefix finds (all at once: one query per
        round); return the events (their `_hit`) whose rows must be unwrapped instead."""
        prefixes = {i: p.prefix for i, p in enumerate(open_) if p.prefix}
        unwrapping = [i for i, p in enumerate(open_) if not p.prefix]
        if not prefixes:
            return unwrapping
        keyed = pl.DataFrame({"_hit": list(prefixes), "_prefix": list(prefixes.values())}, schema={"_hit": pl.UInt32, "_prefix": pl.String})
        own = pl.col("text").str.starts_with(pl.col("_prefix"))
        text = pl.col("text").str.slice(pl.col("_prefix").str.len_chars())
        body = text.str.strip_chars_start(BLANKS)
        ends = own & (body != "") & (text.str.len_chars() - body.str.len_chars() <= 0)
        # One query for them all (the scanning threads keep polars busy: every call waits its turn).
        found = (
            rows.lazy()
            .join(keyed.lazy(), on="_hit")
            .group_by("_hit")
            .agg(
                _rows=pl.len(),
                _own=own.sum(),
                _line=pl.col("line_no").filter(ends).first(),
                _text=strip_escapes(body.filter(ends).first()).str.strip_chars_end(BLANKS),
            )
            .collect()
        )
        for i, size, count, line, ending in found.iter_rows():
            if count == 0 and size >= window:
                open_[i].prefix = ""  # a full window and no line starts as the event's did: unwrap them
                unwrapping.append(i)
            elif line is not None:
                open_[i].ending, open_[i].done = {"line_no": line, "text": ending, "ts": None}, True
        return unwrapping

    def open_since(self) -> int | None:
        """The first line of an event still reading its continuation lines."""
        return min((int(p.event["line_no"]) for p in self.pending), default=None)

    def finish(self) -> list[dict[str, Any]]:
        finished = [p.finished_event() for p in self.pending]
        self.pending = []
        return finished
