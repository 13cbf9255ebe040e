"""Guess a format spec from a sample of lines no spec claims.

The sample's lines are grouped into shapes: lines with the same text before their first number
(after the logger prefix) and the same step counter. A shape that repeats and holds memory or
loss fields becomes one record pattern of a spec, written as memlog's own spec YAML would be: a
literal, a regex with the step (or `inherit_step`, or `ordinal_step` when the log has no counter
at all), one `fields` regex per mapped key, units. The guess reads the log through that spec, so
`memlog formats guess` prints exactly what the generic reader used, and what it guessed is said in
`describe` (coverage and the findings' evidence).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlog.base.columns import MEMORY_COLUMNS
from memlog.parse.generic.fields import BARS, COUNTERS, DEVICE, GENERIC_PREFIXES, Field, counter_step, device_label, fields
from memlog.parse.generic.mapping import meaning_of
from memlog.parse.generic.shape import MIN_REPEATS, Column, Pattern, columns_of
from memlog.parse.generic.table import SPEC_NUM, SPEC_UNIT, find_table, table_literal, table_patterns, table_regex

SAMPLE_LINES = 5000  # lines a guess is learned from (the first ones holding a number)
MAX_LINE = 2000  # longer lines are not metric lines
MAX_TABLE_LINE = 64 * 1024  # nor longer table rows
HEAD_CHARS = 48  # at most this much of the text before a line's first number anchors its pattern


@dataclass
class Guess:
    """What the generic reader made of a source: the spec it reads it with, or why it has none."""

    patterns: list[Pattern] = field(default_factory=list)
    prefix: str | None = None
    weak: str | None = None  # why nothing was read, when memory or loss values were seen
    keys_seen: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.patterns)

    def describe(self) -> str:
        """The mapping in one sentence: "step from `iter`, device memory from `max mem` in MiB ..."."""
        parts = []
        for p in self.patterns:
            if p.counter is not None and p.table is not None:  # a table's counter is a column index
                step = f"step from column `{p.table[1][p.counter]}`"
                if p.bar:
                    step += " and its progress bar's `i/N` (a bar redrawn at one step read once)"
            elif p.counter is not None:
                step = f"step from {COUNTERS[p.counter].name}" + (" (epochs counted from 1)" if p.first_epoch else "")
                step += " (a bar redrawn at one step read once)" if p.counter in BARS else ""
            elif p.ordinal:
                step = "step from reading order (the log prints no step)"
            else:
                step = "step from the step line before"
            cols = [c.text for c in p.columns]
            if p.devices:
                cols.append("a worker per device the lines name (`" + "`, `".join(p.devices[:2]) + "`...)")
            if p.interleaved:
                cols.append(f"{p.interleaved} writers taking turns told apart by the lines' repeating order (guessed)")
            parts.append(f"{step}: " + ", ".join(cols) if cols else step)
        return "; ".join(dict.fromkeys(parts))

    def mapping(self) -> list[dict[str, Any]]:
        return [
            {"column": c.column, "key": c.key, "unit": c.unit or None, "unit_guessed": c.unit_guessed, "pattern": p.name}
            for p in self.patterns
            for c in p.columns
        ]


def _prefix_of(texts: list[str]) -> str | None:
    """The logger prefix most of the sample's lines start with, if one of GENERIC_PREFIXES."""
    best, count = None, 0
    for prefix in GENERIC_PREFIXES:
        compiled = re.compile(prefix)
        n = sum(1 for t in texts if (m := compiled.match(t)) and m.end() > 0)
        if n > count:
            best, count = prefix, n
    return best if count * 2 >= len(texts) and count >= MIN_REPEATS else None


def _head(text: str, start: int) -> str:
    head = text[:start]
    # Cut at a word end: the head anchors where the line starts, not a value's first digits.
    head = re.sub(r"[\w.]*$", "", head) if re.search(r"\w$", head) and not re.search(r"\W", head[-1:]) else head
    return head[:HEAD_CHARS].lstrip()


def _first_digit(text: str) -> int:
    found = re.search(r"\d", text)
    return found.start() if found else len(text)


def _common_prefix(heads: list[str]) -> str:
    first, last = min(heads), max(heads)
    i = 0
    while i < len(first) and i < len(last) and first[i] == last[i]:
        i += 1
    common = first[:i]
    if common != first and common and re.search(r"\w$", common):
        common = re.sub(r"\w+$", "", common)
    return common


def _counter_of(texts: list[str]) -> int | None:
    """The first counter that nearly every line of a shape prints, whose steps mostly go up."""
    for i in range(len(COUNTERS)):
        steps = [s[0] for t in texts if (s := counter_step(i, t))]
        if len(steps) < 0.9 * len(texts) or len(steps) < MIN_REPEATS:
            continue
        ups = sum(b >= a for a, b in zip(steps, steps[1:]))
        if ups >= 0.8 * (len(steps) - 1) and steps[-1] > steps[0]:
            return i
    return None


def _header_of(sample: list[str], idx: list[int]) -> str | None:
    """The line most often printed right above a shape's lines, when it is of another shape: a
    block's header (`[Profiled memory for rank 0]:`), its digits left out. Repeated, or above
    every run of the shape's lines (Galvatron prints one block per rank, once)."""
    own = set(idx)
    above = Counter(re.sub(r"\d+", " ", sample[i - 1]) for i in idx if i > 0 and i - 1 not in own)
    if not above:
        return None
    header, seen = above.most_common(1)[0]
    return header if seen >= MIN_REPEATS or seen == sum(above.values()) else None


def _interleaving(values: list[float]) -> int | None:
    """The number of writers whose lines take turns, when the values say so: a line is much closer
    to the line k before it than to the line before it."""
    finite = [v for v in values if v == v]
    if len(finite) < 12:
        return None
    near = sum(abs(b - a) for a, b in zip(finite, finite[1:])) / (len(finite) - 1)
    if near == 0:
        return None
    for k in range(2, 17):
        if len(finite) < 3 * k:
            break
        far = sum(abs(finite[i] - finite[i - k]) for i in range(k, len(finite))) / (len(finite) - k)
        if far < 0.3 * near:
            return k
    return None


def _first_epoch(counter: int | None, texts: list[str]) -> int:
    """1 when a counter within an epoch never shows epoch 0 (mmcv's `Epoch [1][50/7330]` is the
    run's first epoch), else 0: the step is then the run's own iteration, never one epoch ahead."""
    if counter is None or "?P<epoch>" not in COUNTERS[counter].regex:
        return 0
    compiled = re.compile(COUNTERS[counter].regex)
    epochs = [int(m["epoch"]) for t in texts if (m := compiled.search(t))]
    return 0 if not epochs or min(epochs) == 0 else 1


def _one_key_a_line(idx: list[int], parsed: list[list[Field]], columns: list[Column]) -> list[tuple[list[Column], list[int]]]:
    """A block's shape whose lines each print one of its columns' keys (Galvatron's
    `iter_3_after_backward: X MB`, then `iter_3_after_backward_max: Y MB`): a pattern per column,
    its lines those printing its key, so a step's lines are readings of one step, not copies."""
    keyed = [(c, [i for i in idx if any(f.key == c.key for f in parsed[i])]) for c in columns]
    both = any(sum(any(f.key == c.key for f in parsed[i]) for c in columns) > 1 for i in idx)
    if len(columns) < 2 or both:
        return [(columns, idx)]
    return [([c], lines) for c, lines in keyed if len(lines) >= MIN_REPEATS]


def _read_keys(found: list[Field]) -> frozenset[str]:
    return frozenset(f.key for f in found if meaning_of(f.key, f.unit) is not None)


def _by_keys(idx: list[int], parsed: list[list[Field]]) -> list[list[int]]:
    """One head's lines split into shapes by the keys they read, when those keys never share a line:
    nanoGPT's `iter N: loss ...` and a user's `iter N: mem alloc ...` after it are two shapes of one
    step, each read by a pattern of its own (one pattern would require the first shape's keys)."""
    by: dict[frozenset[str], list[int]] = defaultdict(list)
    for i in idx:
        by[_read_keys(parsed[i])].append(i)
    shapes = [(keys, lines) for keys, lines in by.items() if keys and len(lines) >= MIN_REPEATS]
    if len(shapes) < 2 or any(a & b for (a, _), (b, _) in itertools.combinations(shapes, 2)):
        return [idx]
    rest = [i for keys, lines in by.items() if not keys or len(lines) < MIN_REPEATS for i in lines]
    return [sorted(lines + (rest if n == 0 else [])) for n, (_, lines) in enumerate(shapes)]


def _devices(p: Pattern) -> list[str]:
    """The devices a pattern's lines name, when nearly every line names one and they name several:
    one process printing a line per device (MaxText's `Using (GB) ... on TPU_k(...)`), each device
    a worker of its own. A device named alone (each rank's own `cuda:0`) tells no lines apart."""
    labels = [device_label(text) for _, text in p.lines]
    named = [label for label in labels if label is not None]
    distinct = sorted(set(named), key=named.index)
    return distinct if len(named) >= 0.9 * len(labels) and len(distinct) >= 2 else []


def guess(sample: list[str]) -> Guess:
    """Learn the patterns of a sample of unwrapped lines (module docstring)."""
    # A CSV's header and rows are as wide as its columns (Lightning's DeviceStatsMonitor: 247 of them).
    # (blank once unwrapped: a launcher's label before a progress bar's first `\r`)
    wide = [t for t in sample if len(t) <= MAX_TABLE_LINE and t.strip()]
    sample = [t for t in sample if len(t) <= MAX_LINE and t.strip()]
    result = Guess()
    result.prefix = _prefix_of(sample)
    if result.prefix:
        compiled = re.compile(result.prefix)
        sample = [t[m.end() :] if (m := compiled.match(t)) else t for t in sample]
    rows = sample if result.prefix else wide
    table = find_table(rows)
    if table is not None:
        patterns = table_patterns(rows, *table)
        if patterns:
            result.patterns += patterns
            return result
    shapes: dict[str, list[int]] = defaultdict(list)
    parsed = [fields(t) for t in sample]
    for i, (text, found) in enumerate(zip(sample, parsed)):
        if not found:
            continue
        result.keys_seen.extend(f.key for f in found)
        shapes[_head(text, _first_digit(text))].append(i)
    # A head that another head starts with is the same line shape printed with more words.
    merged: dict[str, list[int]] = defaultdict(list)
    for head in sorted(shapes, key=len):
        into = next((h for h in merged if h and head.startswith(h)), head)
        merged[into].extend(shapes[head])
    groups = [part for idx in merged.values() for part in _by_keys(sorted(idx), parsed)]
    candidates: list[Pattern] = []
    for idx in groups:
        texts = [sample[i] for i in idx]
        counter = _counter_of(texts)
        spans = [hit[1:] if counter is not None and (hit := counter_step(counter, t)) else None for t in texts]
        steps = [s[0] if counter is not None and (s := counter_step(counter, t)) else None for t in texts]
        columns = columns_of(texts, [parsed[i] for i in idx], spans, _header_of(sample, idx), steps)
        common = _common_prefix([_head(sample[i], _first_digit(sample[i])) for i in idx]) if idx else ""
        if counter is not None:
            starts = [s[0] for s in spans if s]
            if starts and min(starts) <= len(common):
                common = _common_prefix([sample[i][: s[0]] for i, s in zip(idx, spans) if s])
        if columns or counter is not None:
            name = re.sub(r"[^a-z0-9]+", "-", common.lower()).strip("-")[:30] or "line"
            first = _first_epoch(counter, texts)
            for cols, lines in _one_key_a_line(idx, parsed, columns) if counter is not None else [(columns, idx)]:
                candidates.append(Pattern(name, common, counter, cols, [(i, sample[i]) for i in lines], first_epoch=first))
    for p in candidates:
        p.devices = _devices(p)
    stepped = [p for p in candidates if p.counter is not None and len(p.lines) >= MIN_REPEATS]
    valued = [p for p in candidates if p.columns and len(p.lines) >= MIN_REPEATS]
    seen_values = any(meaning_of(k, None) for k in set(result.keys_seen))
    if not valued:
        if seen_values:
            result.weak = "memory or loss values were printed, but no line shape repeats often enough to form a series"
        return result
    if stepped:
        result.patterns = [p for p in stepped if p.columns] or stepped[:1]
        result.patterns += [p for p in valued if p.counter is None]
        for p in result.patterns:
            p.inherit = p.counter is None
    else:
        result.patterns = valued
        for p in valued:
            p.inherit = p.ordinal = True
            shown = next((c for c in p.columns if c.column in MEMORY_COLUMNS), p.columns[0])
            values = [f.value for i, _ in p.lines for f in parsed[i] if f.key == shown.key]
            p.interleaved = _interleaving(values)
    names: dict[str, int] = defaultdict(int)
    for p in result.patterns:
        names[p.name] += 1
        if names[p.name] > 1:
            p.name = f"{p.name}-{names[p.name]}"
    return result


# -- the spec ------------------------------------------------------------------------------------


def _loose(text: str) -> str:
    """A literal text as a regex, any run of blanks matching any run of blanks."""
    return r"\s+".join(re.escape(part) for part in re.split(r"\s+", text.strip())) if text.strip() else ""


def _field_regex(col: Column) -> str:
    unit = f"(?:\\s*(?P<{col.column}_unit>{SPEC_UNIT}))?" if col.printed_unit else ""
    value = f"(?P<{col.column}>{SPEC_NUM})"
    key = _loose(col.key)
    if col.form == "quoted":
        return f"{col.quote}{key}{col.quote}\\s*:\\s*['\"]?{value}"
    if col.form == "vk":
        return f"{value}{unit}\\s+{key}(?:\\W|$)"
    if col.form == "total":  # the number after the `/` that follows the value of key `of`
        return f"(?:^|[^\\w-]|\\d_){_loose(col.of)}\\s*[:=]?\\s*{SPEC_NUM}(?:\\s*(?:{SPEC_UNIT}))?\\s*/\\s*{value}{unit}"
    # A key starts the line, follows a non-word character, or is glued to a counter (`iter_1_after_backward`).
    return f"(?:^|[^\\w-]|\\d_){key}\\s*[:=]?\\s*{value}{unit}"


# A shape whose text starts by saying it is an evaluation (`Eval epoch 3 | acc ...`, `val: ...`,
# `Test iter 40 ...`): its own counter and its own memory (eval batches), kept apart from the training
# steps as the formats' `validate` records are, so that its epoch is no restart of the training steps.
_EVALUATION = re.compile(r"^\W*(?:eval(?:uation|uating)?|val(?:id|idation|idating)?|test(?:ing)?)\b", re.IGNORECASE)


def _kind(pattern: Pattern) -> str:
    return "validate" if _EVALUATION.match(pattern.head or "") else "train"


def to_spec(result: Guess, name: str) -> dict[str, Any]:
    """The guess as a format spec mapping (what `memlog formats guess` prints, samples aside)."""
    records = []
    for p in result.patterns:
        units = {c.column: _spec_unit(c.unit) for c in p.columns if c.unit and not c.printed_unit}
        if p.table is not None:
            regex, _ = table_regex(p)
            entry: dict[str, Any] = {"name": p.name, "kind": _kind(p), "literal": table_literal(p), "regex": regex}
            if p.counter is None:
                entry["regex"] = regex.replace("(?P<step>", "(?:")
                entry["inherit_step"] = entry["ordinal_step"] = True
            if p.bar:
                entry["refreshes"] = True
                if p.first_epoch:
                    entry["first_epoch"] = p.first_epoch
            if trailing := [_field_regex(c) for c in p.columns if c.position is None]:
                entry["fields"] = trailing
        else:
            head = _loose(p.head)
            entry = {"name": p.name, "kind": _kind(p), "literal": _literal(p)}
            if p.counter is not None:
                counter = COUNTERS[p.counter].regex
                entry["regex"] = f"^\\s*{head}" + (f".*?{counter.lstrip('^')}" if not counter.startswith("^") else "")
                if counter.startswith("^"):
                    entry["regex"] = counter
                if p.first_epoch:
                    entry["first_epoch"] = p.first_epoch
                if p.counter in BARS:
                    entry["refreshes"] = True
            else:
                entry["regex"] = f"^\\s*{head}" if head else r"^"
                entry["inherit_step"] = True
                if p.ordinal:
                    entry["ordinal_step"] = True
                    if p.interleaved:
                        entry["interleaved"] = p.interleaved
            entry["fields"] = [_field_regex(c) for c in p.columns]
            if p.devices:
                entry["fields"].append(DEVICE)
            texts = [t for _, t in p.lines]
            shared = any(q is not p and q.table is None and q.head == p.head for q in result.patterns)
            if p.counter is not None and p.columns and (shared or not all(p.columns[0].key in t for t in texts)):
                # Lines of this shape without its values (`Step 6: reward 0.4`) are not readings.
                key = next((c.key for c in p.columns if all(c.key in t or p.columns[0].key not in t for t in texts)), p.columns[0].key)
                entry["regex"] += ".*?" + _loose(key) + r"(?:\W|$)"
        if units:
            entry["units"] = units
        records.append(entry)
    return {
        "name": name,
        "title": f"{name} (guessed by memlog)",
        "description": "Guessed by `memlog formats guess` from a log no spec read: " + result.describe() + ". Edit to taste.",
        "logger_prefixes": [result.prefix] if result.prefix else [],
        "records": records,
    }


def _spec_unit(unit: str) -> str:
    return {"G": "GiB", "M": "MiB", "K": "KiB", "T": "TiB"}.get(unit, unit)


def _literal(p: Pattern) -> str:
    """Text every line of the pattern holds: its head's words, else its first key."""
    texts = [t for _, t in p.lines]
    for candidate in (p.head.strip(), *(c.key for c in p.columns), ":", "="):
        if candidate and all(candidate in t for t in texts):
            return candidate
    return p.columns[0].key if p.columns else " "


def spec_path(name: str) -> Path:
    return Path(f"<guessed:{name}>")
