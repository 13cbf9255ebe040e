"""The generated parts of README.md and docs/*.md are real output of the current code
(scripts/readme_examples.py): the command outputs, analyze's examples of each mode, the stage map."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "scripts" / "readme_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_and_docs_are_current():
    script = _script()
    documents = script.wanted_documents()
    assert ROOT / "README.md" in documents and ROOT / "docs" / "commands.md" in documents
    assert not script.missing_blocks([current for current, _ in documents.values()]), "a generated block lost its markers"
    stale = [str(path.relative_to(ROOT)) for path, (current, wanted) in documents.items() if wanted != current]
    assert not stale, f"{stale} are stale: run `python scripts/readme_examples.py` and commit them"


def test_a_block_is_replaced_in_place_and_text_around_it_kept():
    script = _script()
    block = f"{script.BEGIN}\nnew\n{script.END}\n"
    old = f"# top\n\n{script.BEGIN}\nold\n{script.END}\n\n## after\n"
    assert script.updated(old, {(script.BEGIN, script.END): block}) == f"# top\n\n{script.BEGIN}\nnew\n{script.END}\n\n## after\n"
    assert script.updated("# top\n", {(script.BEGIN, script.END): block}) == "# top\n"
    assert script.missing_blocks(["# top\n"]) == [script.BEGIN, script.STAGES_BEGIN]


def test_the_stage_map_follows_the_structure_test():
    """docs/architecture.md's map lists every stage of tests/tooling/test_structure.py's LAYERS, in order."""
    from tests.tooling.test_structure import LAYERS

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### \d+\. (.+)$", text, re.M)

    def shown(stage: str) -> str:  # a stage folder, or a module file of the command line
        name = stage.split(".", 1)[1]
        return name if (ROOT / "memlog" / name).is_dir() else f"{name}.py"

    assert [re.findall(r"`memlog/([\w.]+?)/?`", h) for h in headings] == [[shown(s) for s in peers] for peers in LAYERS]


def test_every_path_the_docs_cite_exists():
    """A backquoted repository path in README.md, CONTRIBUTING.md, CHANGELOG.md or docs/ names a file or folder that is there."""
    pages = [
        ROOT / "README.md",
        *(ROOT / name for name in ("CONTRIBUTING.md", "CHANGELOG.md") if (ROOT / name).exists()),
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    missing = []
    for page in pages:
        for path in re.findall(r"`((?:memlog|parsers|rules|tests|scripts|benchmarks|docs|sample_logs)/[\w./*-]*)`", page.read_text(encoding="utf-8")):
            clean = path.split("*")[0].rstrip("/")
            if not list(ROOT.glob(path)) and not (ROOT / clean).exists():
                missing.append(f"{page.name}: {path}")
    assert not missing, missing


def test_the_formats_reference_names_every_spec_and_wrapper_key():
    from memlog.parse.formats import SPEC_KEYS
    from memlog.parse.wrappers import KEYS

    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    undocumented = sorted(key for key in SPEC_KEYS | KEYS if f"| `{key}` |" not in text)
    assert not undocumented, f"docs/formats.md has no row for {undocumented}"
