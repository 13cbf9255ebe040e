"""Report: the Report, everything memlog concluded about a run (JSON is its contract), its
JSON Schemas and document. It reads no file: the engine fills in the log lines behind the findings
(memlog/engine/excerpt.py) when it builds a Report.

May import: memlog.base, memlog.tables, memlog.judge.
"""
