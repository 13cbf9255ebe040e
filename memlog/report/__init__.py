"""Report: the Report, everything memlog concluded about a run (JSON is its contract), its
JSON Schemas and document, and the log lines behind the findings.

May import: memlog.base, memlog.read, memlog.tables, memlog.judge.
"""
