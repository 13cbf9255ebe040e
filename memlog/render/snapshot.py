"""`memlog snapshot show|diff` as text or JSON (memlog/guard/snapshot.py computes; this prints).

A snapshot's file names and frames are whatever the pickle holds: every line goes through the
output-safety layer."""

from __future__ import annotations

import json

from memlog import __version__
from memlog.guard.snapshot import Sites, SnapshotDiff, ranked, sites_json
from memlog.render.safety import safe, safe_json

SCHEMA_VERSION = 1
STACK_LINES = 4  # frames printed under each site in text (JSON carries more)


def size(n: int) -> str:
    """Bytes as people read them: B, KiB, MiB, GiB (signed where asked)."""
    sign, n = ("-" if n < 0 else ""), abs(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{sign}{n / scale:.1f} {unit}"
    return f"{sign}{n} B"


def render_show(sites: Sites, output: str, top: int) -> str:
    if output == "json":
        return _json({"command": "show"} | sites_json(sites, top))
    lines = [
        f"memlog snapshot: {sites.name}",
        f"live {size(sites.live_bytes)} in {sites.live_blocks:,} blocks at {len(sites.by_stack):,} sites "
        f"({sites.recorded_blocks:,} blocks with a stack); reserved {size(sites.reserved_bytes)}",
        "",
        f"Largest live allocation sites (top {min(top, len(sites.by_stack))}):",
    ]
    for site in ranked(sites)[:top]:
        lines.append(f"  {size(site.bytes):>10}  {site.blocks:>7,} blocks  {site.where}")
        lines += _stack(site.stack)
    return safe("\n".join(lines)) + "\n"


def render_diff(diff: SnapshotDiff, output: str, top: int) -> str:
    if output == "json":
        return _json({"command": "diff"} | diff.to_json(top))
    a, b, grown = diff.before, diff.after, diff.grown
    lines = [
        f"memlog snapshot diff: {a.name} -> {b.name}",
        f"live {size(a.live_bytes)} -> {size(b.live_bytes)} ({_signed(b.live_bytes - a.live_bytes)}), "
        f"{a.live_blocks:,} -> {b.live_blocks:,} blocks; {len(diff.changes):,} sites: {len(grown):,} grew, "
        f"{diff.shrank:,} shrank, {diff.unchanged:,} unchanged",
        "",
    ]
    if not grown:
        lines.append("No allocation site's live bytes grew.")
    else:
        lines.append(f"Allocation sites whose live bytes grew, largest first (top {min(top, len(grown))}):")
    for change in grown[:top]:
        lines.append(
            f"  {_signed(change.growth):>11}  {size(change.bytes_before)} -> {size(change.bytes_after)}, "
            f"{change.blocks_before:,} -> {change.blocks_after:,} blocks  {change.where}"
        )
        lines += _stack(change.stack)
    if b.recorded_blocks == 0:
        lines += [
            "",
            "No block of the second snapshot has a stack: record one with torch.cuda.memory._record_memory_history() on before the allocations to be named.",
        ]
    return safe("\n".join(lines)) + "\n"


def _signed(n: int) -> str:
    return ("+" if n > 0 else "") + size(n)


def _stack(stack) -> list[str]:
    shown = [f"      at {filename}:{line} in {name}" for filename, line, name in stack[:STACK_LINES]]
    if len(stack) > STACK_LINES:
        shown.append(f"      ... {len(stack) - STACK_LINES} more frames")
    return shown


def _json(document: dict) -> str:
    document = {"schema_version": SCHEMA_VERSION, "memlog_version": __version__} | document
    return safe_json(json.dumps(document, indent=2, ensure_ascii=False)) + "\n"
