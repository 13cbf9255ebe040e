"""Block parser for EasyR1's console logger: one YAML block per step.

    (Runner pid=5121) Step 3
    (Runner pid=5121) actor:
    (Runner pid=5121)   pg_loss: -0.012
    (Runner pid=5121) perf:
    (Runner pid=5121)   cpu_memory_used_gb: 212.77

`print(f"Step {step}\\n" + yaml.dump(unflatten_dict(metrics), indent=2))`: keys sorted, `/` in a
metric name turned into nesting (2 spaces a level), floats rounded to 3 decimals or in `1.0e-06`
style, and under Ray every line carries its own `(Runner pid=N)` prefix. A worker's block is its
`Step N` line and the `key: value` lines that worker prints right after it; other workers' lines
may come in between and are not part of it. The block ends at that worker's first other line
(or a line indented wrongly), its next `Step N`, or where the engine stops feeding rows
(`window_start`: rows the parser did not see).

The engine (memlog/parse/multiline.py) feeds the unwrapped rows within `max_lines` after each line
holding the start literal, chunk by chunk, each line's parts read beforehand by `prepare` (on the
threads that scan chunks). Everything here is polars expressions over those rows: blocks are runs
of one worker's key lines after its `Step N`, a key's path is rebuilt from the nearest earlier key
one level up (YAML's own rule), and blocks that may go on in the next chunk are held back and
parsed again with it.

Options (from the spec's `block_parser:`):
  start_literal  literal every block's first line holds ("Step ")
  start          regex of the first line after unwrapping, group 1 is the step
  metrics        metric path (`perf/cpu_memory_used_gb`) -> canonical column
  max_lines      rows after a start line that may still belong to its block
"""

from __future__ import annotations

from typing import Any

import polars as pl

# `key:` or `key: value`. How deep the key is comes from the line's indentation, which the engine
# has counted in `indent` (relative to the block's `Step N` line: a pasted block may be indented whole).
KEY_LINE = r"^(?P<key>[\w@()./-]+):(?: (?P<value>.*))?$"
WORKER = ["node", "actor", "pid", "ip", "rank"]
PARTS = ["line_no", "ts", *WORKER, "window_start", "step", "indent", "key", "value"]
YAML_SPECIAL = {".inf": "inf", "+.inf": "inf", "-.inf": "-inf", ".nan": "nan"}


def yaml_number(text: pl.Expr) -> pl.Expr:
    """A YAML scalar as PyYAML prints a number (`0.532`, `1.0e-06`, `12`, `!!float nan`), else null."""
    plain = text.str.strip_chars().str.strip_prefix("!!float ").str.strip_chars("'\"").str.to_lowercase()
    return plain.replace(YAML_SPECIAL).cast(pl.Float64, strict=False)


class YamlStepBlocks:
    def __init__(self, options: dict[str, Any]):
        self.start_literals = (str(options.get("start_literal", "Step ")),)
        self.start = str(options.get("start", r"^Step (\d+)$"))
        self.metrics = {str(k): str(v) for k, v in (options.get("metrics") or {}).items()}
        self.columns = tuple(dict.fromkeys(self.metrics.values()))
        # The key lines read at all (see _values): a line N deep has a path of N + 1 parts or more,
        # so none deeper than the deepest metric is one, and one that deep is one only if its key is
        # a metric path's last part; every line above may be a metric's parent.
        self.deepest_metric = max((path.count("/") for path in self.metrics), default=0)
        self.metric_leaves = sorted({path.rsplit("/", 1)[-1] for path in self.metrics})
        self.max_lines = int(options.get("max_lines", 400))
        self.held: pl.DataFrame | None = None  # rows of blocks that may go on in the next chunk

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Each line's own parts: the step of a start line; key and value of a key line."""
        return rows.select(
            step=pl.col("text").str.extract(self.start, 1).cast(pl.Int64, strict=False),
            line=pl.col("text").str.extract_groups(KEY_LINE),
        ).unnest("line")

    def feed(self, rows: pl.DataFrame) -> pl.DataFrame | list[dict[str, Any]]:
        return self._blocks(rows.select(PARTS), final=False)

    def finish(self) -> pl.DataFrame | list[dict[str, Any]]:
        return self._blocks(None, final=True)

    def open_since(self) -> int | None:
        """The first line of the blocks held back for the next chunk."""
        return None if self.held is None else int(self.held["line_no"].min())

    def _blocks(self, parts: pl.DataFrame | None, final: bool) -> pl.DataFrame | list[dict[str, Any]]:
        frames = [f for f in (self.held, parts) if f is not None]
        self.held = None
        if not frames:
            return []
        frame = pl.concat([f.select(PARTS) for f in frames], how="vertical_relaxed")
        is_key = pl.col("key").is_not_null()
        frame = frame.with_columns(_win=pl.col("window_start").cum_sum())
        # A worker's rows in one window, named by the first of them: one integer to partition by,
        # instead of the five worker columns (strings, most of them) at every step below.
        window = ["_wid"]
        frame = frame.with_row_index("_wid").with_columns(pl.col("_wid").first().over(*WORKER, "_win"))
        # Two spaces a level below the worker's last `Step N` line; a key line less indented than it,
        # or by an odd number of spaces, is no part of a block.
        base = pl.when(pl.col("step").is_not_null()).then(pl.col("indent")).forward_fill().over(window)
        below = pl.col("indent") - base
        depth = pl.when(is_key).then(below).otherwise(-2)
        misplaced = is_key & ((below % 2 == 1) | (below < 0)).fill_null(True)
        frame = frame.with_columns(_depth=depth // 2, _odd=misplaced)
        # A worker's segment starts at each of its lines that is no key line: alive when that line
        # is a `Step N`. A key line deeper than one below the line before it ends the segment too.
        # The line before, within the segment: the worker's line before, unless this line starts one.
        before = pl.when(is_key).then(pl.col("_depth").shift(1).over(window))
        skipped = pl.col("_depth") > before + 1
        frame = frame.with_columns(_seg=(~is_key | pl.col("_odd") | skipped.fill_null(False)).cum_sum().over(window))
        block = [*window, "_seg"]
        # Each worker's last segment in the last window may go on in the next chunk.
        last = (pl.col("_win") == pl.col("_win").max()) & (pl.col("_seg") == pl.col("_seg").max().over(window))
        frame = frame.with_columns(_step=pl.col("step").first().over(block), _hold=last & pl.lit(not final))
        frame = frame.filter(pl.col("_step").is_not_null())
        held = frame.filter(pl.col("_hold")).select(PARTS).with_columns(window_start=pl.lit(False))
        self.held = None if held.is_empty() else held
        frame = frame.filter(~pl.col("_hold"))
        if frame.is_empty():
            return []
        heads = frame.filter(pl.col("step").is_not_null()).select(*WORKER, *block, "line_no", "ts", "step")
        values = self._values(frame, block)
        records = heads.join(values, on=block, how="left", nulls_equal=True) if values is not None else heads
        return records.drop(*block)

    def _values(self, frame: pl.DataFrame, block: list[str]) -> pl.DataFrame | None:
        """The mapped metrics of each block, one column each (the last reading if a key repeats)."""
        # Only the key lines that may be a metric or a metric's parent (see __init__): of an EasyR1
        # block's ~40 key lines, its few sections and its 7 metrics.
        depth, key = pl.col("_depth"), pl.col("key")
        at_leaf = (depth == self.deepest_metric) & key.is_in(self.metric_leaves)
        keys = frame.filter(key.is_not_null() & ((depth < self.deepest_metric) | at_leaf))
        if keys.is_empty() or not self.metrics:
            return None
        deepest = int(keys["_depth"].max())
        ancestors = [pl.when(pl.col("_depth") == level).then(pl.col("key")).forward_fill().over(block) for level in range(deepest)]
        keys = keys.with_columns(*(a.alias(f"_k{i}") for i, a in enumerate(ancestors)))
        path = pl.col("key")
        for level in range(1, deepest + 1):
            path = (
                pl.when(pl.col("_depth") == level)
                .then(pl.concat_str([*(pl.col(f"_k{i}") for i in range(level)), pl.col("key")], separator="/"))
                .otherwise(path)
            )
        keys = keys.with_columns(_path=path).filter(pl.col("_path").is_in(list(self.metrics)))
        if keys.is_empty():
            return None
        keys = keys.with_columns(_column=pl.col("_path").replace_strict(self.metrics), _value=yaml_number(pl.col("value")))
        return keys.group_by(block).agg(pl.col("_value").filter(pl.col("_column") == column).drop_nulls().last().alias(column) for column in self.columns)


def create(options: dict[str, Any]) -> YamlStepBlocks:
    return YamlStepBlocks(options)
