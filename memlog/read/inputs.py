"""Inputs: what the user named (files, `-`, directories, globs) as the sources to read, each with
what its path says about who wrote it.

A directory is read whole, recursively: every file that may hold log text (by name: `.log`,
`.out`, `.err`, `.txt`, `.jsonl`, `.json`, `.csv`, compressed `.gz`, or no extension), in natural
order (`rank2` before `rank10`); hidden entries and binary artefacts (checkpoints, images, arrays)
are skipped. A path that does not exist but holds `*`, `?` or `[` is a glob (`**` recurses).

The layouts users have are directories, and their paths name the writer:
- torchrun `--log-dir`: `<run>/attempt_<n>/<local_rank>/stdout.log` (the rank is a folder);
- one file per rank: `rank3.log`, `20250304101112_rank3.log` (DeepSpeed `--enable_each_rank_log`);
- one folder or file per node: `node01/`, `node-3.log`;
- Ray session logs: `worker-<id>-<job>-<pid>.out` (the pid; the actor names itself on
  `:actor_name:` lines inside, see parsers/wrappers/ray.yaml).
What a path says fills in what a line does not (a line's own prefix wins).

A URL (`s3://bucket/run/`, `gs://...`) is read the same way through fsspec (memlog/read/remote.py).
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path, PurePath, PurePosixPath

from memlog.base.errors import InputError
from memlog.read.remote import filesystem, is_url, url_of
from memlog.read.source import Source

LOG_SUFFIXES = {".log", ".out", ".err", ".txt", ".jsonl", ".json", ".csv", ".gz"}
NOT_LOGS = re.compile(
    r"\.(?:pt|pth|bin|safetensors|ckpt|npy|npz|parquet|arrow|pkl|pickle|png|jpe?g|gif|svg|pdf|so|pyc|zip|tar|whl|db|sqlite|h5|onnx|yaml|yml|py|sh|md)$", re.I
)
# Path identity, tried on the path relative to the directory given (or on the file name).
TORCHRUN_LOG_DIR = re.compile(r"(?:^|/)attempt_(?P<attempt>\d+)/(?P<rank>\d+)/(?:stdout|stderr)\.log$")
RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(?P<rank>\d+)", re.I)
NODE_IN_PATH = re.compile(r"(?:^|[^a-z0-9])(?P<node>node[-_]?\d+)(?![0-9])", re.I)
RAY_WORKER_FILE = re.compile(r"(?:^|/)(?:python-core-)?worker-[0-9a-f]+-(?:[0-9a-f]+-)?(?P<pid>\d+)\.(?:out|err|log)$")


def torchrun_attempt(source: str) -> tuple[str, int] | None:
    """For a file of a torchrun `--log-dir` attempt, the run it belongs to (its path with every
    attempt's folder in place of this one's: `<run>/attempt_*/0/stdout.log`) and the attempt number:
    each restart of the worker group writes a new attempt folder, a segment of the same run."""
    match = TORCHRUN_LOG_DIR.search(source)
    if match is None:
        return None
    start, end = match.span("attempt")
    return f"{source[:start]}*{source[end:]}", int(match["attempt"])


def natural_key(path: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def identity_of(relative: str) -> dict[str, object]:
    """What a path (relative to the folder the user named) says of who wrote the file."""
    found: dict[str, object] = {}
    name = relative.rsplit("/", 1)[-1]
    if (match := TORCHRUN_LOG_DIR.search(relative)) or (match := RANK_IN_NAME.search(name)):
        found["rank"] = int(match["rank"])
    if match := RAY_WORKER_FILE.search(relative):
        found["pid"] = int(match["pid"])
    nodes = NODE_IN_PATH.findall(relative)
    if nodes:
        found["node"] = nodes[-1]
    return found


def is_log_name(path: PurePath) -> bool:
    if ".tfevents." in path.name:  # a TensorBoard event file: read as a metrics store (memlog/parse/stores)
        return True
    if path.name.startswith(".") or NOT_LOGS.search(path.name):
        return False
    suffixes = path.suffixes[-2:]
    return not path.suffix or path.suffix in LOG_SUFFIXES or any(s in LOG_SUFFIXES for s in suffixes)


def directory_sources(root: Path) -> list[Source]:
    """The log files under `root`, in natural order, each with its path identity (none: [])."""
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = Path(folder) / name
            if path.is_file() and is_log_name(path):
                files.append(path)
    return [Source(str(p), identity=identity_of(p.relative_to(root).as_posix())) for p in sorted(files, key=lambda p: natural_key(p.as_posix()))]


def _directory(root: Path) -> list[Source]:
    sources = directory_sources(root)
    if not sources:
        raise InputError(f"{root}: a directory with no log files in it")
    return sources


def file_source(path: str) -> Source:
    """A file named on its own (or by a glob): its identity from its folder and name."""
    return Source(path, identity=identity_of("/".join(Path(path).parts[-2:])))


def _remote(spec: str) -> list[Source]:
    """A URL: a folder (a prefix) read whole, a glob, or one object, as for local paths."""
    fs, root = filesystem(spec)
    if any(c in root for c in "*?["):
        files = sorted((p for p in fs.glob(root) if fs.isfile(p)), key=natural_key)
        if not files:
            raise InputError(f"{spec}: no file matches this pattern")
        return [Source(url_of(fs, p), identity=identity_of("/".join(PurePosixPath(p).parts[-2:]))) for p in files]
    if fs.isdir(root):
        base = root.rstrip("/") + "/"
        relative = {p: p[len(base) :] for p in fs.find(root) if p.startswith(base)}
        files = [p for p, rel in relative.items() if not any(part.startswith(".") for part in rel.split("/")) and is_log_name(PurePosixPath(p))]
        if not files:
            raise InputError(f"{spec}: a directory with no log files in it")
        return [Source(url_of(fs, p), identity=identity_of(relative[p])) for p in sorted(files, key=natural_key)]
    return [Source(spec, identity=identity_of("/".join(PurePosixPath(root).parts[-2:])))]


def expand(inputs: list[str]) -> list[Source]:
    """The sources of the inputs, in the order given (a directory's files in natural order)."""
    sources: list[Source] = []
    for spec in inputs:
        if spec == "-":
            sources.append(Source(spec))
        elif is_url(spec):
            sources += _remote(spec)
        elif os.path.isdir(spec):
            sources += _directory(Path(spec))
        elif not os.path.exists(spec) and any(c in spec for c in "*?["):
            matches = sorted(glob.glob(spec, recursive=True), key=natural_key)
            files = [m for m in matches if os.path.isfile(m)]
            if not files:
                raise InputError(f"{spec}: no file matches this pattern")
            sources += [file_source(m) for m in files]
        else:
            sources.append(file_source(spec))
    return sources
