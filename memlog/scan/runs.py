"""Finding the runs under the paths `memlog scan` is given.

A run is what `memlog analyze` judges in one call: one log file, or one directory read whole (every
log file under it, memlog/read/inputs.py). Walking down from each path given:

1. a file named on the command line is a run;
2. a directory is one run when its layout says that its files are the workers of one job:
   - a torchrun `--log-dir` run: it holds `attempt_<n>/` folders;
   - a Ray session: a `session_*` folder with a `logs/` folder (the run is that `logs/`), or a
     folder of Ray worker files (`worker-<id>-<job>-<pid>.out`);
   - per-rank or per-node logs: the files or folders directly in it number the workers of one job:
     names alike but for a worker's number (`rank0.log` ... `rank7.log`, `20250304_rank3.log`,
     `node01/ node02/`) whose numbers start at 0 or 1 and leave at most half of the range out. A
     name that merely contains "rank" or "node" proves nothing: `lora-rank8/ lora-rank16/
     lora-rank64/` is a sweep of three runs, `exps/node2-repro/` one run beside the others; and
     the names are a hint the lines must not contradict: entries whose first timestamps lie more
     than an hour apart, or (but for nodes, which print the same local ranks) whose first lines
     name the same rank, are runs of their own (`gpu1/ gpu2/ gpu4/` holding runs of 1, 2 and 4
     GPUs: _one_job);
   - a TensorBoard run: a folder whose logs are all event files (`events.out.tfevents.*`);
   - an MLflow file store (`mlruns/`): each of its run folders is a run; an `mlflow.db` is one;
3. otherwise each log file directly in the directory is a run of its own (a folder of
   `slurm-<jobid>.out` files is that many runs), except `.json` and `.csv` files (configs and
   metric dumps beside the logs) unless one is Hugging Face's `trainer_state.json` (its own run,
   as `analyze` reads it), and each sub-folder is walked in turn.

Hidden entries and symlinked folders are not walked (Ray's `session_latest` points at a session
that is found anyway). `--run-glob PATTERN` replaces the rule: every file or folder under a path
that matches the pattern (`**` recurses) is a run.

The same walk runs on URLs (`s3://bucket/runs/`) through fsspec (memlog/read/remote.py).
"""

from __future__ import annotations

import datetime
import glob
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import polars as pl

from memlog.base.errors import MemlogError
from memlog.base.opening import special_kind
from memlog.parse.stores.mlflow import is_mlflow_input, run_folders
from memlog.parse.unwrap import TIMESTAMP, Unwrapper
from memlog.read.inputs import identity_of, is_log_name, natural_key
from memlog.read.remote import filesystem, is_url

TORCHRUN_ATTEMPT = re.compile(r"^attempt_\d+$")
# A worker's number in a file or folder name (`rank3`, `node-02`, `worker_5`, `gpu1`).
WORKER_NUMBER = re.compile(r"(?i)(?<![a-z])(?:rank|node|worker|gpu)[-_]?(\d+)(?!\d)")
RAY_SESSION = re.compile(r"^session_")
# Beside the logs, not logs: a directory's .json / .csv files are no run of their own.
NOT_A_RUN_ALONE = {".json", ".csv"}
TRAINER_STATE = "trainer_state.json"  # Hugging Face's metrics document: a run, as analyze reads it


@dataclass(frozen=True)
class Run:
    """One run to judge: `name` as the user sees it (relative to the path given), `path` what
    `memlog analyze` reads (a file, a directory or a URL)."""

    name: str
    path: str


class _Local:
    def kind(self, path: str) -> str | None:
        if os.path.isdir(path):
            return "dir"
        return "file" if os.path.isfile(path) or os.path.islink(path) else None

    def children(self, path: str) -> tuple[list[str], list[str]]:
        """(sub-folders, files) directly in `path`, names only; symlinked folders are not walked,
        a broken link is a file (a run that cannot be read, not one that vanishes)."""
        dirs, files = [], []
        try:
            entries = list(os.scandir(path))
        except OSError:
            return [], []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
            elif not _is_dir(entry) and not _special(entry):
                files.append(entry.name)
        return dirs, files

    def join(self, path: str, name: str) -> str:
        return os.path.join(path, name)

    def glob(self, path: str, pattern: str) -> list[str]:
        return glob.glob(pattern, root_dir=path, recursive=True)


class _Remote:
    def __init__(self, url: str):
        self.fs, self.root = filesystem(url)

    def _path(self, url: str) -> str:
        return filesystem(url)[1] if is_url(url) else url

    def kind(self, url: str) -> str | None:
        path = self._path(url)
        if self.fs.isdir(path):
            return "dir"
        return "file" if self.fs.isfile(path) else None

    def children(self, url: str) -> tuple[list[str], list[str]]:
        dirs: list[str] = []
        files: list[str] = []
        try:
            entries = self.fs.ls(self._path(url), detail=True)
        except (FileNotFoundError, OSError):
            return [], []
        for entry in entries:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("."):
                continue
            (dirs if entry["type"] == "directory" else files).append(name)
        return dirs, files

    def join(self, url: str, name: str) -> str:
        return url.rstrip("/") + "/" + name

    def glob(self, url: str, pattern: str) -> list[str]:
        base = self._path(url).rstrip("/")
        return [p[len(base) + 1 :] for p in self.fs.glob(base + "/" + pattern) if p.startswith(base + "/")]


def _is_dir(entry: os.DirEntry) -> bool:
    """A link to a folder is one; a link loop (ELOOP) is not: a file whose row says why it cannot be read."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _special(entry: os.DirEntry) -> bool:
    """A FIFO, device or socket (or a link to one), never a run: reading it may never end, as
    memlog/read/inputs.py skips them in a folder read whole. A link that cannot be followed stays a
    file: its row says why it cannot be read."""
    try:
        mode = entry.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or special_kind(mode) is not None


def _names_workers(tree: Any, path: str, dirs: list[str], logs: list[str]) -> bool:
    """Does this directory's content name the workers of one job (rule 2 above)?"""
    if any(TORCHRUN_ATTEMPT.match(d) for d in dirs):
        return True
    if any("pid" in identity_of(name) for name in logs):  # Ray's worker-<id>-<job>-<pid>.out
        return True
    if logs and all(".tfevents." in name for name in logs) and not dirs:
        return True  # one TensorBoard run (a resumed run adds a file)
    words = _numbered_workers(logs) | _numbered_workers(dirs)
    if not words:
        return False
    # Nodes of one job print the same local ranks; ranks and GPUs of one job print different ones.
    return _one_job(tree, path, dirs, logs, nodes="node" in words)


def _one_job(tree: Any, path: str, dirs: list[str], logs: list[str], nodes: bool) -> bool:
    """Whether entries that name workers by their number (rule 2) are what their lines say too. The
    workers of one job start together and, but for nodes (which print the same local ranks), print
    different ranks: entries whose first timestamps lie more than START_SPREAD apart, or whose
    first lines name the same rank (`[rank0]:`, `[default0]:`, Megatron's `[Rank 0]`: the launcher
    wrappers), are runs of their own (`gpu1/ gpu2/ gpu4/` holding runs of 1, 2 and 4 GPUs). Where
    the lines name neither, the names stand."""
    if not isinstance(tree, _Local):
        return True
    seen: set[int] = set()
    starts = []
    unwrap = Unwrapper([])
    # The first entries tell a sweep from a job (its runs differ from the first two on); a job of
    # 10,000 per-rank files is not read 10,000 times over.
    for name in sorted([*logs, *dirs], key=natural_key)[:MAX_PROBED]:
        ranks, start = _head_of(tree.join(path, name), unwrap)
        if ranks & seen and not nodes:
            return False
        seen |= ranks
        if start is not None:
            starts.append(start)
    return not starts or (max(starts) - min(starts)).total_seconds() <= START_SPREAD


HEAD_BYTES = 64 * 1024  # what is read of each entry to see which ranks its lines name, and when it started
MAX_PROBED = 32  # entries read so
START_SPREAD = 3600.0  # seconds: the workers of one job start within this of each other


def _head_of(path: str, unwrap: Unwrapper) -> tuple[set[int], datetime.datetime | None]:
    """The ranks the first lines of a file (or of a folder's first log file) name, and the first
    timestamp they carry."""
    if os.path.isdir(path):
        found = sorted((os.path.join(root, f) for root, _, files in os.walk(path) for f in files if is_log_name(PurePosixPath(f))), key=natural_key)
        if not found:
            return set(), None
        path = found[0]
    if path.endswith((".gz", ".bz2", ".xz", ".zst")):
        return set(), None  # (compressed: the names stand)
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return set(), None
    lines = head.splitlines()[:-1] or head.splitlines()  # (the last may be cut)
    frame = pl.DataFrame({"line_no": list(range(1, len(lines) + 1)), "text": lines}, schema={"line_no": pl.Int64, "text": pl.String})
    ranks = {int(r) for r in unwrap(frame)["rank"].drop_nulls().unique().to_list()}
    stamp = re.search(TIMESTAMP, head)
    start = None
    if stamp:
        try:
            start = datetime.datetime.fromisoformat(stamp.group(1).replace(",", ".").replace("T", " "))
        except ValueError:
            start = None
    return ranks, start


def _numbered_workers(names: list[str]) -> set[str]:
    """Names alike but for a worker's number, numbered from 0 or 1 with at most half the range
    missing (rank0..rank7; node01, node02): the workers of one job, not runs that happen to
    name a rank (a LoRA rank, a node count) in a name of their own. Returns the words that number
    them (`rank`, `node`, `worker`, `gpu`; none: not numbered so)."""
    templates: dict[str, set[int]] = {}
    for name in names:
        if match := WORKER_NUMBER.search(name):
            template = name[: match.start(1)] + "#" + name[match.end(1) :]
            templates.setdefault(template, set()).add(int(match.group(1)))
    words = set()
    for template, numbers in templates.items():
        low, high = min(numbers), max(numbers)
        if low in (0, 1) and len(numbers) * 2 >= high - low + 1:
            word = WORKER_NUMBER.search(template.replace("#", "0"))
            words.add(re.sub(r"[-_]?0$", "", word.group(0)).lower() if word else "rank")
    return words


def _walk(tree: Any, path: str, name: str) -> Iterator[Run]:
    """The runs under `path`, named relative to the path given ("" at the top: a path that is
    itself a run is named by its own name)."""
    if isinstance(tree, _Local) and is_mlflow_input(path):  # an MLflow file store: each of its runs
        for folder in run_folders(path):
            yield Run(_child(name, folder) or os.path.basename(path.rstrip("/")), os.path.join(path, folder) if folder else path)
        return
    dirs, files = tree.children(path)
    logs = [f for f in files if is_log_name(PurePosixPath(f)) or (isinstance(tree, _Local) and f.endswith(".db") and is_mlflow_input(tree.join(path, f)))]
    base = os.path.basename(path.rstrip("/"))
    if RAY_SESSION.match(base) and "logs" in dirs:
        yield Run(name or base, tree.join(path, "logs"))
        return
    if _names_workers(tree, path, dirs, logs):
        yield Run(name or base, path)
        return
    for log in sorted(logs, key=natural_key):
        if PurePosixPath(log).suffix.lower() not in NOT_A_RUN_ALONE or log == TRAINER_STATE:
            yield Run(_child(name, log), tree.join(path, log))
    for sub in sorted(dirs, key=natural_key):
        yield from _walk(tree, tree.join(path, sub), _child(name, sub))


def _child(name: str, part: str) -> str:
    return f"{name}/{part}" if name else part


def _display(spec: str) -> str:
    """The name of the path given, as its runs are named under it."""
    return spec.rstrip("/").rsplit("/", 1)[-1] or spec


def find_runs(paths: list[str], run_glob: str | None = None) -> list[Run]:
    """The runs under `paths`, each path's in natural order of name, named relative to it. A path
    that does not exist is a run of its own (its row says it cannot be read)."""
    runs: list[Run] = []
    for spec in paths:
        if spec == "-":
            raise MemlogError("memlog scan reads paths, not standard input: use memlog analyze - for a log on stdin")
        tree = _Remote(spec) if is_url(spec) else _Local()
        kind = tree.kind(spec)
        if kind != "dir":
            runs.append(Run(_display(spec), spec))
            continue
        if run_glob:
            found = sorted(tree.glob(spec, run_glob), key=natural_key)
            runs += [Run(match, tree.join(spec, match)) for match in found]
        else:
            runs += list(_walk(tree, spec, ""))
    return runs
