#!/usr/bin/env python3
"""Fuzz `memlog watch`, `scan` and `compare` with the inputs of scripts/fuzz.py (mutated real-looking
logs, odd file names, configs and specs around them); report crashes, hangs, unsafe output and, for
watch, a verdict that is not analyze's.

- watch: the log is written in two parts (the second appended while watching), and at a random chunk
  a SIGTERM or SIGINT arrives (sent to this process: the handler only records it) or the file is
  cut and rewritten, rotated, or replaced by a FIFO or a directory. The closing verdict must be
  analyze's on what the file last held (when it was not replaced by something unreadable), and every
  output mode (text, jsonl, github) must be inert.
- scan: the log in a run folder beside a FIFO nobody writes, a link to /dev/zero, a symlink loop and
  a file named like the case; every output mode of the fleet must be inert and the scan must return.
- compare: the log against itself and against a window of itself; every output mode inert.

    python scripts/fuzz_commands.py --command watch --budget 2000 --workers 2
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from fuzz import OWN_COLOUR, load_seeds, make_input, unsafe  # noqa: E402  (after sys.path names scripts/)
from fuzz_env import lay_out  # noqa: E402  (likewise)

REPLACEMENTS = ("none", "none", "none", "signal", "signal", "truncate", "rotate", "fifo", "directory")
HANG_SECONDS = 120  # an input not done by then is a hang (SIGALRM)


class Hang(BaseException):
    """The input ran past HANG_SECONDS."""


def _judged_or_refused(call):
    """Run `call`; ("exit N", value) or ("crash", traceback). memlog's own refusals are exit 2."""
    from memlog.base.errors import MemlogError

    try:
        return "ok", call()
    except MemlogError:
        return "exit 2", None
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, Hang)):
            raise
        return "crash", traceback.format_exc()


def _inert(outputs: dict[str, str]) -> str | None:
    for mode, text in outputs.items():
        problem = unsafe(mode if mode in ("json", "markdown", "github") else "text", OWN_COLOUR.sub("", text))
        if problem:
            return f"-o {mode}: {problem}"
    return None


def fuzz_watch(log: Path, rng: random.Random, specs: Path | None) -> tuple[str, str | None]:
    import signal

    from memlog.engine.api import analyze
    from memlog.engine.options import ReadingOptions
    from memlog.render.live import LiveOutput
    from memlog.watch import follow
    from memlog.watch.watch import Watcher, stopped_by_signals, watch_loop

    data = log.read_bytes()
    cut = rng.randrange(len(data) + 1)
    followed = log.with_name("followed.log")
    followed.write_bytes(data[:cut])
    action, at = rng.choice(REPLACEMENTS), rng.randint(1, 6)
    absorbed = [0]
    absorb = follow.SourceReader.absorb
    options = ReadingOptions(formats_dirs=(specs,) if specs else ())

    def act(self, piece, scanned):
        absorbed[0] += 1
        if absorbed[0] == at:
            _act(action, followed, data, cut, rng, signal)
        return absorb(self, piece, scanned)

    written: list[str] = []
    outcome, value = "ok", None
    with stopped_by_signals() as stop:
        follow.SourceReader.absorb = act
        try:

            def run():
                watcher = Watcher([str(followed)], options, interval=0)
                with open(followed, "ab") as handle:
                    handle.write(data[cut:])  # the run writes on while watched
                return watch_loop(watcher, lambda report: False, stop=stop, stop_after=0, sleep=lambda s: None)

            outcome, value = _judged_or_refused(run)
        finally:
            follow.SourceReader.absorb = absorb
    if outcome != "ok":
        return outcome, value
    report, why = value
    if report is None:
        return "exit 2", None
    outputs = {}
    for mode in ("text", "jsonl", "github"):
        written.clear()
        out = LiveOutput(mode, written.append)
        out.update(report)
        out.final(report, why)
        outputs[mode] = "".join(written)
    problem = _inert(outputs)
    if problem:
        return "unsafe", problem
    if action in ("none", "signal", "truncate") and followed.is_file():
        expected = _judged_or_refused(lambda: analyze([str(followed)], options=options))
        if expected[0] == "ok" and action != "truncate" and expected[1].verdict != report.verdict:
            return "mismatch", f"watch {report.verdict} ({why}), analyze {expected[1].verdict}; {action} at chunk {at}"
    return f"exit {1 if report.fails('error') else 0}", None


def _act(action: str, followed: Path, data: bytes, cut: int, rng: random.Random, signal) -> None:
    if action == "signal":
        os.kill(os.getpid(), rng.choice([signal.SIGTERM, signal.SIGINT]))
    elif action == "truncate":
        followed.write_bytes(data)  # cut in place and written again, whole
    elif action == "rotate":
        followed.rename(followed.with_name("followed.log.1"))
        followed.write_bytes(data[:cut])
    elif action == "fifo":
        followed.unlink()
        os.mkfifo(followed)
    elif action == "directory":
        followed.unlink()
        followed.mkdir()


def fuzz_scan(log: Path, rng: random.Random, specs: Path | None) -> tuple[str, str | None]:
    from memlog.engine.options import ReadingOptions
    from memlog.render.fleet import FLEET_OUTPUTS, render_fleet
    from memlog.scan.fleet import ScanOptions, scan
    from memlog.scan.runs import find_runs

    root = log.parent / "fleet"
    (root / "run-a").mkdir(parents=True)
    (root / "run-a" / log.name).write_bytes(log.read_bytes())
    (root / "rank-8-sweep").mkdir()
    (root / "rank-8-sweep" / "train.log").write_bytes(log.read_bytes()[: len(log.read_bytes()) // 2])
    os.mkfifo(root / "pipe.log")
    (root / "zero.log").symlink_to("/dev/zero")
    (root / "loop").symlink_to(root / "loop")
    options = ReadingOptions(formats_dirs=(specs,) if specs else ())

    def run():
        runs = find_runs([str(root)])
        fleet = scan(runs, ScanOptions(options, options.loaded_config(), None), jobs=1)
        return {mode: render_fleet(fleet, mode) for mode in FLEET_OUTPUTS}

    outcome, value = _judged_or_refused(run)
    if outcome != "ok":
        return outcome, value
    problem = _inert(value)
    return ("unsafe", problem) if problem else ("exit 0", None)


def fuzz_compare(log: Path, rng: random.Random, specs: Path | None) -> tuple[str, str | None]:
    from memlog.compare.regression import CompareError, compare
    from memlog.engine.options import ReadingOptions
    from memlog.render.compare import render_compare_github, render_compare_json, render_compare_markdown, render_compare_text

    lines = log.read_bytes().split(b"\n")
    other = log.with_name("other.log")
    other.write_bytes(b"\n".join(lines[: rng.randint(1, max(1, len(lines)))]) + b"\n")
    options = ReadingOptions(formats_dirs=(specs,) if specs else ())

    def run():
        try:
            c = compare([str(log)], [str(other)], options=options)
        except CompareError:
            return None
        return {"text": render_compare_text(c), "markdown": render_compare_markdown(c), "github": render_compare_github(c), "json": render_compare_json(c)}

    outcome, value = _judged_or_refused(run)
    if outcome != "ok":
        return outcome, value
    if value is None:
        return "exit 2", None
    problem = _inert(value)
    return ("unsafe", problem) if problem else ("exit 0", None)


COMMANDS = {"watch": fuzz_watch, "scan": fuzz_scan, "compare": fuzz_compare}


def run_one(command: str, seeds, seed: int, index: int) -> tuple[str, str | None]:
    import signal

    def hang(signum, frame):
        raise Hang

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG_SECONDS)
    try:
        return _run_one(command, seeds, seed, index)
    except Hang:
        return "hang", f"not done after {HANG_SECONDS} s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _run_one(command: str, seeds, seed: int, index: int) -> tuple[str, str | None]:
    data, _, case = make_input(seeds, seed, index)
    rng = random.Random(hashlib.sha256(f"{seed}:{index}:{command}".encode()).hexdigest())
    with tempfile.TemporaryDirectory(prefix="memlog-fuzzc-") as folder:
        case.special = None  # (how a log is attached is analyze's fuzzing; here the command attaches it)
        log, _, specs = lay_out(case, Path(folder), data)
        log = os.fsdecode(log)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            outcome, detail = COMMANDS[command](Path(log), rng, specs)
        if outcome.startswith("exit") and printed.getvalue():
            return "unsafe", f"printed: {printed.getvalue()[:300]!r}"
        return outcome, detail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--command", choices=sorted(COMMANDS), required=True)
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay", type=int, help="run input INDEX alone and print the result")
    args = parser.parse_args(argv)
    seeds = load_seeds()
    if args.replay is not None:
        outcome, detail = run_one(args.command, seeds, args.seed, args.replay)
        print(f"outcome: {outcome}\n{detail or ''}")
        return 0 if outcome.startswith("exit") else 1
    started, outcomes, failures = time.monotonic(), Counter(), []
    for index in range(args.budget):
        outcome, detail = run_one(args.command, seeds, args.seed, index)
        outcomes[outcome] += 1
        if not outcome.startswith("exit"):
            failures.append((index, outcome, detail))
            print(f"  {outcome.upper()} input {index}: {(detail or '').strip().splitlines()[-1] if detail else ''}", flush=True)
    elapsed = time.monotonic() - started
    print(f"command:    {args.command}\ninputs:     {args.budget}")
    for kind in ("crash", "hang", "unsafe", "mismatch"):
        print(f"{kind + ':':<11} {outcomes[kind]}")
    print("exit codes: " + ", ".join(f"{k[5:]}={v:,}" for k, v in sorted(outcomes.items()) if k.startswith("exit")))
    print(f"time:       {elapsed:.1f} s ({args.budget / elapsed:.1f} inputs/s, one process)")
    for index, outcome, detail in failures[:3]:
        print(
            f"\n--- {outcome} input {index} (replay: scripts/fuzz_commands.py --command {args.command} --seed {args.seed} --replay {index})\n{(detail or '')[-2500:]}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
