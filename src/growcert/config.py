"""Configuration: the schema's validation with defaults filled in, and the checks across keys.

The schema is package data, `src/growcert/resources/config.schema.yaml` (growcert.schema reads it). Two
entry points, one set of checks:
- `stage_settings(stage, overrides)`: the ONE way a stage gets its settings (every `growcert <stage>` resolves
  its `--settings` through it once, before reading any input);
- `validate_config(config)`: a whole config, as the pipeline validates it (growcert.plan adds what
  only the pipeline's plan needs, and the model families' own rules).
Both run `STAGE_CHECKS`, the checks across the keys of one stage's settings; `validate_config` runs each on
the config's sections, so a check registered there holds for a hand-run stage, `advise` and the pipeline
alike. Every error is one line that names the offending key, e.g.

    config key 'grids[0].widths[1]': -2 is less than the minimum of 1

This module knows keys and values, not model families: a family's own rules (depths, widths, the data it
reads) are its record's (`growcert.models.check_model`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema

from growcert.errors import ConfigError
from growcert.schema import load_schema


def _fill_defaults(instance: Any, schema: dict[str, Any]) -> None:
    """Insert schema defaults for missing keys, recursively (objects and arrays of objects)."""
    if isinstance(instance, dict):
        for key, subschema in schema.get("properties", {}).items():
            if key not in instance and "default" in subschema:
                instance[key] = copy.deepcopy(subschema["default"])
            if key in instance:
                _fill_defaults(instance[key], subschema)
    elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
        for item in instance:
            _fill_defaults(item, schema["items"])


def key_path(path: Any) -> str:
    """Render a jsonschema error path as `grids[0].train.steps`."""
    rendered = ""
    for part in path:
        rendered += f"[{part}]" if isinstance(part, int) else (f".{part}" if rendered else str(part))
    return rendered or "<top level>"


# Keys that were renamed so that each name has one meaning (parent section, old name) -> new name: a config
# that still uses an old name gets one line giving the new one (`checkpoints` alone would name three things).
RENAMED_KEYS = {
    ("train", "checkpoints"): "save_steps",  # the steps at which a run saves a checkpoint
    ("intervene", "checkpoints"): "analyse",
    ("depth", "checkpoints"): "analyse",  # last | all
    ("alignment", "misalignment_checkpoints"): "analyse_misalignment",  # last | all
    ("theory", "checkpoints"): "snapshots",  # how many evenly spaced records
    ("alignment", "reference_MK"): "reference_mk",
}


def _one_line(error: jsonschema.ValidationError, prefix: tuple[str, ...] = ()) -> str:
    path = [*prefix, *error.absolute_path]
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        parent = next((part for part in reversed(path) if isinstance(part, str)), "")
        renamed = [key for key in extra if (parent, key) in RENAMED_KEYS]
        if renamed:
            return (
                f"config key '{key_path(path + [renamed[0]])}' was renamed: use "
                f"'{key_path(path + [RENAMED_KEYS[parent, renamed[0]]])}'"
            )
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        where = key_path(path + [extra[0]]) if extra else key_path(path)
        return f"config key '{where}': unknown key (allowed here: {allowed})"
    message = " ".join(error.message.split())
    return f"config key '{key_path(path)}': {message}"


def _validate(instance: Any, schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(
        validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if errors:
        # The deepest, most specific error says most about what to fix.
        raise ConfigError(_one_line(jsonschema.exceptions.best_match(errors), prefix))


def _check_grokking(grokking: dict[str, Any]) -> None:
    adamw, model = grokking["adamw"], grokking["model"]
    if grokking["poprisk"]["gates"]:  # every gate variant is judged against AdamW at its own decay
        missing = [decay for decay in grokking["poprisk"]["weight_decays"] if decay not in adamw["weight_decays"]]
        if missing:
            raise ConfigError(
                f"config key 'grokking.poprisk.weight_decays': {missing[0]:g} has no AdamW at that decay "
                f"in grokking.adamw.weight_decays {adamw['weight_decays']} (each variant is compared "
                "with AdamW at its own decay)"
            )
    rope = model["architecture"] != "classic"  # every architecture but Power et al.'s rotates feature pairs
    if model["width"] % model["heads"] or (rope and (model["width"] // model["heads"]) % 2):
        raise ConfigError(
            f"config key 'grokking.model.heads': width {model['width']} / heads {model['heads']} must be "
            + ("an even integer (RoPE rotates feature pairs)" if rope else "an integer")
        )
    train_equations = round(grokking["train_fraction"] * grokking["p"] * (grokking["p"] - 1))
    if grokking["batch_size"] is not None and grokking["batch_size"] >= train_equations:
        raise ConfigError(
            f"config key 'grokking.batch_size': {grokking['batch_size']} is not below the "
            f"{train_equations} training equations (the population-risk gate needs batch noise)"
        )
    _check_microbatches("grokking", grokking["poprisk"], grokking["batch_size"] or train_equations)


def _check_pinn(pinn: dict[str, Any]) -> None:
    shared = sorted(set(pinn["seeds"]) & set(pinn["tuning_seeds"]))
    if shared:
        raise ConfigError(
            f"config key 'pinn.tuning_seeds': seed {shared[0]} is also in pinn.seeds (the lr is chosen on "
            "seeds that are never judged)"
        )


def _check_microbatches(section: str, poprisk: dict[str, Any], batch: int) -> None:
    """The microbatch variance splits each batch into K equal micro-batches: K must divide it."""
    if poprisk["gates"] and "microbatch" in poprisk["variances"] and batch % poprisk["microbatches"]:
        raise ConfigError(
            f"config key '{section}.poprisk.microbatches': {poprisk['microbatches']} does not divide "
            f"the batch of {batch} (the microbatch variance splits each batch into equal parts)"
        )


def _check_preference(preference: dict[str, Any]) -> None:
    if preference["batch_size"] >= preference["pairs_train"]:
        raise ConfigError(
            f"config key 'preference.batch_size': {preference['batch_size']} must be below pairs_train "
            f"{preference['pairs_train']} (PopulationRiskAdam's streaming variance needs sampled "
            "minibatches)"
        )
    _check_microbatches("preference", preference["poprisk"], preference["batch_size"])


def _check_grow_experiment(experiment: dict[str, Any], where: str = "grow") -> None:
    if experiment["deeper_depth"] is not None and experiment["deeper_depth"] <= experiment["base_depth"]:
        raise ConfigError(
            f"config key '{where}.deeper_depth': {experiment['deeper_depth']} is not deeper than base_depth"
        )


def _check_train_run(run: dict[str, Any]) -> None:
    check_budget("train", run["train"])


def _check_alignment(alignment: dict[str, Any]) -> None:
    if list(alignment["reference_mk"]) not in [list(pair) for pair in alignment["MK"]]:
        raise ConfigError(
            f"config key 'alignment.reference_mk': {alignment['reference_mk']} is not one of alignment.MK"
        )


def check_budget(where: str, train: dict[str, Any]) -> None:
    """Checkpoints are distinct steps within the training budget."""
    for index, step in enumerate(train["save_steps"]):
        if step > train["steps"]:
            raise ConfigError(
                f"config key '{where}.save_steps[{index}]': step {step} is beyond the budget of {train['steps']} steps"
            )
    if len(set(train["save_steps"])) != len(train["save_steps"]):
        raise ConfigError(f"config key '{where}.save_steps': steps must be distinct")


# The checks across the keys of one stage's settings (the stages of stage_settings): run by `stage_settings`
# for every `growcert <stage>`, and by `validate_config` on the config's sections.
STAGE_CHECKS: dict[str, Callable[..., None]] = {
    "grokking": _check_grokking,
    "preference": _check_preference,
    "alignment": _check_alignment,
    "grow": _check_grow_experiment,
    "train": _check_train_run,
    "pinn": _check_pinn,
}


class Settings(dict):
    """A stage's resolved settings (schema defaults filled in, validated, checked): what `stage_settings`
    returns, and takes back unchanged for the same stage, so a job resolves its settings once. A dict in every
    other respect (a copy made by dict's own constructor is a plain one, with no stage)."""

    def __init__(self, *args: Any, stage: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.stage = stage

    def __reduce__(self):
        """Pickled and deep-copied as the plain dict it holds (checkpoints and resume states store no class of
        this module)."""
        return dict, (dict(self),)


# Stages whose settings are not one top-level section of the config but are built from its parts:
#   train  one run of a grid (family, dataset, width, depth, seed, the family's model options, train)
#   grow   one entry of grow.experiments with the section's shared keys (and the family's model options)
#   pretrained_model  one entry of pretrained.models with the keys every pretrained model shares
DERIVED_STAGES = ("train", "grow", "pretrained_model")
PRETRAINED_SHARED_KEYS = ("context", "tokenizer", "allow_download")  # the pretrained section's keys every model shares
# The options schema of a family without a models.<family> section: none
NO_OPTIONS = {"type": "object", "additionalProperties": False, "default": {}, "properties": {}}


def stage_schema(stage: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON schema of what `growcert <stage> --settings` takes: a top-level section of the config
    (dump, alignment, intervene, depth, grokking, pinn, preference, theory, ...) or a derived stage."""
    properties = (schema or load_schema())["properties"]
    if stage in properties and stage not in DERIVED_STAGES:
        return properties[stage]
    if stage == "train":
        grid = properties["grids"]["items"]["properties"]
        run = {
            "family": grid["family"],
            "dataset": grid["dataset"],
            "width": {"type": "integer", "minimum": 1, "description": grid["widths"]["description"]},
            "depth": {"type": "integer", "minimum": 1, "description": grid["depths"]["description"]},
            "seed": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Seed of initialisation and batch order.",
            },
            "model": {
                "type": "object",
                "default": {},
                "description": "The family's options (config key models.<family>).",
            },
            # No default: the key is absent for a run of a grid that does not sweep context, so such
            # a run's settings (and their hash) stay what they were before context became an axis.
            "context": {"type": "integer", "minimum": 2, "description": grid["contexts"]["description"]},
            "train": grid["train"],
        }
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["family", "dataset", "width", "depth"],
            "properties": run,
        }
    if stage == "grow":
        section = properties["grow"]["properties"]
        experiment = section["experiments"]["items"]
        shared = {key: value for key, value in section.items() if key != "experiments"}
        model = {"type": "object", "default": {}, "description": "The family's options (config key models.<family>)."}
        return {
            "type": "object",
            "additionalProperties": False,
            "required": experiment["required"],
            "properties": {**shared, **experiment["properties"], "model": model},
        }
    if stage == "pretrained_model":
        pretrained = properties["pretrained"]["properties"]
        model = pretrained["models"]["items"]["properties"]
        # Outside the pipeline a model need not declare name, width and depth (null: as the checkpoint has them).
        optional = {
            key: value if "default" in value else {**value, "type": [value["type"], "null"], "default": None}
            for key, value in model.items()
        }
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {**{key: pretrained[key] for key in PRETRAINED_SHARED_KEYS}, **optional},
        }
    raise ConfigError(f"no settings schema for stage {stage!r}")


def stage_settings(stage: str, overrides: dict[str, Any] | None = None) -> Settings:
    """The ONE way a stage gets its settings: `overrides` with the schema's defaults filled in, validated as
    the pipeline validates its config, plus the stage's checks across keys. ConfigError names the key.

    Idempotent, so the pipeline's full section and a bare `growcert <stage> --settings '{}'` give the same
    settings; settings it already resolved for `stage` come back as they are (a stage entry point called by
    the command line, which resolved them, does not resolve them again).
    """
    if isinstance(overrides, Settings) and overrides.stage == stage:
        return overrides
    schema = load_schema()
    settings = copy.deepcopy(overrides or {})
    if not isinstance(settings, dict):
        raise ConfigError(f"settings of {stage}: expected a mapping of keys to values, got {type(settings).__name__}")
    prefix = () if stage == "train" else (stage,)
    section = stage_schema(stage, schema)
    _fill_defaults(settings, section)
    _validate(settings, section, prefix)
    if stage in ("train", "grow"):  # the family's options: the schema of config key models.<family>
        family_options = schema["properties"]["models"]["properties"].get(settings["family"], NO_OPTIONS)
        _fill_defaults(settings["model"], family_options)
        _validate(settings["model"], family_options, (*prefix, "model"))
    STAGE_CHECKS.get(stage, lambda _: None)(settings)
    return Settings(settings, stage=stage)


def validate_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill defaults into `config` in place, validate it, and run every stage's checks on its sections.

    Raises ConfigError with a one-line message naming the key.
    """
    schema = load_schema() if schema is None else schema
    _fill_defaults(config, schema)
    _validate(config, schema)
    for section in ("grokking", "pinn", "preference", "alignment"):
        STAGE_CHECKS[section](config[section])
    shared = {key: value for key, value in config["grow"].items() if key != "experiments"}
    for index, experiment in enumerate(config["grow"]["experiments"]):
        STAGE_CHECKS["grow"]({**shared, **experiment}, f"grow.experiments[{index}]")
    return config


def settings_hash(settings: dict[str, Any]) -> str:
    """Stable short hash of a settings dict (canonical JSON)."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def parse_settings(text: str) -> dict[str, Any]:
    """A `--settings` value: inline JSON, or `@path` to a JSON/YAML file (one line naming the file when unreadable)."""
    import yaml

    if text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            raise ConfigError(f"settings file {path}: no such file")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            raise ConfigError(f"settings file {path}: not valid YAML or JSON ({error})") from None
        return {} if loaded is None else loaded
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"--settings: not valid JSON ({error}); give JSON or @file") from None
