"""The pipeline's validation of a config: `growcert.config.validate_config` (the schema and every stage's checks on
the config's sections), then what only the pipeline needs: the grids (`plan.grids.check_grids`: the families'
rules, contexts, budgets, disjoint cells), the growth experiments' families, the pretrained models' folders, the
DPO reference run, and the dump keeping z (the pipeline runs depth and interventions on every store)."""

from __future__ import annotations

from typing import Any

from growcert import config as config_module
from growcert.errors import ConfigError
from growcert.models import check_growth
from growcert.plan.grids import check_grids
from growcert.plan.preference import preference_reference_run
from growcert.plan.pretrained import check_pretrained
from growcert.plan.settings import grow_experiment_settings


def validate_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill defaults into `config` in place and validate it as the pipeline runs it (see the module docstring).
    Raises ConfigError with a one-line message naming the key."""
    config_module.validate_config(config, schema)
    check_grids(config)
    for index in range(len(config["grow"]["experiments"])):
        check_growth(grow_experiment_settings(config, index), f"grow.experiments[{index}]")
    check_pretrained(config["pretrained"])
    preference_reference_run(config)
    if "z" not in config["dump"]["variables"]:  # every store of the pipeline goes through estimate_depth and intervene
        raise ConfigError(
            f"config key 'dump.variables': {config['dump']['variables']} drops z, which the pipeline's "
            "depth and intervene stages read from every store; use [q, z] (q alone only for `growcert dump`)"
        )
    return config
