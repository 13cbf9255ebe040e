"""The guard in a real (tiny, CPU) Hugging Face Trainer run, on injected readings: the callback stops
the run before the projected OOM and Trainer saves that step's checkpoint; a healthy run trains to
its end with nothing saved."""

from __future__ import annotations

import json
import os

import pytest

if os.environ.get("MEMLOG_REQUIRE_GUARD"):  # CI installs memlog[hf]: these tests must run there
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch", reason="pip install 'memlog[hf]' to test the Trainer callback")
    transformers = pytest.importorskip("transformers", reason="pip install 'memlog[hf]' to test the Trainer callback")

from memlog.guard.hf import MemlogGuardCallback
from tests.guard_readings import Clock, healthy, leaking, ticking


class Tiny(torch.nn.Module):
    """A model Trainer trains: a batch's dict in, a dict with the loss out."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x, labels=None):
        predicted = self.linear(x).squeeze(-1)
        return {"loss": torch.nn.functional.mse_loss(predicted, labels), "logits": predicted}


class Sums(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> dict:
        x = torch.randn(4, generator=torch.Generator().manual_seed(i))
        return {"x": x, "labels": x.sum()}


def train(tmp_path, reader, max_steps: int) -> tuple[transformers.Trainer, MemlogGuardCallback]:
    clock = Clock()
    callback = MemlogGuardCallback(reader=ticking(reader, clock), background=False, clock=clock)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=max_steps,
        per_device_train_batch_size=8,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        logging_steps=10_000,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=Sums(), callbacks=[callback])
    trainer.train()
    return trainer, callback


def test_a_leaking_run_is_saved_and_stopped_before_the_projected_oom(tmp_path):
    trainer, _ = train(tmp_path, leaking(), max_steps=1000)
    stopped = trainer.state.global_step
    assert 360 - 200 - 10 <= stopped <= 360 - 200  # the injected leak reaches the 80 GiB capacity at step 360
    checkpoint = tmp_path / f"checkpoint-{stopped}"
    assert checkpoint.is_dir() and any(p.name in ("model.safetensors", "pytorch_model.bin") for p in checkpoint.iterdir())
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == [checkpoint.name]  # only the guard's save
    document = json.loads((tmp_path / "memlog-guard-rank0.json").read_text())
    assert document["guard"]["decision"]["action"] == "stop" and document["guard"]["decision"]["step"] == stopped
    assert document["report"]["verdict"] == "leak"


def test_a_healthy_run_trains_to_its_end_with_nothing_saved(tmp_path):
    trainer, callback = train(tmp_path, healthy(), max_steps=400)
    assert trainer.state.global_step == 400 and not list(tmp_path.glob("checkpoint-*"))
    assert callback.guard.actions == [] and callback.guard.report.verdict == "warmup-plateau"
