"""The README's examples block is real output of the current code (scripts/readme_examples.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "scripts" / "readme_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_examples_are_current():
    script = _script()
    current = (ROOT / "README.md").read_text(encoding="utf-8")
    assert current.rstrip().endswith(script.END), "the examples block must close the README"
    wanted = script.updated_readme(current, script.examples())
    assert wanted == current, "README examples are stale: run `python scripts/readme_examples.py` and commit README.md"


def test_the_block_is_replaced_in_place_and_appended_when_missing():
    script = _script()
    block = f"{script.BEGIN}\nnew\n{script.END}\n"
    assert script.updated_readme("# top\n", block) == "# top\n\n" + block
    old = f"# top\n\n{script.BEGIN}\nold\n{script.END}\n"
    assert script.updated_readme(old, block) == "# top\n\n" + block
