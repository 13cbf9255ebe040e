"""memlog: read large-model training logs and say what memory and loss are doing, with evidence."""

__version__ = "0.1.0"
