"""The guard in a real (tiny, CPU) Lightning run, on injected readings: the callback saves a
checkpoint and stops the run before the projected OOM; a healthy run trains to its end; with
gradient accumulation it steps once per optimizer step."""

from __future__ import annotations

import json
import os

import pytest

if os.environ.get("MEMLOG_REQUIRE_GUARD"):  # CI installs memlog[lightning]: these tests must run there
    import lightning.pytorch as L
    import torch
else:
    torch = pytest.importorskip("torch", reason="pip install 'memlog[lightning]' to test the Lightning callback")
    L = pytest.importorskip("lightning.pytorch", reason="pip install 'memlog[lightning]' to test the Lightning callback")

from memlog.guard import ReplayReader
from memlog.guard.lightning import MemlogGuard
from tests.guard_readings import Clock, healthy, leaking, ticking


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.linear(x).squeeze(-1), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def train(tmp_path, reader, max_steps: int, **trainer_options) -> tuple[L.Trainer, MemlogGuard]:
    clock = Clock()
    callback = MemlogGuard(reader=ticking(reader, clock), background=False, clock=clock)
    trainer = L.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[callback],
        **trainer_options,
    )
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    trainer.fit(Tiny(), torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(-1)), batch_size=8))
    return trainer, callback


def test_a_leaking_run_is_saved_and_stopped_before_the_projected_oom(tmp_path):
    trainer, callback = train(tmp_path, leaking(), max_steps=1000)
    stopped = trainer.global_step
    assert 360 - 200 - 10 <= stopped <= 360 - 200  # the injected leak reaches the 80 GiB capacity at step 360
    assert callback.saved == [str(tmp_path / f"memlog-guard-step={stopped}.ckpt")]
    checkpoint = torch.load(callback.saved[0], weights_only=False)
    assert checkpoint["global_step"] == stopped and "linear.weight" in checkpoint["state_dict"]
    document = json.loads((tmp_path / "memlog-guard-rank0.json").read_text())
    assert document["guard"]["decision"]["action"] == "stop" and document["report"]["verdict"] == "leak"


def test_a_healthy_run_trains_to_its_end_with_nothing_saved(tmp_path):
    trainer, callback = train(tmp_path, healthy(), max_steps=400)
    assert trainer.global_step == 400 and callback.saved == [] and not list(tmp_path.glob("*.ckpt"))
    assert callback.guard.report.verdict == "warmup-plateau"


def test_accumulating_gradients_the_guard_steps_once_per_optimizer_step(tmp_path):
    steps = []
    reader = healthy()
    _, callback = train(tmp_path, ReplayReader(lambda step: steps.append(step) or reader.read(step)), max_steps=30, accumulate_grad_batches=4)
    assert steps == list(range(1, 31)) and callback.guard.readings == 30
