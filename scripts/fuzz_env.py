"""What scripts/fuzz.py varies around the log itself: the file's name, a config, a folder of user
format specs, and how the input and output are attached (a FIFO, stdin, stdin that is a directory,
a closed stdout, a stdout that only takes strict UTF-8).

Everything is derived from the input's random generator, so an input replays exactly. A case that
names a Python block parser (beside its spec, by `../`, by absolute path or through a symlink, or
by a YAML `!!python` tag) carries a plugin that writes MARKER when it runs: memlog never gets
`--plugins-dir` here, so the marker existing afterwards is a finding.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "PLUGIN_RAN"

# File names: bytes that are not UTF-8, line breaks, workflow commands, markdown and mentions,
# escape sequences, a leading dash. Never `/` or NUL (no file system takes them).
NAME_PARTS = (
    b"\xff\xfe", b"\xc3(", b"\xed\xa0\x80", b"\n", b"\r\n", b"\n::add-mask::x", b"::warning::n", b"##[error]e",
    b"@octocat", b"GH-12", b"#34", b"*b*", b"[x](javascript:alert(1))", b"<img src=x onerror=alert(1)>",
    b"`t`", b"|", b"\x1b]0;pwned\x07", b"\x1b[2J", b"\xe2\x80\xae", b"-o json", b" ", b"%0A", b"\t",
)  # fmt: skip
# Finite extremes and odd values for thresholds and capacities.
ODD_VALUES = (
    0, -1, -0.0, 1e154, 1e300, -1e300, 5e-324, 2**53 + 1, 10**400, ".inf", "-.inf", ".nan", '"x"', "true",
    "[]", "{}", "null", "1e154", "0x10", "~", "2.5", "100",
)  # fmt: skip
SPECIALS = (("fifo", 0.03), ("stdin", 0.02), ("strict-stdout", 0.02), ("closed-stdout", 0.01), ("stdin-dir", 0.004))
OUTPUTS = ("text", "json", "markdown", "github", "sarif", "junit", "html")


@dataclass
class Case:
    """One fuzz input's surroundings; `describe()` says what was chosen."""

    name: bytes = b"input.log"
    config: str | None = None  # YAML text
    specs: dict[str, bytes] = field(default_factory=dict)  # files of a --formats-dir folder
    spec_via_config: bool = False  # the folder named by the config's formats_dirs, not on the command line
    special: str | None = None
    output: str = "json"  # for the subprocess specials
    links: dict[str, str] = field(default_factory=dict)  # symlink name -> target (relative to the case dir)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = []
        if self.name != b"input.log":
            parts.append(f"name {self.name!r}")
        parts += self.notes
        if self.special:
            parts.append(f"{self.special} (-o {self.output})")
        return "; ".join(parts)


def make_case(rng: random.Random, parsers: list[tuple[str, str]]) -> Case:
    case = Case()
    if rng.random() < 0.25:
        parts = rng.sample(NAME_PARTS, rng.randint(1, 4))
        case.name = (b"run " + b"".join(parts) + b".log")[:200]
    if rng.random() < 0.10:
        case.config = _config(rng, case)
    if rng.random() < 0.10:
        _specs(rng, case, parsers)
        if case.config is None and rng.random() < 0.3:
            case.config, case.spec_via_config = "formats_dirs: [specs]\n", True
            case.notes.append("config names the spec folder")
    r, edge = rng.random(), 0.0
    for special, share in SPECIALS:
        edge += share
        if r < edge:
            case.special, case.output = special, rng.choice(OUTPUTS)
            break
    return case


def _value(rng: random.Random) -> str:
    return str(rng.choice(ODD_VALUES))


def _threshold_value(rng: random.Random, threshold) -> str:
    """Half the time an odd value (most are refused), else one a config may set: a bound of the
    threshold's unit (Threshold.bounds), or its default scaled far up or down within them."""
    if rng.random() < 0.5:
        return _value(rng)
    low, high, whole = threshold.bounds()
    value = rng.choice([v for v in (low, high, threshold.default * 1e6, threshold.default / 1e6) if v is not None])
    value = min(max(value, low if low is not None else value), high if high is not None else value)
    return str(int(value) if whole else value)


def _config(rng: random.Random, case: Case) -> str:
    from memlog.judge.rulekit import load_rules

    kind = rng.choice(["thresholds", "thresholds", "capacity", "aliases", "huge", "tag", "dirs", "garbage"])
    case.notes.append(f"config: {kind}")
    rules = [r for r in load_rules() if r.thresholds]
    if kind == "thresholds":
        lines = ["rules:"]
        for rule in rng.sample(rules, rng.randint(1, len(rules))):
            picks = rng.sample(rule.thresholds, rng.randint(1, len(rule.thresholds)))
            lines.append(f"  {rule.id}: {{{', '.join(f'{t.name}: {_threshold_value(rng, t)}' for t in picks)}}}")
        if rng.random() < 0.3:
            lines.append(f"  no-such-rule: {{x: {_value(rng)}}}")
        return "\n".join(lines) + "\n"
    if kind == "capacity":
        return f"capacity_gib: {_value(rng)}\n"
    if kind == "aliases":
        levels = rng.choice([5, 20, 101, 200])
        text = "a0: &a0 [1, 2, 3]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, levels))
        return "rules:\n  memory-leak: {min_growth_gib: 0.2}\n" + text.replace("a0: &a0", "capacity_gib: 80\nx0: &a0")
    if kind == "huge":
        return "capacity_gib: 80\n" + "#" * rng.choice([1000, (1 << 20) + 1]) + "\n"
    if kind == "tag":
        return f"rules: !!python/object/apply:os.system ['touch @CASE@/{MARKER}']\n"
    if kind == "dirs":
        return "formats_dirs: [" + rng.choice(["/nonexistent", "/dev/zero", "/", "..", ".", '""', "input.log"]) + "]\n"
    text = "rules:\n  memory-leak: {min_growth_gib: 0.2, min_tail_points: 5}\ncapacity_gib: 80\n"
    buf = bytearray(text.encode())
    for _ in range(rng.randint(1, 6)):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
    return buf.decode("utf-8", "replace")


PLUGIN = """import pathlib
pathlib.Path("@CASE@", {marker!r}).write_text("ran")


class _Parser:
    start_literals = ("Iteration ",)
    columns = ("loss",)
    max_lines = 5


def create(options):
    return _Parser()
"""


def _specs(rng: random.Random, case: Case, parsers: list[tuple[str, str]]) -> None:
    kind = rng.choice(["mutated", "mutated", "hostile-name", "plugin", "aliases", "huge", "regex"])
    case.notes.append(f"spec: {kind}")
    base_name, base = rng.choice(parsers)
    renamed = re.sub(r"(?m)^name: (\S+)", r"name: fuzz_\1", base, count=1)
    if kind == "mutated":
        buf = bytearray(renamed.encode())
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i : i + rng.randint(0, 3)] = rng.randbytes(rng.randint(0, 3))
        case.specs["spec.yaml"] = bytes(buf)
    elif kind == "hostile-name":
        evil = json.dumps("fuzz " + "".join(rng.sample([p.decode("utf-8", "replace") for p in NAME_PARTS], 4)))
        text = re.sub(r"(?m)^name: .*$", lambda _: f"name: {evil}\ntitle: {evil}", renamed, count=1)
        case.specs["spec.yaml"] = re.sub(r"(?m)^title: (?!\").*$\n?", "", text).encode()
    elif kind == "plugin":
        module = rng.choice(["evil.py", "../evil.py", "{abs}/evil.py", "evil_link.py", "sub/../evil.py"])
        case.notes.append(f"block_parser {module}")
        case.specs["evil.py"] = PLUGIN.format(marker=MARKER).encode()
        case.specs["spec.yaml"] = (
            "name: fuzz_blocks\nblock_parser: {module: '" + module + "', start_literal: 'Iteration ', start: '^Iteration (\\d+)$'}\n"
        ).encode()
        case.links["specs/evil_link.py"] = "../evil.py"
        case.specs["../evil.py"] = case.specs["evil.py"]
    elif kind == "aliases":
        levels = rng.choice([20, 101, 300])
        text = renamed + "\nx0: &a0 [1, 2]\n" + "".join(f"x{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, levels))
        case.specs["spec.yaml"] = text.encode()
    elif kind == "huge":
        case.specs["spec.yaml"] = (renamed + "\n#" + "x" * rng.choice([1000, (1 << 20) + 1]) + "\n").encode()
    else:
        regex = rng.choice(
            [
                r"(a+)+$",
                r"^(?=step)step (\d+)",
                r"(\w)\1",
                r"^step (?P<step>\d+) m=(?P<mem_allocated_gib>[\d.]+)",
                r"[",
                r"(?P<step>\d+)" * 50,
                r"(?P<mem_allocated_gib>\d+(?:\.\d+)?)(?P<mem_allocated_gib_unit>\w+)",
            ]
        )
        case.specs["spec.yaml"] = (f"name: fuzz_regex\nrecords:\n  - name: r\n    literal: 'step'\n    regex: {json.dumps(regex)}\n").encode()
    case.notes[-1] += f" (from {base_name})"


def builtin_parsers(repo: Path) -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted((repo / "parsers").glob("*.yaml"))]


# --- laying a case out on disk --------------------------------------------------------------------


def lay_out(case: Case, folder: Path, data: bytes) -> tuple[str, Path | None, Path | None]:
    """Write the log (or make the FIFO), the config and the spec folder under `folder`; returns the
    log's path (a str that may hold surrogates), the config path and the spec folder (None if unused)."""
    log = os.path.join(os.fsencode(folder), case.name)
    if case.special != "fifo":
        with open(log, "wb") as out:
            out.write(data)
    else:
        os.mkfifo(log)
    specs = None
    if case.specs:
        specs = folder / "specs"
        specs.mkdir()
        for name, content in case.specs.items():
            content = content.replace(b"{abs}", str(specs).encode()).replace(b"@CASE@", str(folder).encode())
            (specs / name).write_bytes(content)
        for name, target in case.links.items():
            (folder / name).symlink_to(target)
    config = None
    if case.config is not None:
        config = folder / "memlog.yaml"
        config.write_text(case.config.replace("@CASE@", str(folder)), encoding="utf-8")
    return os.fsdecode(log), config, specs


def feed_fifo(path: str, data: bytes) -> threading.Thread:
    """Write `data` into the FIFO once a reader opens it; `release_fifo` unblocks it if none does."""

    def write():
        try:
            with open(path, "wb") as out:
                out.write(data)
        except OSError:
            pass  # the reader stopped early (BrokenPipe) or was never there

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def release_fifo(path: str, writer: threading.Thread) -> None:
    """If nothing read the FIFO (the analysis stopped first), open it here so the writer ends."""
    if writer.is_alive():
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            while writer.is_alive():
                try:
                    if not os.read(fd, 1 << 16):
                        writer.join(0.05)
                except BlockingIOError:
                    writer.join(0.05)
            os.close(fd)
        except OSError:
            pass
    writer.join(5)


# --- the special inputs that need a process of their own ------------------------------------------


def run_special(case: Case, log: str, config: Path | None, specs: Path | None, data: bytes, repo: Path, timeout: float, check) -> tuple[str, str | None]:
    """`python -m memlog analyze` with stdin, stdout or the encoding arranged as the case says.
    `check(output, text)` is the fuzzer's safety check for one rendered output."""
    args = [sys.executable, "-m", "memlog", "analyze", "-o", case.output]
    if config is not None:
        args += ["--config", str(config)]
    if specs is not None and not case.spec_via_config:
        args += ["--formats-dir", str(specs)]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    stdin = subprocess.DEVNULL
    if case.special == "stdin":
        args.append("-")
        stdin = subprocess.PIPE
    elif case.special == "stdin-dir":
        args = ["sh", "-c", 'exec "$0" "$@" - < "$MEMLOG_FUZZ_DIR"', *args]
        env["MEMLOG_FUZZ_DIR"] = os.path.dirname(os.fsencode(log)).decode("utf-8", "surrogateescape")
    elif case.special == "closed-stdout":
        args = ["sh", "-c", 'exec "$0" "$@" >&-', *args, log]
    else:  # strict-stdout: a file name that is not UTF-8 must not break a strict UTF-8 stdout
        env["PYTHONIOENCODING"] = "utf-8:strict"
        args.append(log)
    try:
        proc = subprocess.run(
            [os.fsencode(a) if isinstance(a, str) else a for a in args],
            input=data if stdin == subprocess.PIPE else None,
            stdin=None if stdin == subprocess.PIPE else stdin,
            capture_output=True,
            cwd=repo,
            env=env,
            timeout=timeout * 2,
        )
    except subprocess.TimeoutExpired:
        return "hang", f"{case.special}: no answer after {timeout * 2:.0f}s"
    stderr = proc.stderr.decode("utf-8", "replace")
    if case.special == "stdin-dir" and proc.returncode == 1 and "init_sys_streams: <stdin> is a directory" in stderr:
        return "exit cpython", None  # CPython refuses before memlog runs (README: documented)
    if proc.returncode not in (0, 1, 2) or "Traceback" in stderr or "internal error" in stderr:
        return "crash", f"{case.special}: exit {proc.returncode}\n{stderr[-3000:]}"
    if case.special in ("closed-stdout", "stdin-dir"):
        if proc.returncode != 2 or len(stderr.splitlines()) != 1:
            return "crash", f"{case.special}: expected one line and exit 2, got exit {proc.returncode}: {stderr[-1000:]!r}"
        return "exit 2", None
    try:
        text = proc.stdout.decode("utf-8")  # strict: every output is valid UTF-8
    except UnicodeDecodeError as exc:
        return "unsafe", f"{case.special}: stdout is not UTF-8 ({exc})"
    problem = (check(case.output, text) if proc.returncode in (0, 1) else None) or check("stderr", stderr)
    if problem:
        return "unsafe", f"{case.special} -o {case.output}: {problem}"
    return f"exit {proc.returncode}", None
