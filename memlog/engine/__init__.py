"""Engine: the front door. Reads inputs through read -> parse -> tables, judges them and builds
the Report, complete (the evidence lines read back from the logs, excerpt.py, included): what
every command that reads a log calls.

May import: every stage below it (base, read, tables, parse, judge, report).
"""
