"""Format specs: load the YAML files in `parsers/` and apply them to unwrapped lines.

A spec names its logger prefixes (stripped by the unwrapper), its record patterns (one per-step
line shape each; named groups are canonical column names) and its event patterns (OOMs, retries,
capacity lines...). Every pattern has a literal that a line must contain before the regex runs,
and every spec carries sample lines that are checked when the spec is loaded.

Patterns are evaluated by polars (Rust `regex` syntax: linear time, no look-around), on the whole
column at once.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from memlog.base.columns import ALL_VALUE_COLUMNS, UNIT_GIB, is_known_column, unit_gib
from memlog.base.content import content_dir
from memlog.base.errors import FormatSpecError, regex_problem
from memlog.base.events import EVENT_KINDS, unknown_detail_keys
from memlog.base.names import shown
from memlog.base.yamlfile import YamlFileError, read_yaml
from memlog.parse.multiline import BlockParserSpec, Continuation, load_block_parser
from memlog.parse.regexes import group_names, learn_group_names
from memlog.parse.wrappers import node_with_task

# Named groups a record pattern may use besides the canonical value columns: the step, and who
# printed the line when the line itself says it (Megatron's `[Rank N]`), which wins over a prefix's.
# A value group `X` may be followed by a group `X_unit` holding its printed unit (`MiB`, `GB`).
# `device`: the device a line reads, when one process prints a line per device (MaxText's `on TPU_0(...)`).
IDENTITY_GROUPS = {"rank": pl.Int64, "node": pl.String, "actor": pl.String, "pid": pl.Int64, "device": pl.String}
# A step counted within an epoch (`Epoch [3][1200/7330]`) is made global by the epoch and the
# epoch's length: step = epoch * epoch_len + step, so the counter never goes back at an epoch end.
EPOCH_GROUPS = ("epoch", "epoch_len")
RECORD_KEYS = ("step", *EPOCH_GROUPS, *IDENTITY_GROUPS)
UNIT_SUFFIX = "_unit"
# Number text as frameworks print it: `1,341.26`, `np.float64(0.12)`, `'1.234'` (HF 5.x), `N/A`.
_NUMPY_WRAPPER = r"^np\.(?:float|int)\d*\((.*)\)$"

_NUMBER = "_number_"  # the column holding a group's text as a number, while a pattern's matches are built


def _with_numbers(hits: pl.DataFrame, groups: list[str]) -> pl.DataFrame:
    """`hits` with each group's printed text as a number (column `_number_<group>`), unparseable text
    null. A plain cast of all groups in one call; then the cleaning (two regex passes, most of the
    cost of a column) only for groups where some text did not cast. A text that casts holds no
    `,'"%` and no `np.`, so cleaning leaves it as it is: per row, the number is the cast, else the
    cleaned cast."""
    if not groups:
        return hits
    hits = hits.with_columns(pl.col(g).str.strip_chars().cast(pl.Float64, strict=False).alias(_NUMBER + g) for g in groups)
    missed = hits.select((pl.col(_NUMBER + g).is_null() & pl.col(g).is_not_null()).any().alias(g) for g in groups).row(0, named=True)
    cleaned = [
        pl.col(_NUMBER + g).fill_null(
            pl.col(g).str.strip_chars().str.replace(_NUMPY_WRAPPER, "$1").str.replace_all(r"[,'\"%]", "").cast(pl.Float64, strict=False)
        )
        for g in groups
        if missed[g]
    ]
    return hits.with_columns(cleaned) if cleaned else hits


def _step(group: str) -> pl.Expr:
    """A group's printed step as an integer, never through a float: steps above 2**53 stay apart.
    Text only a float reads (`1.0e3`, `np.int64(12)`) goes through its number (_with_numbers)."""
    exact = pl.col(group).str.strip_chars().str.replace_all(r"[,']", "").cast(pl.Int64, strict=False)
    return exact.fill_null(pl.col(_NUMBER + group).cast(pl.Int64, strict=False))


@dataclass(frozen=True)
class LinePattern:
    """One line shape: a literal pre-filter plus a regex whose named groups become columns."""

    name: str
    literal: str
    regex: str
    kind: str | None = None  # record kind ("train", "validate") for record patterns
    # Extra regexes searched anywhere in a matched line: optional fields whose order and
    # presence changed between versions are easier to state one by one than in one regex.
    fields: tuple[str, ...] = ()
    event: str | None = None  # event kind ("oom", "capacity", ...) for event patterns
    units: dict[str, str] = field(default_factory=dict)
    # A field's own units, by field index (`{regex: ..., units: {...}}`): one column printed in bytes
    # by one version and in GiB by another (torchtune v0.1's `gpu_resources`, MPS's live set).
    field_units: dict[int, dict[str, str]] = field(default_factory=dict)
    # Lines with no step of their own (DeepSpeed's see_memory_usage) take the step of the
    # nearest earlier step-bearing line of the same worker (tables.build_records). With a step
    # group as well, a line that prints its step keeps it (an optional group: ms-swift's dicts
    # carry `global_step/max_steps`, the plain Trainer's do not).
    inherit_step: bool = False
    # Event patterns: lines below the matched one that belong to its message (memlog/parse/multiline.py).
    continuation: Continuation | None = None
    # Event patterns: a line is read only where the line right above it, its worker's, sits deeper
    # (a traceback's last frame or code line above the exception: chunks._under_deeper).
    after_deeper: bool = False
    # Step-less record lines of a worker that prints no step-bearing line at all (HF Trainer's
    # loss dicts while DeepSpeed's step lines are silent) are numbered 1, 2, 3... in file order:
    # a log index, not an optimizer step.
    ordinal_step: bool = False
    # Event patterns: detail every match carries (`detail: {scope: host}`), besides what it captures.
    detail: tuple[tuple[str, str], ...] = ()
    # Ordinal lines written in turn by this many processes that no tag tells apart (ranks printing
    # the same untagged line): the k-th line is writer (k mod N)'s reading k // N (records._fill_steps).
    interleaved: int | None = None
    # Lines this pattern must read (`sample:` beside an event pattern: a vocabulary entry carries
    # its own proof), checked like the spec's samples (chunks.sample_mismatches).
    samples: tuple[str, ...] = ()
    # The number the log gives its first epoch, for a step counted within an epoch: mmcv's
    # `Epoch [1][2800/7724]` is the run's step 2800, DETR's `Epoch: [0] [200/5000]` its step 200.
    first_epoch: int = 0
    # Lines a progress bar redraws (tqdm's `\r` refreshes): the lines of one step are one line, its last.
    refreshes: bool = False

    @functools.cached_property
    def groups(self) -> tuple[str, ...]:
        return group_names(self.regex)

    @functools.cached_property
    def field_groups(self) -> tuple[tuple[str, ...], ...]:
        return tuple(group_names(f) for f in self.fields)

    def extract(self, lines: pl.DataFrame, wanted: frozenset[str] | None = None) -> pl.DataFrame:
        """Rows of `lines` that match, with one column per named group (numbers parsed). `wanted`:
        the value columns the caller keeps; a field regex that can only yield others is not run."""
        # Which lines match is decided on their text alone; only those lines are then taken whole
        # (a chunk's unwrapped lines carry a dozen columns: taking every line holding the literal
        # cost a pattern whose literal is common, `step:`, more than its regex).
        text = lines["text"]
        has_literal = text.str.contains(self.literal, literal=True)
        parts = text.filter(has_literal).str.extract_groups(f"(?P<_whole>{self.regex})")
        matched = parts.struct.field("_whole").is_not_null()
        if not matched.any():  # none, or the literal's lines are not this pattern's (`step:` in `microstep:`)
            return lines.clear()
        hits = lines[has_literal.arg_true().filter(matched)].with_columns(parts.filter(matched).alias("_m"))
        # A group named in several field regexes (alternative spellings) takes the first match.
        sources: dict[str, list[pl.Expr]] = {g: [pl.col("_m").struct.field(g)] for g in self.groups}
        fields = [(i, regex_) for i, regex_ in enumerate(self.fields) if self._runs(i, wanted)]
        hits = hits.with_columns(pl.col("text").str.extract_groups(regex_).alias(f"_f{i}") for i, regex_ in fields)
        for i, _ in fields:
            for g in self.field_groups[i]:
                sources.setdefault(g, []).append(pl.col(f"_f{i}").struct.field(g))
        sources.update(self._field_unit_sources(fields))
        scratch = ["_m", *(f"_f{i}" for i, _ in fields)]
        # Who printed the line, when the line says it, wins over what its prefix said; a launcher's
        # task number that stood in for the rank (srun: unwrap.Unwrapper) then names the node.
        named = {g: pl.coalesce(exprs).cast(t, strict=False) for g, t in IDENTITY_GROUPS.items() if (exprs := sources.pop(g, None)) is not None}
        # (a prefix names no device: only the line does)
        identity = {g: pl.coalesce(expr, pl.col(g)) if g in hits.columns else expr for g, expr in named.items()}
        if "rank" in named and {"_task", "node"} <= set(hits.columns):
            # `task1`, or under a node label `gpu-a07/task1`: never the name of the lines whose rank is the task.
            node = identity.get("node", pl.col("node"))
            by_task = node_with_task(node, pl.col("_task"))
            identity["node"] = pl.when(named["rank"].is_not_null() & pl.col("_task").is_not_null()).then(by_task).otherwise(node)
        hits = hits.with_columns(
            *((pl.coalesce(exprs) if len(exprs) > 1 else exprs[0]).alias(group) for group, exprs in sources.items()),
            *(expr.alias(g) for g, expr in identity.items()),
        ).drop(*scratch, "_task", strict=False)
        numbers = [group for group in sources if group == "step" or is_known_column(group)]
        epochs = [g for g in EPOCH_GROUPS if "step" in sources and all(e in hits.columns for e in EPOCH_GROUPS)]
        hits = _with_numbers(hits, [*numbers, *epochs])
        if "step" in sources:
            # A printed step that is no integer (overflow, garbage) is damage, not a line without
            # a step: it must not take a neighbour's step (records.build_records) and its values.
            step = _step("step")
            if epochs:
                epoch, length = (_step(g) for g in EPOCH_GROUPS)
                step = pl.when(epoch.is_not_null() & length.is_not_null()).then((epoch - self.first_epoch) * length + step).otherwise(step)
            hits = hits.with_columns(_step=step).filter(pl.col("step").is_null() | pl.col("_step").is_not_null())
            hits = hits.with_columns(step=pl.col("_step")).drop("_step")
        values = [self._value(group, group + UNIT_SUFFIX if group + UNIT_SUFFIX in hits.columns else None) for group in numbers if group != "step"]
        scratch = [g for g in hits.columns if g.endswith(UNIT_SUFFIX) or g.startswith(_NUMBER)]
        return hits.with_columns(values).drop(*scratch, *EPOCH_GROUPS, strict=False)

    def _field_unit_sources(self, fields: list[tuple[int, str]]) -> dict[str, list[pl.Expr]]:
        """A `<group>_unit` source for each group some field gives units of its own: each match
        carries the unit of the field (or pattern) it came from, in the order the values coalesce."""
        own = {g for i, _ in fields for g in self.field_units.get(i, {})}
        units: dict[str, list[pl.Expr]] = {}
        for g in sorted(own):
            default = self.units.get(g, "GiB")
            if g in self.groups:
                units[g + UNIT_SUFFIX] = [pl.when(pl.col("_m").struct.field(g).is_not_null()).then(pl.lit(default))]
            for i, _ in fields:
                if g in self.field_groups[i]:
                    unit = self.field_units.get(i, {}).get(g, default)
                    units.setdefault(g + UNIT_SUFFIX, []).append(pl.when(pl.col(f"_f{i}").struct.field(g).is_not_null()).then(pl.lit(unit)))
        return units

    def _runs(self, i: int, wanted: frozenset[str] | None) -> bool:
        """Whether field regex `i` is worth running for a caller keeping `wanted`: it may yield a
        wanted value or who printed the line, or the main regex reads no value of its own (then
        the line's other values decide whether it printed memory it did not read, parse.py)."""
        if wanted is None or not any(is_known_column(g) for g in self.groups):
            return True
        return any(g in wanted or g in RECORD_KEYS for g in self.field_groups[i])

    def _value(self, group: str, unit: str | None = None) -> pl.Expr:
        """A group's printed numbers (parsed by _with_numbers) as values: a memory size in GiB, by
        the unit the line printed (`X_unit`), else the spec's `units:` for it, else as GiB."""
        value = pl.col(_NUMBER + group)
        static = unit_gib(self.units[group]) if group in self.units else 1.0
        if unit is not None:
            printed = pl.col(unit).str.strip_chars().str.to_uppercase().replace_strict(UNIT_GIB, default=None, return_dtype=pl.Float64)
            # A line that printed no unit (an optional group) is in the spec's unit.
            scale = pl.when(pl.col(unit).is_null()).then(pl.lit(static)).otherwise(printed)
            return (value * scale).alias(group)
        return (value * static if static != 1.0 else value).alias(group)


@dataclass(frozen=True)
class FormatSpec:
    name: str
    title: str
    description: str
    path: Path
    logger_prefixes: tuple[str, ...]
    records: tuple[LinePattern, ...]
    events: tuple[LinePattern, ...]
    samples: tuple[dict[str, Any], ...]
    block_parser: BlockParserSpec | None = None  # Python escape hatch for multi-line blocks
    replaces: str | None = None  # the built-in format a user spec takes the place of, said explicitly
    # False: what the spec reads does not make the generic reader step aside (a tool's output pasted
    # into any log, such as nvidia-smi's table: the log's own lines are still to be read).
    claims_source: bool = True

    @property
    def patterns(self) -> tuple[LinePattern, ...]:
        return self.records + self.events

    def listing(self) -> str:
        """Its line in `memlog formats list`."""
        return f"{self.name:<12} {self.title} ({len(self.records)} record and {len(self.events)} event patterns) - {shown(str(self.path))}"

    @property
    def literals(self) -> set[str]:
        return {p.literal for p in self.patterns} | set(self.block_parser.start_literals if self.block_parser else ())


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _is_field_list(value: Any) -> bool:
    """A list of regexes, or of `{regex: ..., units: {group: unit}}` for a field with units of its own."""
    return isinstance(value, list) and all(
        isinstance(v, str)
        or (
            isinstance(v, dict)
            and set(v) == {"regex", "units"}
            and isinstance(v["regex"], str)
            and isinstance(v["units"], dict)
            and all(isinstance(u, str) for u in v["units"].values())
        )
        for v in value
    )


def _pattern(spec_path: Path, raw: dict[str, Any], section: str) -> LinePattern:
    if not isinstance(raw, dict):
        raise FormatSpecError(f"{spec_path.name}: each entry of `{section}` must be a mapping, got {raw!r:.60}")
    where = f"{spec_path.name}: {section} entry {raw.get('name', '?')!r}"
    missing = [k for k in ("name", "literal", "regex") if not isinstance(raw.get(k), str) or not raw.get(k)]
    if missing:
        raise FormatSpecError(f"{where}: missing or empty {', '.join(missing)}")
    wrong = [
        message
        for key, ok, message in (
            ("fields", _is_field_list, "`fields` must be a list of regexes (or of `{regex: ..., units: {...}}`)"),
            ("units", lambda v: isinstance(v, dict) and all(isinstance(u, str) for u in v.values()), "`units` maps group names to units"),
            ("kind", lambda v: isinstance(v, str), "`kind` must be a string"),
            ("event", lambda v: isinstance(v, str), "`event` must be a string"),
            ("inherit_step", lambda v: isinstance(v, bool), "`inherit_step` must be true or false"),
            ("after_deeper", lambda v: isinstance(v, bool) and section == "events", "`after_deeper` (events) must be true or false"),
            ("refreshes", lambda v: isinstance(v, bool), "`refreshes` must be true or false"),
            ("first_epoch", lambda v: v in (0, 1) and not isinstance(v, bool), "`first_epoch` is 0 or 1"),
            ("detail", lambda v: isinstance(v, dict) and all(isinstance(x, (str, int, float)) for x in v.values()), "`detail` maps detail keys to values"),
            ("sample", lambda v: isinstance(v, str) or _is_str_list(v), "`sample` is a line (or a list of lines) the pattern reads"),
        )
        if raw.get(key) is not None and not ok(raw[key])
    ]
    if wrong:
        raise FormatSpecError(f"{where}: {'; '.join(wrong)}")
    pattern = LinePattern(
        name=raw["name"],
        literal=raw["literal"],
        regex=raw["regex"],
        kind=raw.get("kind", "train") if section == "records" else None,
        event=raw.get("event") if section == "events" else None,
        units=dict(raw.get("units") or {}),
        fields=tuple(f if isinstance(f, str) else f["regex"] for f in raw.get("fields") or ()),
        field_units={i: dict(f["units"]) for i, f in enumerate(raw.get("fields") or ()) if isinstance(f, dict)},
        inherit_step=bool(raw.get("inherit_step", False)),
        continuation=Continuation.load(where, raw["continuation"]) if section == "events" and raw.get("continuation") else None,
        after_deeper=bool(raw.get("after_deeper", False)),
        ordinal_step=bool(raw.get("ordinal_step", False)),
        detail=tuple((str(k), str(v)) for k, v in (raw.get("detail") or {}).items()),
        interleaved=raw.get("interleaved"),
        samples=tuple([raw["sample"]] if isinstance(raw.get("sample"), str) else raw.get("sample") or ()),
        first_epoch=int(raw.get("first_epoch") or 0),
        refreshes=bool(raw.get("refreshes", False)),
    )
    try:  # polars' own regex dialect decides
        groups = pattern.groups + tuple(g for names in pattern.field_groups for g in names)
    except Exception as exc:
        raise FormatSpecError(f"{where}: invalid regex ({regex_problem(exc)})") from None
    if section == "records":
        unknown = [
            g for g in groups if g not in RECORD_KEYS and not is_known_column(g) and not (g.endswith(UNIT_SUFFIX) and is_known_column(g[: -len(UNIT_SUFFIX)]))
        ]
        if unknown:
            raise FormatSpecError(
                f"{where}: named groups {unknown} are not canonical columns (see memlog/base/columns.py: {', '.join(ALL_VALUE_COLUMNS)}), "
                f"their units (`<column>{UNIT_SUFFIX}`) or who printed the line ({', '.join(IDENTITY_GROUPS)})"
            )
        if "step" not in groups and not pattern.inherit_step:
            raise FormatSpecError(f"{where}: a record pattern needs a (?P<step>...) group, or `inherit_step: true`")
        if not isinstance(raw.get("ordinal_step", False), bool):
            raise FormatSpecError(f"{where}: `ordinal_step` must be true or false")
        if pattern.ordinal_step and not pattern.inherit_step:
            raise FormatSpecError(f"{where}: `ordinal_step: true` needs `inherit_step: true`")
        if pattern.interleaved is not None and (
            not isinstance(pattern.interleaved, int) or isinstance(pattern.interleaved, bool) or not 2 <= pattern.interleaved <= 64 or not pattern.ordinal_step
        ):
            raise FormatSpecError(f"{where}: `interleaved` is a number of writers from 2 to 64, on an `ordinal_step: true` pattern")
    elif not pattern.event:
        raise FormatSpecError(f"{where}: an event pattern needs `event:` (its kind)")
    elif pattern.event not in EVENT_KINDS:
        raise FormatSpecError(f"{where}: unknown event kind {pattern.event!r} (see memlog/base/events.py: {', '.join(EVENT_KINDS)})")
    else:
        carried = [pattern.continuation.detail, *(["from_line"] if pattern.continuation.ends else [])] if pattern.continuation else []
        captured = [*groups, *carried, *(k for k, _ in pattern.detail)]
        unknown = unknown_detail_keys(pattern.event, captured)
        if unknown:
            known = ", ".join(EVENT_KINDS[pattern.event].detail) or "none"
            raise FormatSpecError(f"{where}: named groups {unknown} are not details of a {pattern.event!r} event (known: {known})")
    bad_units = {c: u for units in (pattern.units, *pattern.field_units.values()) for c, u in units.items() if unit_gib(u) is None}
    if bad_units:
        raise FormatSpecError(f"{where}: unknown units {bad_units}; use one of B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB, bytes)")
    return pattern


def load_spec(path: Path, plugins: bool = False) -> FormatSpec:
    """`plugins`: the spec's folder is trusted, its block parser may be a Python file there."""
    try:
        raw = read_yaml(path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, YamlFileError) as exc:
        raise FormatSpecError(f"{path}: cannot read format spec ({str(exc).splitlines()[0]})") from None
    return spec_from_mapping(raw, path, plugins)


def spec_from_mapping(raw: Any, path: Path, plugins: bool = False) -> FormatSpec:
    """A spec from its YAML mapping, checked as a file's would be (the generic reader's guesses)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise FormatSpecError(f"{path}: a format spec is a mapping with at least `name:`")
    unknown = set(raw) - SPEC_KEYS
    if unknown:
        raise FormatSpecError(f"{path.name}: unknown keys {sorted(map(str, unknown))} (known: {', '.join(sorted(SPEC_KEYS))})")
    if raw.get("replaces") is not None and not isinstance(raw["replaces"], str):
        raise FormatSpecError(f"{path.name}: `replaces` names the format this spec replaces")
    if not isinstance(raw.get("claims_source", True), bool):
        raise FormatSpecError(f"{path.name}: `claims_source` must be true or false")
    for key in ("logger_prefixes", "records", "events", "samples"):
        if raw.get(key) is not None and not isinstance(raw[key], list):
            raise FormatSpecError(f"{path}: `{key}` must be a list")
    if not _is_str_list(raw.get("logger_prefixes") or []):
        raise FormatSpecError(f"{path}: `logger_prefixes` must be a list of regexes")
    _check_samples(path, raw.get("samples") or [])
    learn_group_names(
        [
            *(raw.get("logger_prefixes") or ()),
            *(
                regex_
                for section in ("records", "events")
                for entry in raw.get(section) or ()
                if isinstance(entry, dict)
                for regex_ in (
                    entry.get("regex"),
                    *(f.get("regex") if isinstance(f, dict) else f for f in _listed(entry.get("fields"))),
                )
            ),
        ]
    )
    for prefix in raw.get("logger_prefixes") or ():
        _check_logger_prefix(path, prefix)
    spec = FormatSpec(
        name=raw["name"],
        title=str(raw.get("title", raw["name"])),
        description=str(raw.get("description", "")).strip(),
        path=path,
        logger_prefixes=tuple(raw.get("logger_prefixes") or ()),
        records=tuple(_pattern(path, r, "records") for r in raw.get("records") or ()),
        events=tuple(_pattern(path, e, "events") for e in raw.get("events") or ()),
        samples=tuple(raw.get("samples") or ()),
        block_parser=load_block_parser(path, raw["block_parser"], plugins) if raw.get("block_parser") else None,
        replaces=raw.get("replaces"),
        claims_source=bool(raw.get("claims_source", True)),
    )
    return spec


SAMPLE_KEYS = {"line": str, "record": dict, "event": dict, "nothing": bool}


def _check_samples(path: Path, samples: list) -> None:
    """Each of a spec's `samples:` is a mapping: the `line` (text), the `record:`/`event:` values it
    yields (mappings), `nothing: true` for a look-alike line. One line naming the entry and the key."""
    for i, sample in enumerate(samples, 1):
        where = f"{path.name}: samples entry {i}"
        if not isinstance(sample, dict):
            raise FormatSpecError(f"{where}: must be a mapping with `line:` (and `record:`, `event:` or `nothing:`), got {type(sample).__name__}")
        unknown = set(sample) - set(SAMPLE_KEYS)
        if unknown:
            raise FormatSpecError(f"{where}: unknown keys {sorted(map(str, unknown))} (known: {', '.join(SAMPLE_KEYS)})")
        if not isinstance(sample.get("line"), str):
            raise FormatSpecError(f"{where}: `line` must be the text of a log line")
        for key, kind in SAMPLE_KEYS.items():
            if key in sample and not isinstance(sample[key], kind):
                raise FormatSpecError(f"{where}: `{key}` must be {_KIND_WORDS[kind]}, got {type(sample[key]).__name__}")


_KIND_WORDS = {str: "text", dict: "a mapping of column: value", bool: "true or false"}


def _check_logger_prefix(path: Path, prefix: str) -> None:
    """Logger prefixes of all specs are joined into one regex (unwrap.Unwrapper): each must compile
    alone and carry no named group, which would clash with another spec's."""
    try:
        named = group_names(prefix)
    except Exception as exc:
        raise FormatSpecError(f"{path.name}: logger prefix {prefix!r:.80}: invalid regex ({regex_problem(exc)})") from None
    if named:
        raise FormatSpecError(f"{path.name}: logger prefix {prefix!r:.80}: named groups {list(named)} are not allowed here")


SPEC_KEYS = {"name", "title", "description", "logger_prefixes", "records", "events", "samples", "block_parser", "replaces", "claims_source"}


def builtin_dir() -> Path:
    return content_dir("parsers")


_LOADED: dict[tuple, FormatSpec] = {}


def load_spec_once(path: Path, plugins: bool) -> FormatSpec:
    """load_spec, remembered while the file is unchanged: a process that analyses many logs (tests,
    the fuzzer, `watch`, `scan`) reads and checks each spec once. Specs are immutable."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, plugins)
    if key not in _LOADED:
        _LOADED[key] = load_spec(path, plugins)
    return _LOADED[key]


def all_logger_prefixes(specs: Iterable[FormatSpec]) -> list[str]:
    return [p for spec in specs for p in spec.logger_prefixes]


def _listed(value: object) -> list:
    """`value` when a spec gave a list there, else nothing (a wrong type is said by the checks)."""
    return value if isinstance(value, list) else []
