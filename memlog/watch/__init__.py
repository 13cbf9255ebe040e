"""Watch: follow growing logs and re-judge the run as steps arrive, through the engine.

May import: the engine and every stage below it.
"""
