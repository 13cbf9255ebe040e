"""Where the content folders `parsers/` and `rules/` live.

In a wheel they are shipped under `memlog/_content/`; in a source checkout (and an editable
install) they sit at the repository root beside the `memlog` package.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # memlog/, two up from memlog/base/content.py


def content_dir(name: str) -> Path:
    for candidate in (_PACKAGE / "_content" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"memlog's {name}/ folder is missing from this installation")
