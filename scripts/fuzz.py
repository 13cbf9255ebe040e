#!/usr/bin/env python3
"""Fuzz `memlog analyze` with mutated real-looking logs; report crashes, hangs and peak memory.

Not part of CI (tests/commands/test_hostile_commands.py runs a small budget of it). Seeds are the logs in
sample_logs/ plus, for every format spec in parsers/, a log assembled from the spec's own sample
lines (so a format without a sample log yet is still fuzzed). Each input is a window of a seed
with one to four mutations: bit flips, byte noise, truncation, line shuffles/duplicates/drops,
spliced (interleaved) lines, huge/odd numbers (1e309, nan, 400 digits, negatives), control
characters, ANSI/OSC/DCS injections, bidi and separator characters, invalid UTF-8, NUL blocks,
CRLF and bare CR, over-long lines, finite extremes (1e154, 1e300, -0.0, 5e-324, steps 2**53+1),
and gzip (intact, truncated or bit-flipped). Around the log (scripts/fuzz_env.py): its file name
(bytes that are not UTF-8, line breaks, `::`/`##[`, markdown and mentions), a config (odd
thresholds, YAML aliases, oversized, `!!python` tags, odd `formats_dirs`), a `--formats-dir` of
user specs (mutated, hostile names, alias bombs, oversized, bad regexes, and block parsers by
path, `..`, symlink: with no `--plugins-dir`, a plugin that runs is a finding), and how it is
attached (a FIFO; in a process of its own: stdin, stdin that is a directory, a closed stdout,
PYTHONIOENCODING=utf-8:strict).

Each input is analysed in-process (default; specs and rules are loaded once per worker) or with
`--subprocess` through `python -m memlog.cli analyze`, then rendered in every output mode.

    crash   an exception other than memlog's own "cannot judge" errors (MemlogError, exit 2),
            or (--subprocess) an exit code other than 0/1/2, a traceback or an "internal error"
    hang    no answer within --timeout seconds (the worker is killed and replaced)
    unsafe  a rendered output holding a control/escape/bidi character, text that is not valid
            UTF-8, a line that is a workflow command (`::x` or `##[`), an @mention, #123 or GH-123
            outside code in markdown, JSON that does not parse, active HTML, a plugin that ran,
            or (in-process) anything printed to stdout/stderr while analysing or rendering

Inputs are derived from (--seed, index), so any finding can be replayed: `--replay INDEX` runs one
input and prints its traceback; `--save DIR` writes every failing input there.

    python scripts/fuzz.py --budget 100000 --workers 2
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import multiprocessing as mp
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from fuzz_env import MARKER, Case, builtin_parsers, feed_fifo, lay_out, make_case, release_fifo, run_special  # noqa: E402  (after sys.path names scripts/)

PARSERS = builtin_parsers(REPO)

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
OWN_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
INJECTIONS = (
    "\x1b]0;pwned\x07", "\x1b]52;c;cHduZWQ=\x07", "\x1b]8;;https://evil.example/\x1b\\x\x1b]8;;\x1b\\",
    "\x1b[2J\x1b[H", "\x1b[10;10H", "\x1b[3A\x1b[2K", "\x1b[5;7;8m", "\x1bP+q544e\x1b\\", "\x1b]0;open",
    "\x1b[31m", "\x1b[38;2;1;2;3m", "\x1b[0m", "#033[32m", "\x9b2J", "\x9d0;x\x9c", "\u202e", "\u2066",
    "\u2028", "\x08", "\x07", "\x7f", "\x0b", "\x0c", "\t", "<img src=x onerror=alert(1)>", "|", "`",
    "::add-mask::x", "%0A", "]]>", "&amp;", "\ufeff", "\ufffd",
)  # fmt: skip
NUMBERS = (
    "nan", "NaN", "inf", "-inf", "1e309", "-1e309", "1e-400", "9" * 400, "-1", "-0.0", "0", "0x1F",
    "1,2,3", "1..2", "99999999999999999999", "-99999999999999999999", "1e18", "3.4e38", "00012", "+5",
    # finite extremes: their squares and sums overflow to inf, their products underflow
    "1e154", "1e300", "-1e300", "1.7976931348623157e308", "2.2250738585072014e-308", "5e-324", "-0.0",
    str(2**53 + 1), str(2**63 - 1), str(2**64),
)  # fmt: skip
NUMBER_TOKEN = re.compile(rb"\d+(?:\.\d+)?")


# --- seeds -------------------------------------------------------------------------------------


def load_seeds() -> list[tuple[str, bytes]]:
    seeds = []
    for path in sorted((REPO / "sample_logs").rglob("*")):
        if path.is_file() and path.stat().st_size < 4 << 20:
            data = path.read_bytes()
            seeds.append((str(path.relative_to(REPO)), gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data))
    try:
        from memlog.parse.catalog import load_specs

        for spec in load_specs().values():
            lines = [s["line"] for s in spec.samples if isinstance(s, dict) and isinstance(s.get("line"), str)]
            if lines:
                seeds.append((f"samples of {spec.name}", ("\n".join(lines * 6) + "\n").encode()))
    except Exception:
        traceback.print_exc()
    if not seeds:
        raise SystemExit("no seeds: sample_logs/ is empty and no spec has samples")
    return seeds


# --- mutations ---------------------------------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def bit_flips(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    buf = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


def byte_noise(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randint(0, len(buf))
        kind = rng.random()
        if kind < 0.4:
            buf[i:i] = rng.randbytes(rng.randint(1, 8))
        elif kind < 0.7 and buf:
            del buf[i : i + rng.randint(1, 8)]
        elif buf:
            buf[min(i, len(buf) - 1)] = rng.randrange(256)
    return bytes(buf)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randint(0, len(data))]


def shuffle_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    if len(lines) > 2:
        a = rng.randrange(len(lines) - 1)
        b = min(len(lines), a + rng.randint(2, 30))
        part = lines[a:b]
        rng.shuffle(part)
        lines[a:b] = part
    return b"\n".join(lines)


def duplicate_or_drop_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    out = []
    for line in lines:
        r = rng.random()
        if r < 0.05:
            continue
        out.append(line)
        if r > 0.95:
            out.extend([line] * rng.randint(1, 3))
    return b"\n".join(out)


def splice_lines(rng: random.Random, data: bytes) -> bytes:
    """Interleave: the head of one line, another whole line, then the tail (ranks sharing stdout)."""
    lines = _lines(data)
    for _ in range(rng.randint(1, 4)):
        if len(lines) < 2:
            break
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        cut = rng.randint(0, len(lines[i]))
        head, tail = lines[i][:cut], lines[i][cut:]
        lines[i : i + 1] = [head + lines[j], tail]
    return b"\n".join(lines)


def odd_numbers(rng: random.Random, data: bytes) -> bytes:
    tokens = list(NUMBER_TOKEN.finditer(data))
    if not tokens:
        return data
    chosen = sorted(rng.sample(tokens, min(len(tokens), rng.randint(1, 12))), key=lambda m: m.start(), reverse=True)
    buf = bytearray(data)
    for m in chosen:
        r = rng.random()
        new = rng.choice(NUMBERS) if r < 0.6 else str(rng.choice([-1, 1]) * rng.randint(0, 10 ** rng.randint(1, 25)))
        buf[m.start() : m.end()] = new.encode()
    return bytes(buf)


def control_chars(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 10)):
        char = chr(rng.choice([*range(32), 127, *range(0x80, 0xA0), 0x2028, 0x202E, 0x2067]))
        i = rng.randint(0, len(buf))
        buf[i:i] = char.encode("utf-8") if rng.random() < 0.8 else bytes([ord(char) & 0xFF])
    return bytes(buf)


def escape_injection(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(lines))
        at = rng.randint(0, len(lines[i]))
        lines[i] = lines[i][:at] + rng.choice(INJECTIONS).encode() + lines[i][at:]
    return b"\n".join(lines)


def invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    junk = (b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80\x80")
    buf = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        i = rng.randint(0, len(buf))
        buf[i:i] = rng.choice(junk)
    return bytes(buf)


def nul_block(rng: random.Random, data: bytes) -> bytes:
    i = rng.randint(0, len(data))
    return data[:i] + b"\0" * rng.choice([1, 7, 512, 4096, 65536]) + data[i:]


def line_endings(rng: random.Random, data: bytes) -> bytes:
    r = rng.random()
    if r < 0.4:
        return data.replace(b"\n", b"\r\n")
    if r < 0.7:
        return data.replace(b"\n", b"\r")
    lines = _lines(data)
    i = rng.randrange(len(lines))
    at = rng.randint(0, len(lines[i]))
    lines[i] = lines[i][:at] + b"\r" + lines[i][at:]
    return b"\n".join(lines)


def long_line(rng: random.Random, data: bytes) -> bytes:
    """Rare (costly): a line past the reader's cut, with or without a newline after it."""
    if rng.random() > 0.05:
        return data + rng.choice([b"x", b"step: "]) * rng.randint(1000, 20000)
    size = rng.choice([1 << 20, (1 << 20) + 1, 3 << 20])
    block = (rng.choice([b"a", b"step: 1 loss: 2 ", "\u00e9".encode()]) * size)[:size]
    i = rng.randint(0, len(data))
    return data[:i] + block + (b"\n" if rng.random() < 0.5 else b"") + data[i:]


def step_jumps(rng: random.Random, data: bytes) -> bytes:
    return re.sub(
        rb"(step[:= ]\s*)(\d+)",
        lambda m: m.group(1) + str(rng.choice([0, 1, -3, 2**31, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 10**30, rng.randint(0, 10**6)])).encode()
        if rng.random() < 0.2 else m.group(0),
        data,
    )  # fmt: skip


def gzip_wrap(rng: random.Random, data: bytes) -> bytes:
    packed = gzip.compress(data, compresslevel=1)
    r = rng.random()
    if r < 0.4:
        return packed
    if r < 0.7:
        return packed[: rng.randint(0, len(packed))]
    return bit_flips(rng, packed)


MUTATIONS = (
    bit_flips, byte_noise, truncate, shuffle_lines, duplicate_or_drop_lines, splice_lines, odd_numbers,
    odd_numbers, control_chars, escape_injection, escape_injection, invalid_utf8, nul_block, line_endings,
    long_line, step_jumps,
)  # fmt: skip


def make_input(seeds: list[tuple[str, bytes]], seed: int, index: int) -> tuple[bytes, str, Case]:
    """Input number `index` of run `seed`: a window of a seed log, mutated, and its surroundings
    (file name, config, specs, how it is attached). Deterministic."""
    rng = random.Random(f"{seed}:{index}")
    name, data = seeds[rng.randrange(len(seeds))]
    lines = data.split(b"\n")
    size = rng.choice([5, 20, 60, 200, 600])
    start = rng.randrange(max(1, len(lines) - size))
    data = b"\n".join(lines[start : start + size]) + b"\n"
    applied = []
    for mutate in rng.sample(MUTATIONS, rng.randint(1, 4)):
        data = mutate(rng, data)
        applied.append(mutate.__name__)
    if rng.random() < 0.08:
        data = gzip_wrap(rng, data)
        applied.append("gzip_wrap")
    case = make_case(rng, PARSERS)
    around = case.describe()
    return data, f"{name} lines {start + 1}-{start + size}: {', '.join(applied)}{'; ' + around if around else ''}", case


# --- running one input -------------------------------------------------------------------------


class InProcess:
    """analyze() and every renderer, with specs and rules loaded once (they are the same for every input)."""

    def __init__(self):
        import memlog.engine.api as api
        from memlog.render.outputs import render

        self.api, self.render = api, render
        try:
            from memlog.render.outputs import OUTPUTS
        except ImportError:
            OUTPUTS = ("text", "json")
        self.outputs = OUTPUTS

    def __call__(self, path: str, case: Case | None = None, config: Path | None = None, specs: Path | None = None) -> tuple[str, str | None]:
        """Analysis and rendering return text; anything they print themselves is a finding too."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            outcome, detail = self._run(path, config, specs if case is None or not case.spec_via_config else None)
        if outcome.startswith("exit") and printed.getvalue():
            return "unsafe", f"printed while analysing: {printed.getvalue()[:300]!r}"
        return outcome, detail

    def _run(self, path: str, config_path: Path | None, specs: Path | None) -> tuple[str, str | None]:
        from memlog.base.config import load_config
        from memlog.base.errors import MemlogError

        try:
            config = load_config(str(config_path)) if config_path else None
            report = self.api.analyze([path], config=config, formats_dirs=[specs] if specs else ())
        except MemlogError:
            return "exit 2", None
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            return "crash", traceback.format_exc()
        try:
            try:
                from memlog.engine.excerpt import attach_log_lines

                attach_log_lines(report)
            except ImportError:
                pass
            from memlog.render.outputs import RenderOptions

            for output in self.outputs:
                text = self.render(report, output, RenderOptions(colour=False, chart=True))
                problem = unsafe(output, OWN_COLOUR.sub("", text) if output == "text" else text)
                if problem:
                    return "unsafe", f"-o {output}: {problem}"
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            return "crash", traceback.format_exc()
        return f"exit {1 if report.fails('error') else 0}", None


WORKFLOW_COMMAND = re.compile(r"^[ \t]*::|##\[", re.MULTILINE)
OWN_ANNOTATION = re.compile(r"::(?:error|warning|notice)(?: [^\n]*?)?::")
LINKED = re.compile(r"(?<![\w`])@\w|(?<![&\w])#\d|(?<![\w-])gh-\d", re.IGNORECASE)


def unsafe(output: str, text: str) -> str | None:
    bad = UNSAFE.search(text)
    if bad:
        return f"{bad.group()!r} in {text[max(0, bad.start() - 60) : bad.start() + 20]!r}"
    try:
        text.encode("utf-8")  # a non-UTF-8 file name reaches Python as surrogates
    except UnicodeEncodeError as exc:
        return f"not valid UTF-8 ({exc.reason} at {exc.start}: {text[max(0, exc.start - 40) : exc.start]!r})"
    for match in WORKFLOW_COMMAND.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if not (output == "github" and match.group().strip() == "::" and OWN_ANNOTATION.match(text, line_start)):
            return f"workflow command: {text[line_start : line_start + 100]!r}"
    if output in ("json", "sarif"):
        try:
            json.loads(text)
        except ValueError as exc:
            return f"invalid JSON: {exc}"
    if output == "html":
        return _active_html(text)
    if output == "markdown":
        return _linked_markdown(text)
    return None


def _active_html(text: str) -> str | None:
    """The HTML report holds no element or attribute that runs or fetches anything."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag in ("script", "iframe", "img", "object", "embed", "link", "base", "form"):
                found.append(f"<{tag}>")
            found.extend(f"{tag} {name}=" for name, value in attrs if name.startswith("on") or (name in ("src", "href") and not (value or "").startswith("#")))

    Tags(convert_charrefs=True).feed(text)
    return f"active HTML: {found[:3]}" if found else None


def _linked_markdown(text: str) -> str | None:
    """Outside code, nothing GitHub would link or notify: @mentions, #123, GH-123, [x](...)."""
    from markdown_it import MarkdownIt

    def walk(tokens):
        for token in tokens:
            yield token
            yield from walk(token.children or [])

    for token in walk(MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(text)):
        if token.type == "text" and (found := LINKED.search(token.content)):
            return f"{found.group()!r} would link: {token.content[max(0, found.start() - 40) : found.end() + 20]!r}"
        if token.type == "link_open":
            return f"a link: {token.attrs}"
    return None


class Subprocess:
    """`python -m memlog.cli analyze FILE -o json`: the exit code and stderr decide."""

    def __init__(self, timeout: float):
        self.timeout = timeout

    def __call__(self, path: str, case: Case | None = None, config: Path | None = None, specs: Path | None = None) -> tuple[str, str | None]:
        extra = (["--config", str(config)] if config else []) + (["--formats-dir", str(specs)] if specs and not case.spec_via_config else [])
        proc = subprocess.run(
            [sys.executable, "-m", "memlog.cli", "analyze", os.fsencode(path), "-o", "json", *extra],
            capture_output=True, text=True, cwd=REPO, timeout=self.timeout * 2,
        )  # fmt: skip
        if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr or "internal error" in proc.stderr:
            return "crash", f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
        if proc.returncode in (0, 1):
            problem = unsafe("json", proc.stdout) or (UNSAFE.search(proc.stderr) and "unsafe stderr")
            if problem:
                return "unsafe", problem
        return f"exit {proc.returncode}", None


def run_case(run_one, case: Case, data: bytes, folder: Path, timeout: float, check_in_process: bool) -> tuple[str, str | None]:
    """Lay the case out in `folder` (empty), run it, and check that no plugin ran."""
    log, config, specs = lay_out(case, folder, data)
    if case.special and case.special != "fifo":
        outcome, detail = run_special(case, log, config, specs, data, REPO, timeout, unsafe)
    elif case.special == "fifo":
        writer = feed_fifo(log, data)
        try:
            outcome, detail = run_one(log, case, config, specs)
        finally:
            release_fifo(log, writer)
    else:
        outcome, detail = run_one(log, case, config, specs)
    if (folder / MARKER).exists():
        return "unsafe", f"plugin code ran without --plugins-dir ({case.describe()})"
    return outcome, detail


def worker(conn, seed: int, use_subprocess: bool, timeout: float) -> None:
    import shutil

    seeds = load_seeds()
    run_one = Subprocess(timeout) if use_subprocess else InProcess()
    tmp = Path(tempfile.mkdtemp(prefix="memlog-fuzz-"))
    try:
        while True:
            index = conn.recv()
            if index is None:
                break
            data, _, case = make_input(seeds, seed, index)
            folder = tmp / str(index)
            folder.mkdir()
            try:
                outcome, detail = run_case(run_one, case, data, folder, timeout, not use_subprocess)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            conn.send((index, outcome, detail, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- the run -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=1000, help="number of inputs (default 1000)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before an input counts as a hang")
    parser.add_argument("--subprocess", action="store_true", help="run `python -m memlog.cli` per input")
    parser.add_argument("--save", type=Path, help="write failing inputs (and their tracebacks) here")
    parser.add_argument("--replay", type=int, help="run input INDEX alone, in this process, and print the result")
    args = parser.parse_args(argv)

    if args.replay is not None:
        seeds = load_seeds()
        data, description, case = make_input(seeds, args.seed, args.replay)
        with tempfile.TemporaryDirectory(prefix="memlog-fuzz-") as folder:
            run_one = Subprocess(args.timeout) if args.subprocess else InProcess()
            outcome, detail = run_case(run_one, case, data, Path(folder), args.timeout, not args.subprocess)
        print(f"input {args.replay}: {description} ({len(data):,} bytes)\noutcome: {outcome}\n{detail or ''}")
        return 0 if outcome.startswith("exit") else 1

    seeds = load_seeds()
    print(f"seeds: {len(seeds)} ({', '.join(name for name, _ in seeds)})", flush=True)
    ctx = mp.get_context("spawn")  # polars runs threads: a forked child can deadlock on their locks
    started = time.monotonic()
    outcomes: Counter[str] = Counter()
    failures: list[tuple[int, str, str]] = []
    peak_rss_kib = 0
    next_index, done = 0, 0
    busy: dict = {}  # connection -> (process, index, started)

    def spawn():
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(child, args.seed, args.subprocess, args.timeout), daemon=True)
        proc.start()
        child.close()
        return parent, proc

    workers = [spawn() for _ in range(max(1, args.workers))]
    idle = list(workers)

    def record(index: int, outcome: str, detail: str | None) -> None:
        nonlocal done
        done += 1
        outcomes[outcome] += 1
        if not outcome.startswith("exit"):
            failures.append((index, outcome, detail or ""))
            _, description, case = make_input(seeds, args.seed, index)
            print(f"  {outcome.upper()} input {index} ({description})", flush=True)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                data, _, _ = make_input(seeds, args.seed, index)
                (args.save / f"{outcome}-{index}.log").write_bytes(data)  # the log; the .txt says what surrounded it
                (args.save / f"{outcome}-{index}.txt").write_text(f"{description}\n\n{detail or ''}")

    last_report = started
    while done < args.budget:
        while idle and next_index < args.budget:
            conn, proc = idle.pop()
            conn.send(next_index)
            busy[conn] = (proc, next_index, time.monotonic())
            next_index += 1
        for conn in wait(list(busy), timeout=0.5):
            proc, index, _ = busy.pop(conn)
            try:
                got, outcome, detail, rss = conn.recv()
            except EOFError:  # the worker died (segfault, OOM kill): a crash
                record(index, "crash", f"worker died with exit code {proc.join(1) or proc.exitcode}")
                conn.close()
                idle.append(spawn())
                continue
            peak_rss_kib = max(peak_rss_kib, rss)
            record(got, outcome, detail)
            idle.append((conn, proc))
        now = time.monotonic()
        for conn, (proc, index, since) in list(busy.items()):
            if now - since > args.timeout:
                proc.kill()
                proc.join()
                del busy[conn]
                conn.close()
                record(index, "hang", f"no answer after {args.timeout:.0f}s")
                idle.append(spawn())
        if now - last_report > 30:
            last_report = now
            print(f"  ... {done:,}/{args.budget:,} inputs, {done / (now - started):.0f}/s", flush=True)
    for conn, proc in idle:
        conn.send(None)
    for conn, proc in idle:
        proc.join(5)
    children_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    elapsed = time.monotonic() - started

    crashes = outcomes["crash"] + outcomes["unsafe"]
    print(f"inputs:        {done}")
    print(f"crashes:       {outcomes['crash']}")
    print(f"unsafe:        {outcomes['unsafe']}")
    print(f"hangs:         {outcomes['hang']}")
    print("exit codes:    " + ", ".join(f"{k[5:]}={v:,}" for k, v in sorted(outcomes.items()) if k.startswith("exit")))
    print(f"peak RSS:      {max(peak_rss_kib, children_rss) / 1024:.0f} MiB (largest worker)")
    print(f"time:          {elapsed:.1f} s ({done / elapsed:.0f} inputs/s, {len(workers)} workers, {'subprocess' if args.subprocess else 'in-process'})")
    for index, outcome, detail in failures[:5]:
        print(f"\n--- {outcome} input {index} (replay: scripts/fuzz.py --seed {args.seed} --replay {index})\n{detail[-3000:]}")
    return 1 if crashes or outcomes["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
