"""nan-loss: the loss is NaN or infinite on some steps. A training problem, not a memory one.

A non-finite loss reading is, at a logged step of a worker:
- a loss printed as NaN or infinite;
- a count of NaN iterations above zero (`nan_iterations`, Megatron-LM / Megatron-DeepSpeed /
  GPT-NeoX's `number of nan iterations`): iterations of that log interval whose loss was NaN or
  infinite, and which were skipped; the loss the line prints (if any) averages the other ones;
- a NaN or infinite grad norm on a line that printed no loss at all: Megatron-LM and
  Megatron-DeepSpeed print a loss only `if avg > 0.0` (`>= 0.0` from core_v0.17), which a NaN never
  passes, so a NaN loss silently vanishes from the line and the NaN grad norm is what remains of it.
  An interval whose iterations were all skipped also prints no loss, but then the grad norm is
  missing too (the logging iteration was skipped), so it is not counted.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import polars as pl

from memlog.judge.rulekit import Example, Finding, Rule, SeriesKey, Threshold, workers_phrase

# Why a reading is non-finite, in the finding's words.
PRINTED, COUNTED, VANISHED = "printed", "counted", "vanished"
# A printed count is a whole number a float holds exactly; anything else (inf, 1e300: a corrupt line) counts nothing.
MAX_COUNT = 2**53


class Reading(NamedTuple):
    """One loss reading of a worker: its step and line, and why it is non-finite (None: finite)."""

    step: int
    line_no: int
    bad: str | None
    value: float | None = None  # the printed loss, if any
    count: int = 0  # NaN iterations the line counted
    skipped: int | None = None  # skipped iterations the line counted


class Worker(NamedTuple):
    """A worker's loss readings, by line (rule files are loaded without a module of their own, so no
    dataclasses here)."""

    key: SeriesKey
    rank: int | None
    readings: dict[int, Reading]


def _workers(ctx) -> dict[SeriesKey, Worker]:
    """Every worker's loss readings: the loss series, and the lines that show a non-finite loss
    without printing one (module docstring)."""
    found: dict[SeriesKey, Worker] = {}
    for series in ctx.loss_series:
        worker = found.setdefault(series.key, Worker(series.key, series.rank, {}))
        for step, line, value in zip(series.steps, series.line_nos, series.values):
            worker.readings[line] = Reading(step, line, None if math.isfinite(value) else PRINTED, value)
    records = ctx.tables.records
    columns = set(records.columns)
    conditions = []
    if "nan_iterations" in columns:
        conditions.append(pl.col("nan_iterations").is_between(1, MAX_COUNT))
    if {"grad_norm", "loss"} <= columns:
        conditions.append(~pl.col("grad_norm").is_finite() & pl.col("loss").is_null())
    if not conditions or records.is_empty():
        return found
    extra = ["nan_iterations", "skipped_iterations", "grad_norm", "loss"]
    rows = records.filter((pl.col("kind") == "train") & pl.col("step").is_not_null() & pl.any_horizontal(conditions).fill_null(False))
    rows = rows.select(
        "source", "worker", "segment", "rank", "step", "line_no", *(pl.col(c) if c in columns else pl.lit(None, dtype=pl.Float64).alias(c) for c in extra)
    )
    for source, worker_name, segment, rank, step, line, nan_its, skipped, _grad, loss in rows.iter_rows():
        key = SeriesKey(str(source), str(worker_name), int(segment))
        worker = found.setdefault(key, Worker(key, rank, {}))
        count = _count(nan_its) or 0
        bad = COUNTED if count else VANISHED
        printed = worker.readings.get(line)
        if printed is not None and printed.bad == PRINTED:
            bad = PRINTED  # the line printed its non-finite loss itself
        worker.readings[line] = Reading(step, line, bad, loss, count, _count(skipped))
    return found


def _count(value: float | None) -> int | None:
    return int(value) if value is not None and 0 <= value <= MAX_COUNT else None


def check(ctx, t) -> list[Finding]:
    hits = []
    for worker in _workers(ctx).values():
        if any(f.marks == "placeholder" and ctx.key_label(worker.key) in f.series for f in ctx.findings):
            continue  # placeholders are never judged as a loss
        readings = sorted(worker.readings.values(), key=lambda r: (r.step, r.line_no))
        bad = [i for i, r in enumerate(readings) if r.bad]
        if len(bad) >= t["min_steps"]:
            hits.append((worker, readings, bad))
    if not hits:
        return []
    label = {id(w): ctx.key_label(w.key) for w, _, _ in hits}
    labels = [label[id(w)] for w, _, _ in hits]
    total = sum(len(b) for _, _, b in hits)
    first_worker, first_readings, first_bad = min(hits, key=lambda h: (h[1][h[2][0]].step, h[1][h[2][0]].line_no))
    first = first_readings[first_bad[0]]
    persistent = [w for w, r, b in hits if b[-1] == len(r) - 1 and len(b) == len(r) - b[0]]
    bad_readings = [r[i] for _, r, b in hits for i in b]
    printed = [r for r in bad_readings if r.bad == PRINTED]
    counted = [r for r in bad_readings if r.bad == COUNTED]
    vanished = [r for r in bad_readings if r.bad == VANISHED]
    kinds = sorted({"NaN" if math.isnan(r.value) else "inf" for r in printed})
    if counted or vanished:
        kinds = ["NaN or inf"] if not kinds else kinds
    msg = (
        f"Loss is {'/'.join(kinds)} at {total} logged step{'s' if total != 1 else ''} on {workers_phrase(labels)}, "
        f"first at step {first.step} (line {first.line_no})"
    )
    if persistent:
        msg += f"; from then on it stays non-finite on {workers_phrase([label[id(w)] for w in persistent])} (training diverged)"
    else:
        msg += "; intermittent, the loss recovers in between"
    if counted:
        its = sum(r.count for r in counted)
        msg += (
            f". At {len(counted)} of these steps the line counts {its} iteration{'s' if its != 1 else ''} with a NaN or "
            "infinite loss (`number of nan iterations`); they were skipped and left out of the printed average"
        )
    if vanished:
        msg += (
            f". At {len(vanished)} of these steps the line has no loss and a non-finite grad norm: Megatron prints a "
            "loss only when it is above zero, so a NaN loss vanishes from its line"
        )
    msg += ". This is a numerical problem of training and says nothing about memory."
    skipped = [r.skipped for r in counted if r.skipped is not None]
    observed = {
        "non_finite_steps": total,
        "first_step": first.step,
        "series_diverged": len(persistent),
    }
    if counted:
        observed["nan_iterations"] = sum(r.count for r in counted)
    if skipped:
        observed["skipped_iterations"] = sum(skipped)
    if vanished:
        observed["loss_vanished_steps"] = len(vanished)
    hints = [
        "Intermittent NaN/inf: fp16 overflow (watch the loss scaler), a bad batch, or a too-high learning rate at the end of warmup; check gradient clipping.",
        "NaN from some step on: the run diverged; resume from an earlier checkpoint with a lower learning rate, "
        "bf16 instead of fp16, or the offending data skipped.",
    ]
    if counted:
        hints.append(
            "Counted NaN iterations were skipped (the weights were not updated from them), so training went on; many "
            "of them, or at every log line, mean the run is making no progress: find the batch or the layer that "
            "produces the NaN (Megatron's --check-for-nan-in-loss-and-grad and --rerun-mode stop at the first one)."
        )
    if vanished:
        hints.append(
            "A Megatron iteration line without its `lm loss` and with `grad norm: nan` is a NaN loss that was not "
            "skipped (bf16, or the NaN check off): the weights were updated with NaN gradients, so later lines stay NaN."
        )
    return [
        RULE.finding(
            t,
            msg,
            subject="loss",
            series=labels,
            ranks=[w.rank for w, _, _ in hits],
            observed=observed,
            evidence={
                "series": [{"series": label[id(w)], "rank": w.rank, "steps": [r[i].step for i in b][:16], "count": len(b)} for w, r, b in hits][:16],
            },
            hints=hints,
            lines=[(w.key.source, r[b[0]].line_no) for w, r, b in hits[:4]],
        )
    ]


# Megatron-LM iteration lines (core_v0.6 .. v0.15 format) of a bf16 or fp16 run, for the examples below.
def _iteration(it: int, loss: float | None, grad: str | None = "0.873", skipped: int = 0, nan: int = 0, scale: float = 1.0) -> str:
    return (
        f" [2025-05-14 08:{it // 100:02d}:11] iteration {it:8d}/   20000 | consumed samples: {it * 1024:12d} | elapsed time "
        f"per iteration (ms): 2881.1 | learning rate: 2.987100E-04 | global batch size:  1024 |"
        + ("" if loss is None else f" lm loss: {loss:.6E} |")
        + f" loss scale: {scale:.1f} |"
        + ("" if grad is None else f" grad norm: {grad} |")
        + f" number of skipped iterations: {skipped:3d} | number of nan iterations: {nan:3d} |"
    )


RULE = Rule(
    id="nan-loss",
    severity="warning",
    after=("pp-sentinel-loss",),
    summary="The loss is NaN or infinite on some logged steps: a numerical training problem, not a memory one.",
    explanation=(
        "Reports every loss series with non-finite values: where they start, whether they persist (divergence) or "
        "come and go. A step counts as a non-finite loss reading when its loss is printed as NaN or inf; when the "
        "line counts NaN iterations (`nan_iterations` > 0: Megatron-LM, Megatron-DeepSpeed and GPT-NeoX's `number of "
        "nan iterations`, iterations whose loss was NaN or infinite and which were skipped, even when the line also "
        "prints the average loss of the other iterations); and when the line printed no loss at all but a NaN or "
        "infinite grad norm (Megatron prints a loss only when it is above zero, so a NaN loss silently vanishes from "
        "its line and `grad norm: nan` is what remains; an interval whose iterations were all skipped prints neither, "
        "so it does not count). Pipeline-parallel placeholder series (pp-sentinel-loss) are never judged here."
    ),
    not_meaning="Says nothing about memory; a NaN memory reading is a corrupt reading instead.",
    thresholds=(Threshold("min_steps", 1, "steps", "non-finite logged losses that trigger the warning"),),
    examples=(
        Example(
            "fp16 overflow: loss NaN at step 12, finite before and after.",
            True,
            memory={0: [23.4] * 20},
            loss={0: [9.0 - 0.1 * i if i != 11 else float("nan") for i in range(20)]},
        ),
        Example(
            "Pipeline placeholder -1.0 on rank 0 with a real loss on rank 1.",
            False,
            memory={0: [23.4] * 10, 1: [20.1] * 10},
            loss={0: [-1.0] * 10, 1: [9.0 - 0.1 * i for i in range(10)]},
        ),
        Example(
            "Megatron fp16: the iteration-300 line prints a finite lm loss but counts 2 NaN iterations (skipped).",
            True,
            memory={0: [23.4] * 10},
            lines=tuple(
                _iteration(it, 3.2 - 0.01 * i, skipped=2 if it == 300 else 0, nan=2 if it == 300 else 0, scale=65536.0)
                for i, it in enumerate(range(100, 600, 100))
            ),
        ),
        Example(
            "Megatron bf16: from iteration 300 on the lm loss vanishes from the line and the grad norm is nan.",
            True,
            memory={0: [23.4] * 10},
            lines=tuple(_iteration(it, 3.2 - 0.01 * i if it < 300 else None, grad="0.873" if it < 300 else "nan") for i, it in enumerate(range(100, 600, 100))),
        ),
        Example(
            "Megatron fp16 loss-scale warmup: every iteration of the first interval skipped, so its line has no loss and no grad norm; finite after.",
            False,
            memory={0: [23.4] * 10},
            lines=tuple(
                _iteration(it, 3.2 - 0.01 * i, scale=65536.0) if it > 100 else _iteration(it, None, grad=None, skipped=100, scale=65536.0)
                for i, it in enumerate(range(100, 600, 100))
            ),
        ),
    ),
    check=check,
)
