"""Allocator snapshots: read safely, and the allocation sites whose live bytes grew between two.

A snapshot is what `torch.cuda.memory._snapshot()` returns and `_dump_snapshot` pickles: a dict
whose `segments` (the caching allocator's segments) hold `blocks`, each with its `size`, its
`state` (`active_allocated` is live; `active_pending_free`, or `active_awaiting_free` in some
docstrings, was freed and waits for its stream; `inactive` is cache) and the `frames` of the stack
that allocated it, innermost first (`{filename, line, name}`), recorded while
`torch.cuda.memory._record_memory_history` was on (none for blocks allocated before). PyTorch 2.0
kept the frames in a block's `history` instead; very old files are a bare list of segments.

A site is one stack: its live bytes are the sizes of its live blocks. `diff_snapshots` names the
sites whose live bytes grew from A to B, largest growth first; `ranked(live_sites(...))` lists one
snapshot's sites by their live bytes.

Snapshots are pickles, and unpickling runs whatever code a pickle names. They are read with an
unpickler that builds plain containers, strings and numbers only (what PyTorch writes, and all
that its own browser viewer reads): a pickle that names any class or function is refused before
anything is built. A pickle of plain containers can still be shaped to cost time (one list
referenced a million times), so the blocks walked are capped, and every value is checked for the
type a snapshot gives it.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeGuard

from memlog.base.errors import InputError

MAX_SNAPSHOT_BYTES = 8 << 30  # a snapshot file larger than this is not read (history dumps reach GBs)
MAX_BLOCKS = 20_000_000  # blocks walked in one snapshot (a device of 80 GiB holds far fewer)
LIVE_STATES = ("active_allocated",)
NO_FRAMES: list = []  # the frames of a block that records none
NATIVE_SUFFIXES = (".cpp", ".cc", ".c", ".h", ".hpp", ".cu", ".cuh")


class SnapshotError(InputError):
    """A file that is not a snapshot memlog reads: one line, exit 2."""


class _Refused(Exception):
    pass


class PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, tuples, sets, strings, bytes, numbers, booleans and None, and nothing
    else: every opcode that fetches a class or function (GLOBAL, STACK_GLOBAL, INST; REDUCE, BUILD,
    OBJ and NEWOBJ need one fetched first) goes through find_class, which refuses, as does a
    persistent id. The extension registry's opcodes (EXT1/2/4) fail while it is empty, as it is
    unless a program registers codes (copyreg.add_extension); with codes registered, a code already
    met is taken from a cache without find_class, so plain_load then uses ListedOpcodes."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"asks to build {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("asks for a persistent object")


# Opcodes that fetch or call code, or take an object from outside the pickle.
CODE_OPCODES = ("GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "BUILD", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID")


def _refuse_opcode(name: str):
    def refuse(self) -> None:
        raise _Refused(f"holds opcode {name}, which fetches or calls code")

    return refuse


class ListedOpcodes(pickle._Unpickler):  # the pure-Python unpickler, whose opcode table can be narrowed
    """The pure-Python unpickler with every opcode of CODE_OPCODES refused: safe whatever the
    extension registry holds, about three times slower than PlainUnpickler."""

    dispatch = pickle._Unpickler.dispatch | {getattr(pickle, name)[0]: _refuse_opcode(name) for name in CODE_OPCODES}

    find_class = PlainUnpickler.find_class
    persistent_load = PlainUnpickler.persistent_load


def load_snapshot(path: str | os.PathLike) -> dict:
    """The snapshot in `path`, checked to have segments (a bare list of segments is wrapped)."""
    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        if size > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(f"{name}: {size:,} bytes, larger than the {MAX_SNAPSHOT_BYTES >> 30} GiB a snapshot is read up to")
        with open(name, "rb") as handle:
            data = plain_load(handle)
    except FileNotFoundError:
        raise SnapshotError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise SnapshotError(f"{name}: is a directory, not a snapshot file") from None
    except OSError as exc:
        raise SnapshotError(f"{name}: cannot read ({exc.strerror or exc})") from None
    except _Refused as refused:
        raise SnapshotError(
            f"{name}: refused: the pickle {refused}, and a memory snapshot holds only plain containers and numbers (nothing was loaded or run)"
        ) from None
    except MemoryError:
        raise SnapshotError(f"{name}: too large to load in memory") from None
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SnapshotError(f"{name}: not a readable pickle ({first})") from None
    return as_snapshot(data, name)


def plain_load(handle: BinaryIO) -> Any:
    """The pickle in `handle`, built of plain containers and numbers only (or _Refused)."""
    import copyreg

    unpickler = ListedOpcodes if copyreg._inverted_registry else PlainUnpickler  # type: ignore[attr-defined]  # the codes registered, if any (private to copyreg)
    return unpickler(handle).load()


def as_snapshot(data: Any, name: str) -> dict:
    if isinstance(data, list):  # memory_snapshot() of old: the segments alone
        data = {"segments": data}
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise SnapshotError(f"{name}: not a PyTorch memory snapshot (no list of `segments`)")
    return data


# -- sites ----------------------------------------------------------------------------------------

Frame = tuple[str, int, str]  # filename, line, function
Stack = tuple[Frame, ...]


@dataclass
class Site:
    stack: Stack
    bytes: int = 0
    blocks: int = 0

    @property
    def where(self) -> str:
        return where(self.stack)


@dataclass
class Sites:
    """One snapshot's live blocks by the stack that allocated them."""

    name: str
    by_stack: dict[Stack, Site] = field(default_factory=dict)
    live_bytes: int = 0
    live_blocks: int = 0
    reserved_bytes: int = 0
    recorded_blocks: int = 0  # live blocks with a recorded stack


def where(stack: Stack) -> str:
    """The frame that names a site: the innermost one in the user's Python code, past torch's own
    package and native frames (the first frame when every frame is one of those)."""
    if not stack:
        return "(no stack recorded: allocated while history was off)"
    chosen = next((f for f in stack if not _framework(f)), stack[0])
    filename, line, name = chosen
    return f"{_short(filename)}:{line} in {name}"


def _framework(frame: Frame) -> bool:
    filename, _, name = frame
    path = filename.replace("\\", "/")
    return (
        "/torch/" in path
        or path.startswith("torch/")
        or path.endswith(NATIVE_SUFFIXES)
        or filename in ("", "??")
        or name.startswith(("torch::", "c10::", "at::"))
    )


def _short(filename: str) -> str:
    path = filename.replace("\\", "/")
    return path.split("site-packages/", 1)[1] if "site-packages/" in path else filename


def live_sites(snapshot: dict, name: str = "snapshot") -> Sites:
    """The live blocks of `snapshot` (load_snapshot's) summed per allocating stack."""
    sites = Sites(name)
    site_of: dict[int, Site] = {}  # by the id of a frames list: PyTorch shares one among the blocks of one traceback
    for block in _blocks(snapshot, name, sites):
        state = block.get("state")
        if state not in LIVE_STATES:
            if not isinstance(state, str):
                raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a block without a state)")
            continue
        size, frames = _size_and_frames(block, name)
        site = site_of.get(id(frames))
        if site is None:
            stack = _stack(frames, name)
            site = site_of[id(frames)] = sites.by_stack.setdefault(stack, Site(stack))
        site.bytes += size
        site.blocks += 1
        sites.live_bytes += size
        sites.live_blocks += 1
        sites.recorded_blocks += bool(site.stack)
    return sites


def _blocks(snapshot: dict, name: str, sites: Sites) -> Iterator[dict]:
    """Every block of every segment, once the segments are checked and their blocks counted (a count
    past MAX_BLOCKS is refused before any is walked); the segments' sizes go to `sites`."""
    segments = snapshot["segments"]
    for segment in segments:
        if not isinstance(segment, dict) or not isinstance(segment.get("blocks", []), list):
            raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a segment without a list of blocks)")
    if sum(len(segment.get("blocks", [])) for segment in segments) > MAX_BLOCKS:
        raise SnapshotError(f"{name}: more than {MAX_BLOCKS:,} blocks, more than a device holds: not read")
    for segment in segments:
        total = segment.get("total_size", 0)
        sites.reserved_bytes += total if _count(total) else 0
        for block in segment.get("blocks", []):
            if not isinstance(block, dict):
                raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a block that is not a mapping)")
            yield block


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _size_and_frames(block: dict, name: str) -> tuple[int, list]:
    """A block's size and its frames; PyTorch 2.0 kept both in the block's first `history` entry."""
    size, frames = block.get("size"), block.get("frames")
    if frames is None:
        history = block.get("history")
        if isinstance(history, list) and history and isinstance(history[0], dict):
            frames = history[0].get("frames")
    if not _count(size):
        raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a block without a size in bytes)")
    if frames is None:
        frames = NO_FRAMES  # one list for all such blocks: live_sites keys its cache by the list's id
    if not isinstance(frames, list):
        raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a block whose frames are not a list)")
    return size, frames


def _stack(frames: list, name: str) -> Stack:
    stack = []
    for frame in frames:
        if not isinstance(frame, dict):
            raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a frame that is not a mapping)")
        filename, line, function = frame.get("filename", ""), frame.get("line", 0), frame.get("name", "")
        if not (isinstance(filename, str) and isinstance(function, str) and isinstance(line, int) and not isinstance(line, bool)):
            raise SnapshotError(f"{name}: not a PyTorch memory snapshot (a frame whose file, line or name has the wrong type)")
        stack.append((filename, line, function))
    return tuple(stack)


# -- comparing two ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SiteChange:
    stack: Stack
    bytes_before: int
    bytes_after: int
    blocks_before: int
    blocks_after: int

    @property
    def growth(self) -> int:
        return self.bytes_after - self.bytes_before

    @property
    def where(self) -> str:
        return where(self.stack)

    def to_json(self, frames: int) -> dict:
        return {
            "where": self.where,
            "growth_bytes": self.growth,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "blocks_before": self.blocks_before,
            "blocks_after": self.blocks_after,
            "frames": frames_json(self.stack, frames),
            "frames_total": len(self.stack),
        }


@dataclass
class SnapshotDiff:
    """A to B: every site's live bytes then and now; `grown` those that grew, largest growth first."""

    before: Sites
    after: Sites
    changes: list[SiteChange]

    @property
    def grown(self) -> list[SiteChange]:
        return [c for c in self.changes if c.growth > 0]

    @property
    def shrank(self) -> int:
        return sum(1 for c in self.changes if c.growth < 0)

    @property
    def unchanged(self) -> int:
        return sum(1 for c in self.changes if c.growth == 0)

    def to_json(self, top: int = 20, frames: int = 12) -> dict:
        grown = self.grown
        return {
            "before": _summary(self.before),
            "after": _summary(self.after),
            "live_growth_bytes": self.after.live_bytes - self.before.live_bytes,
            "sites": len(self.changes),
            "sites_grown": len(grown),
            "sites_shrank": self.shrank,
            "sites_unchanged": self.unchanged,
            "grown": [c.to_json(frames) for c in grown[:top]],
        }


def _summary(sites: Sites) -> dict:
    return {
        "name": sites.name,
        "live_bytes": sites.live_bytes,
        "live_blocks": sites.live_blocks,
        "reserved_bytes": sites.reserved_bytes,
        "blocks_with_stack": sites.recorded_blocks,
        "sites": len(sites.by_stack),
    }


def diff_snapshots(before: dict, after: dict, names: tuple[str, str] = ("A", "B")) -> SnapshotDiff:
    a, b = live_sites(before, names[0]), live_sites(after, names[1])
    changes = []
    for stack in a.by_stack.keys() | b.by_stack.keys():
        was, now = a.by_stack.get(stack), b.by_stack.get(stack)
        changes.append(SiteChange(stack, was.bytes if was else 0, now.bytes if now else 0, was.blocks if was else 0, now.blocks if now else 0))
    changes.sort(key=lambda c: (-c.growth, -c.bytes_after, c.where, c.stack))
    return SnapshotDiff(a, b, changes)


def ranked(sites: Sites) -> list[Site]:
    """A snapshot's sites by live bytes, largest first."""
    return sorted(sites.by_stack.values(), key=lambda s: (-s.bytes, s.where, s.stack))


def sites_json(sites: Sites, top: int = 20, frames: int = 12) -> dict:
    return {
        "snapshot": _summary(sites),
        "largest": [
            {"where": s.where, "bytes": s.bytes, "blocks": s.blocks, "frames": frames_json(s.stack, frames), "frames_total": len(s.stack)}
            for s in ranked(sites)[:top]
        ],
    }


def frames_json(stack: Stack, frames: int) -> list[dict]:
    """A stack's first `frames` frames (innermost first), as the snapshot wrote them."""
    return [{"filename": filename, "line": line, "name": name} for filename, line, name in stack[:frames]]
