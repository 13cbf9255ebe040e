"""The generic reader, round 2 (issue 35): several line shapes per step, sparse CSV rows, progress
bars, and frameworks no spec reads, each as its sample log in sample_logs/generic/ prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze
from memlog.parse.generic.fields import fields
from memlog.parse.generic.mapping import meaning_of

ROOT = Path(__file__).resolve().parents[2]
GENERIC = ROOT / "sample_logs" / "generic"
runner = CliRunner()


def _memory_read(log: Path) -> set[str]:
    """The memory columns `memlog series` reads from the log (by a spec or a guess)."""
    series = runner.invoke(app, ["series", str(log), "-o", "json"])
    return {k for row in json.loads(series.stdout) for k, v in row.items() if k.endswith("_gib") and v is not None}


# (sample log, verdict a maintainer gives it, a memory column it must be judged on)
VERDICTS = [
    ("nanogpt_iter_then_memory_line_leak.log", "leak", "mem_allocated_gib"),
    ("lightning_tqdm_gpu_mem_leak.log", "leak", "device_mem_used_gib"),
    ("lightning_devicestats_metrics.csv", "leak", "mem_allocated_gib"),
    ("hf_trainer_mb_keys_leak.log", "leak", "mem_allocated_gib"),
    ("maxtext_memstats_per_step_leak.log", "leak", "device_mem_used_gib"),
    ("ezpz_prefix_torchtitan_stable.log", "stable", "mem_peak_reserved_gib"),
    ("galvatron_profiled_memory_block.log", "warmup-plateau", "device_mem_used_gib"),
    ("yolo_tqdm_refreshes_gpu_mem_leak.log", "leak", "device_mem_used_gib"),
    ("rich_handler_wrapped_stable.log", "stable", "mem_reserved_gib"),
]


@pytest.mark.parametrize(("log", "verdict", "column"), VERDICTS, ids=[v[0] for v in VERDICTS])
def test_each_framework_is_read_and_judged(log, verdict, column):
    report = analyze([str(GENERIC / log)])
    assert report.verdict == verdict, [f.message for f in report.findings]
    assert column in _memory_read(GENERIC / log), report.coverage.get("guessed")
    if verdict == "leak":
        (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
        assert column in leak.message or column in str(leak.evidence), leak.message


def test_two_shapes_of_one_step_are_two_patterns_joined_by_the_step():
    """nanoGPT's `iter N: loss ...` and a memory line `iter N: mem alloc ...` after it share their
    head: each is read by its own pattern, and both land on step N."""
    report = analyze([str(GENERIC / "nanogpt_iter_then_memory_line_leak.log")])
    assert "memory-not-read" not in {f.rule for f in report.findings}
    (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
    assert leak.evidence["observed"]["from_step"] == 0 and leak.evidence["observed"]["to_step"] == 1490


def test_formats_test_fails_a_guessed_spec_that_reads_none_of_the_memory_it_names(tmp_path):
    """The spec the reader once guessed for that log: one pattern requiring `loss`, so its memory
    fields never match; its samples (loss lines) passed. Now `formats test` says so."""
    folder = tmp_path / "formats"
    folder.mkdir()
    number = r"(?P<{0}>[-+]?(?:\d+(?:\.\d*)?|\.\d+))"
    (folder / "guessed.yaml").write_text(
        "name: guessed-nanogpt\ntitle: guessed\ndescription: guessed\nrecords:\n"
        "- name: line\n  kind: train\n  literal: ':'\n"
        "  regex: '^\\s*iter\\s+(?P<step>\\d+).*?loss'\n"
        f"  fields:\n  - 'loss\\s*{number.format('loss')}'\n  - 'mem\\s+alloc\\s*{number.format('mem_allocated_gib')}'\n"
        "  units: {mem_allocated_gib: GB}\n"
        "samples:\n- line: 'iter 10: loss 10.9138, time 116.55ms, mfu 29.10%'\n  record: {step: 10, loss: 10.9138}\n"
    )
    tested = runner.invoke(app, ["formats", "test", str(folder)])
    assert tested.exit_code == 1 and "names memory (mem_allocated_gib)" in tested.output, tested.output


def test_a_progress_bar_counter_is_the_step_and_its_redraws_one_line():
    """Lightning's bar `Epoch e:  30%|███ | 600/2000 [..., gpu_mem=8.12, train_loss=...]`, redrawn
    twice at each counter (the count, then the new postfix) and once at `0/2000` when an epoch ends:
    one worker, steps e * 2000 + i, one reading per step (the last drawn), not 100 workers of the epoch."""
    report = analyze([str(GENERIC / "lightning_tqdm_gpu_mem_leak.log")])
    assert report.coverage["workers"] == ["main"], report.coverage["workers"]
    assert report.coverage["records"] == 3 * 40  # 40 counters per epoch, each drawn twice
    (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
    assert (leak.evidence["observed"]["from_step"], leak.evidence["observed"]["to_step"]) == (50, 6000)
    # the last drawing of `100/2000` carries the postfix of step 100 (6.33), not that of step 50 (6.26)
    series = runner.invoke(app, ["series", str(GENERIC / "lightning_tqdm_gpu_mem_leak.log"), "-o", "json"])
    rows = {r["step"]: r["device_mem_used_gib"] for r in json.loads(series.stdout)}
    assert rows[100] == pytest.approx(6.33) and rows[2050] > rows[2000] > rows[1950]


@pytest.mark.parametrize(
    ("first", "steps"),
    [(1, [50, 400, 7330 + 50]), (0, [50, 400, 7330 + 50])],
    ids=["mmcv-from-1", "detr-from-0"],
)
def test_a_step_within_an_epoch_counts_from_the_log_first_epoch(tmp_path, first, steps):
    """mmcv's `Epoch [1][2800/7724]` is the run's iteration 2800 (its epochs count from 1), DETR's
    `Epoch: [0] [2800/7724]` too (from 0): the guess takes the first epoch the log shows."""
    lines = []
    for epoch in (first, first + 1):
        for i in range(50, 7330, 350):
            lines.append(f"Epoch [{epoch}][{i}/7330]\tlr: 2.000e-02, time: 0.506, data_time: 0.011, memory: {4231 + i // 100}, loss: 0.8235")
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    series = runner.invoke(app, ["series", str(log), "-o", "json"])
    got = [r["step"] for r in json.loads(series.stdout)]
    assert got[:2] == steps[:2] and steps[2] in got, got[:25]


@pytest.mark.parametrize(
    "line",
    [
        "Epoch [{e}/6], Step [{i}/{n}], Loss: 2.4000, GPU mem: {mem:.2f} GB",  # the PyTorch tutorials' print
        "2025-04-02 10:00:00 INFO train.py:212 | epoch {e} | step {i}/{n} | loss 2.8980 | mem_alloc {mem:.2f}GB | 0.41s/it",
    ],
    ids=["tutorial-epoch-step", "epoch-bar-step"],
)
def test_a_step_counted_within_each_epoch_runs_on_across_epochs(tmp_path, line):
    """The step printed within its epoch starts again at each epoch: not a restart of the run, and
    the epoch is not the step. Memory that rises 1.5 GiB an epoch of 1,000 steps is a leak of 1.5
    MiB a step, on one worker."""
    n, lines = 1000, []
    for e in range(1, 7):
        for i in range(100, n + 1, 100):
            lines.append(line.format(e=e, i=i, n=n, mem=18.0 + 1.5 * e + 0.0015 * i))
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    series = runner.invoke(app, ["series", str(log), "-o", "json"])
    rows = json.loads(series.stdout)
    assert [r["step"] for r in rows][:3] == [100, 200, 300] and rows[-1]["step"] == 6 * n
    assert {r["worker"] for r in rows} == {"main"} and all(r["segment"] == 0 for r in rows)
    report = analyze([str(log)])
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert leak.evidence["observed"]["slope_gib_per_step"] == pytest.approx(1.5 / n, rel=0.1)


@pytest.mark.parametrize("head", ["Eval epoch {e}", "[eval] epoch {e}", "Validation epoch {e}", "test: epoch {e}"])
def test_an_evaluation_line_with_its_own_counter_is_no_restart_of_the_training_steps(tmp_path, head):
    """A custom loop's evaluation after each epoch, counted by the epoch, its memory the eval batch's:
    kept apart from the training steps (a validate record, as the formats' are), so the training
    steps read as one run and its flat memory is judged flat."""
    n, lines = 500, []
    for e in range(1, 6):
        lines += [f"Epoch {e} | iter {i}/{n} | loss {1.4 - 0.01 * e:.3f} | max_mem {10_233 + i % 7} MB" for i in range(50, n + 1, 50)]
        lines.append(head.format(e=e) + f" | acc {0.6 + 0.05 * e:.3f} | max_mem 15889 MB")
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    rows = json.loads(runner.invoke(app, ["series", str(log), "-o", "json"]).stdout)
    assert {(r["kind"], r["segment"]) for r in rows} == {("train", 0), ("validate", 0)}
    report = analyze([str(log)])
    assert report.verdict == "stable" and not report.coverage["restarts"]


@pytest.mark.parametrize("bands", [("", "__MIN", "__MAX"), ("__MIN", "__MAX", "")], ids=["key-first", "bands-first"])
def test_a_wandb_panel_export_quoted_with_run_names_and_bands_is_read(tmp_path, bands):
    """W&B's "Export panel data" CSV: every cell quoted, each column `<run> - <key>`, its band beside
    it as `<key>__MIN` and `<key>__MAX`: read as the plain export is, the key and not its band, in
    either order."""
    run = "llama8b-run3"
    keys = ["train/loss", "train/mem_reserved_gb"]
    header = ",".join(f'"{c}"' for c in ["Step", *(f"{run} - {k}{band}" for k in keys for band in bands)])
    offset = {"": 0.0, "__MIN": -5.0, "__MAX": 5.0}
    rows = []
    for step in range(10, 1010, 10):
        loss, mem = 2.0 - step / 5000, 30.0 + 0.004 * step
        cells = [v + offset[band] / 500 for band in bands for v in [loss]] + [mem + offset[band] for band in bands]
        rows.append(",".join(f'"{v}"' for v in [step, *cells]))
    log = tmp_path / "wandb_export.csv"
    log.write_text("\n".join([header, *rows]) + "\n")
    report = analyze([str(log)])
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert leak.evidence["observed"]["slope_gib_per_step"] == pytest.approx(0.004, rel=0.05)
    # The key's own values (30.04 GiB at step 10), not its band's __MIN or __MAX 5 GiB below and above.
    assert leak.evidence["observed"]["start_gib"] == pytest.approx(30.04, abs=0.5)


def test_lightnings_rich_progress_bar_counts_batches_across_epochs(tmp_path):
    """RichProgressBar's rows (`Epoch 1/2 ━━━━╸━━ 250/500 0:01:11 • 0:00:53 3.21it/s v_num: 3.000 ...`,
    colours and cursor moves around them): the step is the batch within the epoch, run on across
    epochs, not the epoch; memory creeping 2 MiB a batch is a leak on one worker."""
    lines = []
    for epoch in range(3):
        for i in range(25, 501, 25):
            step = epoch * 500 + i
            bar = "\x1b[38;2;249;38;114m" + "━" * (i // 25) + "\x1b[0m\x1b[38;5;237m" + "━" * (20 - i // 25) + "\x1b[0m"
            lines.append(
                f"\x1b[2K\x1b[1AEpoch {epoch}/2  {bar} {i}/500 \x1b[2m0:00:11 • 0:00:53\x1b[0m \x1b[2;4m3.21it/s\x1b[0m "
                f"\x1b[3mv_num: 3.000 train_loss: {1.2 - step / 10000:.3f} gpu_mem_gb: {12.0 + step * 2 / 1024:.3f}\x1b[0m"
            )
    log = tmp_path / "lightning.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)])
    leak = next(f for f in report.findings if f.rule == "memory-leak")
    assert leak.evidence["observed"]["to_step"] == 1500 and not report.coverage["restarts"]
    assert leak.evidence["observed"]["slope_gib_per_step"] == pytest.approx(2 / 1024, rel=0.05)


def test_sparse_csv_rows_are_merged_by_their_step_and_guessed():
    """Lightning's CSVLogger writes each log call as a row of its own, the other cells empty:
    DeviceStatsMonitor's rows (at batch start and end) and the loss's row share a step. Each shape
    is read by its own pattern, joined by the step; `formats guess` prints that spec."""
    log = GENERIC / "lightning_devicestats_metrics.csv"
    report = analyze([str(log)])
    assert report.coverage["workers"] == ["main"] and report.coverage["steps"] == [49, 1199], report.coverage
    guessed = runner.invoke(app, ["formats", "guess", str(log)])
    assert guessed.exit_code == 0, guessed.output
    assert "`DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.current` in B" in guessed.stdout
    assert "step from column `step`: loss from `train_loss`" in guessed.stdout


@pytest.mark.parametrize(
    ("key", "column"),
    [
        ("DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.current", "mem_allocated_gib"),
        ("DeviceStatsMonitor.on_train_batch_start/reserved_bytes.all.peak", "mem_peak_reserved_gib"),
        ("DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.freed", None),  # bytes freed since the start
        ("DeviceStatsMonitor.on_train_batch_end/active.all.allocated", None),  # a count of blocks
        ("DeviceStatsMonitor.on_train_batch_end/allocated_bytes.small_pool.current", None),  # a part of `all`
        ("DeviceStatsMonitor.on_train_batch_end/oversize_allocations.allocated", None),
        ("DeviceStatsMonitor.on_train_batch_end/num_device_alloc", None),
    ],
)
def test_torch_memory_stats_keys_read_only_the_byte_levels(key, column):
    meaning = meaning_of(key, None)
    assert (meaning.column(False) if meaning else None) == column


@pytest.mark.parametrize(
    ("line", "read"),
    [
        # torchtitan's two blanks after a key's colon belong to the key, not a new field
        ("step:  2  loss:  14.6698  grad_norm:  1.1286  memory:  9.13GiB(11.54%)", {"step": 2.0, "loss": 14.6698, "grad_norm": 1.1286, "memory": 9.13}),
        # MaxText: a unit in parentheses ends its key
        ("\tUsing (GB) 3.12 / 30.75 (10.146341%) on TPU_0(process=0,(0,0,0,0))", {"Using (GB)": 3.12}),
    ],
)
def test_keys_before_blanks_and_units_in_parentheses(line, read):
    found = {f.key: f.value for f in fields(line)}
    assert read.items() <= found.items(), found


def test_a_logger_prefix_no_wrapper_knows_still_leaves_torchtitan_lines_readable(tmp_path):
    """`[ts][INFO][module:line:fn]` (ezpz's shape with the level spelled out): no wrapper strips it,
    so no spec reads the torchtitan lines after it; the guess reads them (105 lines of one shape)."""
    text = (GENERIC / "ezpz_prefix_torchtitan_stable.log").read_text().replace("][I][", "][INFO][")
    log = tmp_path / "run.log"
    log.write_text(text)
    report = analyze([str(log)])
    assert report.verdict == "stable" and report.coverage["records"] == 105, [f.message for f in report.findings]
    assert "device memory from `memory` in GiB" in report.coverage["guessed"][0]["mapping"]


def test_a_single_profiler_block_is_read_a_pattern_per_key():
    """Galvatron prints `[Profiled memory for rank R]:` once per rank, then `iter_N_<stage>: X MB`
    lines, four stages a step: the header says they are memory (one block is enough), each stage
    read by its own pattern (`after_backward` no prefix of `after_backward_max`), none a copy. The
    header names the rank of the lines under it (parsers/wrappers/profiler-block.yaml): two ranks,
    not one worker restarting."""
    report = analyze([str(GENERIC / "galvatron_profiled_memory_block.log")])
    assert report.coverage["workers"] == ["rank0", "rank1"] and report.coverage["records"] == 10, report.coverage
    assert report.coverage["ranks"] == [0, 1] and not report.coverage["restarts"]
    mapping = report.coverage["guessed"][0]["mapping"]
    assert "from `after_backward` in MB as the current value" in mapping and "from `after_backward_max` in MB" in mapping, mapping


def test_llamafactory_trainer_log_steps_from_current_steps():
    """LLaMA-Factory's trainer_log.jsonl prints `current_steps` on every line: the step, not the
    reading order. It logs no memory: the loss is read and memory said to be unread."""
    report = analyze([str(GENERIC / "llamafactory_trainer_log.jsonl")])
    assert report.coverage["steps"] == [5, 595] and report.coverage["records"] == 119, report.coverage
    assert report.verdict == "inconclusive" and "memory-not-read" in {f.rule for f in report.findings}
    assert "reading order" not in report.coverage["guessed"][0]["mapping"]


@pytest.mark.parametrize("style", ["ultralytics-8.3", "tqdm"])
def test_yolo_rows_redrawn_within_an_epoch_take_the_bar_counter(tmp_path, style):
    """ultralytics redraws its row `  1/20  4.22G ... 640: 5% ━╸── 1/20 ...` every batch, the header
    once above each epoch: one worker, step (epoch - 1) * 20 + i, each drawing of a counter read
    once. The same with tqdm's bar (ultralytics < 8.3.150: `640:   5%|▌    | 1/20 [00:00<...]`)."""
    text = (GENERIC / "yolo_tqdm_refreshes_gpu_mem_leak.log").read_text()
    if style == "tqdm":
        import re

        def old(match: re.Match) -> str:
            pct, n, total = int(match[1]), int(match[2]), int(match[3])
            return f"{pct:3d}%|{'█' * (pct // 10):<10}| {n}/{total} [00:0{n % 10}<00:05,  3.30it/s]"

        text = re.sub(r"(\d+)% [━─╸]+ (\d+)/(\d+) \S+ \S+", old, text)
        assert "|" in text
    log = tmp_path / "train.log"
    log.write_text(text)
    report = analyze([str(log)])
    assert report.coverage["workers"] == ["main"] and report.coverage["steps"] == [1, 400], report.coverage
    assert report.coverage["records"] == 400 and report.verdict == "leak"


def test_rich_records_wrapped_over_several_lines_are_one_line_each():
    """RichHandler wraps a record at 80 columns off a terminal, a key (`mem_reserved`) on one line
    and its value (`22.52 GB`) on the next, `run.py:27` right-aligned on the first: each record is
    read as the line the program logged, its first line's number kept."""
    log = GENERIC / "rich_handler_wrapped_stable.log"
    series = runner.invoke(app, ["series", str(log), "-o", "json"])
    rows = json.loads(series.stdout)
    assert len(rows) == 120 and all(r["mem_reserved_gib"] is not None and r["mem_allocated_gib"] is not None for r in rows)
    assert (rows[0]["step"], rows[0]["line_no"], rows[0]["mem_reserved_gib"]) == (10, 5, 22.52)


def test_rich_records_of_two_ranks_behind_torchrun_labels_are_read_whole(tmp_path):
    """torchrun's `[rankN]: ` before every line of two ranks' RichHandler records, their lines
    alternating: each rank's records are joined (memlog/read/richlog.py), so the value wrapped onto
    a record's next line (`mem_reserved` / `22.52 GB`) is read for every step of both ranks."""
    lines = (GENERIC / "rich_handler_wrapped_stable.log").read_text().splitlines()
    log = tmp_path / "ranks.log"
    log.write_text("".join(f"[rank{r}]: {line}\n" for line in lines for r in (0, 1)))
    rows = json.loads(runner.invoke(app, ["series", str(log), "-o", "json"]).stdout)
    assert {r["worker"] for r in rows} == {"rank0", "rank1"} and len(rows) == 240
    assert all(r["mem_reserved_gib"] is not None for r in rows) and {r["readings"] for r in rows} == {1}


def test_maxtext_memstats_lines_are_one_worker_per_device_against_its_capacity():
    """MaxText prints `Using (GB) U / L (P%) on TPU_k(process=0,...)` for each local device after
    each `Memstats:` header: four devices, four workers (not four readings of one), each judged
    against the `/ L` its line prints. The process printing the loss is their host, not a fifth."""
    report = analyze([str(GENERIC / "maxtext_memstats_per_step_leak.log")])
    assert report.coverage["workers"] == ["TPU_0", "TPU_1", "TPU_2", "TPU_3"], report.coverage["workers"]
    assert report.coverage["capacity"]["device_gib"] == 30.75, report.coverage["capacity"]
    assert report.coverage["capacity"]["device_from"] == "device total in the memory lines"
    (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
    assert all(f"TPU_{k}" in leak.message for k in range(4)) and "30.75 GiB device capacity" in leak.message, leak.message


def _per_device_log(path: Path, line, leaking: int = 2, devices: int = 4, prefix=lambda k: "") -> Path:
    """60 steps of a step line, then a memory line per device (`line(k, used)`); one device leaks."""
    out = []
    for step in range(60):
        out.append(f"{prefix(0)}step {step} | loss {5 - step * 0.01:.3f}")
        for k in range(devices):
            used = 10.0 + (0.05 * step if k == leaking else 0.001 * (step % 3))
            out.append(prefix(k) + line(k, used))
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "names"),
    [
        (lambda k, used: f"GPU {k}: memory {used:.2f} GB / 80.00 GB", [f"GPU {k}" for k in range(4)]),
        (lambda k, used: f"mem allocated {used:.2f}GiB on cuda:{k}", [f"cuda:{k}" for k in range(4)]),
        (lambda k, used: f"\tUsing (GB) {used:.2f} / 80.0 ({used / 80:%}) on TPU_{k}(process=0,({k % 2},{k // 2},0,0))", [f"TPU_{k}" for k in range(4)]),
    ],
    ids=["GPU k:", "cuda:k", "TPU_k(...)"],
)
def test_a_device_named_on_each_reading_line_is_its_worker_and_a_leak_names_it(tmp_path, line, names):
    report = analyze([str(_per_device_log(tmp_path / "run.log", line))])
    assert report.coverage["workers"] == names, report.coverage
    (leak,) = [f for f in report.findings if f.rule == "memory-leak"]
    assert names[2] in leak.message and not any(n in leak.message for n in names[:2] + names[3:]), leak.message
    assert "a worker per device" in report.coverage["guessed"][0]["mapping"]


def test_devices_of_several_processes_are_named_under_each_process(tmp_path):
    """srun's `N: ` names the process; each prints its own devices: `rank1/TPU_5`."""
    text = (GENERIC / "maxtext_memstats_per_step_leak.log").read_text().splitlines()
    out = []
    for line in text:
        out.append("0: " + line)
        if " on TPU_" in line:
            out.append("1: " + line.replace("TPU_", "TPU_1").replace("process=0", "process=1"))
        elif line.startswith("completed"):
            out.append("1: " + line)
    (log := tmp_path / "two.log").write_text("\n".join(out) + "\n")
    report = analyze([str(log)])
    assert report.coverage["workers"] == [f"rank{p}/TPU_{'1' if p else ''}{k}" for p in (0, 1) for k in range(4)], report.coverage["workers"]
    assert report.coverage["ranks"] == [0, 1]


def test_one_device_named_on_every_line_is_no_worker_label(tmp_path):
    """A process naming its one device (`cuda:0` on every line) is one worker, as before."""
    report = analyze([str(_per_device_log(tmp_path / "run.log", lambda k, used: f"mem allocated {used:.2f}GiB on cuda:0", devices=1, leaking=0))])
    assert report.coverage["workers"] == ["main"], report.coverage
    assert report.verdict == "leak"


@pytest.mark.parametrize(
    ("line", "capacity"),
    [
        ("\tUsing (GB) 3.12 / 30.75 (10.146341%) on TPU_0(process=0,(0,0,0,0))", 30.75),
        ("step 3 mem 3.1/80.0G tokens/s 4000", 80.0),
        # a rate's `/` and a counter's `i/N` are no totals
        ("completed step: 1, seconds: 0.524, TFLOP/s/device: 331.197, loss: 10.705", None),
        ("  38/299  15.3G  1.2  640", None),
    ],
)
def test_the_number_after_a_memory_value_slash_is_its_total(line, capacity):
    totals = [f for f in fields(line) if f.form == "total"]
    assert [f.value for f in totals] == ([capacity] if capacity else []), fields(line)
    if capacity:
        meaning = meaning_of(totals[0].key, totals[0].unit or "GB")
        assert meaning is not None and meaning.column(False) == "mem_capacity_gib"
