"""Files the guard writes beside the run: its report (JSON) and the allocator snapshots it took."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

from memlog.report.document import finite


def write_document(path: Path, document: dict) -> None:
    """`document` as JSON (finite numbers only), replacing `path` whole: a reader never sees half a file."""
    replaced: list[dict[str, str]] = []
    text = json.dumps(finite(document, replaced=replaced) | ({"non_finite": replaced} if replaced else {}), indent=2, allow_nan=False)
    _replace(path, text.encode("utf-8") + b"\n")


def write_pickle(path: Path, snapshot: dict) -> None:
    """A snapshot as `torch.cuda.memory._dump_snapshot` writes one (protocol 4: what PyTorch's browser viewer reads)."""
    _replace(path, pickle.dumps(snapshot, protocol=4))


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
