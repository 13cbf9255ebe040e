"""What one line holds: its step counter and its numeric fields, as the generic reader learns them.

Learning runs in Python on a bounded sample of a source's lines (guess.SAMPLE_LINES); reading the
whole log is done by the format spec the guess becomes (polars, linear time). So every regex here
that ends up in a spec is written in the dialect both Python's `re` and Rust's `regex` share: no
look-around, no back-references, scoped flags `(?i:...)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A printed number (the spec's value groups use the same text).
NUM = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|inf)"
# A unit printed after a value: sizes (`MB`, `GiB`, `bytes`), bare suffixes (`9.3G`, `433M`), `%`.
UNIT = r"(?:[KMGTP]i?B|bytes|[KMGTP]|%)"
# A unit may follow the number without a space (`517.50MiB`, TensorFlow's and XLA's sizes); other
# letters right after it make it part of a word (`v2rc`), not a value.
_NUMBER = re.compile(
    rf"(?<![A-Za-z0-9.])(?:[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)|(?:nan|NaN|inf)(?![A-Za-z]))(?:[ \t]?{UNIT}(?![A-Za-z])|(?![A-Za-z]{{2}}))"
)
_NUMBER_PARTS = re.compile(rf"(?P<num>{NUM})(?:[ \t]?(?P<unit>{UNIT}))?$")
# Where one field ends and the next begins.
_SEPARATOR = re.compile(r"[,|;{}\t]| - |\s{2,}|\]\s*\[|\]\s|\)\s")
_KEY_CHARS = re.compile(r"[^\w()./%-]+")
_SLASH = re.compile(r"[ \t]*/[ \t]*")
_UNIT_PAREN = re.compile(r"\((?:[KMGTP]i?B|bytes)\)\s$")


@dataclass(frozen=True)
class Counter:
    """A way a line states its step, tried in this order (the first that fits a shape wins)."""

    name: str  # how coverage names it
    regex: str  # with a `step` group, and `epoch` + `epoch_len` for a step within an epoch


# A progress bar between a percentage and its `i/N` counter: tqdm's `|██▌  |`, ultralytics' `━━╸──`.
BAR = r"\d+%\s*(?:\|[^|]*\||[━─╸]+)\s*"

COUNTERS = (
    # A progress bar's counter, its position in the epoch the bar's description names (Lightning's
    # `Epoch 2:  30%|███  | 600/2000 [...]`), else in the run (a bar over all steps). A bar at `0/N`
    # has run no step (Lightning redraws the last epoch's bar at 0 when it resets it): not a reading.
    Counter("a progress bar's `Epoch e: ... i/N`", rf"(?i:epoch)\s*(?P<epoch>\d+)\s*:\s*{BAR}(?P<step>[1-9]\d*)/(?P<epoch_len>\d+)"),
    Counter("a progress bar's `i/N`", rf"{BAR}(?P<step>[1-9]\d*)/\d+(?:\s|$)"),
    # Lightning's RichProgressBar: `Epoch 0/2 ━━━━━━━╸━━━ 25/500 0:00:11 • 0:00:53 3.21it/s v_num: 3 ...`
    # (no percentage; the epoch, then its batches).
    Counter("a rich progress bar's `Epoch e/E ━━ i/N`", r"(?i:epoch)\s*(?P<epoch>\d+)(?:/\d+)?\s*[━─╸╺]+\s*(?P<step>[1-9]\d*)/(?P<epoch_len>\d+)"),
    Counter("`Epoch [e][i/N]`", r"(?i:epoch)\s*(?:\(\w+\))?\s*:?\s*\[\s*(?P<epoch>\d+)\s*(?:/\s*\d+\s*)?\]\s*\[\s*(?P<step>\d+)\s*/\s*(?P<epoch_len>\d+)\s*\]"),
    # The PyTorch tutorials' `Epoch [e/E], Step [i/N]` (N: the loader's length), `epoch e | step i/N`:
    # the step within the epoch, which starts again at each epoch (else each epoch reads as a restart).
    Counter(
        "`epoch e[/E] ... step i/N`",
        r"(?i:epoch)\s*[:=]?\s*\[?\s*(?P<epoch>\d+)\s*(?:/\s*\d+\s*)?\]?\W+(?i:it|iter|iteration|step|batch)\s*[:=]?\s*\[?\s*(?P<step>\d+)\s*/\s*(?P<epoch_len>\d+)",
    ),
    # (`_step`: W&B's history rows, exported from the UI or the API; `current_steps`: LLaMA-Factory's trainer_log.jsonl)
    Counter(
        "`step`", r"(?:^|[^\w/-])['\"]?(?i:global[_ ]step|num_updates|current_steps|_?step)(?:/max_steps)?['\"]?\s*[:=]?\s*['\"]?(?P<step>\d+)(?:[^\w.]|$)"
    ),
    Counter("`iteration`", r"(?:^|[^\w/-])['\"]?(?i:iteration)['\"]?\s*[:=]?\s*['\"]?(?P<step>\d+)(?:[^\w.]|$)"),
    Counter("`iter`", r"(?:^|[^\w/-])['\"]?(?i:iter)['\"]?\s*[:=_]?\s*['\"]?(?P<step>\d+)(?:[^\w.]|$|_)"),
    Counter("`it`", r"(?:^|[^\w/-])(?i:it)\s*[:=]?\s*(?P<step>\d+)(?:[^\w.]|$)"),
    Counter("`[i/N]`", r"\[\s*(?P<step>\d+)\s*/\s*\d+\s*\]"),
    Counter("the leading `N/M` column", r"^\s*(?P<step>\d+)/\d+(?:\s|$)"),
    Counter("`epoch`", r"(?:^|[^\w/-])['\"]?(?i:epoch)['\"]?\s*[:=]?\s*(?P<step>\d+)(?:[^\w.]|$)"),
    Counter("the leading integer column", r"^\s*(?P<step>\d+)(?:\s|$)"),
)
COMPILED = [re.compile(c.regex) for c in COUNTERS]
BARS = (0, 1, 2)  # the counters of progress bars, whose lines are redrawn at one step


def counter_step(index: int, text: str) -> tuple[int, int, int] | None:
    """(global step, match start, match end) of counter `index` in `text`, or None."""
    match = COMPILED[index].search(text)
    if match is None:
        return None
    groups = match.groupdict()
    step = int(groups["step"])
    if groups.get("epoch") is not None and groups.get("epoch_len") is not None:
        step += int(groups["epoch"]) * int(groups["epoch_len"])
    return step, match.start(), match.end()


@dataclass(frozen=True)
class Field:
    """One numeric field as printed: `key` (its words as written), the value, its printed unit."""

    key: str
    value: float
    unit: str | None
    start: int  # where the value is in the line
    end: int
    form: str  # "kv": key then value; "vk": value then key (`4.21 loss`); "quoted": `'key': value`;
    # "total": the number after a value's `/` (`Using (GB) 3.09 / 30.75`), the size that value is of
    quoted: str = ""  # the quote character around a quoted key
    of: str = ""  # for a "total": the key of the value before the `/`


def _clean_key(text: str) -> tuple[str, str]:
    """The key words at the end of the text before a value, and the quote around them if any."""
    text = text.rstrip(" \t:=")
    quote = text[-1] if text.endswith(("'", '"')) else ""
    if quote:
        opening = text.rfind(quote, 0, len(text) - 1)
        return (text[opening + 1 : -1], quote) if opening >= 0 else ("", "")
    text = text.rstrip(" \t:=[(")
    key = _KEY_CHARS.sub(" ", text).strip(" ./_-")
    key = " ".join(key.split()[-4:])  # a key is a few words: `Host RSS Memory`, `max mem`
    return key.lstrip("(").rstrip(")") if key.count("(") != key.count(")") else key, ""


def _inside_key(before: str, sep: re.Match) -> bool:
    """A separator that belongs to the key before a value rather than ending a field: a unit in
    parentheses (MaxText's `Using (GB) 3.12`), blanks after the key's colon (torchtitan's `loss:  7.45`)."""
    return bool(_UNIT_PAREN.search(before, 0, sep.end())) or (sep.group(0).isspace() and before[: sep.start()].endswith((":", "=")))


def fields(text: str) -> list[Field]:
    """Every number of the line with the key it belongs to (module docstring of mapping.py)."""
    found: list[Field] = []
    boundary = 0
    numbers = list(_NUMBER.finditer(text))
    for i, match in enumerate(numbers):
        parts = _NUMBER_PARTS.match(match.group(0))
        if parts is None:
            continue
        try:
            value = float(parts["num"])
        except ValueError:
            continue
        before = text[boundary : match.start()]
        unit = parts["unit"]
        end = match.end()
        if found and found[-1].end == boundary and _SLASH.fullmatch(before):
            # `used / total` (MaxText's `Using (GB) 3.09 / 30.75`, `mem 3.1/80 GB`): the second
            # number is what the first is of, read as a capacity when the first is memory (shape.py).
            of = found[-1].key
            found.append(Field(f"{of} / total", value, unit, match.start(), end, "total", of=of))
            boundary = end
            continue
        cut = max((m.end() for m in _SEPARATOR.finditer(before) if not _inside_key(before, m)), default=0)
        # A quoted key keeps its separators: `'memory(GiB)': 75.2`, `"train/loss": 1.2`.
        quoted_key = re.search(r"(['\"])([\w ()\[\]./%+-]{1,80})\1\s*:\s*['\"]?$", before)
        if quoted_key:
            key, quote, form = quoted_key.group(2), quoted_key.group(1), "quoted"
        else:
            key, quote = _clean_key(before[cut:])
            form = "kv"
        if not key or not re.search(r"[A-Za-z]", key):
            # `4.21 loss`, `1454.57 GB used`: the words after the value name it.
            nxt = numbers[i + 1].start() if i + 1 < len(numbers) else len(text)
            after = text[end:nxt]
            words = re.match(r"[ \t]+([A-Za-z][A-Za-z_ ]{0,30}?)\s*(?:[,|;]|$|\s{2,})", after)
            if not words:
                boundary = end
                continue
            key, form = words.group(1).strip(), "vk"
        found.append(Field(key, value, unit, match.start(), end, form, quote))
        boundary = end
    return found


# A device named on a reading's line: whose reading it is when one process prints a line per device
# (MaxText's `on TPU_0(process=0,(0,0,0,0))`, JAX's `cuda:1`, `GPU 3:`, `[npu:2]`), as printed.
DEVICE = r"(?:^|[^\w:/])(?P<device>(?i:tpu|gpu|cuda|npu|xpu|hpu|mlu|mps|tfrt_cpu)[_: ]?\d+)(?:[^\w.]|$)"
_DEVICE = re.compile(DEVICE)
_UNIT_AFTER = re.compile(rf"\s*{UNIT}(?![A-Za-z])")


def device_label(text: str) -> str | None:
    """The device a line names, unless its number is a size (`GPU 24 GB`)."""
    match = _DEVICE.search(text)
    if match is None or _UNIT_AFTER.match(text, match.end("device")):
        return None
    return match["device"]


# Logger prefixes no built-in spec strips, tried on the sample: a timestamp with a level, in the
# shapes Python's logging, loguru, absl and Paddle's loggers print.
GENERIC_PREFIXES = (
    r"\[?\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*(?:[-|]\s*)?(?:(?:[\w.]+\s+)?(?:\[\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s*\]|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL))\s*(?:[-|:]\s*)?)?",
    r"\d\d/\d\d \d\d:\d\d:\d\d - [\w.]+ - (?:DEBUG|INFO|WARNING|ERROR) - ",
    r"\[\d\d/\d\d \d\d:\d\d:\d\d\] [\w.]+ (?:DEBUG|INFO|WARNING|ERROR): ",
    r"[IWE]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.]+:\d+\] ",
)
