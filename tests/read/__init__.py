"""The reading layer (memlog/read/): sources, chunks, bounded opening, configs."""
