"""Errors that end a run with exit code 2 and one line on stderr."""

from __future__ import annotations


class MemlogError(Exception):
    """A problem the user can fix; its message is the whole explanation."""


class InputError(MemlogError):
    """An input could not be read."""


class ConfigError(MemlogError):
    """A config file or option is invalid."""


class FormatSpecError(MemlogError):
    """A format spec (built-in or user-supplied) is invalid."""


class NoRecordsError(MemlogError):
    """Nothing in the input matched any known format: memlog cannot judge."""


def regex_problem(exc: BaseException) -> str:
    """A regex compile error in one line, whole: polars' message spans lines (the pattern, a caret
    under the fault, then what is wrong), and its first line alone says nothing."""
    lines = [line.rstrip() for line in str(exc).splitlines() if line.strip()]
    what = [line.strip().removeprefix("error: ") for line in lines if line.strip().startswith("error:")]
    carets = [i for i, line in enumerate(lines) if line.strip() and set(line.strip()) <= {"^"}]
    if not what:
        return " ".join(line.strip() for line in lines) or type(exc).__name__
    if carets and carets[0] > 0:
        pattern, caret = lines[carets[0] - 1], lines[carets[0]]
        column = len(caret) - len(caret.lstrip())
        indent = len(pattern) - len(pattern.lstrip())
        return f"{what[0]}, at {pattern.strip()[column - indent :][:40]!r}"
    return what[0]
