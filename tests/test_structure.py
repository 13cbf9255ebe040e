"""The shape of the code: small modules, and imports that only go down.

The layers are the import graph itself: a module sits above everything it imports. A function-level
(lazy) import is there to defer a cost (polars, plotext, pygal, Ray) or a rarely used path, never to
hide a cycle, so lazy imports count as edges too and the whole graph must have no cycle: a lower
module reaching up, even lazily, is a cycle through the module-level imports of the one above. On
top of that, the packages keep their places: the command line (memlog.cli, memlog.commands) over
the renderers (memlog.render) over the library, and memlog.stats and memlog.logwriters need
nothing else of memlog. benchmarks/ and memlog/ never import tests/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600

COMMAND_LINE = ("memlog.cli", "memlog.commands", "memlog.__main__")
RENDERERS = ("memlog.render",)
LEAVES = ("memlog.stats", "memlog.logwriters")  # need nothing else of memlog


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
                return path[path.index(nxt):] + [nxt]
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


def test_packages_keep_their_layer(graph):
    top, lazy = graph
    wrong = []
    for module, targets in both(top, lazy).items():
        for target in sorted(targets - {"memlog"}):  # the package root holds __version__ only
            if within(target, COMMAND_LINE) and not within(module, COMMAND_LINE):
                wrong.append(f"{module} -> {target}: only the command line imports the command line")
            if within(target, RENDERERS) and not within(module, RENDERERS + COMMAND_LINE):
                wrong.append(f"{module} -> {target}: the library imports a renderer")
            for leaf in LEAVES:
                if within(module, (leaf,)) and not within(target, (leaf,)):
                    wrong.append(f"{module} -> {target}: {leaf} needs nothing else of memlog")
    assert not wrong, "\n".join(wrong)


def _imports_of(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("folder", ["memlog", "benchmarks"])
def test_tests_are_not_imported_by(folder):
    assert "tests" not in _imports_of(ROOT / folder), f"{folder}/ imports tests/: move what it needs out of tests/"


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
