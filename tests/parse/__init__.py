"""The parse stage (memlog/parse/): specs, wrappers, the generic reader, the metrics stores."""
