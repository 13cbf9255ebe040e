"""Names as text: what reports show for a path or an argument from the command line."""

from __future__ import annotations


def shown(text: str) -> str:
    """A command-line string (a path, an argument) as text: bytes that are not UTF-8 reach Python as
    surrogates, which no UTF-8 writer accepts; they are shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
