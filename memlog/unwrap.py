"""Unwrap: strip escape codes and the prefixes launchers stack on a line, keeping what they say.

Outermost first (log-formats.md §0.1): Ray's `(Actor pid=N, ip=A)` driver prefix, torchrun's
`[rankN]:` tee prefix, then the framework's logger prefix (`[titan] <ts> - root - INFO - `, ...).
The logger prefixes come from the format specs, so a new format brings its own. Everything here is a
polars expression over the whole chunk: no Python loop per line.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

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

RAY_PREFIX = (
    r"^\((?:(?P<actor>[^()]*?) )?"
    r"(?:pid=(?P<pid>\d+)|(?P<special>raylet|autoscaler[^,)]*|gcs_server))"
    r"(?:, ip=(?P<ip>[0-9a-fA-F.:]+))?\) ?"
)
RAY_REPEATED = r"\s*\[repeated (?P<repeated>\d+)x across cluster\](?: \(Ray deduplicates logs by default\..*\))?\s*$"
# torchrun's tee header is `[{role}{local_rank}]:` with no space; exception lines come with one,
# and under --tee they carry both (`[rank0]:[rank0]: Traceback ...`).
TORCHRUN_PREFIX = r"^\[(?P<role>[A-Za-z_]+?)(?P<rank>\d+)\]: ?(?:\[[A-Za-z_]+?\d+\]: ?)*"
LEADING_TORCHRUN_PREFIX = r"^\[[A-Za-z_]+\d+\]:"
TIMESTAMP = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,6})?)"
# Ranks sharing one stdout without line buffering glue the start of one line to another rank's
# line: `[rank1]: ... loss:  9.1  [rank0]:[titan] ... step: 3 ...`. A torchrun prefix in mid-line
# starts a line of its own, unless it follows another prefix (`]:`, `]: `) or a Ray `(...) `.
INTERLEAVED = r"([^\s:\])]|[^\]]:|[^:)]\s)(\[[A-Za-z_]+\d+\]:)"


def strip_escapes(text: pl.Expr) -> pl.Expr:
    # One pass: at each position an escape sequence is tried before a lone control character,
    # which removes exactly what an escape pass followed by a control pass would.
    return text.str.replace_all(f"(?:{ESCAPES})|{CONTROLS}", "")


def split_interleaved(lines: pl.DataFrame) -> pl.DataFrame:
    """Cut lines where another rank's line was glued in; the pieces keep their line number."""
    glued = pl.col("text").str.contains(INTERLEAVED)
    # Literal test first: a glued line holds a `]:` beyond the torchrun prefix it may start with.
    leading = pl.col("text").str.contains(LEADING_TORCHRUN_PREFIX).cast(pl.UInt32)
    maybe = lines.filter(pl.col("text").str.count_matches("]:", literal=True) > leading)
    if not maybe.select(glued.any()).item():
        return lines
    return lines.with_columns(
        pl.when(glued).then(pl.col("text").str.replace_all(INTERLEAVED, "$1\n$2")).otherwise(pl.col("text")).str.split("\n")
    ).explode("text")


def _strip_prefix(frame: pl.DataFrame, pattern: str, groups: dict[str, pl.DataType]) -> pl.DataFrame:
    """Extract `groups` from a leading `pattern` into columns and remove the matched prefix."""
    parts = pl.col("text").str.extract_groups(f"(?P<_whole>{pattern})")
    frame = frame.with_columns(
        *(parts.struct.field(g).cast(t, strict=False).alias(g) for g, t in groups.items()),
        _prefix_len=parts.struct.field("_whole").str.len_chars().fill_null(0),
    )
    return frame.with_columns(pl.col("text").str.slice(pl.col("_prefix_len"))).drop("_prefix_len")


def _any(frame: pl.DataFrame, condition: pl.Expr) -> bool:
    return bool(frame.select(condition.any()).item())


class Unwrapper:
    """Strips escapes, Ray/torchrun prefixes and the logger prefixes of the loaded formats."""

    def __init__(self, logger_prefixes: Iterable[str]):
        prefixes = [p for p in logger_prefixes if p]
        self.logger_prefix = "^(?:" + "|".join(f"(?:{p})" for p in prefixes) + ")" if prefixes else None

    def __call__(self, lines: pl.DataFrame) -> pl.DataFrame:
        """lines(line_no, text) -> lines + actor, pid, ip, rank, repeated, ts, with text unwrapped.
        A line with another rank's line glued into it comes out as two rows (split_interleaved)."""
        frame = split_interleaved(lines.with_columns(strip_escapes(pl.col("text"))))
        # Each regex runs only when some line can match it (a cheap literal test): most logs have
        # no Ray prefix and no dedup suffix, and the regexes cost more than the test.
        if _any(frame, pl.col("text").str.starts_with("(")):
            frame = _strip_prefix(frame, RAY_PREFIX, {"actor": pl.String, "pid": pl.Int64, "special": pl.String, "ip": pl.String})
            frame = frame.with_columns(pl.coalesce("actor", "special").alias("actor")).drop("special")
        else:
            frame = frame.with_columns(actor=pl.lit(None, dtype=pl.String), pid=pl.lit(None, dtype=pl.Int64), ip=pl.lit(None, dtype=pl.String))
        if _any(frame, pl.col("text").str.contains("[repeated ", literal=True)):
            frame = frame.with_columns(
                repeated=pl.col("text").str.extract(RAY_REPEATED, 1).cast(pl.Int64, strict=False),
                text=pl.col("text").str.replace(RAY_REPEATED, ""),
            )
        else:
            frame = frame.with_columns(repeated=pl.lit(None, dtype=pl.Int64))
        if _any(frame, pl.col("text").str.starts_with("[")):
            frame = _strip_prefix(frame, TORCHRUN_PREFIX, {"rank": pl.Int64})
        else:
            frame = frame.with_columns(rank=pl.lit(None, dtype=pl.Int64))
        if self.logger_prefix is not None:
            prefix = pl.col("text").str.extract(self.logger_prefix, 0)
            frame = frame.with_columns(
                ts=prefix.str.extract(TIMESTAMP, 1),
                text=pl.col("text").str.slice(prefix.str.len_chars().fill_null(0)),
            )
        else:
            frame = frame.with_columns(ts=pl.lit(None, dtype=pl.String))
        return frame
