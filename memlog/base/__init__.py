"""What every stage shares: the canonical vocabularies (columns, event kinds), errors, limits, the
config file, names of inputs as text, and small helpers (grouping keys, ordered parallel map, YAML
read with bounds, where the content folders live).

May import: nothing else of memlog.
"""
