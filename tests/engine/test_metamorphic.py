"""Metamorphic tests: the same run, wrapped the way launchers and collectors deliver it, gives the
same verdict and the same records. Nothing here is tuned to a sample: every sample log goes through
every transformation, and the relation (same verdict, same record count) must hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlog.engine.api import analyze
from memlog.engine.plan import ReadingPlan
from memlog.read import hardwrap

ROOT = Path(__file__).resolve().parents[2]
LOGS = sorted(p for p in (ROOT / "sample_logs").rglob("*.log"))

# What each launcher or collector puts before every line (launchers-and-crashes.md, part A).
PREFIXES = {
    "pdsh": "worker-0: ",
    "pdsh-ip": "10.0.0.1: ",
    "srun": " 0: ",
    "journald": "Sep 12 02:00:00 node01 python3[4242]: ",
    "rsyslog": "Sep  2 02:00:00 node01 python3[4242]: ",
    "stdout": "stdout: ",
    "kubectl-timestamps": "2025-09-12T02:00:00.123456789Z ",
    "kubectl-prefix": "[pod/train-worker-0/pytorch] ",
    "compose": "trainer-1  | ",
    "mpi": "[1,0]<stdout>:",
    "markdown-quote": "> ",
    "cri": "2025-09-12T02:00:00.123456789Z stdout F ",
    # stacks of two, outermost first
    "kubectl-prefix+timestamps": "[pod/train-worker-0/pytorch] 2025-09-12T02:00:00.123456789Z ",
    "srun+pdsh": " 1: gpu-a07: ",
    "journald+stdout": "Sep 12 02:00:00 node01 python3[4242]: stdout: ",
    "compose+timestamps": "trainer-1  | 2025-09-12T02:00:00.123Z ",
    "quote+srun": "> 3: ",
    # a paste indented as a code block, with a tab, or quoted as one (issue threads, docs)
    "indent": "    ",
    "tab": "\t",
    "quote+indent": ">     ",
}


# Whether a sample is a hard-wrapped paste, as the reader decides it: by lengths, then by which
# would-be continuations a format reads on their own (hardwrap.wrap_of).
READS_ALONE = ReadingPlan.of().parser().reads_alone


def wrap_of(log: Path) -> hardwrap.Wrap | hardwrap.RichRecords | None:
    return hardwrap.wrap_of(log.read_bytes(), READS_ALONE)


def judged(path: Path) -> tuple[str, int, set[str], list[str]]:
    """What must not change: the verdict, the records, the rules that spoke, and the columns a guess
    read (a record read in part, its memory on a line not joined to it, keeps its count)."""
    report = analyze([str(path)])
    guessed = sorted(f"{c['pattern']}:{c['column']}" for g in report.coverage.get("guessed", []) for c in g.get("columns") or [])
    return report.verdict, report.coverage["records"], {f.rule for f in report.findings}, guessed


@pytest.fixture(scope="module")
def bare() -> dict[Path, tuple[str, int, set[str]]]:
    return {log: judged(log) for log in LOGS}


# Known misses, each with its reason (sample_logs/threads/README.md): the relation must hold, it does not yet.
KNOWN_MISSES: dict[str, str] = {}


def _params(logs: list[Path]) -> list:
    out = []
    for log in logs:
        name = log.relative_to(ROOT / "sample_logs").as_posix()
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=KNOWN_MISSES[name])] if name in KNOWN_MISSES else []
        out.append(pytest.param(log, id=name, marks=marks))
    return out


@pytest.mark.parametrize("log", _params(LOGS))
def test_a_launcher_prefix_changes_nothing(tmp_path, bare, log):
    # (rich's RichHandler lays its records out over several lines itself: a launcher labels each)
    if isinstance(wrap_of(log), hardwrap.Wrap):
        pytest.skip(
            "a hard-wrapped paste: a launcher's prefix comes before the terminal wraps a line, so "
            "prefixing every wrapped piece makes a log no launcher writes (wrapping: the test below)"
        )
    # A launcher labels each line it relays, up to its `\n`: a progress bar's `\r` inside one is not a
    # line of its own to it (the pieces after it keep no label but the line's: unwrap.with_line_prefixes).
    lines = log.read_bytes().split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline that ends the file
    for name, prefix in PREFIXES.items():
        wrapped = tmp_path / f"{name}-{log.name}"
        wrapped.write_bytes(b"".join(prefix.encode() + line + b"\n" for line in lines))
        assert judged(wrapped) == bare[log], name


def _hard_wrapped(lines: list[str], width: int, padded: bool) -> str:
    """The lines as a terminal (blank-padded) or a log viewer (not padded) breaks them at `width`."""
    out = []
    for line in lines:
        pieces = [line[i : i + width] for i in range(0, len(line), width)] or [""]
        out += [p.ljust(width) if padded else p for p in pieces]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("log", _params(LOGS))
def test_hard_wrapping_changes_nothing(tmp_path, bare, log):
    """Pasted from a terminal or a viewer that breaks long lines at a fixed column: the lines are
    joined back (memlog/read/hardwrap.py). Widths are taken from the log's own line lengths (near its
    60th and 80th percentiles, at least 60 columns) so that many of its lines are cut; a width that
    is some line's own length is skipped (that line would look cut, and whether it is cannot be told
    when what follows it only ever follows it)."""
    wrap = wrap_of(log)
    if isinstance(wrap, hardwrap.RichRecords):
        pytest.skip("rich lays its records out at the console's width: a narrower terminal would have had rich wrap them narrower")
    if wrap is not None:
        pytest.skip("the fixture is itself a hard-wrapped paste")
    lines = log.read_text(errors="replace").splitlines()
    lengths = sorted(len(line) for line in lines)
    for share, padded in ((0.6, True), (0.8, False)):
        wanted = max(60, lengths[int(share * (len(lengths) - 1))])
        width = min((w for w in range(60, lengths[-1]) if w not in lengths), key=lambda w: abs(w - wanted), default=None)
        if width is None:
            continue
        if sum(length > width for length in lengths) < 3:
            continue  # fewer than three cut lines do not show a wrap (hardwrap.MIN_CUTS)
        if padded and any(line[i - 1].isspace() for line in lines for i in range(width, len(line), width)):
            continue  # a padded terminal line cut on a blank cannot be told from padding (hardwrap.py)
        wrapped = tmp_path / f"{'padded' if padded else 'cut'}-{width}-{log.name}"
        wrapped.write_text(_hard_wrapped(lines, width, padded))
        assert judged(wrapped) == bare[log], (width, padded)
