"""GitHub Actions workflow commands, as every command's github output writes them (analyze's,
scan's, compare's, watch's): one annotation per finding, on the file and line of its evidence.

GitHub shows at most 10 error and 10 warning annotations per step (50 per job), so findings are
annotated once each, never per step or per rank. Info findings become notices. Values are escaped
as the runner expects: `%`, CR and LF in the message; also `:` and `,` in properties.
"""

from __future__ import annotations

import os

from memlog.render.safety import safe
from memlog.render.shared import evidence_summary

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return safe(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation_path(source: str, workspace: str | None) -> str:
    """Annotations resolve paths from the repository root: make paths under the workspace relative."""
    if workspace and os.path.isabs(source):
        try:
            relative = os.path.relpath(source, workspace)
        except ValueError:  # another drive (Windows)
            return source
        if not relative.startswith(".."):
            return relative.replace(os.sep, "/")
    return source


def annotation(f, workspace: str | None = None) -> str:
    """One finding as a workflow command, on the file and line of its first evidence line."""
    props = []
    if f.lines and f.lines[0][0] != "<stdin>":
        source, line = f.lines[0]
        props += [f"file={escape_property(annotation_path(source, workspace))}", f"line={line}"]
    props.append(f"title={escape_property(f'memlog {f.rule}')}")
    body = [safe(f.message)]
    evidence = evidence_summary(f.evidence)
    if evidence:
        body.append(f"Evidence: {safe(evidence)}")
    if len(f.lines) > 1:
        body.append("Also at: " + ", ".join(f"{safe(s)}:{n}" for s, n in f.lines[1:]))
    return f"::{LEVEL[f.severity]} {','.join(props)}::{escape_data(chr(10).join(body))}"
