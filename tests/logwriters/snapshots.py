"""Allocator snapshots in the layout `torch.cuda.memory._snapshot()` returns and `_dump_snapshot`
pickles (PyTorch 2.x: THCPModule_memorySnapshot and memory_snapshot.cpp build it; the keys below are
theirs, shared/reference/stores-and-guard.md §5.2), for tests and benchmarks: segments of blocks,
frames innermost first, one frames list shared by the blocks of one traceback, inactive (cached)
and pending-free blocks beside the live ones, device traces and allocator settings."""

from __future__ import annotations

import random

SITE_PACKAGES = "/opt/conda/lib/python3.11/site-packages"
TORCH = [  # what a tensor's allocation passes through before the user's line
    {"filename": f"{SITE_PACKAGES}/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
    {"filename": f"{SITE_PACKAGES}/torch/nn/modules/module.py", "line": 1762, "name": "_call_impl"},
    {"filename": f"{SITE_PACKAGES}/torch/nn/modules/module.py", "line": 1751, "name": "_wrapped_call_impl"},
]
MAIN = [{"filename": "/workspace/train.py", "line": 212, "name": "main"}, {"filename": "/workspace/train.py", "line": 230, "name": "<module>"}]
SEGMENT_BYTES = 1 << 26


def stack(filename: str, line: int, name: str) -> list[dict]:
    """A site's frames: torch's own, then the user's line, then the script's entry."""
    return [*TORCH, {"filename": filename, "line": line, "name": name}, *MAIN]


def snapshot(sites: list[tuple[list[dict], list[int]]], rng: random.Random, *, pending: int = 3, history_layout: bool = False) -> dict:
    """A snapshot whose live blocks are `sites`: (frames, block sizes) each, in random addresses and
    order, packed into segments with an inactive block each, and `pending` freed blocks waiting for
    their stream. `history_layout`: PyTorch 2.0's blocks (frames and size in `history`)."""
    blocks = [(size, "active_allocated", frames) for frames, sizes in sites for size in sizes]
    blocks += [(rng.choice([512, 1 << 20]), "active_pending_free", stack("/workspace/train.py", 140, "step")) for _ in range(pending)]
    rng.shuffle(blocks)
    segments, address = [], 0x7F0000000000 + rng.randrange(1 << 20) * 4096
    for start in range(0, len(blocks), 16):
        chunk = [(size, state, frames) for size, state, frames in blocks[start : start + 16]]
        used = sum(size for size, _, _ in chunk)
        cached = max(512, SEGMENT_BYTES - used)
        cells = [_block(address, size, state, frames, history_layout) for size, state, frames in chunk]
        cells.append(_block(address + used, cached, "inactive", [], history_layout))
        segments.append(
            {
                "device": 0,
                "address": address,
                "total_size": used + cached,
                "allocated_size": used,
                "active_size": used,
                "requested_size": used,
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "frames": [],
                "blocks": cells,
            }
        )
        address += used + cached
    return {
        "segments": segments,
        "device_traces": [[]],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {"1": 0, "2": 0},
        },
    }


def _block(address: int, size: int, state: str, frames: list[dict], history_layout: bool) -> dict:
    if history_layout:
        history = [{"addr": address, "real_size": size, "frames": frames}] if state != "inactive" else []
        return {"size": size, "state": state, "history": history}
    return {"address": address, "size": size, "requested_size": size, "state": state, "frames": frames}


def steady_sites(rng: random.Random, count: int) -> list[tuple[list[dict], list[int]]]:
    """`count` sites in model and data code, each holding one to four blocks of 512 B to 64 MiB."""
    files = [f"/workspace/model/layer_{i}.py" for i in range(40)] + [f"{SITE_PACKAGES}/transformers/models/llama/modeling_llama.py"]
    return [
        (stack(rng.choice(files), 10 + i, f"forward_{i % 97}"), [rng.choice([512, 4096, 1 << 20, 1 << 22, 1 << 26]) for _ in range(rng.randint(1, 4))])
        for i in range(count)
    ]
