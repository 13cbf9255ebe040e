"""Structured metrics documents: Hugging Face's `trainer_state.json` (one JSON document whose
`log_history` holds a dict per logged step), detected by content, not by name.

Line-shaped metrics files (JSON lines, CSV with a step column) need no reader of their own: the
generic reader guesses a spec for them like for any log (guess.py: JSON keys, table headers).
A JSON document is read whole, so it is bounded: beyond MAX_DOCUMENT_BYTES it is not read.
"""

from __future__ import annotations

import functools
import json
import math

import polars as pl

from memlog.base.columns import MEMORY_COLUMNS, unit_gib
from memlog.parse.generic.guessed import Guessed
from memlog.parse.generic.mapping import meaning_of, unit_in_key, words
from memlog.parse.multiline import RECORD_SCHEMA

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
READER = "trainer_state.json"


class StructuredFile:
    def __init__(self, source: str) -> None:
        self.source = source
        self.texts: list[str] = []
        self.size = 0
        self.too_big = False

    @staticmethod
    def detect(lines: pl.DataFrame) -> bool:
        """A JSON document with a `log_history` list near its start."""
        head = "\n".join(lines["text"].head(400).to_list())
        return head.lstrip().startswith("{") and '"log_history"' in head

    def feed(self, lines: pl.DataFrame) -> None:
        if self.too_big:
            return
        texts = lines["text"].to_list()
        self.size += sum(len(t) for t in texts)
        if self.size > MAX_DOCUMENT_BYTES:
            self.too_big, self.texts = True, []
            return
        self.texts += texts

    def finish(self):
        if self.too_big:
            return [], Guessed(self.source, READER, "", weak=f"a JSON document over {MAX_DOCUMENT_BYTES >> 20} MiB is not read")
        try:
            document = json.loads("\n".join(self.texts))
        except (ValueError, RecursionError):
            return [], Guessed(self.source, READER, "", weak="the file starts like trainer_state.json but is not valid JSON")
        history = document.get("log_history") if isinstance(document, dict) else None
        if not isinstance(history, list):
            return [], None
        entries = [e for e in history if isinstance(e, dict) and not any(k.startswith("eval_") for k in e) and "train_runtime" not in e]
        # (evaluation and end-of-training summaries are not training steps)
        return keyed_records(entries, self.source, READER, "each `log_history` entry", "log_history")


def keyed_records(entries: list[dict], source: str, reader: str, where: str, pattern: str) -> tuple[list[pl.DataFrame], Guessed | None]:
    """Records of metrics kept as keys and values per step (trainer_state.json's `log_history`, a
    TensorBoard run's scalars by step: memlog/parse/stores/): each entry a dict with an int `step`
    (and `_seconds`, its wall time, where known), each key mapped to a column by its name as the
    generic reader maps it (mapping.py), its unit from the key. Returns the frames and what was
    read by a guess, in words (`where`: where the steps come from; `pattern`: the evidence's name)."""
    rows: list[dict[str, float | int]] = []
    used: dict[str, str] = {}  # column -> how it was read, in words
    for entry in entries:
        if not isinstance(entry.get("step"), int) or isinstance(entry.get("step"), bool):
            continue
        row: dict[str, float | int] = {"step": entry["step"]}
        for key, value in entry.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or key in ("step", "_seconds"):
                continue
            column, scale, text = _column(key, value)
            if column and column not in row:
                row[column] = value * scale
                used.setdefault(column, text)
        if len(row) > 1:
            if isinstance(entry.get("_seconds"), float):
                row["_seconds"] = entry["_seconds"]
            rows.append(row)
    if not rows:
        return [], None
    frame = (
        pl.DataFrame(rows, infer_schema_length=None)
        .with_columns(
            line_no=pl.int_range(1, len(rows) + 1, dtype=pl.Int64),
            format=pl.lit(reader),
            kind=pl.lit("train"),
            pattern=pl.lit(f"{reader}/{pattern}"),
            inherited=pl.lit(False),
            ordinal_step=pl.lit(False),
            **{c: pl.lit(None, dtype=t) for c, t in RECORD_SCHEMA.items() if c not in ("line_no", "step", "kind", *rows[0])},
        )
        .with_columns(pl.col("step").cast(pl.Int64))
    )
    mapping = f"step from `step` of {where}: " + ", ".join(used.values())
    columns = [{"column": c, "key": t.split("`")[1], "unit": None, "unit_guessed": False, "pattern": pattern} for c, t in used.items()]
    return [frame], Guessed(source, reader, mapping, columns)


# Units a metrics key spells as a word of its own (`memoryAllocatedBytes`, `..._usage_megabytes`).
WORD_UNITS = {"bytes": "B", "kilobytes": "KB", "megabytes": "MB", "gigabytes": "GB", "mib": "MiB", "gib": "GiB", "mb": "MB", "gb": "GB"}


def _unit(key: str) -> str | None:
    """The unit a key spells: `(GiB)`, `_mb`, `Bytes`; "%" for a share of a total, never read as memory."""
    if "%" in key or key.lower().endswith(("percent", "_pct", "pct)")):
        return "%"
    return unit_in_key(key) or WORD_UNITS.get((words(key) or [""])[-1])


def _column(key: str, value: float) -> tuple[str | None, float, str]:
    if key == "learning_rate":
        return "lr", 1.0, "learning rate from `learning_rate`"
    found = _meaning(key)
    if found is None:
        return None, 1.0, ""
    meaning, column, unit = found
    if column in MEMORY_COLUMNS:
        unit = unit or ("MiB" if abs(value) > 512 else "GiB")
        scale = unit_gib(unit) or 1.0
        return column, scale, meaning.describe(key, unit, found[2] is None, meaning.peak)
    if math.isfinite(value) or meaning.role == "loss":
        return column, 1.0, meaning.describe(key, None, False, False)
    return None, 1.0, ""


@functools.lru_cache(maxsize=4096)
def _meaning(key: str):
    """What a key means, the column it fills and the unit it spells: the same for every point of a
    run (a million TensorBoard points have a few tags), so worked out once per key."""
    unit = _unit(key)
    meaning = meaning_of(key, unit)
    if meaning is None:
        return None
    return meaning, meaning.column(running_max=meaning.peak), unit
