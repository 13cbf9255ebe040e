"""Tables: a header line over rows of numbers (CSV, TSV, tqdm tables such as ultralytics'), their
rows read by position, a sparse CSV's rows split by the cells they fill (guess.py uses them)."""

from __future__ import annotations

import re
from collections import defaultdict

from memlog.base.columns import MEMORY_COLUMNS
from memlog.parse.generic.fields import BAR, NUM, UNIT, fields
from memlog.parse.generic.mapping import loss_rank, meaning_of, memory_rank, unit_in_key, words
from memlog.parse.generic.shape import MIN_REPEATS, Column, Pattern, columns_of, magnitude_unit, running_max

SPEC_NUM = NUM
BAR_COUNT = re.compile(rf"{BAR}[1-9]\d*/\d+")
# A unit printed after a value, as a spec captures it (`%` is not a size and is not read).
SPEC_UNIT = r"[KMGTP]i?B|bytes|[KMGTP]\b"


# W&B's panel export names a column `<run name> - <key>`, with `<key>__MIN` and `<key>__MAX` (the band
# around it) beside it; the key itself outranks its band (mapping.memory_rank, loss_rank).
_RUN_PREFIX = re.compile(r"^.+ - (?=[A-Za-z_])")


def _unquoted(cell: str) -> str:
    """A CSV cell without blanks and the double quotes a writer quoting every cell puts around it."""
    cell = cell.strip()
    return cell[1:-1].strip() if len(cell) >= 2 and cell[0] == cell[-1] == '"' else cell


def find_table(sample: list[str]) -> tuple[int, str, list[str]] | None:
    """A header line followed by rows of numbers under it (CSV, tqdm tables): (index, sep, words)."""
    for i, text in enumerate(sample[:-MIN_REPEATS]):
        sep = "," if text.count(",") >= 2 else "\t" if text.count("\t") >= 2 else None
        cells = [_RUN_PREFIX.sub("", _unquoted(c)) for c in (text.split(sep) if sep else text.split())]
        if len(cells) < 3 or not all(re.fullmatch(r"[A-Za-z_][\w./()-]*", c) for c in cells):
            continue
        if row_cells(sample[i + 1], sep, len(cells)) is None:  # a header's first row is right under it
            continue
        rows = sample[i + 1 : i + 1 + 2 * MIN_REPEATS]
        good = sum(1 for r in rows if row_cells(r, sep, len(cells)) is not None)
        if good < MIN_REPEATS:  # the header printed again above each row (tqdm tables, one per epoch)
            under_copies = [sample[k + 1] for k in range(i, len(sample) - 1) if sample[k] == text]
            good = sum(1 for r in under_copies if row_cells(r, sep, len(cells)) is not None)
        if good >= MIN_REPEATS:
            return i, sep or " ", cells
    return None


def row_cells(text: str, sep: str | None, n: int) -> list[str] | None:
    cells = [_unquoted(c).rstrip(":") for c in (text.split(sep) if sep and sep != " " else text.split())][:n]
    # A CSV row may leave cells empty: Lightning's CSVLogger writes each log call as a row of its own.
    empty_ok = sep == ","
    if len(cells) < n or not any(cells) or not all(re.fullmatch(rf"(?:{NUM})(?:/\d+)?(?:{UNIT})?", c) or (empty_ok and not c) for c in cells):
        return None
    return cells


def table_patterns(sample: list[str], at: int, sep: str, header: list[str]) -> list[Pattern]:
    cells_of = {i: got for i, t in enumerate(sample) if i > at and (got := row_cells(t, sep, len(header))) is not None}
    rows = [(i, sample[i]) for i in cells_of]
    if len(rows) < MIN_REPEATS:
        return []
    names = ("global", "step", "iteration", "iter", "epoch")  # in order of preference
    ranked = sorted((names.index(words(h)[0]), j) for j, h in enumerate(header) if words(h) and words(h)[0] in names)
    counter = ranked[0][1] if ranked else None
    if counter is None and re.fullmatch(r"\d+(?:/\d+)?", cells_of[rows[0][0]][0]):
        counter = 0
    columns: dict[str, tuple[tuple, Column]] = {}
    for j, key in enumerate(header):
        if j == counter:
            continue
        cells = [cells_of[i][j] for i, _ in rows]
        parts = [re.fullmatch(rf"(?P<v>{NUM})(?:/\d+)?(?P<u>{UNIT})?", c) for c in cells]
        printed = [p["u"] for p in parts if p and p["u"]]
        meaning = meaning_of(key, printed[0] if printed else unit_in_key(key))
        if meaning is None or "%" in printed:
            continue
        values = [float(p["v"]) for p in parts if p]
        if not values:
            continue
        running = meaning.role == "memory" and meaning.peak and running_max(values)
        column = meaning.column(running)
        unit, guessed = (printed[0] if printed else unit_in_key(key)), False
        if (column in MEMORY_COLUMNS or meaning.role == "capacity") and unit is None:
            unit, guessed = magnitude_unit(values, meaning.host), True
        if column not in MEMORY_COLUMNS and meaning.role != "capacity":
            unit = None
        col = Column(column, key, meaning, "table", "", bool(printed), unit, guessed, running, position=j)
        col.text = meaning.describe(key, unit, guessed, running)
        rank = loss_rank(key) if meaning.role == "loss" else memory_rank(meaning, key)
        if column not in columns or rank < columns[column][0]:
            columns[column] = (rank, col)
    if sep == " ":  # `key: value` fields a row carries after its cells (a user's `RAM= 16.5 GB` suffix)
        texts = [t for _, t in rows]
        cells_end = [re.match(rf"\s*(?:\S+\s+){{{len(header) - 1}}}\S+", t).end() for t in texts]  # type: ignore[union-attr]
        after = [[f for f in fields(t) if f.start >= end] for t, end in zip(texts, cells_end)]
        for col in columns_of(texts, after, [None] * len(texts)):
            columns.setdefault(col.column, ((), col))
    if not columns:
        return []
    bar, first = _bar_within(rows, counter, sep, len(header))
    chosen = [c for _, c in columns.values()]
    patterns = []
    for n, (shape, lines) in enumerate(_row_shapes(rows, chosen, sep, len(header)).items()):
        pattern = Pattern(
            "table-row" + (f"-{n + 1}" if n else ""), "", None, [c for c in chosen if c.position is None or c.position in shape], lines, table=(sep, header)
        )
        pattern.counter = counter  # a column index here, not a COUNTERS index
        pattern.bar, pattern.first_epoch = bar, first
        patterns.append(pattern)
    return patterns


def _bar_within(rows: list[tuple[int, str]], counter: int | None, sep: str, n: int) -> tuple[bool, int]:
    """Whether the rows are a progress bar redrawn within each value of the counter column
    (ultralytics' `38/299  15.3G ... 640: 12% ━╸── 33/273 ...`, every batch): the step is then the
    bar's `i/N` within that epoch. With the number the first epoch is given (0 or 1)."""
    if counter is None:
        return False, 0
    epochs = [int(m[0]) for _, t in rows if (m := re.match(r"\d+", (row_cells(t, sep, n) or [""])[counter]))]
    barred = sum(1 for _, t in rows if BAR_COUNT.search(t))
    repeated = len(set(epochs)) <= 0.5 * len(rows)
    return repeated and barred >= 0.5 * len(rows), 0 if 0 in epochs else 1


def _row_shapes(rows: list[tuple[int, str]], chosen: list[Column], sep: str, n: int) -> dict[frozenset[int], list[tuple[int, str]]]:
    """A sparse table's rows by the read cells they fill (Lightning's metrics.csv: DeviceStatsMonitor's
    rows, then the loss's, at one step): each shape is a pattern requiring its cells, its rows joined
    to the others' by their step. A table without empty cells is one shape."""
    positions = [c.position for c in chosen if c.position is not None]
    shapes: dict[frozenset[int], list[tuple[int, str]]] = defaultdict(list)
    for i, text in rows:
        cells = row_cells(text, sep, n) or []
        shapes[frozenset(j for j in positions if cells[j])].append((i, text))
    kept = {shape: lines for shape, lines in shapes.items() if shape and len(lines) >= MIN_REPEATS}
    return kept or {frozenset(positions): rows}


def table_regex(p: Pattern) -> tuple[str, dict[str, str]]:
    sep, header = p.table  # type: ignore[misc]
    cell_sep = r"\s*,\s*" if sep == "," else r"\t" if sep == "\t" else r"\s+"
    quote = '"?' if sep == "," else ""  # (a writer quoting every cell)
    by_position = {c.position: c for c in p.columns if c.position is not None}
    cells: list[str] = []
    units: dict[str, str] = {}
    last = max([*by_position, p.counter if p.counter is not None else 0])
    for j in range(last + 1):
        if j == p.counter:
            cells.append(quote + (r"(?P<epoch>\d+)(?:/\d+)?" if p.bar else r"(?P<step>\d+)(?:/\d+)?") + quote)
        elif j in by_position:
            c = by_position[j]
            unit = f"(?P<{c.column}_unit>{SPEC_UNIT})?" if c.printed_unit else ""
            cells.append(f"{quote}(?P<{c.column}>{SPEC_NUM}){unit}{quote}")
        else:
            cells.append(r"[^\s,]+" if sep != "," else r"[^,]*")
    bar = f".*?{BAR}(?P<step>[1-9]\\d*)/(?P<epoch_len>\\d+)" if p.bar else ""
    return r"^\s*" + cell_sep.join(cells) + bar, units


def table_literal(p: Pattern) -> str:
    texts = [t for _, t in p.lines]
    for candidate in (",", "/", ".", " "):
        if candidate == p.table[0] or all(candidate in t for t in texts):  # type: ignore[index]
            if all(candidate in t for t in texts):
                return candidate
    return " "
