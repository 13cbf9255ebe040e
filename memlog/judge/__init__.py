"""Judge: the rules (rules/*.py) over the series. Statistics (stats/) and the shape of a series
(trend) are shared primitives; rulekit is the one face a rule file imports.

May import: memlog.base, memlog.tables (and memlog.judge.stats imports nothing else of memlog).
"""
