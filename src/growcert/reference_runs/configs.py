"""A reference run's pipeline config as its jobs got it, and the per-store tables it asks Snakemake for by path.

`merged_config` is config.yaml with the run's configs/<name>.yaml merged over it as `snakemake --configfile`
merges them (mappings merged, lists such as grids replaced), the schema's defaults filled in and validated as the
pipeline validates it (growcert.plan.validation.validate_config). `store_tables` names the alignment or
misalignment table of the last checkpoint of every run such a config trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from growcert.pipeline import artifacts
from growcert.plan.grids import run_steps, run_wildcards, training_runs
from growcert.plan.validation import validate_config

BASE_CONFIG = "config.yaml"  # the Snakefile's configfile, relative to the repository root


def _merge(into: dict, other: dict) -> dict:
    for key, value in other.items():
        into[key] = (
            _merge(into.get(key, {}), value) if isinstance(value, dict) and isinstance(into.get(key), dict) else value
        )
    return into


def merged_config(config_file: str | Path, base: str | Path = BASE_CONFIG) -> dict[str, Any]:
    """`base` with `config_file` merged over it, validated with the schema's defaults filled in."""
    config: dict[str, Any] = {}
    for name in (base, config_file):
        _merge(config, yaml.safe_load(Path(name).read_text(encoding="utf-8")) or {})
    return validate_config(config)


def store_tables(results: Path, config: dict[str, Any], kind: str) -> list[str]:
    """The `kind` table (alignment or misalignment: growcert.pipeline.artifacts.ALIGNMENT, MISALIGNMENT) of the last
    checkpoint of every run `config` trains, as paths under `results`."""
    table = {"alignment": artifacts.ALIGNMENT, "misalignment": artifacts.MISALIGNMENT}[kind]
    return [
        table.path(str(results), step=run_steps(config, run)[-1], **run_wildcards(run)) for run in training_runs(config)
    ]
