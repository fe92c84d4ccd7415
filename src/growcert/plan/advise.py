"""The files the Snakemake target `advise` depends on (config advise.model and advise.data)."""

from __future__ import annotations

import os
from typing import Any

from growcert.errors import ConfigError
from growcert.pipeline.artifacts import HF_CONFIG, INFO


def advise_inputs(config: dict[str, Any]) -> dict[str, str]:
    """The files the Snakemake target `advise` depends on: config advise.model (a checkpoint file, or a Hugging Face
    folder's config.json) and advise.data (a text file, or a prepared folder's info file)."""
    section = config["advise"]
    for key in ("model", "data"):
        if section[key] is None:
            raise ConfigError(
                f"config key 'advise.{key}': null; the target advise needs the "
                + (
                    "model to advise on (a growcert step*.pt or a Hugging Face causal-LM folder)"
                    if key == "model"
                    else "data to read it on (a prepared dataset folder or a text file)"
                )
            )
    model, data = section["model"], section["data"]
    return {
        "model": HF_CONFIG.path(model) if os.path.isdir(model) else model,
        "data": INFO.path(data) if os.path.isdir(data) else data,
    }
