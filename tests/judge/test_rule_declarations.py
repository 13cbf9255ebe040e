"""The house rules of `rules/`: each rule declares what it is, and nothing central names a rule.

A rule file's stem is its id; the verdict it implies, the rules it reads and the marks its findings
put on series are declarations the engine, the headline and the renderers read. These tests fail
when a rule id creeps into memlog/ as a string, or a verdict could let a calm headline sit above an
error.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlog.cli import app
from memlog.judge.rulekit import INCONCLUSIVE, Finding, Rule, Threshold, Verdict, declared_verdicts, headline, load_rules, run_order

ROOT = Path(__file__).resolve().parents[2]
RULES = load_rules()


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_each_rule_file_is_named_after_its_id(rule: Rule):
    assert rule.path is not None and rule.path.stem == rule.id.replace("-", "_")
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.id)


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings (f-string parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


# The event vocabulary declares kinds whose names rules share (an `oom` event, the `oom` rule).
VOCABULARY = {"events.py", "columns.py"}
# The line writers quote the frameworks' own text ("... to avoid fragmentation."), not engine code.
QUOTED = "logwriters"


def test_no_rule_id_is_named_in_the_engine():
    """The engine, the headline and the renderers read declarations: no rule id appears in memlog/ code."""
    ids = [r.id for r in RULES]
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, ids)) + r")(?![\w-])")
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}"
        for path in sorted((ROOT / "memlog").rglob("*.py"))
        if path.name not in VOCABULARY and QUOTED not in path.parts
        for line, text in _code_strings(path)
        if pattern.search(text)
    ]
    assert not offenders, "rule ids named in memlog/:\n" + "\n".join(offenders)


def test_a_rule_that_fires_an_error_never_sits_under_a_calm_headline():
    calm = [v for v in declared_verdicts(RULES) if v.calm]
    for rule in RULES:
        if rule.severity == "error":
            assert rule.verdict is not None and not rule.verdict.calm, rule.id
            assert all(rule.verdict.rank > v.rank for v in calm), rule.id


def test_a_verdict_name_means_one_thing():
    by_name: dict[str, Verdict] = {}
    for rule in RULES:
        if rule.verdict is not None:
            assert by_name.setdefault(rule.verdict.name, rule.verdict) == rule.verdict, rule.id
    ranks = [v.rank for v in by_name.values()]
    assert len(ranks) == len(set(ranks)), "two verdicts share a rank: the headline would depend on rule order"
    assert all(v.rank > INCONCLUSIVE.rank for v in by_name.values())


def test_the_schema_lists_exactly_the_declared_verdicts():
    """The shipped file names no verdict (one place for them: the rules); `memlog schema` fills them in."""
    shipped = (ROOT / "memlog" / "report" / "schema" / "report.schema.json").read_text()
    assert not any(f'"{v.name}"' in shipped for v in declared_verdicts(RULES))
    printed = json.loads(CliRunner().invoke(app, ["schema"]).stdout)
    assert printed["properties"]["verdict"]["enum"] == [v.name for v in declared_verdicts(RULES)]


def test_rules_run_after_the_rules_they_read():
    order = [r.id for r in RULES]
    for rule in RULES:
        for earlier in rule.after:
            assert order.index(earlier) < order.index(rule.id), (rule.id, earlier)


def test_rules_that_wait_on_each_other_are_refused():
    def fake(rule_id: str, after: tuple[str, ...]) -> Rule:
        return Rule(rule_id, "info", "s", "e", "n", (), check=lambda ctx, t: [], after=after)

    from memlog.base.errors import MemlogError

    with pytest.raises(MemlogError, match="wait on each other"):
        run_order([fake("a", ("b",)), fake("b", ("a",))])
    with pytest.raises(MemlogError, match="unknown rules"):
        run_order([fake("a", ("nope",))])


def test_the_headline_is_the_highest_declared_verdict_whatever_the_finding_order():
    low, high = Verdict("calm", 10, "CALM: fine", calm=True), Verdict("bad", 99, "BAD: not fine")
    findings = [Finding("x", "info", "m", {}, verdict=low), Finding("y", "error", "m", {}, verdict=high), Finding("z", "info", "m", {})]
    assert headline(findings) is high and headline(list(reversed(findings))) is high
    assert headline([Finding("z", "info", "m", {})]) is INCONCLUSIVE


def test_the_finding_helper_carries_the_boilerplate():
    rule = Rule(
        "demo-rule",
        "warning",
        "s",
        "e",
        "n",
        (Threshold("k", 3, "x", "d"),),
        check=lambda ctx, t: [],
        verdict=Verdict("demo", 5, "DEMO: d"),
        decides=True,
        marks="placeholder",
    )
    f = rule.finding(
        {"k": 4},
        "msg",
        subject="device",
        series=["rank1", "rank0"],
        ranks=[1, None, 0, 1],
        observed={"a": 1},
        evidence={"metric": "m", "series": [1], "extra": 2},
        lines=[("f", 9), ("f", 2)],
    )
    assert (f.rule, f.severity, f.verdict.name, f.decides, f.marks) == ("demo-rule", "warning", "demo", True, "placeholder")
    assert list(f.evidence) == ["metric", "observed", "thresholds", "extra", "ranks", "series"]
    assert f.evidence["thresholds"] == {"k": 4} and f.evidence["ranks"] == [0, 1]
    assert f.lines == [("f", 2), ("f", 9)]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_one_help_text_feeds_explain_and_sarif(rule: Rule):
    from memlog.render.outputs.sarif import _rule as sarif_rule

    text = rule.help()
    assert rule.summary in text and rule.not_meaning in text
    for t in rule.thresholds:
        assert t.name in text
    assert sarif_rule(rule)["help"]["text"] == text


# -- thresholds a config may set -------------------------------------------------------------------

THRESHOLDS = [(rule, t) for rule in RULES for t in rule.thresholds]


@pytest.mark.parametrize(("rule", "threshold"), THRESHOLDS, ids=[f"{r.id}.{t.name}" for r, t in THRESHOLDS])
def test_a_threshold_outside_what_its_unit_allows_is_one_config_error(rule: Rule, threshold: Threshold):
    """A count of 0 (fuzz seed 2029, input 5381: `min_steps: 0` made nan-loss read the first of no
    readings), a p-value of 2, a negative size: refused when the config is read, naming the range."""
    from memlog.base.errors import ConfigError

    low, high, whole = threshold.bounds()
    assert rule.resolve({threshold.name: threshold.default})[threshold.name] == threshold.default  # the default is allowed
    for value in [v for v in (low - 1 if low is not None else None, high + 1 if high is not None else None) if v is not None]:
        with pytest.raises(ConfigError, match=rf"rule {rule.id}: threshold {threshold.name} (must be|counts \w+:) (from|at least|at most) .*, got"):
            rule.resolve({threshold.name: value})
    if whole:
        with pytest.raises(ConfigError, match="a whole number"):
            rule.resolve({threshold.name: threshold.default + 0.5})
        assert rule.resolve({threshold.name: float(threshold.default)})[threshold.name] == threshold.default  # YAML `2.0`
    if threshold.unit in ("points", "steps", "readings", "p", "GiB", "%"):  # the usual units are bounded
        assert low is not None


def test_every_rule_judges_every_example_with_thresholds_at_their_bounds(tmp_path):
    """Whatever a config sets within the bounds, judging never fails: every rule's example runs
    judged with every threshold at its lowest allowed value, then at its highest (or a huge one)."""
    from memlog.base.config import Config
    from memlog.engine.api import analyze
    from tests.scenarios import FORMATS_DIR, example_log

    def extreme(t: Threshold, end: int):
        value = t.bounds()[end]
        if value is None:
            value = 1e12 if end else -1e12
        return int(value) if t.bounds()[2] else value

    examples = [e for rule in RULES for e in rule.examples if not isinstance(e, str)]
    for end in (0, 1):
        config = Config(rules={rule.id: {t.name: extreme(t, end) for t in rule.thresholds} for rule in RULES if rule.thresholds})
        for i, example in enumerate(examples):
            path = tmp_path / f"{end}-{i}.log"
            path.write_text(example_log(example))
            report = analyze([str(path)], config=config, formats_dirs=[FORMATS_DIR])
            assert report.verdict, example
