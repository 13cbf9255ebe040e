"""memlog scan on this machine: which runs a tree holds, their rows and order, exit codes, every
output format, object stores through fsspec. The Ray path is tests/scan/test_scan_ray.py."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.scan.on_ray import ray_option_args
from memlog.scan.runs import find_runs
from tests import fleet_tree
from tests.synthetic import titan_log

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parents[2] / "memlog" / "report" / "schema" / "scan.schema.json").read_text())


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return fleet_tree.build(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def scanned(tree):
    """The tree's JSON scan, judged in this process."""
    result = runner.invoke(app, ["scan", str(tree), "-o", "json", "--jobs", "1"])
    return result


def test_the_tree_gives_one_right_row_per_run(tree, scanned):
    assert scanned.exit_code == 1, scanned.stderr  # two runs leak
    document = json.loads(scanned.stdout)
    jsonschema.validate(document, SCHEMA)
    rows = {row["run"]: row for row in document["runs"]}
    assert set(rows) == set(fleet_tree.EXPECTED)  # no row for the empty folder, the config, the checkpoint
    for name, (verdict, path) in fleet_tree.EXPECTED.items():
        assert rows[name]["verdict"] == verdict, name
        assert rows[name]["path"] == str(tree / path)
        assert bool(rows[name]["error"]) == (verdict is None), name
    assert "not a text log" in rows["binary.log"]["error"]
    assert "no such file" in rows["gone.log"]["error"]
    assert "empty" in rows["empty.log"]["error"]
    leaky = rows["team-a/leaky"]
    assert leaky["ranks"] == 2 and leaky["steps"] == [1, 40]  # both torchrun ranks, read as one run
    assert leaky["worst"]["rule"] == "memory-leak" and leaky["growth_gib_per_1k_steps"] == pytest.approx(500, rel=0.01)
    assert leaky["projected_oom"]["step"] > 40
    assert rows["healthy"]["ranks"] == 2 and rows["healthy"]["growth_gib_per_1k_steps"] is None


def test_rows_are_worst_first(scanned):
    rows = json.loads(scanned.stdout)["runs"]
    order = [row["verdict"] or "unreadable" for row in rows]
    assert order[:2] == ["leak", "leak"]
    assert order[2:5] == ["unreadable"] * 3  # not judged: before the calm runs, after the findings
    assert order[5] == "warmup-plateau" and set(order[6:]) == {"stable"}
    # The faster leak first (both leak 0.5 GiB/step here, so by name).
    assert [r["run"] for r in rows[:2]] == ["team-a/leaky", "team-b/slurm-101.out"]


def test_summary_counts_and_leaks(scanned):
    summary = json.loads(scanned.stdout)["summary"]
    assert summary == {
        "runs": 8, "judged": 5, "unreadable": 3, "verdicts": {"leak": 2, "warmup-plateau": 1, "stable": 2},
        "failing": 2, "fail_on": "error", "leaking": ["team-a/leaky", "team-b/slurm-101.out"],
    }  # fmt: skip


def test_exit_codes(tree, tmp_path):
    assert runner.invoke(app, ["scan", str(tree), "--jobs", "1", "--fail-on", "never"]).exit_code == 0
    assert runner.invoke(app, ["scan", str(tree / "healthy"), str(tree / "team-b" / "slurm-102.out"), "--jobs", "1"]).exit_code == 0
    # Nothing readable at all: the rows still say why, and one line on stderr; exit 2.
    result = runner.invoke(app, ["scan", str(tree / "binary.log"), str(tree / "empty.log"), "--jobs", "1"])
    assert result.exit_code == 2
    assert "could not be read:" in result.stdout
    assert result.stderr.startswith("memlog: error: none of the 2 run(s) could be read") and result.stderr.count("\n") == 1
    # No run at all: one line, exit 2, nothing on stdout.
    result = runner.invoke(app, ["scan", str(tree / "nothing-here")])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("memlog: error: no runs under") and result.stderr.count("\n") == 1
    # Something unreadable beside something judged is a row, not a failure.
    assert runner.invoke(app, ["scan", str(tree / "healthy"), str(tree / "missing.log"), "--jobs", "1"]).exit_code == 0


def test_fail_on_warning_counts_warnings(tmp_path):
    retry = "[rank0]:[titan] 2025-06-01 08:00:30,000 - root - WARNING - 1 CUDA memory allocation retries."
    log = titan_log(tmp_path / "run.log", {0: fleet_tree.FLAT}, fleet_tree.STEPS)
    log.write_text(log.read_text() + retry + "\n")
    rows = json.loads(runner.invoke(app, ["scan", str(log), "-o", "json"]).stdout)["runs"]
    assert rows[0]["severity"] == "warning" and rows[0]["verdict"] == "stable"  # allocator-retries
    assert runner.invoke(app, ["scan", str(log)]).exit_code == 0
    assert runner.invoke(app, ["scan", str(log), "--fail-on", "warning"]).exit_code == 1


def test_worker_processes_give_the_same_rows(tree, scanned):
    pooled = runner.invoke(app, ["scan", str(tree), "-o", "json", "--jobs", "2"])
    assert pooled.exit_code == scanned.exit_code
    assert pooled.stdout == scanned.stdout


def test_run_glob_overrides_the_layout_rule(tree):
    result = runner.invoke(app, ["scan", str(tree), "--run-glob", "team-*/*.out", "-o", "json", "--jobs", "1"])
    rows = json.loads(result.stdout)["runs"]
    assert sorted(r["run"] for r in rows) == ["team-b/slurm-101.out", "team-b/slurm-102.out"]
    # Each rank file as a run of its own.
    assert [r.name for r in find_runs([str(tree)], "healthy/rank*.log")] == ["healthy/rank0.log", "healthy/rank1.log"]
    result = runner.invoke(app, ["scan", str(tree), "--run-glob", "no-such-*"])
    assert result.exit_code == 2 and "match --run-glob" in result.stderr


def test_layouts(tmp_path):
    """Per-node folders are one run; a session_* folder is its logs/; a folder of unnamed logs is
    that many runs; a path that is a run is named by itself."""
    for node in ("node01", "node02"):
        (tmp_path / "job" / node).mkdir(parents=True)
        titan_log(tmp_path / "job" / node / "train.log", {0: fleet_tree.FLAT}, fleet_tree.STEPS)
    assert [(r.name, r.path) for r in find_runs([str(tmp_path / "job")])] == [("job", str(tmp_path / "job"))]
    assert [r.name for r in find_runs([str(tmp_path)])] == ["job"]
    (tmp_path / "flat").mkdir()
    for name in ("a.log", "b.txt", "c.log.gz", "metrics.csv"):
        (tmp_path / "flat" / name).write_text("x\n")
    assert [r.name for r in find_runs([str(tmp_path / "flat")])] == ["a.log", "b.txt", "c.log.gz"]


def test_text_table(scanned, tree):
    result = runner.invoke(app, ["scan", str(tree), "--jobs", "1"], env={"COLUMNS": "250"})
    lines = result.stdout.splitlines()
    assert lines[0] == "memlog scan: 8 runs: 2 leak, 1 warmup-plateau, 2 stable; 3 could not be read"
    assert lines[2].split()[:3] == ["run", "verdict", "worst"]
    assert lines[3].split()[:3] == ["team-a/leaky", "leak", "memory-leak"]
    (leaking,) = [line for line in lines if line.startswith("leaking: ")]
    assert leaking.startswith("leaking: team-a/leaky (rank") and leaking.endswith("), team-b/slurm-101.out")  # the job's leaking ranks named
    assert "2 runs with a finding at or above error (--fail-on)" in lines


@pytest.mark.parametrize("columns", ["60", "80", "120"])
def test_the_text_table_fits_the_terminal(scanned, tree, columns):
    """At any width the table keeps a row per run with its verdict and ranks, what it cannot hold
    is said, and the leaking runs are named; no line is wider than the terminal."""
    result = runner.invoke(app, ["scan", str(tree), "--jobs", "1"], env={"COLUMNS": columns})
    lines = result.stdout.splitlines()
    # (a path longer than the terminal stays whole, on a line of its own)
    assert all(len(line) <= int(columns) or " " not in line.strip() for line in lines), [line for line in lines if len(line) > int(columns)]
    table = lines[lines.index(next(line for line in lines if line.startswith("run "))) :]
    assert any(line.split()[1:2] == ["leak"] for line in table)
    assert any("not shown at" in line for line in lines) == (columns != "250")
    assert " ".join(lines).count("team-a/leaky") >= 1 and "leaking:" in result.stdout


def test_piped_without_columns_the_table_is_80_wide(scanned, tree, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    result = runner.invoke(app, ["scan", str(tree), "--jobs", "1"])
    assert all(len(line) <= 80 or " " not in line.strip() for line in result.stdout.splitlines())


def test_markdown_summary_to_paste(tree):
    from markdown_it import MarkdownIt

    text = runner.invoke(app, ["scan", str(tree), "-o", "markdown", "--jobs", "1"]).stdout
    assert text.startswith("**memlog scan**: 8 runs: 2 leak")
    assert "| leak | 2 |" in text and "| unreadable | 3 |" in text
    assert "Leaking: team-a/leaky, team-b/slurm-101.out" in text
    html = MarkdownIt().enable("table").render(text)
    assert html.count("<table>") == 2 and html.count("<tr>") == 1 + 4 + 1 + 8  # counts table, runs table


def test_csv_is_valid_and_inert(tmp_path):
    names = ['=HYPERLINK("x","y").log', "+1.log", "-2.log", "@SUM(A1).log", 'a,b "c".log', "esc\x1b[31m.log"]
    for name in names:
        titan_log(tmp_path / name, {0: fleet_tree.LEAK}, fleet_tree.STEPS)
    text = runner.invoke(app, ["scan", str(tmp_path), "-o", "csv", "--jobs", "1"]).stdout
    assert "\x1b" not in text
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    assert header[:3] == ["run", "verdict", "severity"] and len(body) == len(names)
    assert all(len(row) == len(header) for row in body)
    for row in body:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@")), cell
    runs = {row[0] for row in body}
    assert '\'=HYPERLINK("x","y").log' in runs and 'a,b "c".log' in runs and "'-2.log" in runs
    assert {row[1] for row in body} == {"leak"}


def test_github_annotations(tree, tmp_path):
    summary = tmp_path / "summary.md"
    text = runner.invoke(app, ["scan", str(tree), "-o", "github", "--jobs", "1"], env={"GITHUB_STEP_SUMMARY": str(summary)}).stdout
    assert summary.read_text().startswith("**memlog scan**: 8 runs")  # the job summary gets the markdown
    lines = text.splitlines()
    assert lines[0] == "memlog verdict: LEAK: 8 runs: 2 leak, 1 warmup-plateau, 2 stable; 3 could not be read (memlog scan)"
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 2 and all("file=" in line and ",line=" in line for line in errors)
    assert sum(line.startswith("::warning ") for line in lines) == 3  # the unreadable runs
    assert not any("::notice" in line for line in lines)  # calm runs are only counted


def test_ray_option_takes_an_optional_address():
    assert ray_option_args(["runs", "--ray"]) == ["runs", "--ray="]
    assert ray_option_args(["--ray", "runs"]) == ["--ray=", "runs"]
    assert ray_option_args(["--ray", "auto", "runs"]) == ["--ray", "auto", "runs"]
    assert ray_option_args(["--ray", "head:6379", "runs"]) == ["--ray", "head:6379", "runs"]
    assert ray_option_args(["--ray", "ray://head:10001", "runs"]) == ["--ray", "ray://head:10001", "runs"]
    assert ray_option_args(["--ray", "s3://bucket/runs"]) == ["--ray=", "s3://bucket/runs"]


def test_ray_missing_is_one_line(tree, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails
    result = runner.invoke(app, ["scan", str(tree / "healthy"), "--ray"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "memlog: error: --ray needs Ray: pip install 'memlog[ray]'\n"
    result = runner.invoke(app, ["scan", str(tree / "healthy"), "--ray", "--jobs", "2"])
    assert result.exit_code == 2 and "--jobs is for the local scan" in result.stderr


def test_object_store_through_fsspec(tree):
    """A tree in fsspec's memory file system (as an s3:// bucket would be) gives the local rows."""
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    for path in tree.rglob("*"):
        if path.is_file() and not path.is_symlink():
            memory.pipe(f"/fleet/{path.relative_to(tree).as_posix()}", path.read_bytes())
    local_json = runner.invoke(app, ["scan", str(tree), "-o", "json", "--jobs", "1"]).stdout
    local = {r["run"]: r for r in json.loads(local_json)["runs"] if r["run"] != "gone.log"}  # no links in a bucket
    try:
        remote = json.loads(runner.invoke(app, ["scan", "memory://fleet", "-o", "json", "--jobs", "1"]).stdout)["runs"]
        assert {r["run"] for r in remote} == set(local)
        for row in remote:
            assert row["path"].startswith("memory://fleet/")
            want = local[row["run"]]
            assert (row["verdict"], row["steps"], row["ranks"], row["growth_gib_per_1k_steps"]) == (
                want["verdict"], want["steps"], want["ranks"], want["growth_gib_per_1k_steps"]), row["run"]  # fmt: skip
        # analyze reads a URL folder as it reads a local one
        assert runner.invoke(app, ["analyze", "memory://fleet/team-a/leaky", "-o", "json"]).exit_code == 1
    finally:
        memory.rm("/fleet", recursive=True)
    # file:// URLs, and a path that does not exist in the store is a row
    result = runner.invoke(app, ["scan", f"file://{tree}/healthy", "memory://nowhere/x.log", "-o", "json", "--jobs", "1"])
    rows = {r["run"]: r for r in json.loads(result.stdout)["runs"]}
    assert rows["healthy"]["verdict"] == "stable" and "no such file" in rows["x.log"]["error"]
    assert result.exit_code == 0


def test_url_without_fsspec_is_one_line(monkeypatch, tree):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    result = runner.invoke(app, ["scan", "s3://bucket/runs"])
    assert result.exit_code == 2
    assert result.stderr == "memlog: error: s3://bucket/runs: reading URLs needs fsspec (pip install fsspec, and s3fs for s3://, gcsfs for gs://)\n"


@pytest.mark.parametrize("output", ["text", "json", "markdown", "csv", "github"])
def test_every_output_is_inert_and_valid(tmp_path, output):
    """Escape sequences and markup in file names and in the log lines findings quote stay text."""
    from tests.render.test_output_safety import assert_inert, assert_valid, hostile_log

    folder = tmp_path / "fleet\x1b[2J\u202e"
    folder.mkdir()
    hostile_log(folder / "run\x1b]0;pwned\x07\u202eexe.log")
    (folder / "bad\x1b[31m|`x`.log").write_bytes(b"")
    result = runner.invoke(app, ["scan", str(folder), "-o", output, "--jobs", "1"], env={"NO_COLOR": None, "FORCE_COLOR": None})
    assert result.exit_code == 1, result.stderr
    assert_inert(result.stdout, output)
    assert_inert(result.stderr, output + " stderr")
    assert_valid(output, result.stdout)
    if output == "csv":
        assert len(list(csv.reader(io.StringIO(result.stdout)))) == 3
    if output == "markdown":
        table = [line for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line]
        assert all(line.count(" | ") == table[-1].count(" | ") for line in table[-3:])  # no cell split by a pipe


def test_stdin_is_not_a_fleet():
    result = runner.invoke(app, ["scan", "-"])
    assert result.exit_code == 2 and "memlog analyze -" in result.stderr


@pytest.mark.parametrize(
    "names",
    [
        ["lora-rank8", "lora-rank16", "lora-rank64"],  # a LoRA sweep: the rank is a hyperparameter
        ["baseline", "lr-3e-5", "node2-repro"],  # one experiment names a node count
        ["gpu-sweep-a", "gpu-sweep-b"],
        ["exp_rank4_lr1e-4", "exp_rank16_lr1e-4"],
    ],
)
def test_runs_named_with_rank_or_node_are_not_merged(tmp_path, names):
    """A fleet tool that merges runs is wrong silently: sibling runs whose names happen to hold
    "rank" or "node" are one row each, and the leaking one is named."""
    for i, name in enumerate(names):
        (tmp_path / name).mkdir()
        memory = fleet_tree.LEAK if i == 1 else fleet_tree.FLAT
        titan_log(tmp_path / name / "train.log", {0: memory}, fleet_tree.STEPS)
    runs = find_runs([str(tmp_path)])
    assert sorted(r.name for r in runs) == sorted(f"{n}/train.log" for n in names)
    result = runner.invoke(app, ["scan", str(tmp_path), "--jobs", "1", "-o", "json"])
    rows = json.loads(result.stdout)["runs"]
    assert {row["run"].split("/")[0] for row in rows if row["verdict"] == "leak"} == {names[1]}


@pytest.mark.parametrize(
    "names",
    [
        ["rank0.log", "rank1.log", "rank2.log", "rank3.log"],
        ["20250304_rank1.log", "20250304_rank2.log"],
        ["node01", "node02"],
        ["worker_0.out", "worker_1.out", "worker_3.out"],  # a rank whose file is missing
    ],
)
def test_files_numbering_the_workers_of_a_job_are_one_run(tmp_path, names):
    job = tmp_path / "job"
    job.mkdir()
    for i, name in enumerate(names):
        path = job / name
        if "." not in name:
            path.mkdir()
            path = path / "train.log"
        titan_log(path, {i: fleet_tree.FLAT}, fleet_tree.STEPS)
    assert [r.name for r in find_runs([str(tmp_path)])] == ["job"]


def test_a_trainer_state_and_tensorboard_runs_are_runs(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "trainer_state.json").write_text((ROOT / "sample_logs" / "generic" / "trainer_state.json").read_text())
    (tmp_path / "hf" / "config.json").write_text('{"lr": 0.001}\n')
    for run in ("tb/run_a", "tb/run_b"):
        (tmp_path / run).mkdir(parents=True)
        (tmp_path / run / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"")
    assert [r.name for r in find_runs([str(tmp_path)])] == ["hf/trainer_state.json", "tb/run_a", "tb/run_b"]


def test_a_run_of_several_files_names_its_leaking_workers(tmp_path):
    """A per-rank job where one rank leaks: its row names that worker (and the text says it beside
    the run), a healthy single-file run beside it is named alone."""
    job = tmp_path / "job"
    job.mkdir()
    for rank in range(4):
        memory = [30.0 + (0.05 * i if rank == 2 and i > 10 else 0.0) + 0.01 * (i % 3) for i in range(120)]
        titan_log(job / f"rank{rank}.log", {rank: memory}, list(range(1, 121)))
    titan_log(tmp_path / "other.log", {0: [30.0 + 0.05 * i for i in range(120)]}, list(range(1, 121)))
    result = runner.invoke(app, ["scan", str(tmp_path), "--jobs", "1", "-o", "json"])
    rows = {row["run"]: row for row in json.loads(result.stdout)["runs"]}
    assert rows["job"]["verdict"] == "leak" and rows["job"]["leaking"] == ["rank2"]
    text = runner.invoke(app, ["scan", str(tmp_path), "--jobs", "1"], env={"COLUMNS": "120"}).stdout
    assert "leaking: job (rank2), other.log" in text or "leaking: other.log, job (rank2)" in text


def test_numbered_entries_whose_lines_name_the_same_rank_are_runs_of_their_own(tmp_path):
    """`gpu1/ gpu2/ gpu4/` holding runs of 1, 2 and 4 GPUs: numbered like the GPUs of one job, but
    each one's lines name rank 0, so each is a run (one leaks, and its row says so); per-GPU files
    whose lines name different ranks stay one job."""
    flat = [30.0 + 0.01 * (i % 3) for i in range(120)]
    leak = [30.0 + 0.05 * i for i in range(120)]
    for gpus in (1, 2, 4):
        folder = tmp_path / "sweep" / f"gpu{gpus}"
        folder.mkdir(parents=True)
        titan_log(folder / "train.log", dict.fromkeys(range(gpus), leak if gpus == 2 else flat), list(range(1, 121)))
    rows = {r.name: r for r in find_runs([str(tmp_path / "sweep")])}
    assert sorted(rows) == ["gpu1/train.log", "gpu2/train.log", "gpu4/train.log"]
    job = tmp_path / "job"
    job.mkdir()
    for gpu in range(4):
        titan_log(job / f"gpu{gpu}.log", {gpu: flat}, list(range(1, 121)))
    assert [r.name for r in find_runs([str(job)])] == ["job"]
    result = runner.invoke(app, ["scan", str(tmp_path / "sweep"), "--jobs", "1", "-o", "json"])
    assert [row["run"] for row in json.loads(result.stdout)["runs"] if row["verdict"] == "leak"] == ["gpu2/train.log"]


def _fleet_samples(count: int) -> list[Path]:
    """Sample logs (plain text, several formats) whose first timestamps lie hours apart: runs no
    layout should merge, whatever their folders are called."""
    import datetime
    import re

    from memlog.parse.unwrap import TIMESTAMP
    from tests.samples import sample_logs

    chosen, starts, frameworks = [], [], set()
    for path in sample_logs():
        if path.suffix in (".gz", ".json", ".csv") or ".tfevents." in path.name or path.parent.name in frameworks:
            continue
        stamp = re.search(TIMESTAMP, path.read_text(errors="replace")[: 256 * 1024])
        if not stamp:
            continue
        start = datetime.datetime.fromisoformat(stamp.group(1).replace(",", ".").replace("T", " "))
        if all(abs((start - other).total_seconds()) > 2 * 3600 for other in starts):
            chosen.append(path)
            starts.append(start)
            frameworks.add(path.parent.name)
    assert len(chosen) >= count
    return chosen[:count]


@pytest.mark.parametrize(
    "layout",
    [
        lambda i: f"rank{i}/train.log",  # numbered like the ranks of one job
        lambda i: f"gpu{i + 1}/run/out.log",
        lambda i: f"node{i:02d}/train.log",  # numbered like the nodes of one job
        lambda i: f"worker_{i}.log",
        lambda i: f"lora-rank{8 << i}/train.log",
        lambda i: f"exps/node{i}-repro/logs/rank0.log",
    ],
    ids=["rank-folders", "gpu-folders", "node-folders", "worker-files", "lora-ranks", "nested-repros"],
)
def test_a_fleet_of_sample_runs_under_adversarial_names_is_one_row_per_run(tmp_path, layout):
    """Metamorphic: runs of different frameworks put under names that look like the workers of one
    job (rank, gpu, node, worker) or name a rank of their own; a symlinked folder beside them. Each
    run is a row, judged as `analyze` judges it alone."""
    from memlog.engine.api import analyze

    samples = _fleet_samples(4)
    for i, sample in enumerate(samples):
        target = tmp_path / "fleet" / layout(i)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(sample.read_bytes())
    if "/" in layout(0):  # a link to a run's folder (as Ray's session_latest): not walked, no extra row
        (tmp_path / "fleet" / "latest").symlink_to(tmp_path / "fleet" / layout(0).split("/")[0])
    result = runner.invoke(app, ["scan", str(tmp_path / "fleet"), "--jobs", "1", "-o", "json", "--fail-on", "never"])
    rows = json.loads(result.stdout)["runs"]
    assert len(rows) == len(samples), [row["run"] for row in rows]
    for i, sample in enumerate(samples):
        (row,) = [r for r in rows if r["path"].endswith(layout(i)) or r["path"].endswith(str(Path(layout(i)).parent))]
        assert row["verdict"] == analyze([str(sample)]).verdict, (layout(i), sample.name)
