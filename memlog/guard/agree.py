"""Agreeing across ranks: one rank's request to save or stop becomes every rank's, at the same step.

Each rank judges its own device; a rank that stopped alone would leave the others blocked in their
next collective (a gradient all-reduce, an FSDP all-gather, a checkpoint barrier) until the process
group's timeout. So requests are exchanged, never acted on alone: at each agreement step every rank
contributes the action it asks for and its projected OOM step, one all-reduce (MAX) of two int64s
returns the highest action asked (with the highest rank that asked it) and the nearest projection,
and every rank acts on that. The all-reduce must run on every rank at every agreement step, or it
hangs: agreement steps are chosen by the step number alone (Guard.agree_every), which every rank
shares.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Protocol

NO_PROJECTION = 1 << 62  # a rank with no projected OOM contributes -NO_PROJECTION to the MAX


@dataclass(frozen=True)
class Agreed:
    level: int  # the highest action level any rank asked for
    by_rank: int | None  # the (highest) rank that asked for it; None for level 0
    projected_oom_step: float | None  # the nearest projected OOM step of any rank


class Agreement(Protocol):
    rank: int
    world_size: int

    def agree(self, level: int, projected_oom_step: float | None) -> Agreed: ...


class Alone:
    """One process, or no process group: what it asks is what is agreed."""

    world_size = 1

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank

    def agree(self, level: int, projected_oom_step: float | None) -> Agreed:
        return Agreed(level, self.rank if level else None, projected_oom_step)


class ProcessGroup:
    """torch.distributed's default process group: one all_reduce(MAX) of [level * world + rank,
    -projected step]. NCCL reduces CUDA tensors only, so the tensor lives on the current CUDA device
    unless the group has a gloo (CPU) backend; reading the result back waits for the device."""

    def __init__(self, torch) -> None:
        self.torch, self.dist = torch, torch.distributed
        self.rank, self.world_size = self.dist.get_rank(), self.dist.get_world_size()
        backend = str(self.dist.get_backend()).lower()
        on_cpu = "gloo" in backend or "nccl" not in backend
        self.device = torch.device("cpu") if on_cpu else torch.device("cuda", torch.cuda.current_device())
        self.buffer = torch.zeros(2, dtype=torch.int64, device=self.device)

    def agree(self, level: int, projected_oom_step: float | None) -> Agreed:
        mine = -NO_PROJECTION if projected_oom_step is None else -int(projected_oom_step)
        self.buffer.copy_(self.torch.tensor([level * self.world_size + self.rank, mine], dtype=self.torch.int64))
        self.dist.all_reduce(self.buffer, op=self.dist.ReduceOp.MAX)
        asked, nearest = (int(v) for v in self.buffer.tolist())
        agreed_level = asked // self.world_size
        return Agreed(agreed_level, asked % self.world_size if agreed_level else None, None if nearest == -NO_PROJECTION else float(-nearest))


def default_agreement(rank: int | None = None) -> Agreement:
    """The process group the training script initialised (torch.distributed, more than one rank),
    else Alone. Never imports torch: a script that did not import it has no process group."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return ProcessGroup(torch)
    return Alone(rank if rank is not None else int(os.environ.get("RANK", "0") or 0))
