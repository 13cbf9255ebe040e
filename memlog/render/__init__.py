"""Render: each module turns a Report (or a scan, a comparison, watch's judgements) into one
output format; the Report's outputs are memlog.render.outputs, one module each (a new output is one
file there). Renderers compute nothing of their own.
safety holds the one output-safety layer every command's output goes through; shared what every
renderer says the same way.

May import: every stage below it (the engine, watch, scan, compare and the stages under them).
"""
