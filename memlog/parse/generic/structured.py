"""Structured metrics documents: Hugging Face's `trainer_state.json` (one JSON document whose
`log_history` holds a dict per logged step), detected by content, not by name.

Line-shaped metrics files (JSON lines, CSV with a step column) need no reader of their own: the
generic reader guesses a spec for them like for any log (guess.py: JSON keys, table headers).
A JSON document is read whole, so it is bounded: beyond MAX_DOCUMENT_BYTES it is not read.
"""

from __future__ import annotations

import json
import math

import polars as pl

from memlog.base.columns import MEMORY_COLUMNS, unit_gib
from memlog.parse.multiline import RECORD_SCHEMA
from memlog.parse.generic.guessed import Guessed
from memlog.parse.generic.mapping import meaning_of, unit_in_key

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
        rows, used = [], {}
        for entry in history:
            if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
                continue
            if any(k.startswith("eval_") for k in entry) or "train_runtime" in entry:
                continue  # evaluation and end-of-training summaries are not training steps
            row: dict[str, float | int] = {"step": entry["step"]}
            for key, value in entry.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)) or key == "step":
                    continue
                column, scale, text = _column(key, value)
                if column and column not in row:
                    row[column] = value * scale
                    used.setdefault(column, text)
            if len(row) > 1:
                rows.append(row)
        if not rows:
            return [], None
        frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(
            line_no=pl.int_range(1, len(rows) + 1, dtype=pl.Int64), format=pl.lit(READER), kind=pl.lit("train"),
            pattern=pl.lit(f"{READER}/log_history"), inherited=pl.lit(False), ordinal_step=pl.lit(False),
            **{c: pl.lit(None, dtype=t) for c, t in RECORD_SCHEMA.items() if c not in ("line_no", "step", "kind")},
        ).with_columns(pl.col("step").cast(pl.Int64))
        mapping = "step from `step` of each `log_history` entry: " + ", ".join(used.values())
        columns = [{"column": c, "key": t.split("`")[1], "unit": None, "unit_guessed": False, "pattern": "log_history"} for c, t in used.items()]
        return [frame], Guessed(self.source, READER, mapping, columns)


def _column(key: str, value: float) -> tuple[str | None, float, str]:
    if key == "learning_rate":
        return "lr", 1.0, "learning rate from `learning_rate`"
    meaning = meaning_of(key, unit_in_key(key))
    if meaning is None:
        return None, 1.0, ""
    column = meaning.column(running_max=meaning.peak)
    if column in MEMORY_COLUMNS:
        unit = unit_in_key(key) or ("MiB" if abs(value) > 512 else "GiB")
        scale = unit_gib(unit) or 1.0
        return column, scale, meaning.describe(key, unit, unit_in_key(key) is None, meaning.peak)
    if math.isfinite(value) or meaning.role == "loss":
        return column, 1.0, meaning.describe(key, None, False, False)
    return None, 1.0, ""
