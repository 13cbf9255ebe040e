"""Render: each module turns a Report (or a scan, a comparison, watch's judgements) into one
output format; memlog.render.outputs.render picks one. Renderers compute nothing of their own.
safety holds the one output-safety layer every command's output goes through; shared what every
renderer says the same way.

May import: every stage below it (the engine, watch, scan, compare and the stages under them).
"""
