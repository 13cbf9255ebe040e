"""Wrappers: what launchers, collectors and loggers put around a line, declared as data.

One YAML file per wrapper in `parsers/wrappers/` (and in a `wrappers/` folder of a user's formats
directory): a `prefix` regex matched at the start of a line (and/or a `suffix` at its end), whose
named groups say who printed the line or when (a `marker` is a line of its own that names who wrote
the lines after it in the same file, such as Ray's `:actor_name:` in a worker's log file):

    node    host, IP, pod or container that printed it     rank   its rank (torchrun, MPI, ...)
    task    srun's task id (a rank, or a node when torchrun runs under it)
    actor   Ray actor or task name      pid   process id      ip   Ray node IP
    ts      a timestamp                 stream  stdout/stderr   repeated  Ray's dedup count

A group may be spelled `name__2` (`actor__2`) where a regex needs two alternatives for one column.
Every wrapper carries samples (`line`, the `text` left after it, and the fields it names), checked
when a user's wrapper loads (memlog/parse/catalog.py). The unwrapper (memlog/parse/unwrap.py) strips any stack of
them, outermost first.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from memlog.base.content import content_dir
from memlog.base.errors import FormatSpecError, regex_problem
from memlog.base.yamlfile import YamlFileError, read_yaml
from memlog.parse.regexes import group_names, learn_group_names

# Who or when a wrapper can say, and the column type each becomes.
WRAPPER_FIELDS: dict[str, type[pl.DataType]] = {
    "node": pl.String, "rank": pl.Int64, "task": pl.Int64, "actor": pl.String, "pid": pl.Int64, "ip": pl.String,
    "ts": pl.String, "stream": pl.String, "repeated": pl.Int64,
}  # fmt: skip
# Where wrappers stack, the outermost names the node and the rank (a torchrun tee's rank is on
# every line of a process, the traceback's `[rankN]:` inside it only on some); the innermost names
# the process itself (journald's pid is the launcher's, Ray's inner prefix the worker's).
INNERMOST_WINS = frozenset({"actor", "pid", "ip", "ts", "stream", "repeated"})
# What a marker line may name of the lines after it (Ray's `:actor_name:`, a profiler block's
# `[Profiled memory for rank 1]:`).
MARKED_FIELDS = ("actor", "rank")


def node_with_task(node: pl.Expr, task: pl.Expr) -> pl.Expr:
    """Where an srun task ran, as a node name: `task1`, or beside a node already named `gpu-a07/task1`."""
    named = pl.lit("task") + task.cast(pl.String)
    return pl.when(node.is_null()).then(named).otherwise(node + pl.lit("/") + named)


KEYS = {"name", "title", "description", "prefix", "suffix", "marker", "priority", "samples"}


@dataclass(frozen=True)
class WrapperSpec:
    name: str
    title: str
    description: str
    path: Path
    prefix: str | None
    suffix: str | None
    marker: dict[str, Any] | None  # {literals: [...], regex: ...}: a line naming who wrote the lines after it
    priority: int  # lower is tried first where two prefixes could match the same text
    samples: tuple[dict[str, Any], ...]

    @functools.cached_property
    def prefix_fields(self) -> tuple[str, ...]:
        return group_names(self.prefix) if self.prefix else ()

    @functools.cached_property
    def suffix_fields(self) -> tuple[str, ...]:
        return group_names(self.suffix) if self.suffix else ()


def field_of(group: str) -> str:
    """`actor__2` -> `actor`."""
    return group.split("__", 1)[0]


def load_wrapper(path: Path) -> WrapperSpec:
    return wrapper_from_mapping(_read(path), path)


def _read(path: Path) -> Any:
    try:
        return read_yaml(path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, YamlFileError) as exc:
        raise FormatSpecError(f"{path}: cannot read wrapper spec ({str(exc).splitlines()[0]})") from None


def _regexes(raw: Any) -> list[object]:
    """What a wrapper spec's mapping holds as regexes, unchecked."""
    if not isinstance(raw, dict):
        return []
    marker = raw.get("marker")
    return [raw.get("prefix"), raw.get("suffix"), marker.get("regex") if isinstance(marker, dict) else None]


def wrapper_from_mapping(raw: Any, path: Path) -> WrapperSpec:
    learn_group_names(_regexes(raw))
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise FormatSpecError(f"{path}: a wrapper spec is a mapping with at least `name:`")
    unknown = set(raw) - KEYS
    if unknown:
        raise FormatSpecError(f"{path.name}: unknown keys {sorted(map(str, unknown))} (known: {sorted(KEYS)})")
    prefix, suffix, marker = raw.get("prefix"), raw.get("suffix"), raw.get("marker")
    if not (any(isinstance(r, str) and r for r in (prefix, suffix)) or marker is not None) or any(
        r is not None and not isinstance(r, str) for r in (prefix, suffix)
    ):
        raise FormatSpecError(f"{path.name}: a wrapper needs a `prefix:` or `suffix:` regex, or a `marker:`")
    if marker is not None and not (
        isinstance(marker, dict)
        and isinstance(marker.get("regex"), str)
        and marker["regex"]
        and isinstance(marker.get("literals"), list)
        and marker["literals"]
        and all(isinstance(x, str) and x for x in marker["literals"])
    ):
        raise FormatSpecError(f"{path.name}: `marker` needs `literals:` (a list) and `regex:`")
    priority = raw.get("priority", 50)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise FormatSpecError(f"{path.name}: `priority` must be an integer")
    samples = raw.get("samples") or []
    if not isinstance(samples, list) or not samples or not all(isinstance(s, dict) and isinstance(s.get("line"), str) for s in samples):
        raise FormatSpecError(f"{path.name}: `samples` must list at least one {{line: ..., text: ...}} (tested at load)")
    spec = WrapperSpec(
        raw["name"],
        str(raw.get("title", raw["name"])),
        str(raw.get("description", "")).strip(),
        path,
        prefix or None,
        suffix or None,
        marker,
        priority,
        tuple(samples),
    )
    regexes: tuple[tuple[str, str | None], ...] = (("prefix", spec.prefix), ("suffix", spec.suffix), ("marker", marker["regex"] if marker else None))
    for what, regex in regexes:
        if regex is None:
            continue
        try:
            fields = group_names(regex)
        except Exception as exc:
            raise FormatSpecError(f"{path.name}: {what}: invalid regex ({regex_problem(exc)})") from None
        bad = [g for g in fields if field_of(g) not in WRAPPER_FIELDS]
        if bad:
            raise FormatSpecError(f"{path.name}: {what}: named groups {bad} are not wrapper fields ({', '.join(WRAPPER_FIELDS)})")
    return spec


@functools.cache
def _builtin(folder: str) -> tuple[WrapperSpec, ...]:
    raws = [(_read(p), p) for p in sorted(Path(folder).glob("*.yaml"))]
    learn_group_names(r for raw, _ in raws for r in _regexes(raw))  # all in one call
    return tuple(wrapper_from_mapping(raw, p) for raw, p in raws)


def builtin_wrappers() -> dict[str, WrapperSpec]:
    """The wrappers memlog ships (`parsers/wrappers/`), by name: checked by its tests, so loaded
    without checking their samples (memlog.parse.catalog.load_wrappers adds a user's, checked)."""
    return {w.name: w for w in _builtin(str(content_dir("parsers") / "wrappers"))}


def by_priority(wrappers: Iterable[WrapperSpec]) -> list[WrapperSpec]:
    """The order wrappers are tried in: priority, then name."""
    return sorted(wrappers, key=lambda w: (w.priority, w.name))


def markers(wrappers: list[WrapperSpec]) -> tuple[list[str], str | None]:
    """The literals and the combined regex of the wrappers' marker lines (its named groups: who
    wrote the lines after them, MARKED_FIELDS)."""
    found = [w.marker for w in wrappers if w.marker]
    if not found:
        return [], None
    return [lit for m in found for lit in m["literals"]], "|".join(f"(?:{m['regex']})" for m in found)
