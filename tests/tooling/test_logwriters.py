"""The line writers (tests/logwriters) write what the format specs read: each writer's line, with its
prefixes, parses back to the values it was given (rounded as the framework prints them)."""

from __future__ import annotations

import pytest

from memlog.parse.catalog import load_specs
from memlog.parse.chunks import parse_line
from tests.logwriters import deepspeed as ds
from tests.logwriters import easyr1, hf_trainer, pytorch, ray, verl
from tests.logwriters import torchtitan as titan

SPECS = list(load_specs().values())
TS = "2025-01-01 00:00:00,000"
MEMORY = {"mem_gib": 20.5, "mem_pct": 25.91, "tps": 1234.4}
TITAN_READS = {"step": 7, "loss": 1.5, "mem_peak_reserved_gib": 20.5, "mem_peak_reserved_pct": 25.91, "tps": 1234.0}


def only_record(text: str) -> dict:
    records, _ = parse_line(SPECS, text)
    assert len(records) == 1, records
    return records[0]


@pytest.mark.parametrize("color", [titan.NO_COLOR, titan.COLOR], ids=["plain", "colour"])
@pytest.mark.parametrize(
    ("msg", "extra"),
    [
        (
            lambda c: titan.step_line_2024_07(step=7, loss=1.5, wps=MEMORY["tps"], mfu=30.1, color=c, **{k: MEMORY[k] for k in ("mem_gib", "mem_pct")}),
            {"mfu_pct": 30.1},
        ),
        (lambda c: titan.step_line_2025_03(step=7, loss=1.5, tflops=1500.25, mfu=30.1, color=c, **MEMORY), {"tflops": 1500.25}),
        (lambda c: titan.step_line_2025_09(step=7, loss=1.5, grad_norm=0.25, tflops=99.5, mfu=30.1, color=c, **MEMORY), {"grad_norm": 0.25}),
        (lambda c: titan.step_line_newest(step=7, loss=1.5, grad_norm=0.25, tflops=99.5, mfu=None, color=c, **MEMORY), {"mfu_pct": None}),
        (lambda c: titan.validate_line(step=7, loss=1.5, color=c, **MEMORY), {"kind": "validate"}),
    ],
    ids=["2024-07", "2025-03", "2025-09", "newest", "validate"],
)
def test_torchtitan_step_lines_read_back(color, msg, extra):
    for titan_tag in (True, False):
        row = only_record(titan.log_line(msg(color), ts=TS, rank=3, titan=titan_tag))
        assert {k: row[k] for k in [*TITAN_READS, *extra, "rank", "ts"]} == {**TITAN_READS, **extra, "rank": 3, "ts": TS}


def test_deepspeed_lines_read_back():
    memory = only_record(ds.log_line(ds.see_memory_usage(ma=1.234, max_ma=2.0, ca=3.5, max_ca=4.4), ts=TS, where="utils.py:782:see_memory_usage"))
    assert (memory["mem_allocated_gib"], memory["mem_peak_allocated_gib"], memory["mem_reserved_gib"], memory["mem_peak_reserved_gib"]) == (1.23, 2.0, 3.5, 4.0)
    assert only_record(ds.cpu_virtual_memory(used_gib=36.789, percent=3.7))["host_mem_used_gib"] == 36.79
    progress = only_record(ds.log_line(ds.progress(step=10, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]), ts=TS, where="logging.py:96:log_dist"))
    assert (progress["step"], progress["lr"]) == (10, 1e-05)
    timer = only_record(ds.throughput(epoch=0, micro_step=40, step=10, avg=25.0, cur=25.7, alloc=4.321, max_alloc=38.49))
    assert (timer["step"], timer["mem_allocated_gib"], timer["mem_max_allocated_gib"]) == (10, 4.32, 38.49)


def test_ray_hosted_lines_read_back():
    block = "\n".join(ray.actor_prefix(5, "Runner") + line for line in easyr1.step_block(3, {"actor/pg_loss": 0.1234, "perf/cpu_memory_used_gb": 212.7712}))
    row = only_record(block)
    assert (row["actor"], row["pid"], row["step"], row["loss"], row["host_mem_used_gib"]) == ("Runner", 5, 3, 0.123, 212.771)
    row = only_record(
        ray.actor_prefix(9, "TaskRunner", "10.0.0.3")
        + verl.step_line(4, {"actor/pg_loss": -0.5, "perf/max_memory_reserved_gb": 25.75}, np_float64={"perf/max_memory_reserved_gb"})
        + ray.repeated(3)
    )
    assert (row["ip"], row["repeated"], row["step"], row["loss"], row["mem_max_reserved_gib"]) == ("10.0.0.3", 3, 4, -0.5, 25.75)
    row = only_record(verl.gpu_memory_usage("After update_policy", allocated=21.514, reserved=31.27, used=40.17))
    assert (row["mem_allocated_gib"], row["mem_capacity_gib"]) == (21.51, pytorch.H100_GIB)


def test_hf_trainer_dicts_read_back():
    logs = {"loss": 1.23456, "grad_norm": 0.5, "learning_rate": 1e-05, "epoch": 0.1}
    assert only_record(hf_trainer.log_dict(logs))["loss"] == 1.23456
    assert only_record(hf_trainer.log_dict_v5(logs))["loss"] == 1.235


def test_pytorch_oom_is_an_event():
    line = pytorch.excepthook_prefix(0) + pytorch.cuda_oom(
        tried="2.00 GiB", gpu=0, capacity_gib=79.11, free="1.02 GiB", in_use="78.08 GiB", allocated="75.41 GiB", unallocated="1.13 GiB"
    )
    _, events = parse_line(SPECS, line)
    assert [(e["kind"], e["tried"], e["free"]) for e in events if e["kind"] == "oom"] == [("oom", "2.00 GiB", "1.02 GiB")]
