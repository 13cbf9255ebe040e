"""The guard as a Hugging Face `Trainer` callback (pip install 'memlog[hf]').

    from memlog.guard.hf import MemlogGuardCallback
    trainer = Trainer(..., callbacks=[MemlogGuardCallback(on_oom="stop", within_steps=200)])

After every optimizer step (`on_step_end`, where `state.global_step` was just counted) the guard
reads this rank's device and decides; a save sets `control.should_save`, and Trainer saves that
step's checkpoint right after the callback returns; a stop also sets `control.should_training_stop`,
and Trainer leaves its loop once saved. Trainer does not agree control flags across ranks: the guard
does (memlog/guard/agree.py), so every rank saves and stops at the same step. The report goes to
`args.output_dir` unless `report_dir` is given.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from memlog.guard.guard import Guard


class MemlogGuardCallback(TrainerCallback):
    """`guard`: a Guard of one's own; else one is made at the start of training from `options`
    (Guard's keyword arguments)."""

    def __init__(self, guard: Guard | None = None, **options: Any) -> None:
        self.guard, self.options = guard, options

    def on_train_begin(self, args, state, control, **kwargs):
        if self.guard is None:
            options = {"report_dir": args.output_dir, "rank": args.process_index} | self.options
            self.guard = Guard(**options)

    def on_step_end(self, args, state, control, **kwargs):
        assert self.guard is not None  # made in on_train_begin, which the Trainer calls first
        decision = self.guard.step(state.global_step)
        if decision.should_save:
            control.should_save = True
        if decision.should_stop:
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self.guard is not None:
            self.guard.close()
