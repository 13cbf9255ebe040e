"""From leak to culprit inside the run: once a leak is found, record the stacks of allocations, take
two allocator snapshots some steps apart, and name the sites whose live bytes grew between them
(memlog/guard/snapshot.py).

Stacks are recorded only from the moment recording starts: the first snapshot is taken one step
later, so the blocks a leak keeps from then on carry their stack in the second snapshot and not in
the first; blocks allocated before (parameters, optimizer state, what leaked earlier) are one
"no stack" site in both. Recording keeps live allocations' Python stacks only
(`enabled="state"`, `stacks="python"`: no history ring buffer, no C++ symbolisation) and is turned
off after the second snapshot.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Protocol


class Snapshotter(Protocol):
    def start(self) -> None: ...

    def take(self) -> dict: ...

    def stop(self) -> None: ...


class CudaSnapshots:
    """torch.cuda.memory's allocation history and snapshots, of the torch the script imported."""

    def _memory(self):
        return sys.modules["torch"].cuda.memory

    def start(self) -> None:
        self._memory()._record_memory_history(enabled="state", context="state", stacks="python")

    def take(self) -> dict:
        return self._memory()._snapshot()

    def stop(self) -> None:
        self._memory()._record_memory_history(enabled=None)


@dataclass
class Pair:
    first: dict
    second: dict
    first_step: int
    second_step: int


class Hunt:
    """The steps of one hunt: started at a step, the first snapshot at the next step, the second
    `gap` steps after it (each step() call is one step of the loop; the step numbers are the loop's)."""

    def __init__(self, snapshotter: Snapshotter, gap: int) -> None:
        self.snapshotter, self.gap = snapshotter, max(1, gap)
        self.started: int | None = None
        self.first: dict | None = None
        self.first_step: int | None = None
        self.done = False

    @property
    def running(self) -> bool:
        return self.started is not None and not self.done

    def begin(self, step: int) -> None:
        if self.started is None:
            self.snapshotter.start()
            self.started = step

    def step(self, step: int) -> Pair | None:
        """Takes a snapshot when one is due; the pair once the second is taken."""
        if self.started is None or self.done or step <= self.started:  # not running, or not past its start
            return None
        if self.first is None or self.first_step is None:  # set together
            self.first, self.first_step = self.snapshotter.take(), step
            return None
        if step - self.first_step < self.gap:
            return None
        second = self.snapshotter.take()
        self.stop()
        pair, self.first = Pair(self.first, second, self.first_step, step), None
        return pair

    def stop(self) -> None:
        if self.running:
            self.done = True
            self.snapshotter.stop()
