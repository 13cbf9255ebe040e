"""Output safety: nothing from a log (or a file name) acts on the reader's terminal, CI runner or
issue tracker, in any output mode. The modes are read from the CLI at run time, so a mode added
later is covered without touching this file.

Unsafe here means: C0 controls other than tab and newline (ESC starts every CSI/OSC/DCS
sequence: colours, cursor moves, clear screen, window titles, hyperlinks, clipboard writes),
DEL, C1 controls (8-bit CSI/OSC), the Unicode line/paragraph separators, and the bidi
embeddings, overrides and isolates of Trojan Source. memlog's own colours (SGR, with
FORCE_COLOR) are the one exception.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from memlog.cli import app
from tests.synthetic import torchtitan_lines

runner = CliRunner()

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
OWN_COLOUR = re.compile(r"\x1b\[[0-9;]*m")

# What a hostile or merely broken log can hold.
PAYLOADS = (
    "\x1b]0;pwned\x07",  # OSC: set the window title
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: write the clipboard
    "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\",  # OSC 8 hyperlink, ST-terminated
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x1b[10;10H\x1b[3A\x1b[2K",  # cursor moves, erase line
    "\x1b[5;7;8m",  # blink, reverse, conceal
    "\x1bP+q544e\x1b\\",  # DCS
    "\x1b]0;unterminated",  # OSC with no terminator
    "\x9b2J\x9d0;pwned\x9c",  # 8-bit CSI and OSC ... ST
    "\u202e\u2066\u202a",  # bidi override, isolate, embedding
    "\x08\x08\x08\x07\x7f\x0b\x0c",  # backspaces, bell, DEL, VT, FF
    "\u2028",  # line separator
)
PAYLOAD = "".join(PAYLOADS)
# Markup and CI syntax that must stay text: HTML, table pipes, mentions, workflow commands.
MARKUP = "<img src=x onerror=alert(1)> | `tick` @everyone #1 ::add-mask::secret ::stop-commands::tok"


def option_choices(command: str, option: str) -> list[str]:
    """The values a CLI option accepts, as the CLI declares them now."""
    click_command = typer.main.get_command(app).commands[command]
    param = next(p for p in click_command.params if p.name == option)
    choices = getattr(getattr(param, "type", None), "choices", None)
    if choices is None:
        choices = list(param.type_descriptor.annotation)
    return [str(getattr(c, "value", c)) for c in choices]


OUTPUTS = option_choices("analyze", "output")
SERIES_OUTPUTS = [o for o in option_choices("series", "output") if o != "parquet"]  # parquet is binary


def hostile_log(path: Path) -> Path:
    """A leaking two-rank torchtitan run ending in an OOM, with escape sequences and markup where
    the report quotes the log: step lines (evidence excerpts), the capacity line (device name) and
    the OOM message (event text), plus noise lines that are only read."""
    lines = torchtitan_lines({0: [20 + 2 * i for i in range(14)], 1: [21 + 2 * i for i in range(14)]}, capacity=79.11)
    out = []
    for line in lines:
        if "capacity:" in line:
            line = line.replace("NVIDIA H100", f"NVIDIA {PAYLOAD}{MARKUP} H100")
        elif "step:" in line:
            line += f"  {PAYLOAD}{MARKUP}"
        out.append(line)
        out.append(f"[rank0]:[titan] 2025-06-01 08:00:00,000 - root - WARNING - {PAYLOAD}{MARKUP}")
    out.append(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
        f"capacity of 79.18 GiB of which 59.62 MiB is free. {PAYLOAD}{MARKUP}"
    )
    data = "\n".join(out).encode() + b"\n" + b"raw 8-bit CSI \x9b2J and OSC \x9d0;x\x9c\n"
    path.write_bytes(data)
    return path


@pytest.fixture
def hostile(tmp_path) -> Path:
    return hostile_log(tmp_path / "hostile.log")


@pytest.fixture
def hostile_name(tmp_path) -> Path:
    """The file name itself is hostile (ESC, BEL and bidi are legal in Linux file names)."""
    return hostile_log(tmp_path / "run\x1b]0;pwned\x07\x1b[2J\u202eexe.log")


def run(*args: str, env: dict | None = None):
    result = runner.invoke(app, [*map(str, args)], env={"NO_COLOR": None, "FORCE_COLOR": None, **(env or {})})
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr, result.stdout[-2000:])
    return result


def assert_inert(text: str, where: str) -> None:
    bad = UNSAFE.search(text)
    assert bad is None, f"{where}: {bad.group()!r} at {bad.start()}: {text[max(0, bad.start() - 80) : bad.start() + 40]!r}"
    for line in text.splitlines():
        stripped = line.lstrip()
        assert not stripped.startswith(("::add-mask", "::stop-commands")), f"{where}: workflow command from the log: {line!r}"


def assert_valid(output: str, text: str) -> None:
    """The structural checks a consumer of each mode relies on."""
    if output in ("json", "sarif"):
        json.loads(text)
    elif output == "junit":
        ET.fromstring(text.encode())
    elif output == "html":
        import html5lib

        html5lib.HTMLParser(strict=True).parse(text)
        assert "<script" not in text
    elif output == "github":
        for line in text.splitlines():
            if line.startswith("::"):
                assert re.match(r"::(error|warning|notice)( [^:]*)?::", line), line


def test_the_cli_offers_the_modes_we_expect_at_least():
    assert {"text", "json"} <= set(OUTPUTS)


@pytest.mark.parametrize("output", OUTPUTS)
def test_log_content_never_reaches_the_output_raw(hostile, output, tmp_path):
    summary = tmp_path / "step_summary.md"
    result = run("analyze", hostile, "-o", output, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.stdout.strip()
    assert_inert(result.stdout, f"-o {output} stdout")
    assert_inert(result.stderr, f"-o {output} stderr")
    assert_valid(output, result.stdout)
    if summary.exists():
        assert_inert(summary.read_text(encoding="utf-8"), "GITHUB_STEP_SUMMARY")


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_hostile_file_name_never_reaches_the_output_raw(hostile_name, output, tmp_path):
    summary = tmp_path / "step_summary.md"
    result = run("analyze", hostile_name, "-o", output, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert_inert(result.stdout, f"-o {output} stdout")
    assert_inert(result.stderr, f"-o {output} stderr")
    assert_valid(output, result.stdout)
    if summary.exists():
        assert_inert(summary.read_text(encoding="utf-8"), "GITHUB_STEP_SUMMARY")


def test_text_with_colour_has_only_memlog_own_colours(hostile):
    result = run("analyze", hostile, env={"FORCE_COLOR": "1"})
    assert OWN_COLOUR.search(result.stdout), "FORCE_COLOR should colour the text output"
    assert "\x1b[5;7;8m" not in result.stdout  # the log's blink/reverse/conceal
    assert_inert(OWN_COLOUR.sub("", result.stdout), "coloured text")


def strings_in(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings_in(k), *strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def test_json_values_carry_no_escape_from_the_log(hostile):
    """Not only the JSON text: a consumer that prints a value (`jq -r`) gets inert text too."""
    report = json.loads(run("analyze", hostile, "-o", "json").stdout)
    values = strings_in(report)
    assert any("H100" in v for v in values) or any("OutOfMemory" in v for v in values), "log text should be quoted"
    for value in values:
        assert_inert(value, "JSON value")


def test_json_keeps_a_hostile_file_name_exact_but_escaped(hostile_name):
    text = run("analyze", hostile_name, "-o", "json").stdout
    assert "\\u001b" in text and "\\u202e" in text  # escaped in the JSON text ...
    report = json.loads(text)
    assert report["coverage"]["sources"][0]["name"] == str(hostile_name)  # ... and exact once decoded


@pytest.mark.parametrize("output", SERIES_OUTPUTS)
def test_series_output_is_inert(hostile_name, output):
    result = run("series", hostile_name, "-o", output)
    assert_inert(result.stdout, f"series -o {output}")


def test_errors_and_warnings_on_stderr_are_inert(tmp_path):
    missing = tmp_path / "gone\x1b]0;pwned\x07\u202e.log"
    result = runner.invoke(app, ["analyze", str(missing)])
    assert result.exit_code == 2
    assert_inert(result.stderr, "error line")
    assert "gone" in result.stderr and "no such file" in result.stderr
    damaged = hostile_log(tmp_path / "bad\x1b[2J\u202e.log")
    damaged.write_bytes(damaged.read_bytes() + b"\xff\xfe undecodable")
    result = run("analyze", damaged)
    assert "undecodable byte(s) replaced" in result.stderr
    assert_inert(result.stderr, "warning line")


def cli_has(*path: str) -> bool:
    group = typer.main.get_command(app)
    for name in path:
        commands = getattr(group, "commands", {})
        if name not in commands:
            return False
        group = commands[name]
    return True


@pytest.mark.parametrize("command", [("plot",), ("formats", "check")], ids=" ".join)
def test_other_commands_that_quote_the_log_are_inert(hostile_name, command):
    """`plot` titles charts with file and worker names; `formats check` quotes near-miss lines."""
    if not cli_has(*command):
        pytest.skip(f"this CLI has no `{' '.join(command)}`")
    result = runner.invoke(app, [*command, str(hostile_name)], env={"NO_COLOR": None, "FORCE_COLOR": None})
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    assert result.stdout.strip()
    assert_inert(result.stdout, " ".join(command))
    assert_inert(result.stderr, " ".join(command) + " stderr")


@pytest.mark.parametrize("loss", ["-100000000000000000000.0", "1e+300"])
def test_charts_print_nothing_of_their_own(tmp_path, loss):
    """Found by scripts/fuzz.py: one huge loss reading made plotext print a coloured note of its
    own to stderr ("values ... too close together"), ignoring NO_COLOR. A chart returns text only."""
    lines = torchtitan_lines({0: [30.0, 30.5]}, capacity=79.11)
    lines[1] = re.sub(r"loss: +[\d.]+", f"loss: {loss}", lines[1])
    path = tmp_path / "huge_loss.log"
    path.write_text("\n".join(lines[:2]) + "\n")
    result = run("analyze", path, "--chart", env={"NO_COLOR": "1"})
    assert "plotext" not in result.stderr
    assert_inert(result.stdout, "text with chart")
    assert_inert(result.stderr, "stderr")


def test_no_workflow_command_survives_in_text_json_github_or_stderr(tmp_path):
    """An actor named like a workflow command, in a file named like one: no output line may start
    (after blanks) with `::` except memlog's own annotations, and `##[` never appears raw."""
    import json
    import re
    import subprocess
    import sys

    from memlog.render.safety import no_workflow_commands

    assert no_workflow_commands("a\n  ::add-mask::x ##[error]y") == "a\n  : :add-mask::x # #[error]y"
    name = tmp_path / "::warning::run ##[error]x.log"
    name.write_text(
        "".join(
            f"(WorkerDict ##[error]x ::add-mask::secret pid=4242) step:{i} - actor/pg_loss:0.5 - perf/max_memory_allocated_gb:{30 + 0.001 * i:.3f}\n"
            for i in range(1, 30)
        )
    )
    for output in ("text", "json", "github", "markdown"):
        for width in ("60", "200"):
            result = subprocess.run(
                [sys.executable, "-m", "memlog", "analyze", str(name), "-o", output],
                capture_output=True,
                text=True,
                env={"COLUMNS": width, "PATH": "/usr/bin:/bin"},
            )
            assert result.returncode in (0, 1), result.stderr
            for line in (result.stdout + result.stderr).splitlines():
                assert "##[" not in line, (output, line)
                if re.match(r"\s*::", line):
                    assert output == "github" and re.match(r"::(error|warning|notice) ", line), (output, line)
            if output == "json":
                assert "##[error]x" in json.dumps(json.loads(result.stdout))  # the data itself is unchanged


def test_a_file_name_that_is_not_utf8_gives_valid_documents_on_a_strict_stdout(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path as P

    log = P(__file__).resolve().parents[2] / "sample_logs" / "torchtitan" / "fr1_pp2_ep2_leak_oom.log"
    name = os.path.join(os.fsencode(tmp_path), b"run\xff\xfe.log")
    with open(name, "wb") as out:
        out.write(log.read_bytes())
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    for output in ("text", "json", "sarif", "junit", "markdown", "github", "html"):
        result = subprocess.run([os.fsencode(sys.executable), b"-m", b"memlog", b"analyze", name, b"-o", output.encode()], capture_output=True, env=env)
        assert result.returncode == 1, (output, result.stderr)
        text = result.stdout.decode("utf-8")  # strictly valid UTF-8
        assert "\ufffd" in text or output == "github", output


def hostile_spec_folder(tmp_path: Path) -> Path:
    """A user format spec (--formats-dir) whose name and title are hostile: escapes, line breaks
    that would start a workflow command, markdown and mentions."""
    import yaml

    folder = tmp_path / "formats"
    folder.mkdir()
    evil = f"evil{PAYLOAD}\n::add-mask::secret\r\n##[error]boom {MARKUP} GH-12 [x](javascript:alert(1))"
    spec = {
        "name": evil,
        "title": "Title " + evil,
        "records": [{"name": "r", "literal": "train_step=", "regex": r"^train_step=(?P<step>\d+) mem=(?P<mem_allocated_gib>\d+(?:\.\d+)?)GiB"}],
    }
    (folder / "evil.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return folder


def test_formats_list_and_show_escape_a_hostile_user_spec(tmp_path):
    from memlog.parse.catalog import load_specs

    folder = hostile_spec_folder(tmp_path)
    listed = run("formats", "list", "--formats-dir", folder)
    assert_inert(listed.stdout, "formats list")
    assert "##[" not in listed.stdout
    assert len(listed.stdout.splitlines()) == len(load_specs([folder]))  # one line per spec
    name = next(n for n in load_specs([folder]) if n.startswith("evil"))
    shown = run("formats", "show", name, "--formats-dir", folder)
    assert_inert(shown.stdout, "formats show")
    assert "##[" not in shown.stdout


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_hostile_spec_name_is_inert_in_every_report(tmp_path, output):
    folder = hostile_spec_folder(tmp_path)
    log = tmp_path / "run.log"
    log.write_text("".join(f"train_step={i} mem={30 + 0.01 * (i % 3):.2f}GiB\n" for i in range(1, 30)))
    result = run("analyze", log, "--formats-dir", folder, "-o", output)
    assert_inert(result.stdout, output)
    assert "##[" not in result.stdout
    assert_valid(output, result.stdout)
