"""MLflow runs: metric histories (steps, values, timestamps) read through MLflow's own client
(the `memlog[mlflow]` extra), from

- a local file store as MLflow 2 wrote it (an `mlruns/` folder, or one run's folder in it);
- the SQLite file MLflow 3 writes (`mlflow.db`);
- a tracking server: `mlflow://HOST:PORT/RUN_ID` (one run) or `mlflow://HOST:PORT` (every run), over
  http; `mlflows://` for https.

Every metric of a run is a key at a step, mapped to a column by its name as the generic reader maps
keys (keyed_records): the user's `memory/max_reserved_gib` and `train/loss`, and MLflow's own system
metrics (`system/gpu_0_memory_usage_megabytes`, `system/system_memory_usage_megabytes`). Each run is
one source, named `<store>/<experiment>/<run name>`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import polars as pl

from memlog.base.errors import InputError
from memlog.parse.generic.guessed import Guessed
from memlog.parse.generic.structured import keyed_records

READER = "mlflow"
SCHEMES = {"mlflow://": "http://", "mlflows://": "https://"}
MAX_RUNS = 1000  # runs read from one store or server at once


@dataclass(frozen=True)
class MlflowRun:
    tracking_uri: str
    run_id: str
    name: str  # as reports show it


def is_mlflow_input(spec: str) -> bool:
    """An MLflow store, run folder, SQLite file or server URI (by its shape, not by reading it)."""
    if spec.startswith(tuple(SCHEMES)):
        return True
    path = Path(spec)
    if path.is_file():
        return path.suffix == ".db" and _sqlite(path)
    return path.is_dir() and (_is_run_folder(path) or _is_file_store(path))


def _sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _is_run_folder(path: Path) -> bool:
    return (path / "meta.yaml").is_file() and (path / "metrics").is_dir()


def _is_file_store(path: Path) -> bool:
    """An `mlruns/` folder: experiment folders (meta.yaml) holding run folders."""
    try:
        experiments = [d for d in path.iterdir() if d.is_dir() and (d / "meta.yaml").is_file()]
    except OSError:
        return False
    return any(_is_run_folder(run) for experiment in experiments[:50] for run in experiment.iterdir() if run.is_dir())


def run_folders(store: str) -> list[str]:
    """The run folders of a local file store (`<experiment id>/<run id>`), each a run `memlog
    scan` judges on its own."""
    root = Path(store)
    if _is_run_folder(root):
        return [""]
    return sorted(
        f"{experiment.name}/{run.name}"
        for experiment in root.iterdir()
        if experiment.is_dir() and (experiment / "meta.yaml").is_file()
        for run in experiment.iterdir()
        if run.is_dir() and _is_run_folder(run)
    )


def mlflow_runs(spec: str) -> list[MlflowRun]:
    """The runs an input names, each with the tracking URI its client reads it through."""
    client_class = _client_class(spec)
    run_id = None
    if spec.startswith(tuple(SCHEMES)):
        scheme = next(s for s in SCHEMES if spec.startswith(s))
        host, _, run_id = spec[len(scheme) :].partition("/")
        uri, shown = SCHEMES[scheme] + host, f"{scheme}{host}"
    elif Path(spec).is_file():
        uri, shown = f"sqlite:///{Path(spec).resolve()}", spec
    elif _is_run_folder(Path(spec)):
        store = Path(spec).resolve().parent.parent
        uri, shown, run_id = store.as_uri(), str(Path(spec).parent.parent), Path(spec).name
    else:
        uri, shown = Path(spec).resolve().as_uri(), spec.rstrip("/")
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses to open MLflow 2's file store otherwise
    client = client_class(uri)
    try:
        names = {e.experiment_id: e.name for e in client.search_experiments()}
        if run_id:
            runs = [client.get_run(run_id.strip("/"))]
        else:
            runs = list(client.search_runs(list(names), max_results=MAX_RUNS)) if names else []
    except Exception as exc:
        raise InputError(f"{spec}: MLflow could not list its runs ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
    if not runs:
        raise InputError(f"{spec}: an MLflow store with no runs in it")
    return [MlflowRun(uri, r.info.run_id, f"{shown}/{names.get(r.info.experiment_id, r.info.experiment_id)}/{r.info.run_name or r.info.run_id}") for r in runs]


def read_mlflow_run(run: MlflowRun) -> tuple[list[pl.DataFrame], Guessed | None, str | None, int]:
    """One run's records: frames, what was read (in words), damage (None) and the points read."""
    try:
        histories = _file_store_histories(run) if run.tracking_uri.startswith("file:") else None
        if histories is None:
            client = _client_class(run.tracking_uri)(run.tracking_uri)
            keys = list(client.get_run(run.run_id).data.metrics)
            histories = {key: client.get_metric_history(run.run_id, key) for key in keys}
    except Exception as exc:
        raise InputError(f"{run.name}: MLflow could not read its metrics ({type(exc).__name__})") from None
    by_step: dict[int, dict] = {}
    for key, points in histories.items():
        for point in points:
            entry = by_step.setdefault(int(point.step), {"step": int(point.step), "_seconds": point.timestamp / 1000.0})
            entry[key] = float(point.value)
    frames, said = keyed_records([by_step[s] for s in sorted(by_step)], run.name, READER, "each metric point", "metric history")
    return frames, said, None, sum(len(p) for p in histories.values())


def _file_store_histories(run: MlflowRun) -> dict[str, list] | None:
    """A file store's metric histories, each file parsed once. The client pages a history 25,000
    points at a time and the file store parses the whole file for each page, and its `get_run`
    parses every file for the latest values: a run of 1,000,000 points took 127 s of reading then,
    against 12 s now. The keys are the metric files' paths under the run's `metrics/` (a key's `/`
    is a folder); the points come from MLflow's own FileStore. None where the layout is not found."""
    from mlflow.store.tracking.file_store import FileStore

    root = Path(url2pathname(urlparse(run.tracking_uri).path))
    found = [folder / "metrics" for folder in root.glob(f"*/{run.run_id}") if (folder / "metrics").is_dir()]
    if len(found) != 1:
        return None
    keys = sorted(p.relative_to(found[0]).as_posix() for p in found[0].rglob("*") if p.is_file())
    store = FileStore(str(root))
    return {key: store.get_metric_history(run.run_id, key, max_results=None) for key in keys}


def _client_class(spec: str):
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise InputError(f"{spec}: an MLflow store; reading it needs the extra: pip install 'memlog[mlflow]'") from None
    return MlflowClient
