"""memlog watch (memlog/watch/)."""
