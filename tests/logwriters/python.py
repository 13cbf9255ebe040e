"""Python's own output: the logging module's timestamp and tracebacks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


def asctime(dt: datetime) -> str:
    """logging's default ``%(asctime)s``: ``2025-03-18 10:02:15,112``."""
    return dt.strftime("%Y-%m-%d %H:%M:%S") + f",{dt.microsecond // 1000:03d}"


@dataclass(frozen=True)
class Frame:
    """One traceback frame (CPython >= 3.11 layout, see ``traceback``)."""

    file: str
    line: int
    func: str
    code: str | None = None  # None for frozen modules (no source line shown)
    caret: str | None = None  # sub-expression to underline; omitted if it is the whole line


def traceback(frames: list[Frame], exc_line: str) -> list[str]:
    """A CPython 3.12 traceback, carets under the failing sub-expression, then the exception line."""
    out = ["Traceback (most recent call last):"]
    for f in frames:
        out.append(f'  File "{f.file}", line {f.line}, in {f.func}')
        if f.code is None:
            continue
        out.append(f"    {f.code}")
        # CPython shows carets only when the failing expression is shorter than the whole (stripped) line.
        if f.caret and f.caret != f.code:
            col = f.code.index(f.caret)
            out.append("    " + " " * col + "^" * len(f.caret))
    out.append(exc_line)
    return out


def frame_lines(frames: list[tuple[str, int, str, str]]) -> list[str]:
    """(file, line, function, code) frames as CPython 3.10 prints them: two lines each, no carets."""
    out = []
    for path, line, func, code in frames:
        out += [f'  File "{path}", line {line}, in {func}', f"    {code}"]
    return out


def warning_lines(file: str, line: int, category: str, message: str, source: str) -> list[str]:
    """warnings.formatwarning: ``file:line: Category: message`` and the source line, indented by two."""
    return [f"{file}:{line}: {category}: {message}", f"  {source}"]
