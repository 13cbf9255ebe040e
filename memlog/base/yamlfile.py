"""Reading a YAML file a user hands memlog (a config, a format or wrapper spec): bounded in size and
in alias use before it is parsed, so a tiny alias bomb or `/dev/zero` fails in one line, not after
gigabytes. Safe loaders only: YAML never constructs Python objects here."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from memlog.base.opening import SpecialFileError, open_bounded

# Configs and specs are a few KiB; a megabyte is far beyond any real one.
MAX_YAML_BYTES = 1024 * 1024
# Specs share a field list or two by alias (`*step_fields`); a bomb needs thousands of expansions.
MAX_YAML_ALIASES = 100
# Nine aliases of nine aliases... is a billion nodes from a few hundred bytes (and fewer than
# MAX_YAML_ALIASES): what the aliases expand to is counted too. An alias-free file under
# MAX_YAML_BYTES holds at most about half a million nodes (`[1,1,...]`), so this bounds bombs only.
MAX_YAML_NODES = 1_000_000
# Real configs and specs nest a few levels; 50,000 nested `[` crash libyaml's composer (a C stack
# overflow) and exceed Python's recursion limit in the pure one.
MAX_YAML_DEPTH = 64
_ALIAS = re.compile(r"(?<![\w*\\])\*[A-Za-z_][\w-]*")


class YamlFileError(ValueError):
    """Why the file was refused, in a phrase (the caller names the file)."""


def read_yaml(path: Path | str):
    """The parsed document, or YamlFileError/OSError/UnicodeDecodeError/yaml.YAMLError."""
    try:
        handle = open_bounded(path)
    except SpecialFileError as exc:
        raise YamlFileError(str(exc)) from None
    with handle:
        data = handle.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise YamlFileError(f"larger than {MAX_YAML_BYTES // 1024} KiB, not a config or spec")
    text = data.decode("utf-8")
    if len(_ALIAS.findall(text)) > MAX_YAML_ALIASES:
        raise YamlFileError(f"more than {MAX_YAML_ALIASES} YAML aliases (an alias bomb?)")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _check_shape(text, loader)
    try:  # libyaml when PyYAML has it: ~10x faster, a large share of start-up
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:
        return yaml.safe_load(text)  # the pure loader decides, so errors read as they always did


_STARTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_ENDS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _check_shape(text: str, loader) -> None:
    """YamlFileError when the document nests deeper than MAX_YAML_DEPTH or its aliases expand to more
    than MAX_YAML_NODES nodes. Read from the event stream, before any node is built, and stopped at
    the first excess (libyaml's parser slows down quadratically with flow depth). Invalid YAML is
    left to the loader, whose message the caller shows."""
    expanded: dict[str, int] = {}  # anchor -> nodes it stands for
    open_: list[list] = []  # [anchor, nodes so far] of each collection being read
    try:
        for event in yaml.parse(text, Loader=loader):
            kind = type(event)
            if kind is yaml.ScalarEvent:
                nodes = 1
                if event.anchor:
                    expanded[event.anchor] = 1
            elif kind is yaml.AliasEvent:
                nodes = expanded.get(event.anchor, 1)
            elif kind in _STARTS:
                open_.append([event.anchor, 1])
                if len(open_) > MAX_YAML_DEPTH:
                    raise YamlFileError(f"nested more than {MAX_YAML_DEPTH} levels deep (line {event.start_mark.line + 1}), not a config or spec")
                continue
            elif kind in _ENDS:
                anchor, nodes = open_.pop()
                if anchor:
                    expanded[anchor] = nodes
            else:
                continue
            if open_:
                open_[-1][1] += nodes
                nodes = open_[-1][1]
            if nodes > MAX_YAML_NODES:
                raise YamlFileError(f"its aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)")
    except yaml.YAMLError:
        return
