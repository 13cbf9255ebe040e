"""Compare: has memory regressed between two runs, each judged by the engine.

May import: the engine and every stage below it.
"""
