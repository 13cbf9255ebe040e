"""What every format spec shares: each embedded sample line parses to the values it documents, every
pattern is exercised, invalid specs are rejected with a reason (block parsers and continuations
included), and `memlog formats check` explains what matched and what nearly did."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from memlog.base.errors import FormatSpecError
from memlog.cli import app
from memlog.engine.api import parse_sources, select_specs
from memlog.parse.catalog import load_specs
from memlog.parse.chunks import ChunkParser, entry_sample_mismatches, sample_mismatches
from memlog.parse.formats import load_spec
from tests.logwriters.deepspeed import see_memory_usage

SPECS = load_specs()
SAMPLES = [(name, i) for name, spec in SPECS.items() for i in range(len(spec.samples))]
ENTRIES = [(name, pattern.name) for name, spec in SPECS.items() for pattern in spec.patterns if pattern.samples]
runner = CliRunner()


@pytest.mark.parametrize(("name", "index"), SAMPLES, ids=[f"{n}-{i + 1}" for n, i in SAMPLES])
def test_spec_sample_parses_to_documented_values(name, index):
    spec = SPECS[name]
    single = type(spec)(**{**spec.__dict__, "samples": (spec.samples[index],)})
    assert sample_mismatches(single, [s for s in SPECS.values() if s is not spec]) == []


@pytest.mark.parametrize(("name", "entry"), ENTRIES, ids=[f"{n}/{e}" for n, e in ENTRIES])
def test_an_entrys_own_sample_yields_its_event(name, entry):
    spec = SPECS[name]
    assert entry_sample_mismatches(spec, [s for s in SPECS.values() if s is not spec], only=entry) == []


def test_every_spec_has_samples():
    for spec in SPECS.values():
        assert spec.samples or all(p.samples for p in spec.patterns), f"{spec.name} has no samples"


def test_every_entry_of_the_crash_vocabulary_carries_its_sample():
    """parsers/crashes.yaml is the vocabulary users extend: an entry without a sample is refused here."""
    assert all(p.samples for p in SPECS["crashes"].patterns), [p.name for p in SPECS["crashes"].patterns if not p.samples]


def test_a_wrong_entry_sample_is_reported(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nevents:\n  - {name: e, event: oom, literal: 'out of mem', regex: 'out of mem', sample: 'no such words'}\n")
    assert entry_sample_mismatches(load_spec(bad)) == ["bad/e: its sample yields no oom: 'no such words'"]


def test_every_pattern_is_matched_by_a_sample_of_its_spec():
    """A pattern no sample exercises could stop matching unnoticed."""
    unexercised = []
    for spec in SPECS.values():
        matched = set()

        def observe(_unwrapped, observed, own=spec):
            matched.update(pattern.name for s, pattern, hits in observed if s is own and hits.height)

        parser = ChunkParser(list(SPECS.values()), observe)
        for line in [s.get("line", "") for s in spec.samples] + [line for p in spec.patterns for line in p.samples]:
            texts = [piece for physical in line.split("\n") for piece in physical.split("\r")]
            parser(pl.DataFrame({"line_no": list(range(1, len(texts) + 1)), "text": texts}))
        unexercised += [f"{spec.name}/{p.name}" for p in spec.patterns if p.name not in matched]
    assert unexercised == []


def test_a_wrong_sample_expectation_is_reported(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: toy\nrecords:\n  - name: s\n    literal: 'it='\n    regex: 'it=(?P<step>\\d+) loss=(?P<loss>[\\d.]+)'\n"
        "samples:\n  - line: 'it=3 loss=1.5'\n    record: {step: 3, loss: 2.5}\n"
    )
    problems = sample_mismatches(load_spec(bad))
    assert problems == ["toy sample 1: loss = 1.5, expected 2.5"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<step>\\d+'\n", "invalid regex"),
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<step>\\d+) (?P<lossy>\\d+)'\n", "not canonical columns"),
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<loss>\\d+)'\n", "needs a (?P<step>...) group, or `inherit_step: true`"),
        ("name: x\nevents:\n  - name: e\n    literal: a\n    regex: 'a'\n", "needs `event:`"),
        ("- just a list\n", "is a mapping"),
        ("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?<=a)(?P<step>\\d+)'\n", "invalid regex"),
    ],
)
def test_invalid_specs_are_rejected_with_a_reason(tmp_path: Path, body, message):
    path = tmp_path / "x.yaml"
    path.write_text(body)
    with pytest.raises(FormatSpecError, match=re.escape(message)):
        load_spec(path)


def test_ordinal_step_needs_inherit_step(tmp_path):
    spec = tmp_path / "x.yaml"
    spec.write_text("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: 'a(?P<loss>\\d+)'\n    ordinal_step: true\n")
    with pytest.raises(FormatSpecError, match="needs a"):
        load_spec(spec)
    spec.write_text("name: x\nrecords:\n  - name: s\n    literal: a\n    regex: '(?P<step>\\d+)a(?P<loss>\\d+)'\n    ordinal_step: true\n")
    with pytest.raises(FormatSpecError, match="`ordinal_step: true` needs `inherit_step: true`"):
        load_spec(spec)


def test_a_sample_marked_nothing_fails_when_something_matches(tmp_path):
    spec = tmp_path / "x.yaml"
    spec.write_text("name: x\nrecords:\n  - name: s\n    literal: 'it='\n    regex: 'it=(?P<step>\\d+)'\nsamples:\n  - line: 'it=3'\n    nothing: true\n")
    assert sample_mismatches(load_spec(spec)) == ["x sample 1: expected nothing from 'it=3', got 1 records and 0 events"]


# --------------------------------------------------------------------------
# the spec keys of multi-line formats
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"x.yaml": "name: x\nblock_parser: missing.py\n"}, "no such Python file in"),
        ({"x.yaml": "name: x\nblock_parser: {options: 1}\n"}, "give the module file"),
        ({"x.yaml": "name: x\nblock_parser: b.py\n", "b.py": "def create(options):\n    raise ValueError('boom')\n"}, "cannot load (ValueError: boom)"),
        (
            {
                "x.yaml": "name: x\nblock_parser: {module: b.py, metrics: {perf/x: host_gib}}\n",
                "b.py": "from pathlib import Path\nimport importlib.util\n"
                "spec = importlib.util.spec_from_file_location('e', Path(__file__).parent / 'easyr1_blocks.py')\n"
                "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\ncreate = mod.create\n",
                "easyr1_blocks.py": None,
            },
            "columns ['host_gib'] are not canonical",
        ),
        (
            {"x.yaml": "name: x\nevents:\n  - {name: e, event: oom, literal: a, regex: a, continuation: {detail: t}}\n"},
            "`continuation` needs either `regex:` (table rows) or `ends: outdented`",
        ),
        (
            {"x.yaml": "name: x\nevents:\n  - {name: e, event: oom, literal: a, regex: a, continuation: {detail: t, regex: x, ends: outdented}}\n"},
            "`continuation` needs either `regex:` (table rows) or `ends: outdented`",
        ),
        ({"x.yaml": "name: x\nevents:\n  - {name: e, event: oom, literal: a, regex: a, continuation: {regex: x}}\n"}, "`continuation` needs `detail:`"),
        (
            {"x.yaml": "name: x\nevents:\n  - {name: e, event: oom, literal: a, regex: a, continuation: {detail: t, regex: '(?<=x)y'}}\n"},
            "continuation: invalid",
        ),
    ],
)
def test_invalid_multiline_keys_are_rejected_with_a_reason(tmp_path, files, message):
    from memlog.base.errors import FormatSpecError
    from memlog.parse.formats import builtin_dir, load_spec

    for name, body in files.items():
        (tmp_path / name).write_text(body if body is not None else (builtin_dir() / name).read_text())
    with pytest.raises(FormatSpecError, match=re.escape(message)):
        load_spec(tmp_path / "x.yaml", plugins=True)


def test_a_users_block_parser_runs_from_a_trusted_plugins_folder(tmp_path):
    """A user format can bring its own block parser, from a folder trusted with --plugins-dir."""
    from memlog.parse.formats import builtin_dir

    (tmp_path / "yaml_blocks.py").write_text((builtin_dir() / "easyr1_blocks.py").read_text())
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nblock_parser: {module: yaml_blocks.py, start_literal: 'Iteration ', start: '^Iteration (\\d+)$', metrics: {mem/host: host_mem_used_gib}}\n"
    )
    log = tmp_path / "run.log"
    log.write_text("Iteration 1\nmem:\n  host: 10.5\nIteration 2\nmem:\n  host: 11.0\n")
    tables, _ = parse_sources([str(log)], select_specs(load_specs(plugin_dirs=[tmp_path]), "mine"))
    assert tables.records.select("step", "host_mem_used_gib").rows() == [(1, 10.5), (2, 11.0)]


@pytest.mark.parametrize(
    "log", ["easyr1/fr3_geometry3k_host_stairs_raykill.log", "threads/easyr1_260_vllm_sleep_wake_host_leak.log", "verl/ray_driver_mixed.log"]
)
def test_a_block_parser_may_return_dicts_or_a_frame(tmp_path, log):
    """feed() and finish() may return a list of record dicts or a polars frame of them
    (memlog/parse/multiline.py): the records are the same either way, on multi-worker Ray logs."""
    from memlog.parse.formats import builtin_dir

    (tmp_path / "yaml_blocks.py").write_text((builtin_dir() / "easyr1_blocks.py").read_text())
    (tmp_path / "as_dicts.py").write_text(
        "import importlib.util\nfrom pathlib import Path\n"
        "spec = importlib.util.spec_from_file_location('yaml_blocks_copy', Path(__file__).parent / 'yaml_blocks.py')\n"
        "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n\n"
        "def dicts(found):\n    return found if isinstance(found, list) else found.to_dicts()\n\n"
        "class AsDicts(module.YamlStepBlocks):\n"
        "    def feed(self, rows):\n        return dicts(super().feed(rows))\n\n"
        "    def finish(self):\n        return dicts(super().finish())\n\n"
        "def create(options):\n    return AsDicts(options)\n"
    )
    easyr1 = SPECS["easyr1"]
    (tmp_path / "easyr1.yaml").write_text("replaces: easyr1\n" + easyr1.path.read_text().replace("easyr1_blocks.py", "as_dicts.py"))
    path = str(Path(__file__).parents[2] / "sample_logs" / log)
    as_frames, _ = parse_sources([path], list(SPECS.values()))
    as_dicts, _ = parse_sources([path], list(load_specs(plugin_dirs=[tmp_path]).values()))
    assert as_frames.records.filter(pl.col("format").cast(pl.String) == "easyr1").height > 0
    assert as_dicts.records.equals(as_frames.records)


def test_a_user_spec_can_name_a_shipped_block_parser_without_trusting_anything(tmp_path):
    """`--formats-dir` and config folders run no code of their own, but reuse what memlog ships."""
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nblock_parser: {module: easyr1_blocks.py, start_literal: 'Iteration ', start: '^Iteration (\\d+)$', "
        "metrics: {mem/host: host_mem_used_gib}}\n"
    )
    log = tmp_path / "run.log"
    log.write_text("Iteration 1\nmem:\n  host: 10.5\nIteration 2\nmem:\n  host: 11.0\n")
    tables, _ = parse_sources([str(log)], select_specs(load_specs([tmp_path]), "mine"))
    assert tables.records.select("step", "host_mem_used_gib").rows() == [(1, 10.5), (2, 11.0)]


def test_block_metrics_at_any_depth_and_keys_holding_slashes_are_read(tmp_path):
    """easyr1_blocks reads only the key lines that may be a metric or a metric's parent: a metric
    two levels down, one whose key holds a `/`, one at the top, a deeper line under a metric's
    parent, and look-alike keys in other sections must still come out as the paths say."""
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nblock_parser: {module: easyr1_blocks.py, start_literal: 'Iteration ', start: '^Iteration (\\d+)$', "
        "metrics: {a/b/c: loss, a/x/y: grad_norm, z: lr, a/k: host_mem_used_gib}}\n"
    )
    log = tmp_path / "run.log"
    block = [
        "Iteration {i}",
        "a:",
        "  b:",
        "    c: {c}",
        "    deep:",
        "      c: 99",
        "  k: {k}",
        "  x/y: {xy}",
        "other:",
        "  c: 98",
        "  k: 97",
        "  x/y: 96",
        "z: {z}",
    ]
    log.write_text("".join(line.format(i=i, c=i + 0.5, k=i + 0.25, xy=i * 2, z=i / 10) + "\n" for i in (1, 2) for line in block))
    tables, _ = parse_sources([str(log)], select_specs(load_specs([tmp_path]), "mine"))
    assert tables.records.select("step", "loss", "host_mem_used_gib", "grad_norm", "lr").rows() == [(1, 1.5, 1.25, 2.0, 0.1), (2, 2.5, 2.25, 4.0, 0.2)]


# --------------------------------------------------------------------------
# memlog formats check
# --------------------------------------------------------------------------


def test_formats_check_counts_matches_and_explains_a_near_miss(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        "\n".join(
            [
                "[2023-11-07 01:55:23,714] [INFO] [timer.py:260:stop] epoch=0/micro_step=40/global_step=10, "
                "RunningAvgSamplesPerSec=25.0, CurrSamplesPerSec=25.7, MemAllocated=4.32GB, MaxMemAllocated=38.49GB",
                see_memory_usage(ma=14.23, max_ma=18.9, ca=16.5, max_ca=21),
                see_memory_usage(ma=14.23, max_ma=18.9, ca=16.5, max_ca=21).replace("CA 16.5 GB", "CA 16.5 GiB"),  # a near miss
                "{'loss': 1.2345, 'learning_rate': 1.9e-05, 'epoch': 0.01}",
            ]
        )
        + "\n"
    )
    result = runner.invoke(app, ["formats", "check", str(log)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "4 lines read" in out
    assert "deepspeed: 1 step record, 0 events" in out
    assert "record see-memory-usage" in out and "1 line matched, 1 near miss" in out
    assert "record throughput-timer  " in out
    assert "line 3: 'MA 14.23 GB" in out
    # The partial match ends right after "CA 16.5 G", where the pattern wants "B" and the line has "iB".
    assert "matches up to column 52" in out and "then comes 'iB " in out
    assert "no line matched: " in out and "torchtitan" in out.split("no line matched: ")[1]


def test_formats_check_of_a_missing_file_is_one_error_line(tmp_path):
    result = runner.invoke(app, ["formats", "check", str(tmp_path / "nope.log")])
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_where_it_stops_is_bounded_on_hostile_patterns():
    from memlog.engine.formatcheck import where_it_stops

    assert where_it_stops(r"(a+)+$", "a" * 40 + "b")[0] > 0
    assert where_it_stops(r"xyz", "abc") == (0, 0)
    assert where_it_stops(r"ab[c", "abd") == (2, 2)  # the unclosed class is skipped, "ab" matches
    # `^step: (?P<step>\d+) los` still matches "step: 12 los"; the final "s" is where it stops.
    assert where_it_stops(r"^step: (?P<step>\d+) loss", "step: 12 lost") == (24, 12)
