"""Reading: gzip by magic bytes, stdin, CRLF and bare CR, bad bytes, over-long and unterminated lines."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlog.engine.api import analyze
from memlog.read import source as reading
from memlog.read.source import Source, read_chunks


def lines_of(path, **kw) -> tuple[pl.DataFrame, Source]:
    source = Source(str(path))
    frames = list(read_chunks(source, **kw))
    return (pl.concat(frames) if frames else pl.DataFrame({"line_no": [], "text": []})), source


def test_plain_lines_keep_their_numbers(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"one\ntwo\nthree\n")
    frame, source = lines_of(p)
    assert frame.rows() == [(1, "one"), (2, "two"), (3, "three")]
    assert source.stats.lines == 3


def test_gzip_is_detected_by_magic_not_extension(tmp_path):
    p = tmp_path / "looks_plain.log"
    p.write_bytes(gzip.compress(b"alpha\nbeta\n"))
    frame, source = lines_of(p)
    assert frame["text"].to_list() == ["alpha", "beta"]
    assert source.stats.gzip


def test_truncated_gzip_keeps_what_was_readable(tmp_path):
    p = tmp_path / "cut.gz"
    p.write_bytes(gzip.compress(b"".join(b"line %d\n" % i for i in range(5000)))[:-40])
    frame, source = lines_of(p)
    assert source.stats.damaged and "truncated or corrupt" in source.stats.damaged
    assert frame.height > 0


def test_crlf_and_bare_cr(tmp_path):
    p = tmp_path / "tqdm.log"
    p.write_bytes(b"a\r\nbar 1/10\rbar 2/10\r(TaskRunner pid=1) step:1 - x:1\nlast\r\n")
    frame, _ = lines_of(p)
    assert frame.rows() == [(1, "a"), (2, "bar 1/10"), (2, "bar 2/10"), (2, "(TaskRunner pid=1) step:1 - x:1"), (3, "last")]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    p = tmp_path / "bad.log"
    p.write_bytes(b"ok\n\xff\xfe step: 1\nfine\n")
    frame, source = lines_of(p)
    assert frame["text"].to_list() == ["ok", "\ufffd\ufffd step: 1", "fine"]
    assert source.stats.replaced_bytes == 2


def test_unterminated_last_line_is_read(tmp_path):
    p = tmp_path / "t.log"
    p.write_bytes(b"first\nsecond")
    frame, _ = lines_of(p)
    assert frame["text"].to_list() == ["first", "second"]


def test_lines_across_chunk_boundaries(tmp_path):
    p = tmp_path / "c.log"
    body = b"".join(b"line number %d\n" % i for i in range(1000))
    p.write_bytes(body)
    frame, _ = lines_of(p, chunk_bytes=97)
    assert frame["text"].to_list() == [f"line number {i}" for i in range(1000)]
    assert frame["line_no"].to_list() == list(range(1, 1001))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab \t:=[]0123456789\r\u00e9", max_size=120), max_size=60), st.integers(min_value=1, max_value=400))
def test_lines_are_the_same_whatever_the_chunk_size(tmp_path_factory, lines, chunk):
    """Cutting blocks into pieces of whole lines (reading.LineCutter; a piece is copied once where no
    hard wrap is to be joined) gives the lines that one block holding the whole file gives. Hard
    wraps are decided on the first 4 lines here, so that small files reach the pieces cut after."""
    path = tmp_path_factory.mktemp("c") / "x.log"
    path.write_bytes("\n".join(lines).encode())
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(reading.hardwrap, "SAMPLE_LINES", 4)
        patched.setattr(reading.hardwrap, "ENOUGH_BYTES", 256)
        whole, whole_source = lines_of(path, chunk_bytes=1 << 20)
        cut, cut_source = lines_of(path, chunk_bytes=chunk)
    assert cut.rows() == whole.rows()
    assert cut_source.stats.lines == whole_source.stats.lines


def test_overlong_line_is_cut_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(reading, "MAX_LINE_BYTES", 100)
    p = tmp_path / "long.log"
    p.write_bytes(b"a\n" + b"x" * 1000 + b"\nb\n" + b"y" * 5000)
    frame, source = lines_of(p, chunk_bytes=64)
    texts = frame["text"].to_list()
    assert texts[0] == "a" and texts[1] == "x" * 100 and texts[2] == "b" and texts[3] == "y" * 100
    assert source.stats.truncated_lines == 2


def test_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(gzip.compress(b"s1\ns2\n")))))
    frames = list(read_chunks(Source("-")))
    assert pl.concat(frames)["text"].to_list() == ["s1", "s2"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=300))
def test_arbitrary_bytes_never_raise_and_count_lines(tmp_path_factory, data, chunk):
    p = tmp_path_factory.mktemp("h") / "x.log"
    p.write_bytes(data)
    frame, source = lines_of(p, chunk_bytes=chunk)
    assert source.stats.bytes_read == len(data) or source.stats.gzip or source.stats.damaged
    if not data.startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\xfd7zXZ\x00", b"BZh")):  # compressed: read as such
        expected = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        assert source.stats.lines == expected
        if frame.height:
            assert frame["line_no"].max() <= expected


def test_hard_wrapped_lines_are_joined_across_chunk_boundaries(tmp_path):
    """A line cut at a fixed width is joined back even where the cut falls at the end of a chunk:
    the cutter never ends a chunk after a line the next one may continue (memlog/read/hardwrap.py).
    (Chunks too small to show the wrap in the first one leave their first lines as they are.)"""
    logical = [f"(TaskRunner pid=7) step:{i} - " + " - ".join(f"perf/key_{k}:{i * 1.5 + k:.3f}" for k in range(12)) for i in range(1, 200)]
    width = 97
    physical = [line[j : j + width] for line in logical for j in range(0, len(line), width)]
    log = tmp_path / "wrapped.log"
    log.write_text("\n".join(physical) + "\n")
    for chunk_bytes in (1000, 1500, 4096, 1 << 20):
        lines = [t for chunk in read_chunks(Source(str(log)), chunk_bytes=chunk_bytes) for t in chunk["text"].to_list()]
        assert lines == logical, chunk_bytes
    numbers = [n for chunk in read_chunks(Source(str(log)), chunk_bytes=1000) for n in chunk["line_no"].to_list()]
    assert numbers[:3] == [1, 1 + -(-len(logical[0]) // width), 1 + 2 * -(-len(logical[0]) // width)]  # first physical line


def test_lines_that_merely_share_the_longest_length_are_not_joined(tmp_path):
    """Step lines of one length, and a longest line always followed by another kind (a memory hook
    printing after each step line), are what the program printed: nothing is joined."""
    constant = [f"2025-06-01 10:00:{i % 60:02d} | INFO | step {i:08d}/00001000 | loss {1 + i / 1e3:.4f} | peak-gpu-memory 57.26 GB" for i in range(300)]
    pairs = []
    for i in range(1, 100):
        pairs += [
            f"Epoch(train) [1][{i:>3}/500]  lr: 2.0000e-02  memory: {3700 + i % 3}  loss: {1.5 - i / 500:.4f}",
            f"Memory information used_memory: {60000 + 300 * i:06d} MB, swap_memory_utilization: 0.0 %, current_process_memory: {10000 + 2 * i:06d} MB",
        ]
    for name, lines in (("constant", constant), ("pairs", ["Checkpoints will be saved to /work_dirs.", *pairs])):
        log = tmp_path / f"{name}.log"
        log.write_text("\n".join(lines) + "\n")
        assert [t for chunk in read_chunks(Source(str(log))) for t in chunk["text"].to_list()] == lines, name


# Bytes the two ways of splitting a piece could read differently: line ends, CR, NUL, quotes and
# separators a CSV reader knows, a byte-order mark, U+FFFD printed, invalid and multi-byte UTF-8,
# the magic bytes of gzip, zlib and zstd (polars' reader decompresses what starts with them).
_AWKWARD = [
    b"a",
    b"\n",
    b"\r",
    b"\0",
    b'"',
    b",",
    b"\t",
    b" ",
    b"#",
    b"\xef\xbb\xbf",
    b"\xef\xbf\xbd",
    b"\xff",
    b"\xc3",
    b"\xc3\xa9",
    b"\xe2\x96\x88",
    b"\x1f\x8b",
    b"x\x01",
    b"x\x9c",
    b"(\xb5/\xfd",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_AWKWARD), max_size=40), st.integers(min_value=1, max_value=1000))
def test_polars_split_reads_a_piece_as_decoding_and_splitting_it(parts, first):
    """to_frame splits valid UTF-8 with polars' reader (reading._split_utf8) and decodes the rest
    in Python: both give the same lines and the same reading stats for any piece."""
    data = b"".join(parts) + b"\n"
    lines = data.count(b"\n")

    def frame(split) -> tuple[pl.DataFrame, reading.ReadStats]:
        stats = reading.ReadStats(lines=lines)
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(reading, "_split_utf8", split)
            return reading.to_frame(reading.Piece(data, first, stats)), stats

    (split, split_stats), (decoded, decoded_stats) = frame(reading._split_utf8), frame(lambda data, lines: None)
    assert split.equals(decoded) and split_stats == decoded_stats


def test_polars_split_is_taken_for_utf8_text():
    """The fast path is the one valid UTF-8 (with CRs, quotes, empty lines) takes."""
    data = 'a,"b\r\n\n\r\n é █ \ufffd\n'.encode()
    split = reading._split_utf8(data, data.count(b"\n"))
    assert split is not None and split.to_list() == ['a,"b', "", "", " é █ \ufffd"]
    assert reading._split_utf8(b"\xff\n", 1) is None and reading._split_utf8(b"\xef\xbb\xbfx\n", 1) is None
    assert reading._split_utf8(b"x\x01 not zlib\n", 1) is None  # polars would take it for zlib


def test_lines_that_only_reach_a_formats_longest_length_are_no_hard_wrap():
    """A terminal piles lines up at exactly its width; a step line format's longest lines are spread
    just below it (one digit fewer). A few of the longest step lines followed by a crash line are
    not wrapped lines to join."""
    from memlog.read import hardwrap

    step = "[titan] 2025-03-04 17:00:{:02d},931 - root - INFO - step: {:2d}  loss:  8.{}000  memory: 41.00GiB(51.83%)  tps: {}  mfu: 31.40%"
    lines = []
    for i in range(1, 12):
        lines.append(step.format(i, i, i % 10, "12,345" if i % 4 == 1 else "4,512"))
        if i % 4 == 1:
            lines.append("torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)")
    data = ("\n".join(lines) + "\n").encode()
    assert hardwrap.wrap_of(data) is None
    # The same lines cut by a terminal at 80 columns are a wrap.
    cut = [line[i : i + 80] for line in lines for i in range(0, len(line), 80)]
    assert hardwrap.wrap_of(("\n".join(cut) + "\n").encode()) is not None


def test_a_formats_fixed_length_lines_each_followed_by_its_own_line_are_no_hard_wrap(tmp_path):
    """Megatron's iteration line keeps one length for long stretches (fixed-width fields) and, with
    --log-memory-interval, is always followed by the memory report: by lengths alone that is a wrap
    (every longest line "continued" by a line that only ever follows it). The memory lines are lines
    a format reads on their own, so they are not joined and the leak in them is read; the same log
    cut by a terminal at 100 columns is still joined back and judged the same."""
    from memlog.read import hardwrap
    from tests.logwriters.megatron import iteration_line, report_memory

    lines = []
    for i in range(1, 41):
        it = 10 * i
        lines.append(
            iteration_line(
                iteration=it,
                train_iters=10_000,
                elapsed_ms=1234.5,
                lr=3e-4,
                global_batch_size=512,
                consumed_samples=512 * it,
                losses={"lm loss": 3.4 - i / 100},
                loss_scale=1.0,
                skipped=0,
                nan=0,
                grad_norm=0.873,
            )
        )
        used = 20_000 + 97.0 * i
        lines.append(
            report_memory(f"(after {it} iterations)", allocated=used, max_allocated=used + 26_600, reserved=used + 31_000, max_reserved=used + 31_000, rank=0)
        )
    assert len({len(line) for line in lines[::2]}) == 1  # every iteration line one length: a wrap by lengths alone
    log = tmp_path / "megatron.log"
    log.write_text("\n".join(lines) + "\n")
    assert hardwrap.wrap_of(log.read_bytes()) is not None  # what lengths alone say (the reader asks further)
    report = analyze([str(log)])
    assert report.verdict == "leak", report.verdict
    cut = tmp_path / "megatron-cut.log"
    cut.write_text("".join(line[i : i + 100] + "\n" for line in lines for i in range(0, len(line), 100)))
    assert analyze([str(cut)]).verdict == "leak"


def test_workers_are_named_shortly_by_what_tells_them_apart():
    """tables.series.worker_names: the worker alone where it names one worker; its rank and attempt
    in a torchrun --log-dir run; else the fewest trailing path parts that tell the files apart."""
    import polars as pl

    from memlog.tables.series import worker_names

    def names(pairs):
        return sorted(worker_names(pl.DataFrame(pairs, schema=["source", "worker"], orient="row")).values())

    assert names([("/a/rank0.log", "rank0"), ("/a/rank1.log", "rank1")]) == ["rank0", "rank1"]
    run = "/runs/job/logs/none_k2x9w1qa"
    assert names([(f"{run}/attempt_{a}/{r}/stdout.log", f"rank{r}") for a in (0, 1) for r in (0, 1)]) == [
        "rank0 (attempt 0)", "rank0 (attempt 1)", "rank1 (attempt 0)", "rank1 (attempt 1)",
    ]  # fmt: skip
    assert names([("/x/exp1/node1/train.log", "main"), ("/x/exp1/node2/train.log", "main")]) == ["node1/train.log:main", "node2/train.log:main"]
    assert names([("/x/a/train.log", "main"), ("/y/b/train.log", "main"), ("/y/b/c/train.log", "main")]) == [
        "a/train.log:main",
        "b/train.log:main",
        "c/train.log:main",
    ]


RICH = Path(__file__).resolve().parents[2] / "sample_logs" / "generic" / "rich_handler_wrapped_stable.log"


def _rich_records(path, chunk_bytes: int = 1 << 20) -> list[str]:
    return [t for chunk in read_chunks(Source(str(path)), chunk_bytes=chunk_bytes) for t in chunk["text"].to_list()]


@pytest.mark.parametrize("label", ["[rank{r}]: ", " {r}: ", "worker-{r}: ", "[1,{r}]<stdout>:", "> {r}: "])
def test_rich_records_behind_launcher_labels_are_joined_per_label(tmp_path, label):
    """RichHandler's records wrapped over several lines (memlog/read/richlog.py), relayed by a launcher
    that labels each line: two ranks' lines alternating, one by one, are joined per label into the
    records each rank logged, across chunk boundaries too."""
    bare = _rich_records(RICH)
    lines = RICH.read_text().splitlines()
    log = tmp_path / "ranks.log"
    log.write_text("".join(label.format(r=r) + line + "\n" for line in lines for r in (0, 1)))
    for chunk_bytes in (2000, 4096, 1 << 20):
        records = _rich_records(log, chunk_bytes)
        for r in (0, 1):
            mine = label.format(r=r)
            # (a blank line keeps its label, its trailing blank dropped as every line's is)
            assert [(t + " ")[len(mine) :].rstrip(" ") for t in records if (t + " ").startswith(mine)] == bare, (chunk_bytes, r)
        assert len(records) == 2 * len(bare)


def test_rich_records_behind_a_timestamp_per_line_are_joined(tmp_path):
    """kubectl's `--timestamps` differ on every line of one stream: still one stream."""
    bare = _rich_records(RICH)
    lines = RICH.read_text().splitlines()
    log = tmp_path / "pod.log"
    log.write_text("".join(f"2025-09-12T02:{i // 600 % 60:02d}:{i // 10 % 60:02d}.{i * 7919 % 10**9:09d}Z {line}\n" for i, line in enumerate(lines)))
    records = _rich_records(log, 4096)
    assert [t[31:] for t in records] == bare


def test_records_held_back_to_the_end_add_no_line(tmp_path):
    """The cutter holds a rich record (or hard-wrapped lines) back until the next block; at the end
    of the file those lines already end in their newline: no empty line is added after them."""
    frame, source = lines_of(RICH)
    assert source.stats.lines == len(RICH.read_text().splitlines())
    assert frame["text"][-1] != "" and frame["line_no"].max() < source.stats.lines + 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.booleans(), min_size=40, max_size=400), st.integers(min_value=3000, max_value=40000))
def test_interleaved_rich_records_are_never_cut_in_two(tmp_path_factory, turns, chunk):
    """However two ranks' labelled lines interleave (`turns`: whose line comes next) and wherever a
    block ends, each rank's records come out whole (richlog.RichRecords.settle cuts where no record
    of any label is open)."""
    bare = _rich_records(RICH)
    lines = RICH.read_text().splitlines()
    queues = [[f"[rank{r}]: {line}" for line in lines] for r in (0, 1)]
    out = []
    for turn in turns * (2 * len(lines) // len(turns) + 1):
        if queues[turn]:
            out.append(queues[turn].pop(0))
    out += queues[0] + queues[1]
    log = tmp_path_factory.mktemp("rich") / "ranks.log"
    log.write_text("\n".join(out) + "\n")
    records = _rich_records(log, chunk)
    for r in (0, 1):
        mine = f"[rank{r}]: "
        assert [(t + " ")[len(mine) :].rstrip(" ") for t in records if (t + " ").startswith(mine)] == bare, r
