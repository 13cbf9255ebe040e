"""Nothing memlog opens or calls can keep it waiting forever (issue 40): devices and other special
files are refused when opened, a FIFO nobody writes is refused once FIFO_WAIT_S has passed (0 here,
so no test waits on the clock), scan skips special files in the folders it walks and reads a link
loop as a run that cannot be read, and `scan --ray ADDRESS` with nothing listening is one line.

A case that would hang the old code runs where it can be stopped: a child process (killed with its
worker processes when a generous timeout passes), or a thread that the test unblocks and fails."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.base import opening
from memlog.base.errors import MemlogError
from memlog.cli import app
from tests.synthetic import torchtitan_lines

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
GUARD_S = 120  # only reached by code that hangs: a pass takes a second


def flat_log(path: Path) -> Path:
    path.write_text("\n".join(torchtitan_lines({0: [30.0 + 0.01 * (i % 3) for i in range(12)]}, capacity=79.11)) + "\n")
    return path


def run_child(*args: str) -> subprocess.CompletedProcess:
    """`memlog ARGS` in a child process group, killed whole (scan's workers too) if it hangs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlog", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"memlog {' '.join(args)} still running after {GUARD_S} s")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def one_error_line(returncode: int, stderr: str) -> str:
    assert returncode == 2, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memlog: error: "), stderr
    return lines[0]


def invoke_unblocking(args: list[str], fifo: Path):
    """`memlog ARGS` in this process on a thread; if it is still blocked on `fifo` the test opens
    and closes the FIFO's write end, which lets a blocked open return, and fails."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", runner.invoke(app, args)), daemon=True)
    thread.start()
    thread.join(GUARD_S)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"memlog {' '.join(args)} blocked on a FIFO nobody writes")
    return box["result"]


@pytest.fixture
def no_fifo_wait(monkeypatch):
    monkeypatch.setattr(opening, "FIFO_WAIT_S", 0.0)


def test_analyze_refuses_dev_zero_at_open():
    proc = run_child("analyze", "/dev/zero")
    assert one_error_line(proc.returncode, proc.stderr) == "memlog: error: /dev/zero: is a device, not a file memlog reads"


def test_analyze_refuses_a_fifo_nobody_writes(tmp_path, no_fifo_wait):
    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)
    result = invoke_unblocking(["analyze", str(fifo)], fifo)
    line = one_error_line(result.exit_code, result.stderr)
    assert line == f"memlog: error: {fifo}: a FIFO nobody wrote to within 0 s"


def test_a_fifo_with_a_writer_is_still_read(tmp_path, no_fifo_wait):
    """Process substitution and `cat log > fifo`: data waiting in the FIFO is read, whatever the wait."""
    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)
    keep_open = os.open(fifo, os.O_RDWR)  # a writer (Linux lets O_RDWR open a FIFO at once)
    try:
        os.write(keep_open, flat_log(tmp_path / "flat.log").read_bytes())
        handle = opening.open_bounded(fifo)
    finally:
        os.close(keep_open)  # the last writer leaves: the reader sees the end after the data
    with handle:
        assert handle.read().count(b"step:") == 12


def test_config_naming_a_fifo_nobody_writes(tmp_path, no_fifo_wait):
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    result = invoke_unblocking(["analyze", "--config", str(fifo), str(flat_log(tmp_path / "flat.log"))], fifo)
    assert one_error_line(result.exit_code, result.stderr) == f"memlog: error: {fifo}: a FIFO nobody wrote to within 0 s"


def test_config_naming_a_device_is_refused_unread(tmp_path):
    proc = run_child("analyze", "--config", "/dev/zero", str(flat_log(tmp_path / "flat.log")))
    assert one_error_line(proc.returncode, proc.stderr) == "memlog: error: /dev/zero: is a device, not a file memlog reads"


def test_scan_skips_fifos_and_links_to_devices_in_a_folder(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkfifo(runs / "stuck.log")
    (runs / "zeros.log").symlink_to("/dev/zero")
    flat_log(runs / "flat.log")
    proc = run_child("scan", str(runs), "-o", "csv", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert [row["run"] for row in csv.DictReader(io.StringIO(proc.stdout))] == ["flat.log"]


def test_scan_of_a_folder_of_special_files_only_is_one_line(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    os.mkfifo(runs / "stuck.log")
    (runs / "zeros.log").symlink_to("/dev/zero")
    proc = run_child("scan", str(runs))
    assert one_error_line(proc.returncode, proc.stderr) == f"memlog: error: no runs under {runs} (no log files)"


def test_scan_over_a_symlink_loop_is_a_run_that_cannot_be_read(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "loop.log").symlink_to("loop.log")
    result = runner.invoke(app, ["scan", str(runs), "--jobs", "1"])
    line = one_error_line(result.exit_code, result.stderr)
    assert "loop.log: cannot open (Too many levels of symbolic links)" in line
    flat_log(runs / "flat.log")
    result = runner.invoke(app, ["scan", str(runs), "--jobs", "1", "-o", "csv"])
    assert result.exit_code == 0, result.stderr
    rows = {row["run"]: row for row in csv.DictReader(io.StringIO(result.stdout))}
    assert set(rows) == {"flat.log", "loop.log"} and "Too many levels" in rows["loop.log"]["error"]


class _NoRay:
    """A stand-in for the ray module: connecting must never get as far as ray.init."""

    def __init__(self):
        self.init_called = False

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        self.init_called = True


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:  # bound, never listening: connecting is refused at once
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}"])
def test_ray_address_with_nothing_listening_is_one_line(form):
    from memlog.scan import on_ray

    address = form.format(port=_closed_port())
    fake = _NoRay()
    with pytest.raises(MemlogError) as raised:
        on_ray._connect(fake, address)
    assert not fake.init_called
    assert str(raised.value).startswith(f"cannot connect to Ray at {address}: nothing accepts a connection at 127.0.0.1:")
    assert "\n" not in str(raised.value)


def test_ray_auto_reads_the_address_a_head_left(monkeypatch, tmp_path):
    from memlog.scan import on_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    current = tmp_path / "ray_current_cluster"
    current.write_text(f"127.0.0.1:{_closed_port()}\n")
    monkeypatch.setattr(on_ray, "RAY_CURRENT_CLUSTER", str(current))
    with pytest.raises(MemlogError, match="cannot connect to Ray at auto: nothing accepts"):
        on_ray._connect(_NoRay(), "auto")
    current.unlink()  # no head left an address: ray.init says so itself, at once
    fake = _NoRay()
    on_ray._connect(fake, "auto")
    assert fake.init_called
