"""The config schema (src/growcert/resources/config.schema.yaml, package data): read once per process, handed
out as copies. The workflow validates its config against the same file (rules/common.smk).

Every CLI command takes its defaults from the schema (e.g. `--device`), and every Snakemake job starts
a fresh process, so reading it is on every job's start-up path: it is parsed with libyaml when PyYAML
has it (the pure-Python parser takes ~0.3 s for its ~60 KB) and cached per path and modification time.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

# The package's own copy, wherever the package is installed (an editable install or a wheel).
SCHEMA_FILE = Path(str(resources.files("growcert") / "resources" / "config.schema.yaml"))


# libyaml's parser when PyYAML has it: every job reads the schema, and the pure-Python parser is slow on a file this
# size (docs/science.md, "Cost").
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=8)
def _parsed_schema(path: str, mtime_ns: int) -> dict[str, Any]:
    with open(path) as handle:
        return yaml.load(handle, Loader=_YAML_LOADER)


def load_schema(path: str | Path = SCHEMA_FILE) -> dict[str, Any]:
    """The config schema at `path`, parsed once per process (every CLI command's defaults read it) and
    handed out as a copy, so that no caller can change another's."""
    path = Path(path).resolve()
    return copy.deepcopy(_parsed_schema(str(path), path.stat().st_mtime_ns))


def top_level_default(key: str) -> Any:
    """The schema's default of a top-level config key (e.g. `device`), for the CLI's own defaults."""
    return copy.deepcopy(_parsed_schema(str(SCHEMA_FILE), SCHEMA_FILE.stat().st_mtime_ns)["properties"][key]["default"])
