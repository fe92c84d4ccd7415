"""What a config plans: the pipeline's validation, then which runs, stores, tasks and figures the pipeline makes,
every job's settings and resources. The top of the package beside the command line: it reads the experiments
registry, the model families and the wiring facts (growcert.pipeline), and nothing below imports it.

    grids.py        the training grids: runs, their settings and their folders' wildcards
    validation.py   validate_config: growcert.config's validation, then the checks only the pipeline needs
    preference.py   the DPO reference: whether the config runs it, and the trained run it starts from
    pretrained.py   the pretrained models: stores, folders, settings, their folders' check
    advise.py       the files the `advise` target depends on
    settings.py     each job's `--settings`: `job_settings(config, stage, wildcards)` and `JobSettings.settings_json`
    targets.py      the runs and stores, the checkpoints each stage analyses, growth experiments, P2 tasks and
                    units, figures, the report's inputs (`Targets`)
    resources.py    memory and runtime models, threads and GPUs (`Resources`)

`Plan(config)` answers the rules (rules/*.smk), which only name what it returns; tests call it too. Its three
parts share the config alone: where targets or resources need a job's settings they import
`settings.job_settings` and pass the config, so no part reaches another through `self` (tests/test_layout.py).
"""

from __future__ import annotations

from typing import Any

from growcert.models import pretrained_family
from growcert.plan.preference import PREFERENCE_DATASET
from growcert.plan.resources import Resources, per_attempt
from growcert.plan.settings import JobSettings
from growcert.plan.targets import Targets, family_pattern
from growcert.plan.validation import validate_config

__all__ = ["PREFERENCE_DATASET", "Plan", "family_pattern", "per_attempt", "validate_config"]


class Plan(Targets, JobSettings, Resources):
    """The jobs a validated config plans, for the rules: its targets, each job's settings and resources (the
    three parts' methods, each reading only `config` and the folders set here)."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.results = config["results"]
        self.prepared = config["prepared_data"]
        self.pretrained = pretrained_family()  # the family of config key pretrained (models.hf)
