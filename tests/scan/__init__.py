"""memlog scan (memlog/scan/), local and on Ray."""
