"""Scan: a fleet of runs under some paths, each judged by the engine (locally or as Ray tasks).

May import: the engine and every stage below it.
"""
