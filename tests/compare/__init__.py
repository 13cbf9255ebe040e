"""memlog compare (memlog/compare/)."""
