"""memlog: read large-model training logs and say what memory and loss are doing, with evidence."""

import os
import sys

__version__ = "0.1.0"

# polars allocates through its own jemalloc, which reads this variable once, when polars loads.
# One arena instead of one per thread keeps the memory freed by one scanning thread reusable by the
# other: sparse 1 GiB log, 2 cores, peak 244-251 -> 200-204 MiB at the same wall time
# (benchmarks/README.md).
# Pages freed for 200 ms go back to the system (MADV_DONTNEED) instead of ageing for 10 s and then
# lingering as MADV_FREE pages, which still count in RSS: each chunk allocates and frees tens of MiB,
# and the pages kept grew with every file read (64 per-rank files 724-755 -> 528-564 MiB, Ray
# 465-473 -> 397-405 MiB, at the same wall; returning them at once costs 20-45% more time).
# A setting of the user's own wins; nothing changes if polars was imported before memlog.
ALLOCATOR_SETTINGS = "narenas:1,dirty_decay_ms:200,muzzy_decay_ms:0"
if "polars" not in sys.modules:
    os.environ.setdefault("_RJEM_MALLOC_CONF", ALLOCATOR_SETTINGS)
