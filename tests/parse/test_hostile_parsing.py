"""Hostile and broken input, the parsing stage (memlog/parse/): lines no format matches, lines of
concurrent ranks glued together, a step number that overflows, user format specs that are wrong
(each refused in one line naming the file), a regex that backtracks exponentially, and block
parsers: code runs only from a folder given as trusted (--plugins-dir). Shared helpers:
tests/hostile.py."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest

from memlog.parse.catalog import load_specs
from tests.hostile import CAPACITY_GIB, analyze, cannot_judge, flat_lines, report_of, run_measured, series_rows, tried_formats, write
from tests.synthetic import torchtitan_lines


@pytest.fixture
def flat_log(tmp_path) -> Path:
    return write(tmp_path / "flat.log", flat_lines())


def test_millions_of_lines_without_records(tmp_path):
    path = write(tmp_path / "noise.log", b"epoch 3 batch 17 data loader ok\n" * 2_000_000)
    assert cannot_judge(analyze(path)) == (
        f"memlog: error: no training-step records found in {path}: none of 2,000,000 lines matches a known format (tried: {tried_formats()})"
    )


def test_interleaved_partial_lines_from_concurrent_ranks(tmp_path):
    """Ranks writing to one file without line buffering glue half a line to another rank's line.
    No value may be credited to the wrong rank."""
    lines = torchtitan_lines({0: [30.0] * 12, 1: [40.0] * 12}, capacity=CAPACITY_GIB)
    damaged, glued = [], 0
    cuts = ("memory:", "loss:", "GiB")  # after a field name, mid-field, after a value
    for line in lines:
        if line.startswith("[rank1]") and "step:" in line and glued < len(cuts) and " 1  loss" not in line:
            # rank1's line stops mid-way, rank0's next line lands behind it, then rank1's rest.
            at = line.index(cuts[glued]) + (len(cuts[glued]) if cuts[glued] != "GiB" else -1)
            damaged.append(("head", line[:at]))
            damaged.append(("tail", line[at:]))
            glued += 1
        else:
            damaged.append(("whole", line))
    out, pending_tail = [], None
    for kind, text in damaged:
        if kind == "head":
            out.append(text)
        elif kind == "tail":
            pending_tail = text
        else:
            if pending_tail is not None and text.startswith("[rank0]") and out and not out[-1].startswith("[rank0]"):
                out[-1] += text
                out.append(pending_tail)
                pending_tail = None
            else:
                out.append(text)
    assert pending_tail is None and glued == 3
    path = write(tmp_path / "shared_stdout.log", out)
    result = analyze(path, "-o", "json")
    assert result.exit_code == 0 and result.stderr == ""
    report = report_of(result)
    assert report["verdict"] != "leak"
    rows = series_rows(path)
    by_rank = {r: [row for row in rows if row["rank"] == r] for r in (0, 1)}
    assert [row["step"] for row in by_rank[0]] == list(range(1, 13))  # every rank0 line recovered
    assert {row["mem_peak_reserved_gib"] for row in by_rank[0]} == {30.0}
    assert {row["mem_peak_reserved_gib"] for row in by_rank[1]} <= {40.0, None}


def test_step_number_that_overflows_is_not_credited_to_another_step(tmp_path, flat_log):
    lines = flat_lines()
    lines[4] = lines[4].replace("step:  4", "step: 99999999999999999999999").replace("30.01GiB", "77.00GiB")
    path = write(tmp_path / "overflow.log", lines)
    rows = series_rows(path)
    assert [r["step"] for r in rows] == [s for s in range(1, 13) if s != 4]
    assert 77.0 not in {r["mem_peak_reserved_gib"] for r in rows}


PAYLOAD = "from pathlib import Path\nPath({marker!r}).write_text('ran')\ndef create(options):\n    raise SystemExit\n"


def payload_spec(folder: Path, module: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write(folder / "mine.yaml", f"name: mine\nblock_parser: {{module: {module!r}}}\n")


@pytest.mark.parametrize("via", ["--config", "--formats-dir"])
def test_a_block_parser_beside_an_untrusted_spec_never_runs(tmp_path, flat_log, via):
    """A pull request's tree can hold a config and specs: analysing with them must not run its code."""
    marker = tmp_path / "pwned"
    formats = tmp_path / "formats"
    payload_spec(formats, "evil.py")
    write(formats / "evil.py", PAYLOAD.format(marker=str(marker)))
    if via == "--config":
        cfg = write(tmp_path / "memlog.yaml", "formats_dirs: [formats]\n")
        line = cannot_judge(analyze(flat_log, "--config", cfg))
    else:
        line = cannot_judge(analyze(flat_log, "--formats-dir", formats))
    assert "evil.py: not a block parser memlog ships" in line and "--plugins-dir" in line, line
    assert not marker.exists()


@pytest.mark.parametrize("module", ["../evil.py", "/tmp/evil.py", "sub/evil.py", "..", ".hidden.py"])
def test_a_block_parser_path_is_refused_even_from_a_trusted_folder(tmp_path, flat_log, module):
    marker = tmp_path / "pwned"
    write(tmp_path / "evil.py", PAYLOAD.format(marker=str(marker)))
    plugins = tmp_path / "plugins"
    payload_spec(plugins, module.replace("/tmp/evil.py", str(tmp_path / "evil.py")))
    line = cannot_judge(analyze(flat_log, "--plugins-dir", plugins))
    assert "`module` is a file name such as NAME.py, not a path" in line, line
    assert not marker.exists()


def test_a_symlink_out_of_the_trusted_folder_is_not_in_it(tmp_path, flat_log):
    marker = tmp_path / "pwned"
    outside = write(tmp_path / "outside.py", PAYLOAD.format(marker=str(marker)))
    plugins = tmp_path / "plugins"
    payload_spec(plugins, "linked.py")
    (plugins / "linked.py").symlink_to(outside)
    line = cannot_judge(analyze(flat_log, "--plugins-dir", plugins))
    assert "linked.py: no such Python file in" in line, line
    assert not marker.exists()


def test_a_trusted_plugin_folder_runs_its_parser(tmp_path, flat_log):
    """The opt-in works: --plugins-dir loads the folder's Python file (here it refuses to build)."""
    marker = tmp_path / "ran"
    plugins = tmp_path / "plugins"
    payload_spec(plugins, "mine.py")
    write(plugins / "mine.py", PAYLOAD.format(marker=str(marker)))
    line = cannot_judge(analyze(flat_log, "--plugins-dir", plugins))
    assert "mine.py: cannot load (SystemExit" in line, line
    assert marker.exists()


def spec_error(flat_log: Path, tmp_path: Path, text: str) -> tuple[str, Path]:
    formats = tmp_path / "formats"
    formats.mkdir(exist_ok=True)
    spec = write(formats / "mine.yaml", textwrap.dedent(text))
    return cannot_judge(analyze(flat_log, "--formats-dir", formats)), spec


GOOD_RECORD = r"""
      - name: r
        literal: "train_step="
        regex: '^train_step=(?P<step>\d+)'
"""


@pytest.mark.parametrize(
    ("regex", "why"),
    [
        (r"^train_step=(?P<step>\d+", "unclosed group"),
        (r"(?<=x)train_step=(?P<step>\d+)", "look-behind: not in Rust's regex"),
        (r"^train_step=(?P<step>\d+) (\1)", "backreference: not in Rust's regex"),
        (r"^train_step=(?P<step>\d+)(a{1000}){1000}", "compiles past the size limit"),
    ],
)
def test_spec_invalid_regex_names_the_file(tmp_path, flat_log, regex, why):
    text = f"""
    name: mine
    records:
      - name: r
        literal: "train_step="
        regex: '{regex}'
    """
    line, spec = spec_error(flat_log, tmp_path, text)
    assert re.fullmatch(r"memlog: error: mine\.yaml: records entry 'r': invalid regex \(.+\)", line), (why, line)


def test_spec_invalid_regex_among_good_ones_is_the_one_named(tmp_path, flat_log):
    """A spec's group names are read in one call for all its regexes:
    one that does not compile must still be named, not its neighbours or the batch (memlog/parse/regexes.py)."""
    text = f"""
    name: mine
    logger_prefixes: ['\\[\\d+\\] ']
    records:{GOOD_RECORD}
      - name: bad
        literal: "eval_step="
        regex: '^eval_step=(?P<step>\\d+'
        fields: ['loss=(?P<loss>[0-9.]+)']
    events:
      - name: o
        literal: "OOM"
        regex: 'OOM'
        event: oom
    """
    line, _ = spec_error(flat_log, tmp_path, text)
    assert re.fullmatch(r"memlog: error: mine\.yaml: records entry 'bad': invalid regex \(.+\)", line), line


def test_group_names_read_together_are_those_read_one_by_one():
    """memlog/parse/regexes.py reads the group names of a spec's or the wrappers' regexes in one call."""
    from memlog.parse import regexes
    from memlog.parse.wrappers import builtin_wrappers

    specs = load_specs().values()
    wrappers = builtin_wrappers().values()
    every = sorted(
        {r for spec in specs for p in spec.patterns for r in (p.regex, *p.fields)}
        | {p for spec in specs for p in spec.logger_prefixes}
        | {r for w in wrappers for r in (w.prefix, w.suffix, w.marker and w.marker["regex"]) if r}
    )
    one_by_one = {}
    for regex_ in every:
        regexes._GROUP_NAMES.clear()
        one_by_one[regex_] = regexes.group_names(regex_)
    regexes._GROUP_NAMES.clear()
    regexes.learn_group_names(every)
    assert {r: regexes._GROUP_NAMES[r] for r in every} == one_by_one
    assert any(one_by_one.values()) and not all(one_by_one.values())  # names read, and unnamed groups left out


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("records: {r: 1}", "{spec}: `records` must be a list"),
        ("records: [5]", "mine.yaml: each entry of `records` must be a mapping, got 5"),
        ("logger_prefixes: '^x'", "{spec}: `logger_prefixes` must be a list"),
        ("logger_prefixes: [5]", "{spec}: `logger_prefixes` must be a list of regexes"),
        ("logger_prefixes: ['(?P<ts>\\d+) ']" + GOOD_RECORD.replace("\n", "\n    ").rstrip(), None),
        ("logger_prefixes: ['([0-9']" + GOOD_RECORD.replace("\n", "\n    ").rstrip(), None),
        ("name: !!python/name:os.system", None),
    ],
)
def test_spec_wrong_shapes(tmp_path, flat_log, body, message):
    line, spec = spec_error(flat_log, tmp_path, ("name: mine\n" if not body.startswith("name:") else "") + body + "\n")
    if message is None:
        assert line.startswith((f"memlog: error: {spec.name}: logger prefix ", f"memlog: error: {spec}: cannot read format spec (")), line
    else:
        assert line == "memlog: error: " + message.format(spec=spec)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("fields", "'mfu=(?P<mfu_pct>\\d+)'", "`fields` must be a list of regexes (or of `{regex: ..., units: {...}}`)"),
        ("fields", "[{regex: 'mfu=(?P<mfu_pct>\\d+)'}]", "`fields` must be a list of regexes (or of `{regex: ..., units: {...}}`)"),
        ("units", "[GiB]", "`units` maps group names to units"),
        ("kind", "[train]", "`kind` must be a string"),
        ("inherit_step", "'yes'", "`inherit_step` must be true or false"),
    ],
)
def test_spec_wrong_field_types(tmp_path, flat_log, field, value, message):
    text = f"name: mine\nrecords:\n  - name: r\n    literal: 'train_step='\n    regex: '^train_step=(?P<step>\\d+)'\n    {field}: {value}\n"
    line, _ = spec_error(flat_log, tmp_path, text)
    assert line == f"memlog: error: mine.yaml: records entry 'r': {message}"


def test_spec_pathological_regex_runs_in_linear_time(tmp_path):
    """`(a+)+$` backtracks exponentially in Python's re on `aaaa...!`; polars' Rust regex is
    linear. 20,000 lines of 2,000 such characters must finish well inside the timeout."""
    formats = tmp_path / "formats"
    formats.mkdir()
    write(
        formats / "evil.yaml",
        "name: evil\nrecords:\n  - name: r\n    literal: ' a'\n    regex: '^(?P<step>\\d+) (a+)+$'\n",
    )
    path = tmp_path / "aaaa.log"
    with path.open("wb") as out:
        for i in range(20_000):
            out.write(b"%d " % i + b"a" * 2000 + b"!\n")
    started = time.monotonic()
    proc, _ = run_measured(str(path), "--formats-dir", str(formats), timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert "none of 20,000 lines matches a known format" in proc.stderr
    assert elapsed < 60, f"took {elapsed:.1f}s"
