"""The formats and wrappers a run is read with: memlog's own, plus those of a user's folders, each
user spec proven on its own samples before it reads a log.

formats.py and wrappers.py declare what a spec is and load one file; checking a spec's samples
needs the parser (parse.py) and the unwrapper (unwrap.py), which build on those two, so loading a
checked set lives here, above all four.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from memlog.base.columns import MEMORY_COLUMNS
from memlog.base.errors import FormatSpecError
from memlog.parse.chunks import entry_sample_mismatches, parse_line, sample_mismatches
from memlog.parse.formats import FormatSpec, builtin_dir, load_spec, load_spec_once
from memlog.parse.unwrap import sample_mismatches as wrapper_sample_mismatches
from memlog.parse.wrappers import WrapperSpec, builtin_wrappers, by_priority, load_wrapper


def load_specs(extra_dirs: Sequence[Path] = (), plugin_dirs: Sequence[Path] = ()) -> dict[str, FormatSpec]:
    """Built-in specs plus user ones (later directories override earlier names). Specs in
    `plugin_dirs` (trusted by an explicit command-line option, never by a config file) may run a
    Python block parser of their own folder; all others can only name the ones memlog ships."""
    specs: dict[str, FormatSpec] = {}
    folders = [(builtin_dir(), False), *((d, False) for d in extra_dirs), *((d, True) for d in plugin_dirs)]
    users: list[FormatSpec] = []
    for directory, plugins in folders:
        if not Path(directory).is_dir():
            raise FormatSpecError(f"{directory}: formats directory not found")
        for path in sorted(Path(directory).glob("*.yaml")):
            spec = load_spec_once(path, plugins)
            if directory != builtin_dir():
                if spec.name in specs and spec.replaces != spec.name:
                    raise FormatSpecError(
                        f"{path}: a format named {spec.name!r} is already loaded ({specs[spec.name].path}); "
                        f"add `replaces: {spec.name}` to take its place, or give this one another name"
                    )
                users.append(spec)
            specs[spec.name] = spec
    for spec in users:  # a user's spec proves itself on its own samples before it reads a log
        problems = spec_sample_problems(spec, specs.values())
        if problems:
            raise FormatSpecError(f"{spec.path}: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return specs


def spec_sample_problems(spec: FormatSpec, context: Iterable[FormatSpec]) -> list[str]:
    """What is wrong with a spec's samples (its own and its entries'), checked with the other loaded
    specs (memlog/parse/chunks.py)."""
    others = [s for s in context if s is not spec]
    return sample_mismatches(spec, others) + entry_sample_mismatches(spec, others)


def unread_memory(spec: FormatSpec) -> list[str]:
    """A record pattern that names memory columns must read memory from some sample it matches: a
    guessed spec whose one pattern reads only its loss lines (`iter N: loss ...`) while the memory it
    names is printed on other lines would pass its samples and read no memory at all."""
    problems = []
    read: dict[str, set[str]] = {}
    for sample in spec.samples:
        records, _ = parse_line([spec], sample.get("line", ""))
        for record in records:
            got = {c for c in MEMORY_COLUMNS if record.get(c) is not None}
            read.setdefault(str(record.get("pattern", "")).split("/", 1)[-1], set()).update(got)
    for pattern in spec.records:
        named = sorted({g for names in (pattern.groups, *pattern.field_groups) for g in names if g in MEMORY_COLUMNS})
        if named and pattern.name in read and not read[pattern.name]:
            problems.append(f"{spec.name}/{pattern.name}: names memory ({', '.join(named)}) but none of the samples it reads holds any")
    return problems


def load_wrappers(extra_dirs: tuple[Path, ...] = ()) -> list[WrapperSpec]:
    """Built-in wrappers plus those in `<dir>/wrappers/` of each user formats folder (a user
    wrapper named like a built-in one replaces it). Ordered by priority, then name."""
    found = builtin_wrappers()
    users = []
    for directory in extra_dirs:
        for path in sorted((Path(directory) / "wrappers").glob("*.yaml")):
            wrapper = load_wrapper(path)
            found[wrapper.name] = wrapper
            users.append(wrapper)
    wrappers = by_priority(found.values())
    for wrapper in users:  # a user's wrapper proves itself on its own samples first
        problems = wrapper_sample_mismatches(wrapper, wrappers)
        if problems:
            raise FormatSpecError(f"{wrapper.path}: {problems[0]}")
    return wrappers


def test_folder(folder: Path, plugins: bool = False) -> list[tuple[Path, list[str]]]:
    """Every spec and wrapper of a user's folder checked on its own samples, with memlog's own specs
    and wrappers around it: (file, problems) for each file, an unloadable file's error as its problem."""
    if not folder.is_dir():
        raise FormatSpecError(f"{folder}: formats directory not found")
    results: list[tuple[Path, list[str]]] = []
    builtin = load_specs()
    for path in sorted(folder.glob("*.yaml")):
        try:
            spec = load_spec(path, plugins)
        except FormatSpecError as exc:
            results.append((path, [str(exc)]))
            continue
        problems = spec_sample_problems(spec, [s for n, s in builtin.items() if n != spec.name]) + unread_memory(spec)
        if spec.name in builtin and spec.replaces != spec.name:
            problems.insert(0, f"a format named {spec.name!r} ships with memlog: add `replaces: {spec.name}` to take its place")
        results.append((path, problems))
    wrappers = load_wrappers()
    for path in sorted((folder / "wrappers").glob("*.yaml")):
        try:
            wrapper = load_wrapper(path)
        except FormatSpecError as exc:
            results.append((path, [str(exc)]))
            continue
        results.append((path, wrapper_sample_mismatches(wrapper, wrappers)))
    return results
