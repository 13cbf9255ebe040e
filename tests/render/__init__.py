"""The renderers (memlog/render/): every output format, and output safety."""
