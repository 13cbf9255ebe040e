"""The shape of the code: small modules, stages as folders, and imports that only go down.

memlog is a pipeline, and its folders are its stages, lowest first (LAYERS): what every stage
shares (base), read, tables, parse, judge, report, the engine that runs them, the uses of the
engine beyond one log (watch, scan, compare: peers, none imports another), the guard inside a
training process (judging as watch does), the renderers, and the command line. A module may import
its own stage and the stages below it, never above nor a peer. Each folder's `__init__` says the
same in words. A function-level (lazy) import is there to defer a cost (polars, plotext, pygal,
Ray) or a rarely used path, never to hide a cycle, so lazy imports count as edges too and the whole
graph must have no cycle. memlog.judge.stats needs nothing else of memlog. memlog/ and benchmarks/
never import tests/ (but tests.logwriters, the line writers that benchmarks generate their logs
with).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600

# The stages, lowest first; stages in one tuple are peers that may not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("memlog.base",),
    ("memlog.read",),
    ("memlog.tables",),
    ("memlog.parse",),
    ("memlog.judge",),
    ("memlog.report",),
    ("memlog.engine",),
    ("memlog.watch", "memlog.scan", "memlog.compare"),
    ("memlog.guard",),  # the judgement inside the training process, judging as watch does
    ("memlog.render",),
    ("memlog.commands", "memlog.cli", "memlog.__main__"),  # the command line, one stage
)
LEAVES = ("memlog.judge.stats",)  # need nothing else of memlog


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, function-level imports) between the modules under `package`, by
    module name. `from memlog.x import y` is an import of memlog.x.y when that is a module, else of
    memlog.x. Imports under `if TYPE_CHECKING:` are not run, so they are not edges."""
    root = package.parent
    paths = {module_name(p, root): p for p in package.rglob("*.py")}
    top: dict[str, set[str]] = {m: set() for m in paths}
    lazy: dict[str, set[str]] = {m: set() for m in paths}

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    for module, path in paths.items():
        is_package = path.name == "__init__.py"

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                names: list[str] = []
                if isinstance(child, ast.Import):
                    names = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:  # relative: from the module's package, up level - 1
                        anchor = module.split(".")[: len(module.split(".")) - child.level + is_package]
                        base = ".".join([*anchor, base] if base else anchor)
                    names = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in child.names]
                for name in names:
                    target = known(name)
                    if target and target != module:
                        (lazy if nested else top)[module].add(target)
                visit(child, nested)

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return top, lazy


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := walk(start)):
            return found
    return None


def both(top: dict[str, set[str]], lazy: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: top[m] | lazy[m] for m in top}


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT / "memlog")


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "memlog").rglob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they do): {long}"


def test_module_level_imports_have_no_cycle(graph):
    top, _ = graph
    assert cycle_in(top) is None, f"import cycle: {' -> '.join(cycle_in(top))}"


def test_lazy_imports_never_reach_up(graph):
    """A lazy import of a module that imports this one (at any depth) is a cycle deferred, not a
    cost deferred: move the shared piece down to a module both can import."""
    top, lazy = graph
    found = cycle_in(both(top, lazy))
    assert found is None, f"a lazy import closes a cycle: {' -> '.join(found)}"


def stage_of(module: str) -> tuple[int, str] | None:
    """(the stage's place in LAYERS, the stage's package) of a module, None for the package root."""
    for place, stages in enumerate(LAYERS):
        for stage in stages:
            if within(module, (stage,)):
                return place, stage
    return None


def test_every_module_sits_in_a_stage(graph):
    top, _ = graph
    loose = sorted(m for m in top if m != "memlog" and stage_of(m) is None)
    assert not loose, f"modules outside every stage folder (put each in the stage it serves): {loose}"


def test_every_stage_folder_says_what_it_may_import():
    for stages in LAYERS[:-1]:
        for stage in stages:
            init = ROOT / Path(*stage.split(".")) / "__init__.py"
            assert "May import" in init.read_text(encoding="utf-8"), f"{init} does not say what it may import"


def test_imports_only_go_down_the_stages(graph):
    top, lazy = graph
    wrong = []
    for module, targets in both(top, lazy).items():
        here = stage_of(module)
        for target in sorted(targets - {"memlog"}):  # the package root holds __version__ only
            there = stage_of(target)
            if here is None or there is None:
                continue
            if there[0] > here[0]:
                wrong.append(f"{module} -> {target}: {here[1]} sits below {there[1]}")
            elif there[0] == here[0] and there[1] != here[1] and here[0] != len(LAYERS) - 1:
                wrong.append(f"{module} -> {target}: {here[1]} and {there[1]} are peers")
            for leaf in LEAVES:
                if within(module, (leaf,)) and not within(target, (leaf,)):
                    wrong.append(f"{module} -> {target}: {leaf} needs nothing else of memlog")
    assert not wrong, "\n".join(wrong)


def test_the_stage_check_sees_an_upward_import():
    """The check above on a planted edge: the parser importing the report is caught."""
    assert stage_of("memlog.parse.chunks")[0] < stage_of("memlog.report.report")[0]
    assert stage_of("memlog.watch.watch")[0] == stage_of("memlog.scan.fleet")[0]
    assert stage_of("memlog.api_elsewhere") is None


def _imports_of(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


def test_memlog_never_imports_tests():
    assert "tests" not in _imports_of(ROOT / "memlog"), "memlog/ imports tests/: the product needs nothing of its tests"


def test_benchmarks_import_only_the_line_writers_of_tests():
    """benchmarks/ writes its logs with tests.logwriters (test tooling, not in the wheel), nothing else of tests/."""
    found = set()
    for path in (ROOT / "benchmarks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tests":
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "tests"}
    assert all(within(m, ("tests.logwriters",)) for m in found), f"benchmarks import more of tests/ than its line writers: {found}"


def test_the_checks_see_a_lazy_back_edge(tmp_path):
    """The graph above is read from the source, so check the reader on a planted case."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from pkg.high import g  # reaches up\n    return g\n")
    (package / "high.py").write_text("from pkg.low import f\n\ndef g():\n    return f\n")
    (package / "rel.py").write_text("from .low import f\n")
    top, lazy = import_graph(package)
    assert top["pkg.high"] == {"pkg.low"} and lazy["pkg.low"] == {"pkg.high"} and top["pkg.rel"] == {"pkg.low"}
    assert cycle_in(top) is None
    assert cycle_in(both(top, lazy)) == ["pkg.high", "pkg.low", "pkg.high"]


def test_rules_and_parsers_import_the_engine_through_one_face():
    """A rule file imports memlog.judge.rulekit and nothing else of memlog; a block parser in parsers/
    nothing of memlog (the engine hands it rows): moving a module inside memlog never breaks them."""
    wrong = []
    for folder, allowed in (("rules", {"memlog.judge.rulekit"}), ("parsers", set())):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [node.module]
                    if isinstance(node, ast.ImportFrom) and node.module
                    else [a.name for a in getattr(node, "names", [])]
                    if isinstance(node, ast.Import)
                    else []
                )
                wrong += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "memlog" and n not in allowed]
    assert not wrong, "\n".join(wrong)


def test_tests_mirror_the_stages():
    """The tests sit in folders named after the stage they test (tests/<stage>/test_*.py), beside
    `parsers/` (one module per format spec) and `tooling/` (log writers, samples, benchmarks, the
    fuzzer, this file); none at the top of tests/, where only shared helpers live."""
    tests = ROOT / "tests"
    stages = {module.split(".")[1] for layer in LAYERS for module in layer if module.count(".") == 1}
    assert not sorted(p.name for p in tests.glob("test_*.py"))
    folders = {p.parent.name for p in tests.glob("*/test_*.py")}
    assert folders <= stages | {"parsers", "tooling"}, folders - stages
    assert {"read", "parse", "tables", "judge", "engine", "render", "commands", "watch", "scan", "compare", "guard"} <= folders
