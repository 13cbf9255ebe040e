"""The guard as a Lightning callback (pip install 'memlog[lightning]').

    from memlog.guard.lightning import MemlogGuard
    trainer = L.Trainer(..., callbacks=[MemlogGuard(on_oom="stop", within_steps=200)])

After each optimizer step (`on_train_batch_end` once `trainer.global_step` moved: with gradient
accumulation, every few batches) the guard reads this rank's device and decides. A save calls
`trainer.save_checkpoint` (which every rank must call: the decision is agreed across ranks, so
every rank does, at the same step) into the ModelCheckpoint callback's folder, else
`default_root_dir`; a stop sets `trainer.should_stop`, which Lightning honours at the end of the
batch (not before `min_steps`/`min_epochs` are met). The report goes to `default_root_dir` unless
`report_dir` is given. Imports `lightning.pytorch`, else the older `pytorch_lightning`.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package of old
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment, unused-ignore]  # the same class, under its old package (one of the two may be absent)

from memlog.guard.guard import Guard


class MemlogGuard(Callback):
    """`guard`: a Guard of one's own; else one is made when training starts from `options` (Guard's
    keyword arguments). `checkpoints`: where the guard's checkpoints go, if not the defaults above."""

    def __init__(self, guard: Guard | None = None, *, checkpoints: str | os.PathLike | None = None, **options: Any) -> None:
        self.guard, self.options, self.checkpoints = guard, options, checkpoints
        self.saved: list[str] = []
        self._last_step: int | None = None

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_step = trainer.global_step  # read from the first optimizer step of this fit on
        if self.guard is None:
            options = {"report_dir": trainer.default_root_dir, "rank": trainer.global_rank} | self.options
            self.guard = Guard(**options)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._last_step:  # accumulating gradients: no optimizer step since the last batch
            return
        self._last_step = step
        assert self.guard is not None  # made in on_train_start, which Lightning calls first
        decision = self.guard.step(step)
        if decision.should_save:
            path = os.path.join(self._folder(trainer), f"memlog-guard-step={step}.ckpt")
            trainer.save_checkpoint(path)
            self.saved.append(path)
        if decision.should_stop:
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module) -> None:
        if self.guard is not None:
            self.guard.close()

    def _folder(self, trainer) -> str:
        if self.checkpoints is not None:
            return os.fspath(self.checkpoints)
        callback = getattr(trainer, "checkpoint_callback", None)
        return getattr(callback, "dirpath", None) or trainer.default_root_dir
