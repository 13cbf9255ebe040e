"""`memlog snapshot show|diff`: PyTorch allocator snapshots (torch.cuda.memory._dump_snapshot), read
with the guard's restricted unpickler (memlog/guard/snapshot.py), printed by memlog/render/snapshot.py."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from memlog.commands.common import Debug, emit, guard

snapshot_app = typer.Typer(no_args_is_help=True, help="PyTorch allocator snapshots: the largest live allocation sites, and what grew.")


class SnapshotOutput(str, Enum):
    text = "text"
    json = "json"


Output = Annotated[SnapshotOutput, typer.Option("-o", "--output", help="text, or json (see `memlog schema --kind snapshot`).")]
Top = Annotated[int, typer.Option("--top", help="Sites listed.", min=1, max=100_000)]


@snapshot_app.command("show")
def snapshot_show(
    snapshot: Annotated[str, typer.Argument(metavar="SNAPSHOT", help="A pickle from torch.cuda.memory._dump_snapshot.")],
    output: Output = SnapshotOutput.text,
    top: Top = 20,
    debug: Debug = False,
) -> None:
    """The largest live allocation sites of one snapshot (the stacks that allocated what is held)."""
    from memlog.guard.snapshot import live_sites, load_snapshot
    from memlog.render.snapshot import render_show

    guard(debug, lambda: emit(render_show(live_sites(load_snapshot(snapshot), snapshot), output.value, top)))


@snapshot_app.command("diff")
def snapshot_diff(
    before: Annotated[str, typer.Argument(metavar="A", help="The earlier snapshot.")],
    after: Annotated[str, typer.Argument(metavar="B", help="The later snapshot.")],
    output: Output = SnapshotOutput.text,
    top: Top = 20,
    debug: Debug = False,
) -> None:
    """The allocation sites whose live bytes grew from A to B, largest growth first."""
    from memlog.guard.snapshot import diff_snapshots, load_snapshot
    from memlog.render.snapshot import render_diff

    guard(debug, lambda: emit(render_diff(diff_snapshots(load_snapshot(before), load_snapshot(after), (before, after)), output.value, top)))
