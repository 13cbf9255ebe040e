"""The guard inside a training process (memlog/guard/)."""
