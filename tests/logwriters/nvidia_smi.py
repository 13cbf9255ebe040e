"""nvidia-smi output (parsers/nvidia_smi.yaml) as the driver prints it, in the layouts of pastes in
public issues: 440 (`Tesla V100-SXM2...`, no MIG line), 535 (the 525+ header, `MIG M.` line per GPU),
550 (wider name column), 580 (a `+---+` rule under the version line); and `--query-gpu ... --format=csv`."""

from __future__ import annotations

from collections.abc import Sequence

# (version line, rule under it, the two column-header lines and the `MIG M.` line or None, the `===` rule,
# the rule between GPUs, width of the name cell, width of the memory cell)
LAYOUTS = {
    440: (
        "| NVIDIA-SMI 440.64.00    Driver Version: 440.64.00    CUDA Version: 10.2     |",
        "|-------------------------------+----------------------+----------------------+",
        (
            "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |",
        ),
        None,
        "|===============================+======================+======================|",
        "+-------------------------------+----------------------+----------------------+",
    ),
    535: (
        "| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |",
        "|-----------------------------------------+----------------------+----------------------+",
        (
            "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
        ),
        "|                                         |                      |               MIG M. |",
        "|=========================================+======================+======================|",
        "+-----------------------------------------+----------------------+----------------------+",
    ),
    550: (
        "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
        "|-----------------------------------------+------------------------+----------------------+",
        (
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        ),
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        "+-----------------------------------------+------------------------+----------------------+",
    ),
    580: (
        "| NVIDIA-SMI 580.126.09             Driver Version: 580.126.09     CUDA Version: 13.0     |",
        "+-----------------------------------------+------------------------+----------------------+",
        (
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        ),
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        "+-----------------------------------------+------------------------+----------------------+",
    ),
}


# The three cells' widths, from the `===` rule.
CELLS = {440: (31, 22, 22), 535: (41, 22, 22), 550: (41, 24, 22), 580: (41, 24, 22)}


def _row(cells: Sequence[str]) -> str:
    return "|" + "|".join(cells) + "|"


def _gpu_rows(driver: int, index: int, name: str, used: int, total: int) -> list[str]:
    w1, w2, w3 = CELLS[driver]
    bus = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
    on = "On   " if driver == 440 else "On  "
    first = f"{index:>4}  {name}"
    power = "56W / 300W " if driver == 440 else "312W /  700W "
    state = " N/A   45C    P0    " if driver == 440 else " N/A   41C    P0 "
    memory = f"{used}MiB / {total}MiB " if driver < 550 else f"{used}MiB / {total:>6}MiB "
    rows = [
        _row([first + " " * (w1 - len(first) - len(on)) + on, f"{bus} Off ".rjust(w2), "0 ".rjust(w3)]),
        _row([state + power.rjust(w1 - len(state)), memory.rjust(w2), f"{'97%':>8}      Default ".rjust(w3)]),
    ]
    if driver != 440:
        rows.append(_row([" " * w1, " " * w2, "Disabled ".rjust(w3)]))
    return rows


def table(used_mib: Sequence[int], total_mib: int, *, driver: int = 550, name: str = "NVIDIA H100 80GB HBM3", processes: bool = True) -> list[str]:
    """The summary table of a node whose GPU i uses used_mib[i] of total_mib, then its processes."""
    version, under, header, mig, double, between = LAYOUTS[driver]
    width = len(version)
    lines = ["Wed Nov  4 09:13:31 2026       ", "+" + "-" * (width - 2) + "+", version, under, *header]
    lines += [mig] if mig else []
    lines.append(double)
    for i, used in enumerate(used_mib):
        lines += [*_gpu_rows(driver, i, name, used, total_mib), between]
    if processes:
        lines += [" " * width, "+" + "-" * (width - 2) + "+", f"| {'Processes:':<{width - 4}} |"]
        lines += [f"| {' GPU   GI   CI        PID   Type   Process name':<{width - 14}}GPU Memory |", "|" + "=" * (width - 2) + "|"]
        lines += [f"| {f'   {i}   N/A  N/A      {2298 + i}      C   python':<{width - 14}}{f'{used - 412}MiB':>10} |" for i, used in enumerate(used_mib)]
        lines.append("+" + "-" * (width - 2) + "+")
    return lines


def query_csv(used_mib: Sequence[int], total_mib: int, *, fields: Sequence[str] = ("index", "memory.used", "memory.total"), units: bool = True) -> list[str]:
    """`nvidia-smi --query-gpu=<fields> --format=csv[,nounits]`: the header, then a row per GPU."""
    header = {
        "index": "index",
        "name": "name",
        "memory.used": "memory.used [MiB]",
        "memory.total": "memory.total [MiB]",
        "utilization.gpu": "utilization.gpu [%]",
    }
    mib = " MiB" if units else ""
    cell = {
        "index": lambda i, u: str(i),
        "name": lambda i, u: "NVIDIA A100-SXM4-80GB",
        "memory.used": lambda i, u: f"{u}{mib}",
        "memory.total": lambda i, u: f"{total_mib}{mib}",
        "utilization.gpu": lambda i, u: "97 %" if units else "97",
    }
    return [", ".join(header[f] for f in fields)] + [", ".join(cell[f](i, u) for f in fields) for i, u in enumerate(used_mib)]


def query_csv_loop(used_mib_per_query: Sequence[Sequence[int]], total_mib: int, *, fields: Sequence[str], every_s: int = 30) -> list[str]:
    """`nvidia-smi --query-gpu=<fields> --format=csv -l <every_s>`: the header once, then a row per GPU
    at every interval (`timestamp` as nvidia-smi prints it, `pci.bus_id` per GPU)."""
    header = {"timestamp": "timestamp", "name": "name", "pci.bus_id": "pci.bus_id", "memory.used": "memory.used [MiB]", "memory.total": "memory.total [MiB]"}
    rows = [", ".join(header[f] for f in fields)]
    for n, query in enumerate(used_mib_per_query):
        for gpu, used in enumerate(query):
            cell = {
                "timestamp": f"2025/06/01 10:{(n * every_s) // 60 % 60:02d}:{(n * every_s) % 60:02d}.{412 + 3 * gpu:03d}",
                "name": "NVIDIA A100-SXM4-80GB",
                "pci.bus_id": f"00000000:{0x07 + 8 * gpu:02X}:00.0",
                "memory.used": f"{used} MiB",
                "memory.total": f"{total_mib} MiB",
            }
            rows.append(", ".join(cell[f] for f in fields))
    return rows
