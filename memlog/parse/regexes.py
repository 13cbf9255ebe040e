"""The named groups of a regex as polars' dialect (Rust `regex`) reads them: what a format spec's
patterns and a wrapper's prefix capture. Compiling is the check: a regex polars cannot compile
raises here, when its spec loads, not while a log is read."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

# Regex -> its group names. Bounded: the generic reader makes specs of its own for every log it guesses.
_GROUP_NAMES: dict[str, tuple[str, ...]] = {}
_GROUP_NAMES_HELD = 4096


def group_names(regex_: str) -> tuple[str, ...]:
    """Named groups in order (raises if polars cannot compile the regex)."""
    if regex_ not in _GROUP_NAMES:
        _remember(regex_, _named(pl.Series([], dtype=pl.String).str.extract_groups(regex_).dtype))
    return _GROUP_NAMES[regex_]


def learn_group_names(regexes: Iterable[object]) -> None:
    """The group names of many regexes read in one polars call: memlog's specs and wrappers hold
    ~190, and asked one by one their fixed cost was ~25 of the ~70 ms loading them took. Entries that
    are not strings are left to the caller's checks; a regex that does not compile leaves them all to
    group_names, whose error then names it."""
    todo = list(dict.fromkeys(r for r in regexes if isinstance(r, str) and r not in _GROUP_NAMES))
    if not todo:
        return
    empty = pl.LazyFrame(schema={"text": pl.String})
    try:
        schema = empty.select(pl.col("text").str.extract_groups(r).alias(str(i)) for i, r in enumerate(todo)).collect_schema()
    except Exception:
        return
    for i, regex_ in enumerate(todo):
        _remember(regex_, _named(schema[str(i)]))


def _named(struct: pl.DataType) -> tuple[str, ...]:
    """The names of extract_groups' struct fields; unnamed groups come as "1", "2"..."""
    assert isinstance(struct, pl.Struct)  # extract_groups always gives a struct
    return tuple(f.name for f in struct.fields if not f.name.isdigit())


def _remember(regex_: str, names: tuple[str, ...]) -> None:
    if len(_GROUP_NAMES) >= _GROUP_NAMES_HELD:
        _GROUP_NAMES.clear()
    _GROUP_NAMES[regex_] = names
