"""One output-safety layer for scan and compare too (issue 40): a file name that is not UTF-8 keeps
stdout valid UTF-8 in every mode, a Unicode blank (no-break space, ideographic space, the en/em
spaces, and what older .NET trims too: zero-width space, BOM) before `::add-mask::` or `::error::`
never puts a workflow command at the start of a line, and `-o github` starts with the verdict line
as analyze's does. The layer is memlog/render/safety.py; these drive it through each command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memlog.render.safety import no_workflow_commands, safe, safe_json
from tests import fleet_tree
from tests.synthetic import titan_log

REPO = Path(__file__).resolve().parents[2]
# What GitHub's runner (.NET) trims from a line before it looks for `::`: every Unicode blank, and
# in older .NET also these three.
TRIMMED = "".join(chr(c) for c in range(0x110000) if chr(c).isspace() and chr(c) not in "\n\r") + "\u180e\u200b\ufeff"
BLANKS = ["\u00a0", "\u3000", "\u2003", "\u202f", "\u205f", "\u1680", "\u200b", "\ufeff", " \u00a0\t"]
SCAN_MODES = ("text", "json", "markdown", "csv", "github")
COMPARE_MODES = ("text", "json", "markdown", "github")


def runner_reads_a_command(line: str) -> bool:
    return line.lstrip(TRIMMED).startswith("::")


def memlog(*args: bytes | str) -> subprocess.CompletedProcess:
    """memlog in a child whose stdout is strictly UTF-8: the bytes it writes are checked as they are."""
    argv = [os.fsencode(sys.executable), b"-m", b"memlog", *(os.fsencode(a) if isinstance(a, str) else a for a in args)]
    return subprocess.run(argv, capture_output=True, cwd=REPO, timeout=300, env={**os.environ, "PYTHONIOENCODING": "utf-8:strict", "COLUMNS": "200"})


@pytest.mark.parametrize("blank", BLANKS)
def test_safe_counts_unicode_blanks_as_blanks(blank):
    for command in ("::add-mask::secret", "::error::boom", "::stop-commands::tok"):
        for text in (blank + command, "first line\n" + blank + command, blank + blank + command):
            assert not any(runner_reads_a_command(line) for line in safe(text).splitlines()), repr(text)
            assert not any(runner_reads_a_command(line) for line in no_workflow_commands(text).splitlines())


def test_lone_surrogates_become_replacement_characters():
    name = os.fsdecode(b"run\xff.log")
    assert safe(name) == "run\ufffd.log"
    assert safe_json('"' + name + '"') == '"run\ufffd.log"'
    safe(name).encode("utf-8")  # strict: no error


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory) -> Path:
    """Runs whose names are not UTF-8 or start with a Unicode blank and a workflow command."""
    folder = tmp_path_factory.mktemp("odd")
    raw = [b"run\xff\xfe.log"] + [(blank + command + ".log").encode() for blank, command in zip(BLANKS, ["::add-mask::secret", "::error::boom"] * len(BLANKS))]
    for name in raw:
        titan_log(Path(os.fsdecode(os.path.join(os.fsencode(folder), name))), {0: fleet_tree.LEAK}, fleet_tree.STEPS)
    return folder


def check_lines(stdout: bytes, output: str) -> list[str]:
    text = stdout.decode("utf-8")  # strictly valid UTF-8
    lines = text.splitlines()
    for line in lines:
        if runner_reads_a_command(line):  # only memlog's own annotations, flush left
            assert output == "github" and re.match(r"::(error|warning|notice) ", line), (output, line)
    return lines


@pytest.mark.parametrize("output", SCAN_MODES)
def test_scan_output_is_utf8_and_starts_no_workflow_command(odd_names, output):
    result = memlog("scan", str(odd_names), "-o", output, "--jobs", "1")
    assert result.returncode == 1, result.stderr
    lines = check_lines(result.stdout, output)
    assert sum("\ufffd" in line for line in lines) >= 1
    if output == "github":
        assert lines[0] == f"memlog verdict: LEAK: {len(BLANKS) + 1} runs: {len(BLANKS) + 1} leak (memlog scan)"
    result.stderr.decode("utf-8")


@pytest.mark.parametrize("output", COMPARE_MODES)
def test_compare_output_is_utf8_and_starts_no_workflow_command(odd_names, output):
    base = os.path.join(os.fsencode(odd_names), b"run\xff\xfe.log")
    new = os.fsencode(odd_names / (BLANKS[0] + "::add-mask::secret.log"))
    result = memlog("compare", base, new, "-o", output)
    assert result.returncode == 0, result.stderr
    lines = check_lines(result.stdout, output)
    if output == "github":
        assert lines[0] == "memlog verdict: SAME: memory is the same within the thresholds (memlog compare)"
    else:
        assert "\ufffd" in "\n".join(lines)


def test_the_verdict_line_comes_first_for_every_command_in_github_mode(odd_names, tmp_path):
    log = odd_names / (BLANKS[1] + "::error::boom.log")
    firsts = [
        memlog(*args, "-o", "github").stdout.decode("utf-8").splitlines()[0]
        for args in (["analyze", str(log)], ["scan", str(log), "--jobs", "1"], ["compare", str(log), str(log)])
    ]
    assert all(first.startswith("memlog verdict: ") for first in firsts), firsts


def test_scan_of_nothing_readable_says_so_in_its_verdict_line(tmp_path):
    (tmp_path / "empty.log").write_text("")
    result = memlog("scan", str(tmp_path), "-o", "github", "--jobs", "1")
    assert result.returncode == 2
    assert result.stdout.decode().splitlines()[0] == "memlog verdict: UNREADABLE: 1 run: none judged; 1 could not be read (memlog scan)"
