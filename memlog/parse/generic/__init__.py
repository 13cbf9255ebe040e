"""The generic reader: lines of a source that no format spec claims, read by a guess.

- fields.py: a line's step counter and numeric fields (`key: v`, `key=v`, `v unit key`, quoted keys);
- mapping.py: key families onto canonical columns (memory scope, measure, window; loss);
- guess.py: line shapes of a sample turned into a format spec, and what it guessed in words;
- shape.py: a shape's pattern and the columns its keys map to; table.py: header-and-rows tables;
- structured.py: JSON documents (trainer_state.json);
- reader.py: the per-source seam the engine calls (memlog/engine/api.py), never instead of a spec.
"""

from memlog.parse.generic.reader import GENERIC, Guessed, SourceGuesser

__all__ = ["GENERIC", "Guessed", "SourceGuesser"]
