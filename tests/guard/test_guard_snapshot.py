"""Allocator snapshots (memlog/guard/snapshot.py, `memlog snapshot show|diff`): read with a restricted
unpickler (a hostile pickle is one line and exit 2, and nothing it names runs), and the allocation
sites whose live bytes grew, found among thousands of steady ones."""

from __future__ import annotations

import copy
import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.guard.snapshot import MAX_BLOCKS, SnapshotError, diff_snapshots, live_sites, load_snapshot, ranked, where
from tests.logwriters import snapshots

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads(runner.invoke(app, ["schema", "--kind", "snapshot"]).stdout)
LEAK_SITE = snapshots.stack("/workspace/train.py", 88, "train_step")  # `self.history.append(outputs)`
MIB = 1 << 20


def leaking_pair(rng: random.Random, steady: int = 3000, history_layout: bool = False) -> tuple[dict, dict]:
    """A at step 101, B at step 121: `steady` sites hold the same bytes in both (at other addresses,
    in another order), 200 of them move by a small block either way, and the leaking site goes from
    4 to 24 blocks of 8 MiB."""
    sites = snapshots.steady_sites(rng, steady)
    later = [(frames, list(sizes)) for frames, sizes in sites]
    for i in rng.sample(range(steady), min(200, steady // 2)):
        (later if rng.random() < 0.5 else sites)[i][1].append(4096)  # a small block more in B, or in A
    a = snapshots.snapshot([*sites, (LEAK_SITE, [8 * MIB] * 4)], rng, history_layout=history_layout)
    b = snapshots.snapshot([*later, (LEAK_SITE, [8 * MIB] * 24)], rng, history_layout=history_layout)
    return a, b


def write(path: Path, data, protocol: int = 4) -> Path:
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    return path


def test_the_leaking_site_comes_first_among_thousands_of_steady_ones():
    a, b = leaking_pair(random.Random(3))
    diff = diff_snapshots(a, b)
    top = diff.grown[0]
    assert top.stack == tuple((f["filename"], f["line"], f["name"]) for f in LEAK_SITE)
    assert (top.growth, top.blocks_before, top.blocks_after) == (160 * MIB, 4, 24)
    assert top.where == "/workspace/train.py:88 in train_step"  # past torch's own frames
    assert all(change.growth <= 4096 for change in diff.grown[1:])  # the steady sites' noise, far below
    assert diff.unchanged >= 2800 and len(diff.changes) == 3001
    assert diff.after.live_bytes - diff.before.live_bytes == 160 * MIB + 4096 * (len(diff.grown) - 1) - 4096 * diff.shrank


def test_pytorch_2_0_history_layout_and_a_bare_list_of_segments_read_alike():
    a, b = leaking_pair(random.Random(4), steady=300, history_layout=True)
    assert diff_snapshots(a, b).grown[0].growth == 160 * MIB
    bare = live_sites(a["segments"] and {"segments": a["segments"]})
    assert bare.live_bytes == live_sites(a).live_bytes


def test_show_ranks_sites_by_live_bytes_and_counts_only_live_blocks():
    rng = random.Random(5)
    big = snapshots.stack("/workspace/model/embed.py", 12, "__init__")
    snap = snapshots.snapshot([(big, [1 << 30]), *snapshots.steady_sites(rng, 50)], rng, pending=5)
    sites = live_sites(snap)
    assert ranked(sites)[0].where == "/workspace/model/embed.py:12 in __init__"
    live = sum(b["size"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    assert sites.live_bytes == live  # neither the cache (inactive) nor blocks freed and waiting for their stream
    assert sites.reserved_bytes == sum(s["total_size"] for s in snap["segments"])


def test_where_names_the_users_frame_past_torch_and_native_frames():
    native = ("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1200, "c10::cuda::CUDACachingAllocator::malloc")
    user = ("/workspace/train.py", 5, "step")
    assert where((native, ("/x/site-packages/torch/_tensor.py", 1, "f"), user)) == "/workspace/train.py:5 in step"
    assert where((("/x/site-packages/transformers/trainer.py", 9, "train"),)) == "transformers/trainer.py:9 in train"
    assert where((native,)).startswith("/pytorch/c10/cuda/CUDACachingAllocator.cpp:1200")  # nothing else: the first frame
    assert where(()).startswith("(no stack recorded")


def test_cli_diff_text_and_json(tmp_path):
    a, b = leaking_pair(random.Random(6), steady=2000)
    pa, pb = write(tmp_path / "A.pickle", a), write(tmp_path / "B.pickle", b)
    text = runner.invoke(app, ["snapshot", "diff", str(pa), str(pb), "--top", "3"])
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    first = lines.index(next(line for line in lines if line.startswith("Allocation sites whose live bytes grew"))) + 1
    assert lines[first].split()[0] == "+160.0" and lines[first].endswith("/workspace/train.py:88 in train_step")
    assert "at /opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py:125 in forward" in lines[first + 1]
    out = runner.invoke(app, ["snapshot", "diff", str(pa), str(pb), "-o", "json"])
    document = json.loads(out.stdout)
    jsonschema.validate(document, SCHEMA)
    assert document["grown"][0]["growth_bytes"] == 160 * MIB and document["sites"] == 2001
    assert document["grown"][0]["frames"][3] == {"filename": "/workspace/train.py", "line": 88, "name": "train_step"}


def test_cli_show_text_and_json(tmp_path):
    rng = random.Random(7)
    path = write(tmp_path / "one.pickle", snapshots.snapshot(snapshots.steady_sites(rng, 100), rng))
    text = runner.invoke(app, ["snapshot", "show", str(path), "--top", "5"])
    assert text.exit_code == 0 and "Largest live allocation sites (top 5):" in text.stdout
    document = json.loads(runner.invoke(app, ["snapshot", "show", str(path), "-o", "json"]).stdout)
    jsonschema.validate(document, SCHEMA)
    sizes = [site["bytes"] for site in document["largest"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) == 20


def test_protocol_5_and_2_read_like_4(tmp_path):
    a, _ = leaking_pair(random.Random(8), steady=50)
    for protocol in (2, 5):
        assert live_sites(load_snapshot(write(tmp_path / f"p{protocol}.pickle", a, protocol))).live_bytes == live_sites(a).live_bytes


class Runs:
    """Pickles whatever os.system would do on load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def hostile_pickles(marker: Path) -> dict[str, bytes]:
    """Ways a pickle names code: REDUCE of a global (protocols 0 and 4), INST (protocol 0), a class
    with state (BUILD), a persistent id; each inside an otherwise plain snapshot."""
    plain = {"segments": [], "device_traces": [[]]}
    inside = dict(plain, allocator_settings=Runs(marker))
    return {
        "reduce-protocol-4": pickle.dumps(inside, protocol=4),
        "reduce-protocol-0": pickle.dumps(inside, protocol=0),
        "inst-protocol-0": b"(i" + b"os\nsystem\n" + f"(S'touch {marker}'\ntR.".encode(),
        "build": pickle.dumps(dict(plain, settings=random.Random(1)), protocol=2),
        "persistent-id": b"\x80\x04P" + b"0\n" + b".",
    }


@pytest.mark.parametrize("kind", list(hostile_pickles(Path("/x"))))
def test_a_hostile_pickle_is_refused_in_one_line_and_nothing_runs(tmp_path, kind):
    marker = tmp_path / "ran"
    path = tmp_path / f"{kind}.pickle"
    path.write_bytes(hostile_pickles(marker)[kind])
    with pytest.raises(SnapshotError, match="refused: the pickle (asks to build|asks for a persistent)"):
        load_snapshot(path)
    # The real command, in a process of its own: one line on stderr, exit 2, no traceback, nothing run.
    done = subprocess.run([sys.executable, "-m", "memlog", "snapshot", "show", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("memlog: error: "), done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_a_global_through_the_extension_registry_is_refused(tmp_path):
    import copyreg

    copyreg.add_extension("os", "system", 0xF0)
    try:
        path = tmp_path / "extension.pickle"
        path.write_bytes(b"\x80\x02\x82\xf0" + b"X\x04\x00\x00\x00true\x85R.")  # EXT1 240, ("true",), REDUCE
        assert pickle.loads(path.read_bytes()) == 0  # what it does unrestricted: runs `true` (and caches os.system)
        with pytest.raises(SnapshotError, match="refused: the pickle holds opcode EXT1"):
            load_snapshot(path)
        a, _ = leaking_pair(random.Random(11), steady=100)  # a registry with codes takes the pure-Python path: same snapshot
        assert live_sites(load_snapshot(write(tmp_path / "a.pickle", a))).by_stack == live_sites(a).by_stack
    finally:
        copyreg.remove_extension("os", "system", 0xF0)


def test_the_hostile_reduce_would_run_with_a_plain_unpickler(tmp_path):
    """The refusal above is the restriction's doing: pickle's own loader runs the command."""
    marker = tmp_path / "ran"
    pickle.loads(hostile_pickles(marker)["reduce-protocol-4"])
    assert marker.exists()


@pytest.mark.parametrize(
    "data, said",
    [
        (b"not a pickle at all\n", "not a readable pickle"),
        (pickle.dumps({"segments": [{"blocks": []}]})[:-5], "not a readable pickle"),  # cut short
        (pickle.dumps(42), "no list of `segments`"),
        (pickle.dumps({"device_traces": []}), "no list of `segments`"),
        (pickle.dumps({"segments": [{"blocks": [{"state": "active_allocated", "frames": []}]}]}), "a block without a size"),
        (pickle.dumps({"segments": [{"blocks": [{"size": 1, "state": "active_allocated", "frames": [{"filename": ["x"]}]}]}]}), "wrong type"),
        (pickle.dumps({"segments": [{"blocks": [{"size": True, "state": "active_allocated"}]}]}), "a block without a size"),
        (pickle.dumps({"segments": ["x"]}), "a segment without a list of blocks"),
    ],
)
def test_malformed_snapshots_are_one_line(tmp_path, data, said):
    path = tmp_path / "bad.pickle"
    path.write_bytes(data)
    result = runner.invoke(app, ["snapshot", "diff", str(path), str(path)])
    assert result.exit_code == 2 and said in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_list_shared_a_million_times_is_capped_not_walked(tmp_path):
    """Plain containers can still cost: one segment of 100 blocks referenced by every entry of a
    long list is a small pickle (memo references) and more blocks than a device holds."""
    segment = {"blocks": [{"size": 1, "state": "active_allocated", "frames": []}] * 100}
    path = write(tmp_path / "shared.pickle", {"segments": [segment] * (MAX_BLOCKS // 100 + 10)})
    assert path.stat().st_size < 50 * MIB
    with pytest.raises(SnapshotError, match="more than"):
        live_sites(load_snapshot(path), "shared.pickle")


def test_missing_file_and_directory_are_one_line(tmp_path):
    for target, said in ((tmp_path / "nope.pickle", "no such file"), (tmp_path, "is a directory")):
        result = runner.invoke(app, ["snapshot", "show", str(target)])
        assert result.exit_code == 2 and said in result.stderr


def test_escape_sequences_in_frames_never_reach_the_terminal(tmp_path):
    rng = random.Random(9)
    evil = snapshots.stack("/workspace/\x1b]0;pwned\x07train.py", 1, "\x1b[2Jstep")
    path = write(tmp_path / "evil.pickle", snapshots.snapshot([(evil, [MIB])], rng))
    for output in ("text", "json"):
        result = runner.invoke(app, ["snapshot", "show", str(path), "-o", output])
        assert result.exit_code == 0 and "\x1b" not in result.stdout


def test_the_in_memory_diff_is_the_files_diff(tmp_path):
    a, b = leaking_pair(random.Random(10), steady=500)
    from_files = diff_snapshots(load_snapshot(write(tmp_path / "a", a)), load_snapshot(write(tmp_path / "b", copy.deepcopy(b))))
    assert from_files.to_json() == diff_snapshots(a, b).to_json()
