"""Time `memlog analyze -o json` against the polars floor on generated logs; print a Markdown table.

    python -m benchmarks.run                          # every case at the issue's sizes (~15 GiB of logs)
    python -m benchmarks.run --cases dense,sparse     # some cases
    python -m benchmarks.run --cases dense --sizes 256M,512M --runs 5
    python -m benchmarks.run --quick                  # small sizes: a smoke run in a minute
    python -m benchmarks.run --cases manyranks,restarts,churn --runs 1 --warmup 0   # memory of unusual layouts

Each measurement is the median wall time of --runs runs after --warmup runs (which also bring the
file into the page cache and, as an installed tool's first run does, write memlog's bytecode
cache even where PYTHONDONTWRITEBYTECODE is set), for memlog and for ripgrep alike, run one after the other as
subprocesses, interleaved. Peak RSS is each process's own maximum resident set (os.wait4), the
largest over the runs. The figures are printed, never asserted: the targets (issue 20) are shown
beside them with whether they are met. The floor is benchmarks/floor.py, the script a user would
write instead (polars' own reader, a literal filter, one regex with four fields): targets are
ratios of memlog's wall time to it. `rg -c` is shown for reference, not as a target. Logs come from
benchmarks/generate.py and are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.generate import DEFAULT_OUT, generate, parse_size, size_label

GIB = 1 << 30
MIB = 1 << 20
RG_PATTERN = "step:"
LINEAR_TOLERANCE = 1.2  # s/GiB at the largest size may exceed the smallest size's by this factor
RSS_MIB = 300  # issue 20: peak RSS on every case


@dataclass(frozen=True)
class Target:
    """What issue 20 asks of a case; None where it asks nothing."""

    ratio: float | None = None  # memlog wall <= ratio x the polars floor's wall
    seconds: float | None = None  # memlog wall <= seconds
    rss_mib: float | None = None  # peak RSS <= this
    same_rss_as: str | None = None  # peak RSS within +-10% of this case's (memory follows records, not size)
    linear_to: str | None = None  # s/GiB within LINEAR_TOLERANCE of this case's


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # benchmarks.generate kind
    size: int  # bytes per file
    files: int = 1
    target: Target = field(default_factory=Target)

    @property
    def key(self) -> tuple[str, int, int]:
        """Cases with the same key measure the same input, so they share one measurement."""
        return (self.kind, self.size, self.files)

    @property
    def size_text(self) -> str:
        total = self.size * self.files
        text = f"{total / GIB:g} GiB" if total >= GIB else f"{total / MIB:g} MiB"
        return f"{self.files} × {size_label(self.size)}iB" if self.files > 1 else text


# Case groups and their sizes: (full run, --quick). Sizes are per file.
DEFAULT_SIZES = {
    "dense": (["1G"], ["16M"]),
    "sparse": (["1G", "4G"], ["16M", "64M"]),
    "ranks": (["16M"], ["1M"]),
    "small": (["1M"], ["1M"]),
    "linearity": (["1G", "2G", "4G"], ["16M", "32M", "64M"]),
    "ray": (["256M"], ["8M"]),
    "deepspeed": (["256M"], ["8M"]),
    # Layouts whose memory followed the file rather than the steps (issue: 10,000 ranks teed; 8 ranks
    # resumed every 2,500 steps; a restart loop): see benchmarks.generate.
    "manyranks": (["1G"], ["16M"]),
    "restarts": (["400M"], ["16M"]),
    "churn": (["90M"], ["4M"]),
}
RANK_FILES = (64, 8)  # files in the `ranks` case: (full, --quick)


def build_cases(groups: list[str], sizes: list[int] | None, quick: bool) -> list[Case]:
    cases: list[Case] = []
    for group in groups:
        group_sizes = sizes or [parse_size(s) for s in DEFAULT_SIZES[group][1 if quick else 0]]
        if group == "dense":
            cases += [Case(f"dense {size_label(s)}", "dense", s, target=Target(ratio=1.3, rss_mib=RSS_MIB)) for s in group_sizes]
        elif group == "sparse":
            first = f"sparse {size_label(group_sizes[0])}"
            cases += [
                Case(f"sparse {size_label(s)}", "sparse", s, target=Target(ratio=1.5, rss_mib=RSS_MIB, same_rss_as=first if i else None))
                for i, s in enumerate(group_sizes)
            ]
        elif group == "ranks":
            files = RANK_FILES[1 if quick else 0]
            cases += [Case(f"per-rank files {files}×{size_label(s)}", "ranks", s, files, Target(ratio=1.6, rss_mib=RSS_MIB)) for s in group_sizes]
        elif group == "small":
            cases += [Case(f"small {size_label(s)}", "dense", s, target=Target(seconds=0.3, rss_mib=RSS_MIB)) for s in group_sizes]
        elif group == "linearity":
            first = f"linearity {size_label(group_sizes[0])}"
            cases += [
                Case(f"linearity {size_label(s)}", "dense", s, target=Target(rss_mib=RSS_MIB, linear_to=first if i else None, same_rss_as=first if i else None))
                for i, s in enumerate(group_sizes)
            ]
        elif group in ("manyranks", "restarts", "churn"):
            cases += [Case(f"{group} {size_label(s)}", group, s, target=Target(rss_mib=512)) for s in group_sizes]
        elif group in ("ray", "deepspeed"):
            ratio = 3.0 if group == "ray" else 2.0
            cases += [Case(f"{group} {size_label(s)}", group, s, target=Target(ratio=ratio, rss_mib=RSS_MIB)) for s in group_sizes]
        else:
            raise SystemExit(f"unknown case {group!r} (known: {', '.join(DEFAULT_SIZES)})")
    return cases


@dataclass
class Timing:
    wall: float
    cpu: float  # user + system seconds of the process (2 cores: up to twice the wall)
    rss_mib: float
    code: int
    stdout: bytes
    stderr: bytes
    killed: str | None = None  # why the guard stopped it


@dataclass(frozen=True)
class Limits:
    """Stop a run that would take the shared machine down with it."""

    seconds: float | None = None
    rss_mib: float | None = None


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _guard(proc: subprocess.Popen, limits: Limits, done: threading.Event, why: list[str]) -> None:
    """Watch from a thread, so that the timed wait4 in the caller adds no polling delay."""
    started = time.monotonic()
    while not done.wait(0.2):
        if limits.seconds and time.monotonic() - started > limits.seconds:
            why.append(f"over {limits.seconds:g} s")
        elif limits.rss_mib and _rss_mib(proc.pid) > limits.rss_mib:
            why.append(f"over {limits.rss_mib:g} MiB")
        if why:
            proc.kill()
            return


# A machine that sets PYTHONDONTWRITEBYTECODE (this project's does) would have every run compile
# memlog's changed modules again (~40 ms of a 1 MB log's 0.5 s); an installed tool has its bytecode.
RUN_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], limits: Limits = Limits()) -> Timing:
    """Run `cmd`; wall time and that child's own peak RSS (wait4 reports it per process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        done, why = threading.Event(), []
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=RUN_ENV)
        watch = threading.Thread(target=_guard, args=(proc, limits, done, why), daemon=True)
        if limits.seconds or limits.rss_mib:
            watch.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Timing(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, out.read(), err.read(), why[0] if why else None)


@dataclass
class Result:
    memlog_wall: float
    memlog_cpu: float
    memlog_rss: float
    rg_wall: float | None
    floor_wall: float | None  # benchmarks/floor.py: polars read + literal filter + one regex
    floor_cpu: float | None
    floor_rss: float | None
    records: int | None
    verdict: str | None
    error: str | None  # memlog could not judge (exit 2): its message
    stopped: bool = False  # killed by the guard: the wall time is a lower bound


def measure(memlog: list[str], kind: str, paths: list[Path], runs: int, warmup: int, limits: Limits = Limits()) -> Result:
    rg = shutil.which("rg")
    memlog_cmd = [*memlog, "analyze", "-o", "json", *map(str, paths)]
    rg_cmd = [rg, "-c", RG_PATTERN, *map(str, paths)] if rg else None
    floor_cmd = [sys.executable, str(Path(__file__).with_name("floor.py")), "--kind", kind, *map(str, paths)]
    memlog_runs, rg_runs, floor_runs = [], [], []
    for i in range(warmup + runs):
        m = timed(memlog_cmd, limits)
        r = timed(rg_cmd) if rg_cmd else None
        f = timed(floor_cmd, limits)
        if m.killed:  # one stopped run says enough; do not repeat it
            memlog_runs, rg_runs = [m], [r] if r else []
            break
        if i >= warmup:
            memlog_runs.append(m)
            if r:
                rg_runs.append(r)
            if f.code == 0:
                floor_runs.append(f)
    last = memlog_runs[-1]
    records = verdict = error = None
    if last.killed:
        error = f"stopped by the benchmark's guard: {last.killed} (--timeout / --max-rss)"
    elif last.code in (0, 1):  # judged; 1 = a finding at or above --fail-on
        report = json.loads(last.stdout)
        records, verdict = report["coverage"]["records"], report["verdict"]
    else:
        error = (last.stderr.decode(errors="replace").strip().splitlines() or [f"exit {last.code}"])[-1]
    return Result(
        memlog_wall=statistics.median(t.wall for t in memlog_runs),
        memlog_cpu=statistics.median(t.cpu for t in memlog_runs),
        memlog_rss=max(t.rss_mib for t in memlog_runs),
        rg_wall=statistics.median(t.wall for t in rg_runs) if rg_runs else None,
        floor_wall=statistics.median(t.wall for t in floor_runs) if floor_runs else None,
        floor_cpu=statistics.median(t.cpu for t in floor_runs) if floor_runs else None,
        floor_rss=max(t.rss_mib for t in floor_runs) if floor_runs else None,
        records=records,
        verdict=verdict,
        error=error,
        stopped=bool(last.killed),
    )


def judge(case: Case, result: Result, results: dict[str, Result], cases: dict[str, Case]) -> tuple[str, str]:
    """(target text, met text) for one row."""
    t = case.target
    wants, misses = [], []
    if t.ratio is not None:
        wants.append(f"≤ {t.ratio:g}× floor")
        if result.floor_wall is None:
            misses.append("no floor")
        elif result.memlog_wall > t.ratio * result.floor_wall:
            misses.append("wall")
    if t.seconds is not None:
        wants.append(f"≤ {t.seconds:g} s")
        if result.memlog_wall > t.seconds:
            misses.append("wall")
    if t.rss_mib is not None:
        wants.append(f"≤ {t.rss_mib:g} MiB")
        if result.memlog_rss > t.rss_mib:
            misses.append("RSS")
    if t.same_rss_as and t.same_rss_as in results:
        base = results[t.same_rss_as].memlog_rss
        wants.append(f"RSS ±10% of {t.same_rss_as}")
        if abs(result.memlog_rss - base) > 0.1 * base:
            misses.append("RSS growth")
    if t.linear_to and t.linear_to in results:
        per_gib = result.memlog_wall / (case.size * case.files / GIB)
        ref = cases[t.linear_to]
        base = results[t.linear_to].memlog_wall / (ref.size * ref.files / GIB)
        wants.append(f"s/GiB ≤ {LINEAR_TOLERANCE:g}× {t.linear_to}'s ({per_gib / base:.2f}×)")
        if per_gib > LINEAR_TOLERANCE * base:
            misses.append("not linear")
    if result.error:
        misses.insert(0, "could not judge")
    if not wants:
        return "—", "—" if not result.error else "could not judge"
    return ", ".join(wants), "yes" if not misses else "no (" + ", ".join(misses) + ")"


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def table(cases: list[Case], results: dict[str, Result]) -> str:
    by_name = {c.name: c for c in cases}
    rows = [
        "| case | size | records | verdict | memlog wall (s) | polars floor (s) | ratio | memlog CPU (s) | floor CPU (s) | CPU ratio "
        "| memlog peak RSS (MiB) | floor peak RSS (MiB) | target | met? | rg -c (s) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    notes = []
    for case in cases:
        r = results[case.name]
        ratio = (">" if r.stopped else "") + f"{r.memlog_wall / r.floor_wall:.2f}×" if r.floor_wall else "—"
        records = f"{r.records:,}" if r.records is not None else "—"
        target, met = judge(case, r, results, by_name)
        if target == "—" and case.name.startswith("linearity"):
            target = f"reference: {r.memlog_wall / (case.size * case.files / GIB):.1f} s/GiB"
        wall = (">" if r.stopped else "") + seconds(r.memlog_wall)
        floor_rss = f"{r.floor_rss:.0f}" if r.floor_rss is not None else "n/a"
        cpu_ratio = f"{r.memlog_cpu / r.floor_cpu:.2f}×" if r.floor_cpu else "—"
        rows.append(
            f"| {case.name} | {case.size_text} | {records} | {r.verdict or '—'} | {wall} | "
            f"{seconds(r.floor_wall)} | {ratio} | {seconds(r.memlog_cpu)} | {seconds(r.floor_cpu)} | {cpu_ratio} | "
            f"{r.memlog_rss:.0f} | {floor_rss} | {target} | {met} | "
            f"{seconds(r.rg_wall)} |"
        )
        if r.error:
            notes.append(f"- {case.name}: {r.error}")
    return "\n".join(rows + ([""] + notes if notes else []))


def environment(memlog: list[str]) -> str:
    def output(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "n/a"

    import polars

    commit = output(["git", "-C", str(Path(__file__).resolve().parents[1]), "describe", "--always", "--dirty"])
    rg = output(["rg", "--version"]) if shutil.which("rg") else "ripgrep not installed"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"memlog `{shlex.join(memlog)}` at {commit}; polars {polars.__version__}; {rg}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs; {platform.platform()}; load average {load}"
    )


def default_memlog() -> list[str]:
    """The console script next to this interpreter (a pyenv shim would add its own start-up time)."""
    beside = Path(sys.executable).with_name("memlog")
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-c", "from memlog.cli import main; main()"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(DEFAULT_SIZES), help=f"comma-separated, from: {', '.join(DEFAULT_SIZES)} (default: all)")
    parser.add_argument(
        "--sizes",
        help="comma-separated sizes (per file) for every selected case, e.g. 256M,1G; "
        "default: each case's own (dense 1G; sparse 1G,4G; linearity 1G,2G,4G; ...)",
    )
    parser.add_argument("--runs", type=int, default=3, help="measured runs per case; the median is shown (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs first (default 1)")
    parser.add_argument("--quick", action="store_true", help="small default sizes, for a smoke run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where generated logs live (default {DEFAULT_OUT})")
    parser.add_argument("--memlog", help="memlog command to time (default: the installed console script)")
    parser.add_argument("--timeout", type=float, default=1800, help="stop a memlog run after this many seconds (default 1800)")
    parser.add_argument("--max-rss", type=float, default=8192, help="stop a memlog run above this RSS in MiB (default 8192)")
    args = parser.parse_args(argv)

    groups = [g.strip() for g in args.cases.split(",") if g.strip()]
    sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else None
    cases = build_cases(groups, sizes, args.quick)
    memlog = shlex.split(args.memlog) if args.memlog else default_memlog()
    if not shutil.which("rg"):
        print("warning: ripgrep (rg) not found; install it with `apt-get install ripgrep`", file=sys.stderr)

    start_load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    measured: dict[tuple, Result] = {}
    results: dict[str, Result] = {}
    for case in cases:
        if case.key not in measured:
            started = time.perf_counter()
            paths = generate(case.kind, case.size, args.out, files=case.files)
            generated = time.perf_counter() - started
            measured[case.key] = measure(memlog, case.kind, paths, args.runs, args.warmup, Limits(args.timeout, args.max_rss))
            r = measured[case.key]
            print(
                f"{case.name}: memlog {r.memlog_wall:.2f} s, {r.memlog_rss:.0f} MiB; rg "
                f"{r.rg_wall if r.rg_wall is not None else float('nan'):.2f} s; polars floor "
                f"{r.floor_wall if r.floor_wall is not None else float('nan'):.2f} s, "
                f"{r.floor_rss if r.floor_rss is not None else float('nan'):.0f} MiB (log ready in {generated:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
        results[case.name] = measured[case.key]

    print(environment(memlog) + f" (at start: {start_load})")
    print(
        f"Median of {args.runs} runs after {args.warmup} warm-up; rg = `rg -c '{RG_PATTERN}'` on the same files; "
        "polars floor = benchmarks/floor.py (polars' reader, a literal filter, one regex with four fields: "
        "no memlog work); ratio = memlog / floor.\n"
    )
    print(table(cases, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
