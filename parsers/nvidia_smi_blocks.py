"""Block parser for `nvidia-smi` output pasted into a training log: the summary table and
`--query-gpu=... --format=csv`.

The table (every driver since the 3xx series; the 525+ layout adds a `MIG M.` line per GPU, 580
a `+---+` rule under the version line):

    | GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
    | Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
    |=========================================+========================+======================|
    |   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |
    | N/A   41C    P0            312W /  400W |   31211MiB /  81920MiB |    100%      Default |

A GPU's index is on its first row (the one with the bus id), its memory on the row below: one
line cannot say both, hence a block parser. A block starts at the column-header line holding
`Pwr:Usage/Cap` (the MIG table's header has `Memory-Usage` too, but not this) and ends at its
worker's first line that is no table row, or at `MIG devices:` / `Processes:` (MIG instances and
processes are not devices' readings).

The CSV (`nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv[,nounits]`): a header
naming the queried fields (`index, memory.used [MiB], memory.total [MiB]`, in the order asked),
then a row per GPU (`0, 41235 MiB, 81920 MiB`); without an `index` field a row's place under the
header is its GPU's index (nvidia-smi lists them in order). `noheader` output says no field's name
and is not read.

Each GPU's used memory is a reading of the whole device as the driver sees it (every process's
contexts, the caching allocator's pool, NCCL's buffers), its total the device's capacity, and the
GPU is the device the reading belongs to (`GPU0` under the process that printed the table). No
table says a step: a reading takes the step the log printed last (the engine's inheritance).

Rows are few (a table every few hundred lines), so they are walked in Python; what each line is
was found by `prepare` with polars, on the threads that scan chunks.
"""

from __future__ import annotations

from typing import Any

import polars as pl

HEADER = "Pwr:Usage/Cap"
CSV_HEADER = "memory.used ["
# A CSV row with units: not a block's start, but a line near which rows are fed to the parser, so
# that the rows of `nvidia-smi -l` (one header, then a row per GPU every interval) are read however
# long the loop ran, not only within max_lines of its header.
CSV_ROW = " MiB, "
# Fields that name a GPU in a CSV without `index`, in the order they are trusted.
GPU_NAMES = ("pci.bus_id", "uuid", "serial")
WORKER = ("node", "actor", "pid", "ip", "rank")
# The first row of a GPU: its index, a name, then the bus id (`00000000:07:00.0`; drivers before
# 2018 printed `0000:07:00.0`).
GPU_ROW = r"^\|\s*(\d+)\s+\S.*?\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\b"
MEMORY_ROW = r"\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|"
ENDS = r"MIG devices:|Processes:"
MIB = 1 / 1024


def _number(cell: str) -> float | None:
    """`41235 MiB` or `41235` (`nounits`) -> 41235.0; `[N/A]`, `[Not Supported]` -> None."""
    value = cell.strip().removesuffix("MiB").strip()
    try:
        return float(value)
    except ValueError:
        return None


class SmiBlocks:
    def __init__(self, options: dict[str, Any]):
        self.start_literals = (HEADER, CSV_HEADER, CSV_ROW)
        self.columns = ("device_mem_used_gib", "mem_capacity_gib")
        # A table of 16 GPUs (three or four rows each) with the lines above them, or a CSV of as many.
        self.max_lines = int(options.get("max_lines", 120))
        self.open: dict[tuple[Any, ...], dict[str, Any]] = {}  # each worker's block being read

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        """What each line is: a table's start, a CSV header, a GPU's first row, a memory row, the end
        of the GPUs, another table row; and the text itself, split into cells for a CSV row."""
        text = pl.col("text").str.strip_chars()
        memory = text.str.extract_groups(MEMORY_ROW)
        csv_header = text.str.contains(r"(?:^|,\s*)memory\.used \[")
        return rows.select(
            smi_start=pl.when(text.str.contains(HEADER, literal=True)).then(pl.lit("table")).when(csv_header).then(pl.lit("csv")),
            smi_gpu=text.str.extract(GPU_ROW, 1).cast(pl.Int64, strict=False),
            smi_used=memory.struct.field("1").cast(pl.Float64, strict=False),
            smi_total=memory.struct.field("2").cast(pl.Float64, strict=False),
            smi_ends=text.str.contains(ENDS),
            smi_row=text.str.starts_with("|") | text.str.starts_with("+"),
            smi_text=text,
        )

    def feed(self, rows: pl.DataFrame) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        if not self.open:
            # Nothing open: rows before the first start read nothing. A log whose own lines hold the
            # CSV_ROW literal is fed whole, and must not be walked row by row in Python for it.
            starts = rows["smi_start"].is_not_null().arg_true()
            if starts.is_empty():
                return records
            rows = rows.slice(int(starts[0]))
        present = [c for c in WORKER if c in rows.columns]
        for row in rows.iter_rows(named=True):
            if row.get("window_start"):
                self.open.clear()  # rows the parser did not see: blocks open before them end
            who = tuple(row.get(c) for c in present)
            if row["smi_start"] is not None:
                self.open[who] = self._start(row)
                continue
            block = self.open.get(who)
            if block is None:
                continue
            if block["kind"] == "table":
                done = self._table_row(block, row, records)
            else:
                done = self._csv_row(block, row, records)
            if done:
                del self.open[who]
        return records

    def finish(self) -> list[dict[str, Any]]:
        self.open.clear()
        return []

    def open_since(self) -> int | None:
        return None  # a reading comes out at its own line, never later: nothing is held back

    @staticmethod
    def _start(row: dict[str, Any]) -> dict[str, Any]:
        if row["smi_start"] == "table":
            return {"kind": "table", "gpu": None}
        names = [name.strip() for name in row["smi_text"].split(",")]
        keys = ("index", "memory.used", "memory.total", "timestamp", *GPU_NAMES)
        where = {key: next((i for i, n in enumerate(names) if n.split(" [")[0] == key), None) for key in keys}
        return {"kind": "csv", "fields": len(names), "where": where, "nth": 0, "named": {}, "sample": None}

    @staticmethod
    def _table_row(block: dict[str, Any], row: dict[str, Any], records: list[dict[str, Any]]) -> bool:
        if row["smi_ends"] or not row["smi_row"]:
            return True
        if row["smi_gpu"] is not None:
            block["gpu"] = row["smi_gpu"]
        elif block["gpu"] is not None and row["smi_used"] is not None:
            records.append(_record(row, block["gpu"], row["smi_used"], row["smi_total"]))
            block["gpu"] = None  # one reading per GPU: the BAR1 and MIG lines below are not it
        return False

    @staticmethod
    def _csv_row(block: dict[str, Any], row: dict[str, Any], records: list[dict[str, Any]]) -> bool:
        cells = row["smi_text"].split(",") if row["smi_text"] else []
        if len(cells) != block["fields"]:
            return True
        where = block["where"]
        used = _number(cells[where["memory.used"]]) if where["memory.used"] is not None else None
        total = _number(cells[where["memory.total"]]) if where["memory.total"] is not None else None
        index = _number(cells[where["index"]]) if where["index"] is not None else _csv_gpu(block, cells)
        if used is not None and index is not None:
            records.append(_record(row, int(index), used, total))
        return False


def _csv_gpu(block: dict[str, Any], cells: list[str]) -> int:
    """A CSV row's GPU where no `index` was queried: the order in which its bus id (uuid, serial)
    first came; else its place among the rows of one query, which `-l`'s loop repeats every interval
    (a new `timestamp`, to the second, starts a new query); else its place under the header."""
    where = block["where"]
    name = next((where[key] for key in GPU_NAMES if where[key] is not None), None)
    if name is not None:
        return block["named"].setdefault(cells[name].strip(), len(block["named"]))
    if where["timestamp"] is not None:
        second = cells[where["timestamp"]].strip().split(".")[0]
        if second != block["sample"]:
            block["sample"], block["nth"] = second, 0
    block["nth"] += 1
    return block["nth"] - 1


def _record(row: dict[str, Any], gpu: int, used_mib: float, total_mib: float | None) -> dict[str, Any]:
    return {
        **{c: row.get(c) for c in ("line_no", "ts", *WORKER)},
        "step": None,
        "kind": "train",
        "device": f"GPU{gpu}",
        "device_mem_used_gib": used_mib * MIB,
        "mem_capacity_gib": total_mib * MIB if total_mib is not None else None,
    }


def create(options: dict[str, Any]) -> SmiBlocks:
    return SmiBlocks(options)
