"""compare across stores (issue 37): a TensorBoard run as the baseline and an MLflow run as the new
one, each written by its own library, compared as two printed logs are."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from memlog.cli import app

if os.environ.get("MEMLOG_REQUIRE_STORES"):
    import mlflow  # noqa: F401  (CI installs memlog[tensorboard,mlflow]: a skip would be a failure)
    import tensorboard  # noqa: F401
else:
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")

from tests.parse.test_stores_mlflow import log_run
from tests.parse.test_stores_tensorboard import leak, warmup, write_run

runner = CliRunner()


@pytest.mark.parametrize(("new", "verdict", "code"), [(warmup, "same", 0), (leak, "regression", 1)], ids=["same", "leak"])
def test_a_tensorboard_baseline_against_an_mlflow_run(tmp_path, new, verdict, code):
    (tmp_path / "tb").mkdir()
    base = write_run(tmp_path / "tb", warmup(200))
    store = tmp_path / "mlruns"
    log_run(store.as_uri(), "candidate", new(200))
    result = runner.invoke(app, ["compare", base, str(store), "-o", "json"])
    assert result.exit_code == code, result.stderr
    document = json.loads(result.stdout)
    assert document["verdict"] == verdict
    assert [f["rule"] for f in document["findings"] if f["rule"] == "new-leak"] == (["new-leak"] if new is leak else [])
