"""`memlog compare BASE NEW` on pairs of runs written by tests.logwriters (tests/synthetic.py)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.compare.regression import VERDICTS
from tests.logwriters import deepspeed as ds
from tests.synthetic import torchtitan_lines

runner = CliRunner()
SCHEMA = json.loads(runner.invoke(app, ["schema", "--kind", "compare"]).stdout)  # the published contract
CAPACITY = 79.11


def noise(i: int) -> float:
    return 0.02 * ((i * 7919) % 13) / 13


def write_run(path, level: float = 30.0, *, ranks=(0, 1, 2, 3), n: int = 60, leak: float = 0.0, first_step: int = 1, loss=None):
    """Warmup (10 GiB below the plateau for 3 steps), then the plateau, rising `leak` GiB per step."""
    memory = {r: [(level - 10 if i < 3 else level + leak * (i - 3)) + noise(i + r) for i in range(n)] for r in ranks}
    losses = dict.fromkeys(ranks, loss) if loss is not None else None
    path.write_text("\n".join(torchtitan_lines(memory, capacity=CAPACITY, steps=list(range(first_step, first_step + n)), loss_by_rank=losses)) + "\n")
    return str(path)


def run(*args: str):
    result = runner.invoke(app, ["compare", *args])
    return result.exit_code, result.stdout, result.stderr


def as_json(base: str, new: str, *extra: str) -> tuple[int, dict]:
    code, out, err = run(base, new, "-o", "json", *extra)
    assert code in (0, 1), err
    document = json.loads(out)
    jsonschema.validate(document, SCHEMA)  # every JSON document these tests read keeps to the schema
    return code, document


@pytest.fixture
def base(tmp_path):
    return write_run(tmp_path / "base.log")


def test_equivalent_runs_are_the_same(tmp_path, base):
    code, doc = as_json(base, write_run(tmp_path / "new.log", 30.05))
    assert code == 0 and doc["verdict"] == "same" and doc["findings"] == []
    assert [p["worker"] for p in doc["pairs"]] == ["rank0", "rank1", "rank2", "rank3"]
    assert doc["loss"]["same_work"] is True


def test_a_leak_introduced_is_a_regression(tmp_path, base):
    code, doc = as_json(base, write_run(tmp_path / "new.log", leak=0.05))
    assert code == 1 and doc["verdict"] == "regression"
    new_leak = next(f for f in doc["findings"] if f["rule"] == "new-leak")
    assert new_leak["severity"] == "error" and new_leak["evidence"]["ranks"] == [0, 1, 2, 3]
    pair = doc["pairs"][0]
    assert pair["base"]["leaks"] is False and pair["new"]["leaks"] is True
    assert pair["base"]["steps_to_capacity"] is None and pair["new"]["steps_to_capacity"] > 0


def test_a_higher_plateau_is_a_regression_beyond_fail_on_increase(tmp_path, base):
    higher = write_run(tmp_path / "new.log", 32.0)  # +6.7%
    code, doc = as_json(base, higher)
    assert code == 1 and doc["verdict"] == "regression"
    level = next(f for f in doc["findings"] if f["rule"] == "level-increase")
    assert level["evidence"]["observed"]["change_gib"] == pytest.approx(2.0, abs=0.05)
    assert doc["pairs"][0]["diff"]["level_pct"] == pytest.approx(6.7, abs=0.2)
    code, doc = as_json(base, higher, "--fail-on-increase", "10")  # a threshold above the rise: the same
    assert code == 0 and doc["verdict"] == "same" and doc["thresholds"]["fail_on_increase_pct"] == 10
    config = tmp_path / "memlog.yaml"
    config.write_text("compare: {fail_on_increase_pct: 10}\n")
    assert as_json(base, higher, "--config", str(config))[0] == 0


def test_compare_thresholds_take_what_their_unit_allows(tmp_path, base):
    """compare's thresholds are checked as the rules' are (rulekit.resolve_thresholds): a count of 0
    common points or a negative percentage is one line, exit 2."""
    config = tmp_path / "memlog.yaml"
    for line, message in (
        ("min_common_points: 0", "compare: threshold min_common_points counts points: at least 1, got 0"),
        ("fail_on_increase_pct: -1", "compare: threshold fail_on_increase_pct must be at least 0, got -1"),
        ("bogus: 1", "compare: unknown threshold 'bogus'"),
    ):
        config.write_text(f"compare: {{{line}}}\n")
        code, out, err = run(base, base, "--config", str(config))
        assert code == 2 and out == "" and err.startswith(f"memlog: error: {message}") and err.count("\n") == 1, err


def test_a_lower_plateau_is_an_improvement(tmp_path, base):
    code, doc = as_json(base, write_run(tmp_path / "new.log", 27.0))
    assert code == 0 and doc["verdict"] == "improvement"
    assert {f["rule"] for f in doc["findings"]} >= {"level-decrease"}


def test_fewer_ranks_in_new_compares_the_common_ones_and_says_so(tmp_path, base):
    code, doc = as_json(base, write_run(tmp_path / "new.log", ranks=(0, 1)))
    assert code == 0 and doc["verdict"] == "same"
    assert [p["worker"] for p in doc["pairs"]] == ["rank0", "rank1"]
    missing = next(f for f in doc["findings"] if f["rule"] == "missing-workers")
    assert missing["evidence"]["observed"]["missing"] == ["rank2", "rank3"]


def test_different_step_ranges_are_compared_on_the_common_steps(tmp_path, base):
    longer = write_run(tmp_path / "new.log", n=200)
    code, doc = as_json(base, longer)
    assert code == 0 and doc["verdict"] == "same"
    assert doc["common_steps"] == [1, 60] and doc["new"]["steps"] == [1, 200]
    assert any("compared on steps 1-60" in note for note in doc["notes"])


def test_different_work_is_flagged_by_the_loss(tmp_path, base):
    code, doc = as_json(base, write_run(tmp_path / "new.log", loss=5.0))
    assert code == 0 and doc["loss"]["same_work"] is False
    assert any(f["rule"] == "loss-differs" for f in doc["findings"])


def test_runs_without_common_steps_cannot_be_aligned(tmp_path, base):
    later = write_run(tmp_path / "new.log", first_step=1000)
    code, out, err = run(base, later)
    assert code == 2 and out == ""
    assert err.startswith("memlog: error: cannot compare the runs: no common steps") and err.count("\n") == 1


def test_runs_without_a_common_rank_cannot_be_aligned(tmp_path, base):
    other = write_run(tmp_path / "new.log", ranks=(4, 5, 6, 7))
    code, _, err = run(base, other)
    assert code == 2 and "no rank or worker in common" in err and "rank4" in err


def test_runs_logging_different_memory_measures_cannot_be_aligned(tmp_path, base):
    lines = [ds.log_dist(ds.see_memory_usage(ma=30.0 + noise(i), max_ma=31.0, ca=32.0, max_ca=33.0)) for i in range(40)]
    other = tmp_path / "ds.log"
    other.write_text("\n".join(lines) + "\n")
    code, _, err = run(base, str(other))
    assert code == 2 and "cannot compare" in err


def test_unreadable_input_is_one_line_exit_2(tmp_path, base):
    code, _, err = run(base, str(tmp_path / "missing.log"))
    assert code == 2 and err.startswith("memlog: error: NEW (") and "no such file" in err


def test_directories_of_rank_files(tmp_path):
    for name, level in (("base", 30.0), ("new", 33.0)):
        folder = tmp_path / name
        folder.mkdir()
        for rank in (0, 1):
            write_run(folder / f"rank{rank}.log", level, ranks=(rank,))
    code, doc = as_json(str(tmp_path / "base"), str(tmp_path / "new"))
    assert code == 1 and [p["worker"] for p in doc["pairs"]] == ["rank0", "rank1"]


def test_markdown_and_github_outputs(tmp_path, base):
    higher = write_run(tmp_path / "new.log", 32.0)
    code, out, _ = run(base, higher, "-o", "markdown")
    assert code == 1 and out.startswith("### memlog compare: REGRESSION")
    assert "| worker | plateau level |" in out and "| rank0 |" in out
    code, out, _ = run(base, higher, "-o", "github")
    assert code == 1 and "::error title=memlog compare level-increase::" in out
    assert out.startswith("memlog verdict: REGRESSION: NEW uses more memory than BASE (memlog compare)\n")  # as analyze's
    assert as_json(base, higher)[0] == 1  # the same pair as JSON, checked against the schema


def test_the_compare_schema_is_published_and_strict(tmp_path, base):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["kind"]["const"] == "compare"
    assert SCHEMA["properties"]["verdict"]["enum"] == list(VERDICTS)
    _, doc = as_json(base, write_run(tmp_path / "new.log", 32.0))
    doc["pairs"][0]["diff"]["surprise"] = 1  # a field the schema does not name is refused
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)
    scan = json.loads(runner.invoke(app, ["schema", "--kind", "scan"]).stdout)
    assert scan["title"] == "memlog scan -o json"
    result = runner.invoke(app, ["schema", "--kind", "nope"])
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def test_markdown_names_from_the_logs_link_nothing(tmp_path):
    """File names reach the compare markdown: no mention, issue reference (#12, GH-12) or link."""
    import re

    base = write_run(tmp_path / "@octocat GH-12 #34 [x](javascript:e).log", 30.0)
    higher = write_run(tmp_path / "new <b>.log", 32.0)
    code, out, _ = run(str(base), str(higher), "-o", "markdown")
    assert code == 1
    assert not re.search(r"@\w|#\d|(?<![\w-])GH-\d|(?<!\\)\]\(|<b>", out), out


@pytest.mark.parametrize("columns", ["60", "80", "120", "250"])
def test_the_text_fits_the_terminal(tmp_path, base, columns):
    """Every line fits the terminal: the table in full where it fits, else in short (BASE>NEW per
    cell), else each worker's figures as a sentence; sentences wrapped. Every worker stays named."""
    result = runner.invoke(app, ["compare", base, write_run(tmp_path / "new.log", leak=0.05)], env={"COLUMNS": columns})
    lines = result.stdout.splitlines()
    assert result.exit_code == 1
    assert all(len(line) <= int(columns) or " " not in line.strip() for line in lines), [line for line in lines if len(line) > int(columns)]
    text = "\n".join(lines)
    assert all(f"rank{r}" in text for r in range(4)) and "new-leak" in text
    assert ("no -> leak" in text) == (columns == "250")  # the full table only where it fits


@pytest.mark.parametrize("new_loss", [0.0, 2.5])
def test_a_base_whose_mean_loss_is_zero_is_compared(tmp_path, new_loss):
    """A mean loss of zero has no share to differ by (the fuzzer's crash: `None:+` in the text)."""
    base = write_run(tmp_path / "base.log", loss=0.0)
    new = write_run(tmp_path / "new.log", loss=new_loss)
    for output in ("text", "markdown", "github", "json"):
        code, out, err = run(base, new, "-o", output)
        assert code in (0, 1) and not err, err
    code, doc = as_json(base, new)
    assert doc["loss"]["same_work"] is (new_loss == 0.0)
    assert (doc["loss"]["diff_pct"] is None) is (new_loss != 0.0)
