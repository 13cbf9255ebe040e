"""memlog: read large-model training logs and say what memory and loss are doing, with evidence."""

import os
import sys

__version__ = "0.1.0"

# polars allocates through its own jemalloc, which reads this variable once, when polars loads.
# One arena instead of one per thread keeps the memory freed by one scanning thread reusable by the
# other: sparse 1 GiB log, 2 cores, peak 244-251 -> 200-204 MiB at the same wall time
# (benchmarks/README.md).
# A setting of the user's own wins; nothing changes if polars was imported before memlog.
if "polars" not in sys.modules:
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1")
