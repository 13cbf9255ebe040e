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
