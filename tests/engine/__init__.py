"""The engine (memlog/engine/): goldens, parity across commands, properties, metamorphic tests."""
