"""Segments (memlog/tables/segments.py): a run started again after steps of its own is a new run,
whether its step counter goes back or goes on."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from memlog.base.phrases import workers_phrase
from tests.hostile import analyze, report_of, write
from tests.logwriters import hf_trainer as hf
from tests.logwriters import megatron as mg
from tests.logwriters import nemo
from tests.logwriters import torchtitan as tt

CAPACITY = 79.11
T0 = datetime(2025, 3, 18, 10, 0, 0)


def _ts(seconds: int) -> str:
    return f"{T0 + timedelta(seconds=seconds):%Y-%m-%d %H:%M:%S},000"


def _step(rank: int, step: int, gib: float, at: int) -> str:
    line = tt.step_line_2025_03(step=step, loss=8.0 - step * 1e-3, mem_gib=gib, mem_pct=100 * gib / CAPACITY, tps=5100, tflops=240.1, mfu=24.3)
    return tt.log_line(line, ts=_ts(at), rank=rank)


def _leaking_run(rank: int, steps: range, at: int, rate: float = 0.01) -> list[str]:
    """A process's steps: a 20-step warmup to 40 GiB, then `rate` GiB a step (its own steps counted from 1)."""
    return [_step(rank, s, 30 + min(k, 20) * 0.5 + rate * k, at + k) for k, s in enumerate(steps, start=1)]


def _restarted(tmp_path: Path, second: range, *, ranks=(0,), marker: bool = True) -> dict:
    lines = []
    for rank in ranks:
        lines.append(tt.log_line(tt.training_starts(1), ts=_ts(0), rank=rank))
    for rank in ranks:
        lines += _leaking_run(rank, range(1, 301), 10)
    lines.append(tt.log_line("Training completed", ts=_ts(400), rank=ranks[0]))
    if marker:
        for rank in ranks:
            lines.append(tt.log_line(tt.training_starts(second.start), ts=_ts(700), rank=rank))
    for rank in ranks:
        lines += _leaking_run(rank, second, 710)
    return report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))


def _leak(report: dict) -> dict:
    (leak,) = [f for f in report["findings"] if f["rule"] == "memory-leak"]
    return leak


def test_a_run_started_again_whose_steps_go_on_is_a_new_segment(tmp_path):
    report = _restarted(tmp_path, range(301, 601))
    assert report["coverage"]["restarts"] == [301]
    leak = _leak(report)
    # Judged where it runs now: the second process's warmup and rate, not one line across the drop.
    assert leak["evidence"]["observed"]["from_step"] > 301 and leak["evidence"]["observed"]["r_squared_min"] > 0.99
    assert "(segment 2)" in leak["message"] and "also in 1 earlier segment" in leak["message"]
    assert "rank 0, rank0" not in leak["message"]  # the live series named once


def test_going_on_or_counting_again_is_judged_alike(tmp_path):
    """Metamorphic: the restarted process numbering its steps 301.. or 1.. changes only the numbers."""
    on = _leak(_restarted(tmp_path, range(301, 601)))
    again = _leak(_restarted(tmp_path, range(1, 301)))
    for key in ("slope_gib_per_step", "r_squared_min", "start_gib", "end_gib"):
        assert on["evidence"]["observed"][key] == again["evidence"]["observed"][key], key
    assert on["evidence"]["observed"]["from_step"] - 300 == again["evidence"]["observed"]["from_step"]


def test_without_the_start_line_steps_that_go_on_are_one_run(tmp_path):
    report = _restarted(tmp_path, range(301, 601), marker=False)
    assert not report["coverage"]["restarts"]


def test_a_rank_starting_again_splits_only_its_own_steps(tmp_path):
    lines = [tt.log_line(tt.training_starts(1), ts=_ts(0), rank=r) for r in (0, 1)]
    lines += _leaking_run(0, range(1, 601), 10) + _leaking_run(1, range(1, 301), 10)
    lines.append(tt.log_line(tt.training_starts(301), ts=_ts(700), rank=1))
    lines += _leaking_run(1, range(301, 601), 710)
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    assert report["coverage"]["restarts"] == [301]
    series = {s["series"] for s in _leak(report)["evidence"]["series"]}
    assert "rank1 (segment 2)" in series and "rank0" in series and "rank0 (segment 2)" not in series


def test_the_start_of_every_log_is_no_restart(tmp_path):
    """The Trainer says it starts training after DeepSpeed's engine printed its `step=0` and memory
    while it set up: one run."""
    ts = "2024-10-02 14:01:54,767"
    lines = [
        f"[{ts}] [INFO] [utils.py:782:see_memory_usage] MA 7.21 GB         Max_MA 7.21 GB         CA 7.43 GB         Max_CA 7 GB ",
        f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] step=0, skipped=0, lr=[0.0, 0.0], mom=[[0.9, 0.999], [0.9, 0.999]]",
        hf.logger_line("2024-10-02 14:01:55,267", "INFO", "trainer.py:2243", "***** Running training *****"),
    ]
    lines += [hf.log_dict({"loss": round(2.5 - 0.01 * i, 4), "grad_norm": 0.5, "learning_rate": 2e-05, "epoch": 0.01 * i}) for i in range(1, 40)]
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    assert not report["coverage"]["restarts"]


def test_the_trainer_starting_again_splits_its_dicts(tmp_path):
    """auto_find_batch_size: an attempt, then `***** Running training *****` again with a smaller batch."""

    def attempt(start_gib: float) -> list[str]:
        head = [hf.logger_line("2024-10-02 14:01:55,267", "INFO", "trainer.py:2243", "***** Running training *****")]
        return head + [
            hf.log_dict({"loss": 2.0, "learning_rate": 2e-05, "memory/max_allocated (GiB)": round(start_gib + 0.05 * i, 2), "epoch": 0.01 * i})
            for i in range(1, 30)
        ]

    report = report_of(analyze(write(tmp_path / "train.log", attempt(60.0) + attempt(30.0)), "-o", "json"))
    assert report["coverage"]["restarts"] == [30]


def test_a_long_run_started_again_is_split_where_it_is_condensed(tmp_path):
    """Past 2 * CONDENSE_AFTER steps a worker's steps are kept as bins while reading; a bin never spans
    the start line (events cut runs), so the split is the same."""
    lines = [tt.log_line(tt.training_starts(1), ts=_ts(0), rank=0)] + _leaking_run(0, range(1, 6001), 10, rate=0.001)
    lines.append(tt.log_line(tt.training_starts(6001), ts=_ts(7000), rank=0))
    lines += _leaking_run(0, range(6001, 9001), 7010, rate=0.001)
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    assert report["coverage"]["restarts"] == [6001]
    observed = _leak(report)["evidence"]["observed"]
    # The second process's own climb (40 -> 43 GiB), not one line from the first one's 46 GiB.
    assert observed["from_step"] > 6001 and 40.0 <= observed["start_gib"] < 41.0 and observed["end_gib"] == 43.0


def test_a_worker_judged_in_several_segments_is_named_once():
    assert workers_phrase(["rank0", "rank0 (segment 2)"]) == "rank 0 (segments 1 and 2)"
    assert workers_phrase(["rank0 (segment 2)", "rank1 (segment 2)"]) == "ranks 0-1 (segment 2)"
    assert workers_phrase(["rank0", "rank1", "rank0 (segment 2)"]) == "rank 0 (segments 1 and 2), rank 1"
    assert workers_phrase(["Runner pid=5", "Runner pid=5 (segment 2)", "Runner pid=5 (segment 3)"]) == "Runner pid=5 (segments 1-3)"
    assert workers_phrase(["rank0", "rank1", "rank3"]) == "ranks 0-1, rank 3"


def test_a_plateau_across_a_restart_is_said_per_segment(tmp_path):
    """The second process settles higher (a bigger batch after the resume): two levels of one worker."""
    lines = [tt.log_line(tt.training_starts(1), ts=_ts(0), rank=0)]
    lines += [_step(0, s, 30 + min(s, 20) * 0.7, 10 + s) for s in range(1, 201)]
    lines.append(tt.log_line(tt.training_starts(201), ts=_ts(700), rank=0))
    lines += [_step(0, s, 30 + min(s - 200, 20) * 1.1, 710 + s) for s in range(201, 401)]
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    (plateau,) = [f for f in report["findings"] if f["rule"] == "warmup-plateau"]
    assert "rank 0 (segments 1 and 2)" in plateau["message"] and "depending on the worker and restart segment" in plateau["message"]
    assert "one-off jump" not in plateau["message"]


def test_a_start_the_job_printed_splits_every_worker_of_the_source(tmp_path):
    """Megatron's rank 0 says `[before the start of training step]` for the job (print_rank_0, no
    rank named), and each rank reports its memory as `[Rank N]`: a resume from the checkpoint saved
    at exit goes on counting iterations, and every rank's memory starts afresh."""
    t0 = datetime(2026, 3, 2, 10, 0, 0)

    def attempt(first: int, last: int) -> list[str]:
        lines = [mg.print_datetime("before the start of training step", t0, micro=True)]
        for it in range(first, last + 1, 10):
            lines.append(
                mg.iteration_line(
                    iteration=it, train_iters=1000, elapsed_ms=1234.5, lr=3e-4, global_batch_size=512, consumed_samples=512 * it,
                    losses={"lm loss": 3.0}, loss_scale=1.0, skipped=0, nan=0, grad_norm=0.9,
                )
            )  # fmt: skip
            k = it - first
            for rank in (0, 1):
                mib = 20_000 + min(k, 50) * 100 + 10.0 * k
                lines.append(
                    mg.report_memory(
                        f"(after {it} iterations)", allocated=mib, max_allocated=mib + 9000, reserved=mib + 12000, max_reserved=mib + 12000, rank=rank
                    )
                )
        return lines

    report = report_of(analyze(write(tmp_path / "train.log", attempt(10, 600) + attempt(610, 1000)), "-o", "json"))
    assert report["coverage"]["restarts"] == [610]
    series = {s["series"] for s in _leak(report)["evidence"]["series"]}
    assert {"rank0 (segment 2)", "rank1 (segment 2)"} <= series


def test_a_nemo_job_preempted_and_resumed_is_calm_with_the_preemption_said(tmp_path):
    """NeMo 2 resumes from its last checkpoint (Lightning's `Restoring states from the checkpoint
    path at ...`) and goes on counting global steps after Slurm preempted it: the run is judged
    calm, and the preemption is a warning that ended an attempt."""

    def steps(first: int, last: int) -> list[str]:
        return [
            nemo.progress_line(
                epoch=0,
                iteration=i,
                total=1999,
                metrics={"global_step": float(i), "max_memory_allocated": float(50 * 2**30 + (i % 7) * 2**20), "reduced_train_loss": 2.5},
            )
            for i in range(first, last + 1)
        ]

    t = datetime(2026, 11, 29, 11, 20, 30)
    lines = steps(0, 199) + ["slurmstepd: error: *** STEP 88121.0 ON gpu-a-17 CANCELLED AT 2026-11-29T11:00:01 DUE TO PREEMPTION ***"]
    lines += [nemo.log_header(t, "I", "nemo_logging:393") + "Restoring states from the checkpoint path at /results/checkpoints/step=199-last"]
    lines += steps(200, 399)
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    assert report["verdict"] == "stable" and report["coverage"]["restarts"] == [200]
    (crash,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert crash["severity"] == "warning"


def test_an_evaluations_own_counter_is_no_restart(tmp_path):
    """accelerate's loop: `eval step i/40: eval_loss=..., mem=...` after every 500 training steps, its
    counter starting again at each evaluation: no restart of the run, and the eval batch's memory
    is not the training steps'."""
    prefix = "11/29/2026 10:00:00 - INFO - __main__ - "
    lines = []
    for phase in range(3):
        lines += [
            prefix + f"step {s}: loss={3.2 - s / 5000:.4f}, lr=3e-05, mem={31.2 + (s % 3) * 0.01:.2f}GB" for s in range(phase * 500 + 10, phase * 500 + 510, 10)
        ]
        lines += [prefix + f"eval step {i}/40: eval_loss={2.9 - i / 1000:.4f}, mem={44.5 + (i % 2) * 0.1:.2f}GB" for i in range(1, 41)]
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    assert report["verdict"] == "stable" and not report["coverage"]["restarts"]
    (stable,) = [f for f in report["findings"] if f["rule"] == "stable-memory"]
    assert stable["evidence"]["observed"]["level_gib_max"] < 32


def test_restarts_are_counted_once_per_restart_however_many_workers_and_steps(tmp_path):
    """Two ranks resumed together three times, each time from step 1: three restarts, said so, where
    the steps they resumed at are one."""
    lines = []
    for _ in range(4):
        for rank in (0, 1):
            lines += _leaking_run(rank, range(1, 61), 10, rate=0.0)
    report = report_of(analyze(write(tmp_path / "train.log", lines), "-o", "json"))
    assert report["coverage"]["restarts"] == [1] and report["coverage"]["restart_count"] == 3
    text = analyze(write(tmp_path / "train.log", lines), "--no-chart").stdout
    assert "The run restarted 3 times (from step 1 each time)" in " ".join(text.split())
