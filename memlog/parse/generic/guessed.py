"""What the generic reader says of a source it read (or tried to), for the report's coverage: its
own module so the readers (reader.py, structured.py) and the engine share it without importing each
other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Guessed:
    """What coverage says of a source the generic reader read."""

    source: str
    reader: str
    mapping: str
    columns: list[dict] = field(default_factory=list)
    weak: str | None = None
    lines: int = 0
    keys: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        found = {"source": self.source, "reader": self.reader, "mapping": self.mapping, "columns": self.columns}
        if self.weak:
            found["weak"] = self.weak
        return found
