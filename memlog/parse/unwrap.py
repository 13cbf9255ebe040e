"""Unwrap: strip escape codes and the wrappers stacked on a line, keeping what they say.

Outermost first (launchers-and-crashes.md §0.1): collectors, transports, launcher tees, in-process
rank prefixes, then the framework's logger prefix. Blanks before and after them (a pasted log's indent, a markdown code
block's, a traceback's own) are stripped as well and counted in `indent`, so that every format
reads an indented line and multi-line readers still see how deep a line sits. The
wrappers are data (memlog/parse/wrappers.py,
`parsers/wrappers/*.yaml`): all their prefixes are tried at once as one anchored alternation, and
stripped round after round while any line still starts with one, so any stack of them comes off.
What they name (node, rank, actor, pid, ...) becomes columns; the first wrapper to name a field
(the outermost) keeps it. The framework logger prefixes come from the format specs and are stripped
last. Everything here is a polars expression over the whole chunk: no Python loop per line.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from memlog.parse.wrappers import INNERMOST_WINS, WRAPPER_FIELDS, WrapperSpec, builtin_wrappers, by_priority, field_of, node_with_task

# Terminal escape sequences: CSI (colours, cursor moves, clear screen), OSC (window titles,
# hyperlinks) terminated by BEL or ST, other two-byte ESC sequences, and the `#033[..m` form
# that syslog/journald captures leave behind. Removing them all keeps log content from acting on
# the reader's terminal, whatever memlog later prints.
ESCAPES = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, DCS, SOS, PM, APC strings up to BEL or ST
    r"|\x1b[@-Z\\-_]"
    r"|#033\[[0-9;]*m"
)
# Remaining C0 controls (tab kept), DEL, C1 controls, Unicode line/paragraph separators and bidi
# overrides/isolates.
CONTROLS = r"[\x00-\x08\x0a-\x1f\x7f\x{80}-\x{9f}\x{2028}\x{2029}\x{202a}-\x{202e}\x{2066}-\x{2069}]"

LEADING_TORCHRUN_PREFIX = r"^\[[A-Za-z_]+\d+\]:"
TIMESTAMP = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,6})?)"
# Ranks sharing one stdout without line buffering glue the start of one line to another rank's
# line: `[rank1]: ... loss:  9.1  [rank0]:[titan] ... step: 3 ...`. A torchrun prefix in mid-line
# starts a line of its own, unless it follows another prefix (`]:`, `]: `) or a Ray `(...) `.
INTERLEAVED = r"([^\s:\])]|[^\]]:|[^:)]\s)(\[[A-Za-z_]+\d+\]:)"
# Blanks at the start of a line: spaces, tabs, and the no-break and ideographic spaces a copy from
# a web page or a CJK terminal leaves.
BLANKS = " \t\u00a0\u3000"
# Wrappers stacked deeper than this are left for the format's patterns to face.
MAX_DEPTH = 6
# Distinct prefixes per line below which their groups are read once per distinct prefix
# (Unwrapper._read_prefix); above it (a timestamp in every prefix), line by line.
DISTINCT_PREFIXES = 0.5
# Share of a chunk's lines with a wrapper prefix below which those are read apart from the others
# (Unwrapper._strip_prefixes); above it all lines are read together.
PREFIXED_APART = 0.5


# One pass: at each position an escape sequence is tried before a lone control character,
# which removes exactly what an escape pass followed by a control pass would.
ESCAPE_OR_CONTROL = f"(?:{ESCAPES})|{CONTROLS}"


def strip_escapes(text: pl.Expr) -> pl.Expr:
    return text.str.replace_all(ESCAPE_OR_CONTROL, "")


def without_escapes(lines: pl.DataFrame) -> pl.DataFrame:
    """`text` with escapes and controls removed. Looked for first: replacing copies every line,
    ten times the cost of finding none (a Ray chunk: 12 ms against 1.6)."""
    if not lines.select(pl.col("text").str.contains(ESCAPE_OR_CONTROL).any()).item():
        return lines
    return lines.with_columns(strip_escapes(pl.col("text")))


def split_interleaved(lines: pl.DataFrame) -> pl.DataFrame:
    """Cut lines where another rank's line was glued in; the pieces keep their line number, and
    `_glued` is true on every piece but the first (each starts with its own `[rankN]:`)."""
    glued = pl.col("text").str.contains(INTERLEAVED)
    # Literal tests first: a glued line holds a `]:` beyond the torchrun prefix it may start with
    # (most chunks hold no `]:` at all once their wrappers are off: a quarter of counting them).
    not_glued = lines.with_columns(_glued=pl.lit(False))
    if not lines.select(pl.col("text").str.contains("]:", literal=True).any()).item():
        return not_glued
    leading = pl.col("text").str.contains(LEADING_TORCHRUN_PREFIX).cast(pl.UInt32)
    maybe = lines.filter(pl.col("text").str.count_matches("]:", literal=True) > leading)
    if not maybe.select(glued.any()).item():
        return not_glued
    pieces = pl.when(glued).then(pl.col("text").str.replace_all(INTERLEAVED, "$1\n$2")).otherwise(pl.col("text")).str.split("\n")
    return lines.with_columns(pieces).explode("text").with_columns(_glued=pl.int_range(pl.len()).over("line_no") > 0)


def _strip_blanks(frame):
    """`text` without its leading blanks, their count added to `indent` (a frame or a lazy frame)."""
    text = pl.col("text")
    stripped = text.str.strip_chars_start(BLANKS)
    return frame.with_columns(indent=pl.col("indent") + (text.str.len_chars() - stripped.str.len_chars()).cast(pl.Int32), text=stripped)


def _alternation(wrappers: list[WrapperSpec], part: str) -> tuple[str | None, list[tuple[str, str]]]:
    """One regex trying every wrapper's `part` (prefix or suffix); groups renamed `w{i}_{group}` so
    they stay unique. Returns the regex and (renamed group, field) pairs."""
    alternatives, groups = [], []
    for i, wrapper in enumerate(wrappers):
        regex = getattr(wrapper, part)
        if regex is None:
            continue
        for group in getattr(wrapper, f"{part}_fields"):
            regex = regex.replace(f"(?P<{group}>", f"(?P<w{i}_{group}>")
            groups.append((f"w{i}_{group}", field_of(group)))
        alternatives.append(f"(?:{regex})")
    if not alternatives:
        return None, []
    body = "|".join(alternatives)
    # Blanks between stacked wrappers (a quoted code block: `>     [rank0]: `) go with the wrapper
    # after them; those before the first and after the last are counted as the line's indent.
    return (f"^[{BLANKS}]*(?:{body})" if part == "prefix" else f"(?:{body})$"), groups


class Unwrapper:
    """Strips escapes, the declared wrappers and the logger prefixes of the loaded formats."""

    def __init__(self, logger_prefixes: Iterable[str], wrappers: Iterable[WrapperSpec] | None = None):
        """`wrappers`: the wrappers to strip; by default the built-in ones (memlog/parse/wrappers.py)."""
        prefixes = [p for p in logger_prefixes if p]
        self.logger_prefix = "^(?:" + "|".join(f"(?:{p})" for p in prefixes) + ")" if prefixes else None
        wrappers = by_priority(builtin_wrappers().values()) if wrappers is None else list(wrappers)
        self.prefix, self.prefix_groups = _alternation(wrappers, "prefix")
        self.suffix, self.suffix_groups = _alternation(wrappers, "suffix")

    def __call__(self, lines: pl.DataFrame) -> pl.DataFrame:
        """lines(line_no, text) -> lines + the wrapper fields (node, rank, actor, pid, ip, ts, ...),
        with text unwrapped. A line with another rank's line glued into it comes out as two rows
        (split_interleaved)."""
        fields = (pl.lit(None, dtype=t).alias(f) for f, t in WRAPPER_FIELDS.items())
        frame = _strip_blanks(without_escapes(lines).with_columns(*fields, indent=pl.lit(0, dtype=pl.Int32)))
        frame = self._strip_prefixes(frame)
        # Another rank's line glued into this one (shared stdout): its own prefix names its rank.
        frame = split_interleaved(frame)
        if frame["_glued"].any():
            frame = pl.concat([frame.filter(~pl.col("_glued")), self._strip_prefixes(frame.filter("_glued").with_columns(rank=None))])
            frame = frame.sort("line_no", maintain_order=True)
        frame = frame.drop("_glued")
        whole = pl.col("_w").struct.field("_whole")
        if self.suffix is not None:
            frame = frame.with_columns(_w=pl.col("text").str.extract_groups(f"(?P<_whole>{self.suffix})"))
            if frame.select(whole.is_not_null().any()).item():
                cut = pl.col("text").str.len_chars() - whole.str.len_chars().fill_null(0)
                frame = self._take(frame, self.suffix_groups).with_columns(pl.col("text").str.slice(0, cut))
        # The rest needs no look at the data: one lazy query, planned once rather than step by step,
        # in which the logger prefix's regex (its length and its timestamp are read) runs once.
        rest = frame.drop("_w", strict=False).lazy()
        # srun's task id is the rank when nothing else names the process; under torchrun (one task
        # per node) or Ray it tells the nodes apart. `_task` keeps a task that stood in for the rank:
        # when the line's own text names its rank (Megatron's `[Rank N]`, formats.LinePattern.extract)
        # the task tells the nodes apart after all.
        # A node an outer wrapper named (a journald host over srun's output) keeps the task beside it.
        named = pl.col("rank").is_not_null() | pl.col("actor").is_not_null()
        rest = rest.with_columns(
            rank=pl.when(named).then(pl.col("rank")).otherwise(pl.col("task")),
            node=pl.when(named & pl.col("task").is_not_null()).then(node_with_task(pl.col("node"), pl.col("task"))).otherwise(pl.col("node")),
            _task=pl.when(named).then(None).otherwise(pl.col("task")),
        ).drop("task")
        logger_ts = pl.lit(None, dtype=pl.String)
        rest = _strip_blanks(rest)  # (blanks after the last wrapper, before the logger's prefix)
        if self.logger_prefix is not None:
            prefix = pl.col("text").str.extract(self.logger_prefix, 0)
            logger_ts = prefix.str.extract(TIMESTAMP, 1)
            rest = rest.with_columns(_logger_ts=logger_ts, text=pl.col("text").str.slice(prefix.str.len_chars().fill_null(0)))
            logger_ts = pl.col("_logger_ts")
        rest = _strip_blanks(rest)
        # The logger's own clock first (it is the program's); a wrapper's timestamp otherwise, when it parses.
        wrapper_ts = pl.col("ts").str.extract(TIMESTAMP, 1)
        return rest.with_columns(ts=pl.coalesce(logger_ts, wrapper_ts)).drop("_logger_ts", strict=False).collect()

    def with_line_prefixes(self, lines: pl.DataFrame) -> pl.DataFrame:
        """`lines` where the pieces of a physical line that reading cut at `\\r` (reading.to_frame) carry
        the wrapper prefixes the line began with: a launcher labels the whole line it relays
        (`gpu-a07: 45%|###|\\r(Runner pid=5121) Step 3`), so every piece is that node's (without it, a
        block whose first line came after a progress bar lost its node, and the block with it). A
        piece that starts with the line's outermost prefix already was labelled itself (and this may
        run twice): it is left as it is."""
        if self.prefix is None or lines.height < 2:
            return lines
        later = (pl.col("line_no").diff() == 0).fill_null(False)  # rows are in line order: a later piece repeats its number
        if not lines.select(later.any()).item():
            return lines
        heads = lines.filter(later.shift(-1, fill_value=False) & ~later).select(
            "line_no", _rest=strip_escapes(pl.col("text")), _prefix=pl.lit(""), _outer=pl.lit(None, dtype=pl.String)
        )
        rest, cut = pl.col("_rest"), pl.col("_cut")
        found = rest.str.head(rest.str.len_chars() - cut.str.len_chars())
        for _ in range(MAX_DEPTH):  # the stack of wrappers, outermost first, as _strip_prefixes takes it off
            # (the finding pass: no groups read). The blanks around them go too: a piece of an
            # indented line is as indented as the line (multi-line readers compare indents).
            heads = heads.with_columns(_cut=rest.str.strip_chars_start(BLANKS).str.replace(self.prefix, "").str.strip_chars_start(BLANKS))
            if heads.select((rest == cut).all()).item():
                break
            heads = heads.with_columns(_outer=pl.coalesce("_outer", pl.when(rest != cut).then(found)), _prefix=pl.col("_prefix") + found, _rest=cut)
        heads = heads.filter(pl.col("_prefix") != "").select("line_no", "_prefix", "_outer")
        if heads.is_empty():
            return lines
        # Only the later pieces are looked at and written (a Ray chunk: 5,000 of 75,000 lines).
        at = lines.select(pl.arg_where(later)).to_series()
        pieces = lines[at].select("line_no", "text").join(heads, on="line_no", how="left", maintain_order="left")
        text, prefix = pl.col("text"), pl.col("_prefix")
        carried = prefix.is_not_null() & ~strip_escapes(text).str.strip_chars_start(BLANKS).str.starts_with(pl.col("_outer"))
        texts = lines["text"].clone()
        texts.scatter(at, pieces.select(pl.when(carried).then(prefix + text).otherwise(text)).to_series())
        return lines.with_columns(texts)

    def _strip_prefixes(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Strip wrapper prefixes round after round, outermost first, while any line has one."""
        if self.prefix is None:
            return frame
        for _ in range(MAX_DEPTH):
            # A yes/no pass first: most lines carry one wrapper or none. Where most lines of the
            # chunk have none, the others are read on their own; where most have one, all are read
            # together (a line without one is left as it was), sparing a split and a re-sort.
            has = frame.select(pl.col("text").str.contains(self.prefix)).to_series()
            if not has.any():
                break
            rest = None
            if has.sum() < PREFIXED_APART * len(has):
                frame = frame.with_row_index("_i")
                frame, rest = frame.filter(has), frame.filter(~has)
            frame = self._take(self._read_prefix(frame, self.prefix), self.prefix_groups).drop("_w")
            if rest is not None:
                frame = pl.concat([frame, rest], how="vertical_relaxed").sort("_i").drop("_i")
        return frame

    def _read_prefix(self, frame: pl.DataFrame, prefix: str) -> pl.DataFrame:
        """Lines with their wrapper prefix cut off and its groups in `_w` (a line without one is left
        as it was, its groups null).

        The groups are read once per distinct prefix: a chunk's prefixes repeat (a few ranks,
        workers, hosts), and the capturing pass is most of unwrapping's cost, where finding and
        cutting the prefix is a sixth of it (a Ray chunk: 37 ms against 6). The regex's match and groups depend on the prefix and
        on the character after it only (it has no look-ahead; `\\b` and `$` at its end see that
        character), so one line per distinct (prefix, next character) stands for all of them."""
        text = pl.col("text")
        frame = frame.with_columns(_rest=text.str.replace(prefix, ""))
        cut = text.str.len_chars() - pl.col("_rest").str.len_chars()
        frame = frame.with_columns(_cut=cut, _key=text.str.head(cut + 1))
        groups = text.str.extract_groups(f"(?P<_whole>{prefix})")
        distinct = frame.unique(["_cut", "_key"], keep="any")
        if distinct.height > DISTINCT_PREFIXES * frame.height:
            frame = frame.with_columns(_w=groups)
        else:
            read = distinct.select("_cut", "_key", _w=groups)
            # Only the groups some prefix filled: joining all of them in costs more than the reading saved.
            nulls = read["_w"].struct.unnest().null_count().row(0, named=True)
            filled = [pl.col("_w").struct.field(group) for group, _ in self.prefix_groups if nulls[group] < read.height]
            read = read.with_columns(_w=pl.struct(filled) if filled else pl.lit(None, dtype=pl.Struct({"_none": pl.String})))
            frame = frame.join(read, on=["_cut", "_key"], how="left", maintain_order="left")
        return frame.with_columns(text=pl.col("_rest")).drop("_rest", "_cut", "_key")

    @staticmethod
    def _take(frame: pl.DataFrame, groups: list[tuple[str, str]]) -> pl.DataFrame:
        """Take the fields the wrapper groups in `_w` name: node and rank from the outermost wrapper
        that names them, the process (actor, pid, ...) from the innermost (wrappers.INNERMOST_WINS)."""
        # Only the groups that matched somewhere in the chunk: a coalesce over dozens of empty ones
        # costs a millisecond per chunk to plan, and changes nothing.
        nulls = frame["_w"].struct.unnest().null_count().row(0, named=True)
        by_field: dict[str, list[pl.Expr]] = {}
        for group, field in groups:
            if nulls.get(group, frame.height) < frame.height:  # (a group may have been left out already)
                by_field.setdefault(field, []).append(pl.col("_w").struct.field(group).cast(WRAPPER_FIELDS[field], strict=False))
        if "task" in by_field:
            # A task label inside another (srun's output relabelled by an outer srun): the inner one
            # is the process's; the outer one names where it ran, beside any node already named.
            inner, outer = pl.coalesce(*by_field.pop("task")), pl.col("task")
            nested = outer.is_not_null() & inner.is_not_null()
            frame = frame.with_columns(
                node=pl.when(nested).then(node_with_task(pl.col("node"), outer)).otherwise(pl.col("node")),
                task=pl.coalesce(inner, outer),
            )
        return frame.with_columns(
            (pl.coalesce(*exprs, pl.col(field)) if field in INNERMOST_WINS else pl.coalesce(pl.col(field), *exprs)).alias(field)
            for field, exprs in by_field.items()
        )


def sample_mismatches(wrapper: WrapperSpec, others: list[WrapperSpec]) -> list[str]:
    """Each sample, unwrapped with this wrapper and the others, leaves `text` and names its fields."""
    unwrap = Unwrapper([], [wrapper, *(w for w in others if w.name != wrapper.name)])
    problems = []
    for i, sample in enumerate(wrapper.samples, start=1):
        row = unwrap(pl.DataFrame({"line_no": [1], "text": [sample["line"]]})).row(0, named=True)
        for key, want in sample.items():
            if key == "line":
                continue
            got = row.get(key)
            if got != want and str(got) != str(want):
                problems.append(f"{wrapper.path.name} sample {i}: {key} = {got!r}, expected {want!r} (line {sample['line'][:80]!r})")
    return problems
