"""Output safety, one layer for every command's every output: nothing a log contains (escape
sequences, control characters, bidi overrides, workflow commands for a CI runner) reaches a
terminal or a CI log as anything but text.
"""

from __future__ import annotations

import re

# Log text was cleaned when read; this is the last line of defence for anything printed:
# C0 controls but tab and newline, DEL, C1 controls (8-bit CSI/OSC), the Unicode line and
# paragraph separators, bidi overrides and isolates (Trojan Source).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

# What the renderers themselves print outside ASCII, for terminals that are not UTF-8.
_ASCII = str.maketrans(
    {
        "─": "-", "━": "=", "┈": "-", "═": "=", "│": "|", "┃": "|", "┊": ":", "║": "|",
        "┌": "+", "┐": "+", "└": "+", "┘": "+", "├": "+", "┤": "+", "┬": "+", "┴": "+", "┼": "+",
        "╭": "+", "╮": "+", "╰": "+", "╯": "+",
        "·": ".", "•": "*", "…": "...", "→": "->", "≈": "~", "≥": ">=", "≤": "<=", "²": "2",
        "–": "-", "—": "-", "µ": "u", "⠶": "*", "↑": "^",
    }
)  # fmt: skip


# GitHub's runner reads workflow commands from every line a job prints: `::command::` after leading
# blanks, and the legacy `##[command]` anywhere. Log text (an actor named `x ::add-mask::y`), file
# names and wrapped message lines must never form one.
_LEGACY_COMMAND = re.compile(r"##\[")
# The runner trims a line as .NET does: every Unicode blank (no-break space, ideographic space, the
# en/em spaces...), and older .NET also the zero-width space, BOM and Mongolian vowel separator.
_BLANKS = r"(?:[^\S\n]|[\u180e\u200b\ufeff])*"
_COMMAND_AT_LINE_START = re.compile(rf"(?m)^({_BLANKS}):(?=:)")
# A file name that is not UTF-8 reaches Python as lone surrogates, which a UTF-8 stream cannot
# carry (written with surrogateescape they are the raw bytes, and stdout is no longer UTF-8).
_SURROGATE = re.compile("[\ud800-\udfff]")


def no_workflow_commands(text: str) -> str:
    return _COMMAND_AT_LINE_START.sub(r"\1: ", _LEGACY_COMMAND.sub("# #[", text))


def valid_text(text: str) -> str:
    """`text` with nothing that is not a character (lone surrogates) left: U+FFFD in its place."""
    return _SURROGATE.sub("\ufffd", text)


def safe(text: str) -> str:
    """Text for a terminal or a CI log: valid UTF-8, no control characters, no workflow commands."""
    return no_workflow_commands(_UNSAFE.sub("?", valid_text(text)))


def safe_json(text: str) -> str:
    """Serialized JSON with every unsafe character written as a \\uXXXX escape: the data is
    unchanged, and nothing in it acts on a terminal (json.dumps leaves DEL, C1 and bidi raw) or on
    a CI runner (`##[` becomes `#\\u0023[`)."""
    return _LEGACY_COMMAND.sub("#\\\\u0023[", _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", valid_text(text)))


def ascii_text(text: str) -> str:
    """The ASCII fallback: transliterate what we print, replace anything else (log content) by '?'."""
    return text.translate(_ASCII).encode("ascii", "replace").decode("ascii")
