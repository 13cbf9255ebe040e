"""Tables: the records (one row per reading of a worker at a step) and events a run's reading
yields, condensed while read, and the series (one metric of one worker over one restart segment)
and capacities the judge works on.

May import: memlog.base, memlog.read.
"""
