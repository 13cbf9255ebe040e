"""Parser tests, one module per format spec (test_specs.py: what every spec shares)."""
