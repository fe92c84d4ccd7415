"""Each job's settings: what `growcert <stage> --settings` takes for the job of a rule's wildcards (a config
section, one run of a grid, one growth experiment, one pretrained model, a P2 task's section), as the JSON the
command resolves once through `growcert.config.stage_settings`. `job_settings(config, stage, wildcards)` is a
function of the config, so that targets.py and resources.py, which need a job's settings too, import it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from growcert.experiments import EXPERIMENTS
from growcert.models import family_of
from growcert.pipeline import artifacts
from growcert.plan.grids import run_of, train_settings
from growcert.plan.pretrained import pretrained_of, pretrained_settings


def grow_experiment_names(config: dict[str, Any]) -> list[str]:
    """Folder names of the growth experiments (artifacts.GROW_EXPERIMENT), in config order: a grow job's
    `experiment` wildcard."""
    return [artifacts.GROW_EXPERIMENT.format(**experiment) for experiment in config["grow"]["experiments"]]


def grow_experiment_settings(config: dict[str, Any], index: int) -> dict[str, Any]:
    """What `growcert grow` needs for experiment `index` of a validated config: the entry, the `grow` section's
    shared keys and the family's model options (stage `grow` of `stage_settings`)."""
    section = config["grow"]
    shared = {key: value for key, value in section.items() if key != "experiments"}
    experiment = dict(section["experiments"][index])
    return {**shared, **experiment, "model": dict(config["models"].get(experiment["family"], {}))}


def is_pretrained_job(wildcards: Any, pretrained: bool) -> bool:
    """A job of a pretrained model: of a pretrained model's rule, or with a pretrained family wildcard."""
    return pretrained or (hasattr(wildcards, "family") and family_of(wildcards.family).pretrained)


def job_settings(config: dict[str, Any], stage: str, wildcards: Any = None, pretrained: bool = False) -> dict[str, Any]:
    """What `growcert <stage> --settings` takes for the job of these wildcards (`pretrained`: a job of a
    pretrained model's rule, whose paths name no family): a config section, one run of a grid, one growth
    experiment, one pretrained model, a P2 task's section ({} for a task without one); a pretrained
    model's dump and depth jobs take the overrides of config pretrained.dump and pretrained.depth."""
    if stage == "prepare":
        return config["datasets"][wildcards.dataset]
    if stage == "train":
        return train_settings(config, run_of(wildcards))
    if stage == "grow":
        return grow_experiment_settings(config, grow_experiment_names(config).index(wildcards.experiment))
    if stage == "pretrained_model":
        return pretrained_settings(config, pretrained_of(config, wildcards))
    if stage in EXPERIMENTS:
        return config.get(stage, {})
    if stage == "intervene":
        return {key: value for key, value in config["intervene"].items() if key != "analyse"}
    if stage in ("dump", "depth") and wildcards is not None and is_pretrained_job(wildcards, pretrained):
        return {**config[stage], **config["pretrained"][stage]}
    return config[stage]


class JobSettings:
    """The settings part of `growcert.plan.Plan`: each job's settings, from its config alone."""

    config: dict[str, Any]

    def job_settings(self, stage: str, wildcards: Any = None, pretrained: bool = False) -> dict[str, Any]:
        """`job_settings` of this config: what `growcert <stage> --settings` takes for the job of these wildcards."""
        return job_settings(self.config, stage, wildcards, pretrained)

    def settings_json(self, stage: str, wildcards: Any = None, pretrained: bool = False) -> str:
        """The job's settings (`job_settings`) as the JSON of its --settings."""
        return json.dumps(self.job_settings(stage, wildcards, pretrained), sort_keys=True)

    def settings(self, stage: str, pretrained: bool = False) -> Callable[[Any], str]:
        """`settings_json` of `stage` as a rule's params function of the wildcards."""
        return lambda wildcards: self.settings_json(stage, wildcards, pretrained)

    def task_settings(self, wildcards: Any) -> str:
        """The settings of the P2 task a job of the task rules runs (its `task` wildcard)."""
        return self.settings_json(wildcards.task, wildcards)
