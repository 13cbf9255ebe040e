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
    try:  # libyaml when PyYAML has it: ~10x faster, a large share of start-up
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return yaml.safe_load(text)  # the pure loader decides, so errors read as they always did
