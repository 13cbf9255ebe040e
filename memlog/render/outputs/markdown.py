"""Issue-ready markdown: paste it into a GitHub issue (or a job summary) and it reads well.

One-line verdict, an evidence table, a sparkline per rank in a code block, the log lines behind the
findings and an environment block in collapsed `<details>`. Always under LIMIT characters (GitHub
rejects issue bodies over 65,536), whatever the size of the log.

Anything that came from a log (worker names, file names, log lines, messages that quote them) is
escaped so it cannot break the table, start markdown or HTML, or notify anyone: outside code, HTML
specials become entities, markdown punctuation is backslash-escaped, and `@name` / `#123` get a
zero-width space after the sign, `GH-123` after `GH` (GitHub links mentions and issue references in
text, never in code).
Inside code blocks, text is left as it was and the fence is longer than any backtick run in it.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable

from memlog import __version__
from memlog.base.phrases import workers_phrase
from memlog.render.mermaid import SUBJECT_TITLES, chart_data, describe, render_mermaid
from memlog.render.outputs import RenderOptions
from memlog.render.safety import safe
from memlog.render.selection import noun_of, select
from memlog.render.shared import axis_word, buckets, by_severity, capacity_phrase, evidence_summary, restarts_sentence, workers_phrase_of
from memlog.report.report import Report, SeriesView, source_damage

LIMIT = 60_000
SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 48
MAX_SPARK_ROWS = 16
MAX_MESSAGE_CHARS = 1500
MAX_EVIDENCE_CHARS = 600
MAX_SOURCES_LISTED = 10
# The environment block always stays, so each of its lines is bounded: a command with 10,000 file
# arguments, a 4 KiB path or a long message must not carry the report past LIMIT.
MAX_ENV_LINE_CHARS = 1000
MAX_NAME_CHARS = 200
ZWSP = "\u200b"

_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]|~])")
_MENTION_OR_REFERENCE = re.compile(r"([@#])(?=[\w-])")
# GitHub also links `GH-123` (any case) to issue 123: a zero-width space after `GH` breaks it.
_GH_REFERENCE = re.compile(r"(?<![\w-])(gh)(?=-\d)", re.IGNORECASE)
_BACKTICKS = re.compile(r"`+")


def md_text(text: str, limit: int | None = None) -> str:
    """Log-derived text for a table cell or a sentence: one line, inert, at most `limit` characters."""
    text = " ".join(safe(str(text)).split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    text = html.escape(text, quote=False)
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)
    text = _GH_REFERENCE.sub(lambda m: m.group(1) + ZWSP, text)
    return _MENTION_OR_REFERENCE.sub(lambda m: m.group(1) + ZWSP, text)


def code_block(lines: Iterable[str], info: str = "text") -> str:
    """A fenced block whose fence no line of the content can close."""
    body = [safe(line) for line in lines]
    longest = max((len(run) for line in body for run in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + info, *body, fence])


def details(summary: str, body: str) -> str:
    # A blank line after </summary> and before </details>, or GitHub renders the body as raw text.
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def render_markdown(report: Report) -> str:
    required = [_verdict_line(report), _findings_table(report)]
    optional = [_charts(report), _log_lines(report), _hints(report)]
    env = _environment(report)
    sections = [*required, *optional, env]
    text = _join(sections)
    # Over the limit (a huge number of findings or sources): drop the optional parts, least
    # useful first, then cut the table. The environment block always stays.
    for drop in (2, 1, 0):
        if len(text) < LIMIT:
            break
        optional[drop] = ""
        text = _join([*required, *optional, env])
    if len(text) >= LIMIT:
        keep = LIMIT - len(_join([required[0], *optional, env])) - 200
        table = required[1][: max(keep, 0)].rsplit("\n", 1)[0]
        text = _join([required[0], table + "\n\n*(table cut: the report is too long for an issue; see `-o json`)*", env])
    if len(text) >= LIMIT:  # last resort: the verdict and the head of the environment block
        text = _join([required[0], "*(report cut: too long for an issue; see `-o json`)*", _environment(report, brief=True)])
    return text


def _join(sections: list[str]) -> str:
    return "\n\n".join(s for s in sections if s) + "\n"


def _verdict_line(report: Report) -> str:
    name, meaning = report.headline.title, report.headline.meaning
    cov = report.coverage
    context = [", ".join(cov["formats"]) or "no format"]
    if cov.get("workers"):
        context.append(workers_phrase_of(cov))
    if cov.get("steps"):
        context.append(f"steps {cov['steps'][0]}–{cov['steps'][1]}")
    line = f"**memlog verdict: {name}** — {md_text(meaning, MAX_MESSAGE_CHARS)} ({md_text(', '.join(context), MAX_ENV_LINE_CHARS)})"
    restarts = restarts_sentence(cov)
    return f"{line}\n\n{md_text(restarts)}" if restarts else line


def _findings_table(report: Report) -> str:
    if not report.findings:
        return "_No rule fired._"
    rows = ["| Severity | Rule | Finding | Evidence | Log lines |", "|---|---|---|---|---|"]
    many_sources = len(report.coverage.get("sources") or []) > 1
    for f in by_severity(report):
        evidence = evidence_summary(f.evidence) or ""
        if many_sources:
            where = ", ".join(f"{source}:{line}" for source, line in f.lines)
        else:
            where = f"line{'s' if len(f.lines) > 1 else ''} {', '.join(str(line) for _, line in f.lines)}" if f.lines else ""
        rows.append(
            f"| {'**error**' if f.severity == 'error' else f.severity} | `{f.rule}` | {md_text(f.message, MAX_MESSAGE_CHARS)} "
            f"| {md_text(evidence, MAX_EVIDENCE_CHARS)} | {md_text(where, 300)} |"
        )
    return "\n".join(rows)


def _hints(report: Report) -> str:
    items = [f"- `{f.rule}`: {md_text(h, 500)}" for f in by_severity(report) for h in f.hints[:5]]
    return details("What to check", "\n".join(items)) if items else ""


def _charts(report: Report) -> str:
    blocks = []
    chart = chart_data(report)
    if chart is not None:
        blocks.append(
            f"{SUBJECT_TITLES[chart.subject]} per {chart.noun} against {axis_word([line.view for line in chart.lines])}:\n\n"
            + code_block(render_mermaid(chart).splitlines(), "mermaid")
            + "\n\n"
            + describe(chart, md_text)
        )
    sentinel = report.marked("placeholder")
    for subject, title in (("device", "Device memory"), ("host", "Host memory"), ("loss", "Loss")):
        views = [v for v in report.series if v.subject == subject]
        if not views:
            continue
        rows = _spark_rows(report, subject, views, sentinel if subject == "loss" else set())
        steps = [s for v in views for s in v.steps]
        unit = " GiB" if views[0].metric.endswith("_gib") else ""
        blocks.append(
            f"{title} per {noun_of(views)}, steps {_num(min(steps))}–{_num(max(steps))} (`{views[0].metric}`{', ' + unit.strip() if unit else ''}; "
            "first value, shape, last value, lowest–highest reading; one scale for all rows, each mark the mean of its "
            "stretch of steps):\n\n" + code_block(rows)
        )
    return "\n\n".join(blocks)


def _spark_rows(report: Report, subject: str, views: list[SeriesView], sentinel: set[str]) -> list[str]:
    real = [v for v in views if v.label not in sentinel]
    selection = select(report, real, subject, MAX_SPARK_ROWS)
    shown = [(p, buckets(None, p.view.values, SPARK_WIDTH)) for p in selection.picks]
    shown = [(p, b) for p, b in shown if b.height]
    # The marks share one scale, from the lowest to the highest bucket mean; the range column
    # gives the readings' own extremes, which a mean can hide.
    low = min((b["mean"].min() for _, b in shown), default=0.0)
    high = max((b["mean"].max() for _, b in shown), default=0.0)
    width = max((len(p.view.label) for p, _ in shown), default=0)
    rows = []
    for pick, bucket in shown:
        view = pick.view
        marks = _sparkline(bucket["mean"].to_list(), low, high)
        gib = view.metric.endswith("_gib")
        first, last, lowest, highest = (
            (f"{x:.2f}" if gib else _num(x)) for x in (bucket["first"][0], bucket["last"][-1], bucket["low"].min(), bucket["high"].max())
        )
        knee = f"  knee at step {view.knee_step}" if view.knee_step is not None else ""
        why = f"  ({pick.why})" if pick.why else ""
        rows.append(f"{view.label:<{width}}  {first:>7} {marks} {last:<7}  {lowest}–{highest}{knee}{why}")
    if selection.hidden:
        rows.append(selection.hidden_note())
    placeholders = [v for v in views if v.label in sentinel]
    if placeholders:
        value = placeholders[0].values[0] if placeholders[0].values else -1
        rows.append(f"{workers_phrase([v.label for v in placeholders])}: {value:g} at every step (pipeline-parallel placeholder, not a loss)")
    return rows


def _sparkline(points: list[float], low: float, high: float) -> str:
    """One mark per bucket, at the height of its mean (a maximum would turn a warmup into a bar)."""
    # Halves: exact for floats, and the span of -1e308..1e308 stays finite (found by scripts/fuzz.py).
    # A bucket mean can still overflow (two readings of 1e308): no mark there.
    span = high / 2 - low / 2
    if not 0 < span < math.inf:
        return SPARK[3] * len(points)
    positions = [(p / 2 - low / 2) / span * len(SPARK) for p in points]
    return "".join(SPARK[max(0, min(len(SPARK) - 1, int(x)))] if math.isfinite(x) else " " for x in positions)


def _num(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.0f}"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def _log_lines(report: Report) -> str:
    if not report.log_lines:
        return ""
    many = len({source for source, _ in report.log_lines}) > 1
    width = max(len(str(line)) for _, line in report.log_lines)
    rows = [f"{source + ':' if many else ''}{line:>{width}}  {text}" for (source, line), text in sorted(report.log_lines.items())]
    return details(f"Log lines behind the findings ({len(rows)})", code_block(rows))


def _environment(report: Report, brief: bool = False) -> str:
    cov = report.coverage
    sources = cov.get("sources") or []
    listed = [f"{_name(s['name'])} ({s['lines']:,} lines{', gzip' if s.get('gzip') else ''})" for s in sources[:MAX_SOURCES_LISTED]]
    if len(sources) > MAX_SOURCES_LISTED:
        listed.append(f"and {len(sources) - MAX_SOURCES_LISTED:,} more")
    ranks = cov.get("ranks") or []
    steps = f", steps {cov['steps'][0]}-{cov['steps'][1]}" if cov.get("steps") else ""
    who = f"{workers_phrase_of(cov)}{f' ({_ranks(ranks)})' if ranks else ''}{steps}"
    lines = [
        f"memlog      {__version__}",
        f"command     {report.command or '(library call)'}",
        f"formats     {', '.join(f'{k} ({v:,} records)' for k, v in cov['formats'].items())}",
        f"sources     {'; '.join(listed)}",
        f"read        {cov['lines_read']:,} lines, {cov['records']:,} step records, {who}",
        f"events      {', '.join(f'{k} {v}' for k, v in cov.get('event_counts', {}).items()) or 'none'}",
        f"capacity    {capacity_phrase(cov)}",
    ]
    if brief:
        return details("Environment", code_block(_cut(line, MAX_ENV_LINE_CHARS) for line in lines))
    damaged = [s for s in sources if source_damage(s)]
    for source in damaged[:MAX_SOURCES_LISTED]:
        lines.append(f"damaged     {_name(source['name'])}: {source_damage(source)}")
    if len(damaged) > MAX_SOURCES_LISTED:
        lines.append(f"damaged     and {len(damaged) - MAX_SOURCES_LISTED:,} more")
    guessed_all = cov.get("guessed", ())
    for guessed in guessed_all[:MAX_SOURCES_LISTED]:
        said = guessed.get("mapping") or f"not read: {guessed.get('weak')}"
        lines.append(f"guessed     {_name(guessed['source'])} ({guessed['reader']} reader): {said}")
    if len(guessed_all) > MAX_SOURCES_LISTED:
        lines.append(f"guessed     and {len(guessed_all) - MAX_SOURCES_LISTED:,} more")
    for rule_id, values in report.thresholds.items():
        if values:
            lines.append(f"thresholds  {rule_id}: " + " ".join(f"{k}={v:g}" for k, v in values.items()))
    for skip in report.skipped[:20]:
        lines.append(f"skipped     {skip['rule']}: {' '.join(skip['reason'].split())[:300]}")
    return details("Environment", code_block(_cut(line, MAX_ENV_LINE_CHARS) for line in lines))


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 40]} … ({len(text) - limit + 40:,} more characters)"


def _name(name: str) -> str:
    """A source name of at most MAX_NAME_CHARS: the end of a long path (the file name) is kept."""
    return name if len(name) <= MAX_NAME_CHARS else "…" + name[-(MAX_NAME_CHARS - 1) :]


def _ranks(ranks: list[int]) -> str:
    return workers_phrase([f"rank{r}" for r in ranks])


QUOTES_LOG_LINES = True  # the evidence lines, read back from the logs


def render(report: Report, options: RenderOptions) -> str:
    return render_markdown(report)
