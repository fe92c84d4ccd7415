"""The pretrained models of a config (config pretrained): their stores, folders and settings, and the check that
each names its own results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from growcert.config import PRETRAINED_SHARED_KEYS
from growcert.errors import ConfigError
from growcert.models import pretrained_family
from growcert.plan.grids import Run


def check_pretrained(pretrained: dict[str, Any]) -> None:
    """Each pretrained model names its own results folder: (width, depth, seed, step) and names are unique."""
    folders: dict[tuple[int, int, int, int], int] = {}
    names: dict[str, int] = {}
    for index, model in enumerate(pretrained["models"]):
        where = f"pretrained.models[{index}]"
        if model["name"] in names:
            raise ConfigError(
                f"config key '{where}.name': {model['name']} is already pretrained.models[{names[model['name']]}]"
            )
        names[model["name"]] = index
        folder = (model["width"], model["depth"], model["seed"], model["step"])
        if folder in folders:
            raise ConfigError(
                f"config key '{where}': {model['name']} has the width, depth, seed and step of "
                f"pretrained.models[{folders[folder]}], which name its results folder; label one with "
                f"another step or seed"
            )
        folders[folder] = index


def pretrained_stores(config: dict[str, Any]) -> list[tuple[Run, int]]:
    """(run, step) of every pretrained model's gradient store, in config order."""
    pretrained = config["pretrained"]
    return [
        (Run(pretrained_family(), pretrained["dataset"], model["width"], model["depth"], model["seed"]), model["step"])
        for model in pretrained["models"]
    ]


def pretrained_model(config: dict[str, Any], run: Run, step: int) -> dict[str, Any]:
    """The `pretrained.models` entry whose results folder is (run, step)."""
    for (candidate, candidate_step), model in zip(pretrained_stores(config), config["pretrained"]["models"]):
        if (candidate, candidate_step) == (run, step):
            return model
    raise ConfigError(
        f"config key 'pretrained.models': no model with width {run.width}, depth {run.depth}, "
        f"seed {run.seed}, step {step} on {run.dataset}"
    )


def pretrained_of(config: dict[str, Any], wildcards: Any) -> dict[str, Any]:
    """The pretrained.models entry a pretrained rule's job is for (its dataset, width, depth, seed and step)."""
    run = Run(pretrained_family(), wildcards.dataset, int(wildcards.width), int(wildcards.depth), int(wildcards.seed))
    return pretrained_model(config, run, int(wildcards.step))


def pretrained_checkpoint(config: dict[str, Any], model: dict[str, Any]) -> str:
    """The checkpoint folder of a pretrained model: its `path`, else checkpoint_root/name."""
    return model["path"] or str(Path(config["pretrained"]["checkpoint_root"]) / model["name"])


def pretrained_settings(config: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """What `growcert dump --hf` / `intervene --hf` need for one model (stage pretrained_model)."""
    shared = {key: config["pretrained"][key] for key in PRETRAINED_SHARED_KEYS}
    return {**shared, **{key: model[key] for key in ("repo", "name", "width", "depth", "step", "seed")}}
