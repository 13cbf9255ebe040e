"""memlog scan --ray on a local Ray cluster started here (one per module: starting Ray takes seconds):
the same rows, order, summary and exit codes as the local scan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from tests import fleet_tree

if os.environ.get("MEMLOG_REQUIRE_RAY"):  # CI installs Ray (the test extra): these tests must run there
    import ray
else:
    ray = pytest.importorskip("ray", reason="pip install 'memlog[ray]' to test memlog scan --ray")

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # Two CPUs: this machine's. The workers import memlog from this checkout, as the driver does.
    ray.init(
        num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )  # fmt: skip
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return fleet_tree.build(tmp_path_factory.mktemp("fleet"))


def both(args: list[str]):
    """The same scan locally (in this process) and on Ray."""
    return runner.invoke(app, ["scan", *args, "--jobs", "1"]), runner.invoke(app, ["scan", *args, "--ray"])


def test_ray_gives_the_local_json(tree):
    local, on_ray = both([str(tree), "-o", "json"])
    assert on_ray.exit_code == local.exit_code == 1, on_ray.stderr
    assert on_ray.stdout == local.stdout
    rows = {row["run"]: row["verdict"] for row in json.loads(on_ray.stdout)["runs"]}
    assert rows == {name: verdict for name, (verdict, _) in fleet_tree.EXPECTED.items()}


def test_ray_rows_and_exit_codes_match_locally(tree):
    for args in (
        [str(tree), "--fail-on", "never"],  # 0 whatever leaks
        [str(tree / "healthy"), str(tree / "team-b" / "slurm-102.out")],  # 0: calm runs
        [str(tree / "binary.log"), str(tree / "empty.log")],  # 2: nothing readable, rows still printed
        [str(tree), "-o", "csv"],
        [str(tree), "-o", "markdown"],
    ):
        local, on_ray = both(args)
        assert (on_ray.exit_code, on_ray.stdout, on_ray.stderr) == (local.exit_code, local.stdout, local.stderr), args
    assert both([str(tree / "binary.log")])[1].exit_code == 2


def test_ray_reads_urls(tree):
    """Ray tasks read object-store URLs themselves (here file://, which every local worker can read)."""
    local, on_ray = both([f"file://{tree}/team-a", "-o", "json"])
    assert on_ray.stdout == local.stdout and on_ray.exit_code == 1
    assert json.loads(on_ray.stdout)["runs"][0]["path"] == f"file://{tree}/team-a/leaky"
