"""The generic reader: key families, counters, the guess's round trip through a spec file, and
properties of the verdict under renamed keys, reordered and extra fields."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memlog.cli import app
from memlog.engine.api import analyze
from memlog.parse.generic.fields import COUNTERS, counter_step, fields
from memlog.parse.generic.mapping import meaning_of
from tests.samples import sample_logs

ROOT = Path(__file__).resolve().parents[2]
GENERIC = [p for p in sample_logs() if p.parent.name == "generic"]
runner = CliRunner()


@pytest.mark.parametrize(
    ("key", "unit", "column"),
    [
        ("allocated", "MB", "mem_allocated_gib"),
        ("MemAllocated", "GB", "mem_allocated_gib"),
        ("reserved", None, "mem_reserved_gib"),
        ("cached", None, "mem_reserved_gib"),
        ("memory", None, "device_mem_used_gib"),
        ("gpu_mem", "G", "device_mem_used_gib"),
        ("used", "GB", "device_mem_used_gib"),
        ("Host RSS Memory", "MB", "host_mem_used_gib"),
        ("current_process_memory", "MB", "host_mem_used_gib"),
        ("CPU memory usage", "MB", "host_mem_used_gib"),
        ("RAM", "GB", "host_mem_used_gib"),
        ("anon", "MiB", "host_mem_used_gib"),
    ],
)
def test_current_memory_keys(key, unit, column):
    assert meaning_of(key, unit).column(running_max=False) == column


@pytest.mark.parametrize(
    ("key", "running", "column"),
    [
        ("max mem", True, "mem_max_allocated_gib"),
        ("max mem", False, "mem_peak_allocated_gib"),
        ("peak-gpu-memory", False, "mem_peak_allocated_gib"),
        ("max_mem_reserved", True, "mem_max_reserved_gib"),
        ("MaxMemAllocated", True, "mem_max_allocated_gib"),
        ("max_reserved", False, "mem_peak_reserved_gib"),
    ],
)
def test_peak_keys_window_decided_by_values(key, running, column):
    assert meaning_of(key, None).column(running_max=running) == column


@pytest.mark.parametrize("key", ["loss", "train loss", "cross-entropy-loss", "Loss", "total_loss", "train/loss"])
def test_loss_keys(key):
    assert meaning_of(key, None).column(False) == "loss"


@pytest.mark.parametrize("key", ["val_loss", "eval loss", "swap", "gb_free", "time", "lr", "GFLOPS", "mem bandwidth", "epoch"])
def test_keys_not_read(key):
    assert meaning_of(key, "GB" if key == "swap" else None) is None or meaning_of(key, None).role not in ("memory", "loss")


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("Epoch [3][1200/7330]\tlr: 2.0e-02, memory: 5737", 3 * 7330 + 1200),
        ("Epoch(train) [1][ 650/1833]  memory: 3756", 1833 + 650),
        ("Epoch: [0]  [ 200/5000]  eta: 1:02:03  max mem: 4454", 200),
        ("iter: 19  total_loss: 1.2", 19),
        ("Iter 10: Train loss 0.98", 10),
        ("step 00000003/00001000 | loss 7.1", 3),
        ("{'global_step/max_steps': '600/22156'}", 600),
        ("iteration 8/29 |", 8),
        ("iter_1_after_backward: 729.48 MB", 1),
        ("epoch 1/10 - it 3/100 - loss 0.69", 103),
        ("  12  1.43 ms run", 12),
    ],
)
def test_counters(line, step):
    assert next(s for i in range(len(COUNTERS)) if (s := counter_step(i, line)))[0] == step


def test_fields_keep_units_and_value_before_key():
    found = {f.key: (f.value, f.unit) for f in fields("12  1.43 ms run, 4.21 loss, 1454.57 GB used, max_mem: 433M")}
    assert found["loss"] == (4.21, None) and found["used"] == (1454.57, "GB") and found["max_mem"] == (433.0, "M")


def _guessed(log: Path) -> bool:
    """Whether the generic reader guesses this log's spec (its golden's formats say so): not
    trainer_state.json (read whole), nor a log a built-in spec reads (hf_trainer's dicts)."""
    return "generic" in json.loads((ROOT / "tests" / "golden" / f"generic__{log.name}.json").read_text())["formats"]


@pytest.mark.parametrize("log", [p for p in GENERIC if _guessed(p)], ids=lambda p: p.name)
def test_guess_round_trips_through_a_spec_file(log, tmp_path):
    guessed = runner.invoke(app, ["formats", "guess", str(log)])
    assert guessed.exit_code == 0, guessed.output
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "guessed.yaml").write_text(guessed.stdout)
    tested = runner.invoke(app, ["formats", "test", str(folder)])
    assert tested.exit_code == 0, tested.output
    plain = runner.invoke(app, ["series", str(log), "-o", "json"])
    loaded = runner.invoke(app, ["series", str(log), "-o", "json", "--formats-dir", str(folder)])
    assert plain.exit_code == loaded.exit_code == 0
    # `steps`: which row of a step stands for it; `readings`: the empty row below is one more
    drop = ("format", "steps", "readings")

    # Rows that read a value: a built-in pattern that matches a line without reading anything
    # (EasyR1's `{"step": N` on any JSON line) adds empty rows once the guess is a spec of its own.
    def read(output):
        rows = [{k: v for k, v in r.items() if k not in drop} for r in json.loads(output)]
        return [r for r in rows if any(v is not None for k, v in r.items() if k.endswith("_gib") or k in ("loss", "grad_norm"))]

    rows, again = read(plain.stdout), read(loaded.stdout)
    assert rows == again and rows


def test_coverage_and_evidence_say_what_was_guessed():
    report = analyze([str(ROOT / "sample_logs" / "generic" / "detr_metriclogger_stable.log")])
    mapping = report.coverage["guessed"][0]["mapping"]
    assert "`max mem`" in mapping and "running maximum" in mapping and "Epoch [e][i/N]" in mapping
    assert all(f.evidence.get("guessed") == mapping for f in report.findings if f.subject == "device")


def test_a_weak_guess_explains_why_nothing_was_judged(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("model loaded, allocated 12.1 GB\nsomething else\nafter training: peak memory 30.2 GB\n")
    report = analyze([str(log)])
    assert report.verdict == "inconclusive" and [f.rule for f in report.findings] == ["unread-values"]


def test_memory_on_a_line_that_reports_swap_is_host_and_the_process_own_key_wins(tmp_path):
    """mmengine's MemoryProfilerHook line names no host word for `used_memory`, but reports swap:
    devices have no swap. Of the host keys, the process's (`current_process_memory`) is read."""
    rows = []
    for i in range(1, 13):
        rows.append(f"Epoch(train)  [1][{i * 10:>3}/500]  lr: 2.0000e-02  time: 0.41  memory: {3700 + i % 3}  loss: {1.5 - i / 50:.4f}")
        rows.append(
            f"Memory information available_memory: {900000 - 40 * i} MB, used_memory: {60000 + 300 * i} MB, "
            f"memory_utilization: 6.0 %, available_swap_memory: 8191 MB, used_swap_memory: 0 MB, "
            f"swap_memory_utilization: 0.0 %, current_process_memory: {10000 + 20 * i} MB"
        )
    log = tmp_path / "run.log"
    log.write_text("\n".join(rows) + "\n")
    report = analyze([str(log)])
    mapping = report.coverage["guessed"][0]["mapping"]
    assert "host memory from `current_process_memory` in MB" in mapping, mapping
    assert "`used_memory`" not in mapping and "device memory from `memory`" in mapping


def test_profiler_blocks_read_the_sizes_under_the_header_not_the_rank_in_it():
    """`[Profiled memory for rank R]:` names who printed the block (its number is no reading);
    the sizes under it are memory because the header says so, the step comes from `iter_N_`."""
    assert meaning_of("Profiled memory for rank", None) is None and meaning_of("local_rank", None) is None
    report = analyze([str(ROOT / "sample_logs" / "generic" / "profiled_memory_blocks_stable.log")])
    mapping = report.coverage["guessed"][0]["mapping"]
    assert mapping.startswith("step from `iter`") and "from `after_backward` in MB" in mapping, mapping
    (stable,) = [f for f in report.findings if f.rule == "stable-memory"]
    observed = stable.evidence["observed"]
    assert 0.70 < observed["level_gib_min"] <= observed["level_gib_max"] < 0.73
    assert report.coverage["workers"] == ["rank0", "rank1"]  # the header names each block's rank (profiler-block wrapper)


def test_a_table_whose_header_is_printed_above_each_row(tmp_path):
    """Ultralytics prints its tqdm table's header again above every epoch's row, with validation
    rows in between: the rows are read, the step from the `Epoch` column, named as such, and
    `key= value` fields after a row's cells too."""
    lines = []
    for epoch in range(1, 13):
        lines += [
            "",
            ("%11s" * 5) % ("Epoch", "GPU_mem", "box_loss", "Instances", "Size"),
            ("%11s" * 2 + "%11.4g" * 3) % (f"{epoch}/12", f"{4 + 0.2 * epoch:.3g}G", 1.5 - epoch / 20, 30, 640)
            + f": 100%|##########| 358/358 [01:44<00:00,  3.25it/s] RAM= {10 + epoch % 2 * 0.1:.1f} GB",
            "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100%",
            "                   all        200        495      0.505      0.455      0.505      0.354",
        ]
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    report = analyze([str(log)])
    mapping = report.coverage["guessed"][0]["mapping"]
    assert mapping.startswith("step from column `Epoch`") and "`GPU_mem` in G" in mapping, mapping
    assert "host memory from `RAM` in GB" in mapping  # a field the row carries after its cells
    assert report.coverage["records"] == 12
    assert report.verdict == "leak"


def test_a_log_a_spec_reads_is_not_guessed():
    report = analyze([str(ROOT / "sample_logs" / "torchtitan" / "stable_newest.log")])
    assert "guessed" not in report.coverage and "generic" not in report.coverage["formats"]


# -- properties: renaming keys within a family, reordering fields, unrelated fields ---------------

FAMILY = {"allocated": ["allocated", "alloc", "mem_allocated", "memory_allocated"], "loss": ["loss", "train_loss", "Loss"]}


def _log(rng: random.Random, leak: bool, names: dict[str, str], order: list[str], extra: int) -> str:
    lines = []
    for step in range(1, 61):
        values = {names["allocated"]: f"{20000 + (35 * step if leak else 0) + rng.gauss(0, 3):.1f} MB", names["loss"]: f"{3 - step / 100:.3f}"}
        values.update({f"unrelated_{i}": f"{rng.random():.3f}" for i in range(extra)})
        keys = [k for k in order if k in values] + [k for k in values if k not in order]
        lines.append(f"step {step} | " + " | ".join(f"{k}: {values[k]}" for k in keys))
    return "\n".join(lines) + "\n"


@settings(max_examples=12, deadline=None)
@given(
    leak=st.booleans(),
    alloc=st.sampled_from(FAMILY["allocated"]),
    loss=st.sampled_from(FAMILY["loss"]),
    swap=st.booleans(),
    extra=st.integers(0, 3),
    seed=st.integers(0, 1000),
)
def test_verdict_is_the_same_under_renamed_reordered_and_extra_fields(tmp_path_factory, leak, alloc, loss, swap, extra, seed):
    folder = tmp_path_factory.mktemp("prop")
    base, variant = folder / "base.log", folder / "variant.log"
    base.write_text(_log(random.Random(seed), leak, {"allocated": "allocated", "loss": "loss"}, ["loss", "allocated"], 0))
    names = {"allocated": alloc, "loss": loss}
    order = [alloc, loss] if swap else [loss, alloc]
    variant.write_text(_log(random.Random(seed), leak, names, order, extra))
    expected = "leak" if leak else "stable"
    assert analyze([str(base)]).verdict == expected
    assert analyze([str(variant)]).verdict == expected
