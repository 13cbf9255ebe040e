"""Parse: lines into records and events. Wrappers (launcher and logger prefixes) are unwrapped,
format specs (parsers/*.yaml) are applied to the unwrapped lines, multi-line blocks are joined,
and lines no spec claims go to the generic reader (generic/).

May import: memlog.base, memlog.read, memlog.tables.
"""
