"""Configuration: JSON-Schema validation with defaults filled in, and grid expansion.

The schema is package data, `src/growcert/resources/config.schema.yaml` (growcert.schema reads it);
`rules/common.smk` validates Snakemake's `config` with `validate_config` before any
rule is defined, and tests call the same function. Every error is one line that
names the offending key, e.g.

    config key 'grids[0].widths[1]': -2 is less than the minimum of 1
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import jsonschema

from growcert.errors import ConfigError
from growcert.grids import (CONTEXT_FAMILIES, Run, check_context_family, check_contexts, context_of_tag,  # noqa: F401
                            context_tag, grid_cells, grid_of, run_steps, run_wildcards, train_settings,
                            training_runs)
from growcert.schema import SCHEMA_FILE, load_schema, top_level_default  # noqa: F401  (the config's public API)

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
# that still uses an old name gets one line giving the new one. `checkpoints` meant three things.
RENAMED_KEYS = {("train", "checkpoints"): "save_steps",  # the steps at which a run saves a checkpoint
                ("intervene", "checkpoints"): "analyse", ("depth", "checkpoints"): "analyse",  # last | all
                ("alignment", "misalignment_checkpoints"): "analyse_misalignment",  # last | all
                ("theory", "checkpoints"): "snapshots",  # how many evenly spaced records
                ("alignment", "reference_MK"): "reference_mk"}


def _one_line(error: jsonschema.ValidationError, prefix: tuple[str, ...] = ()) -> str:
    path = [*prefix, *error.absolute_path]
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        parent = next((part for part in reversed(path) if isinstance(part, str)), "")
        renamed = [key for key in extra if (parent, key) in RENAMED_KEYS]
        if renamed:
            return (f"config key '{key_path(path + [renamed[0]])}' was renamed: use "
                    f"'{key_path(path + [RENAMED_KEYS[parent, renamed[0]]])}'")
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        where = key_path(path + [extra[0]]) if extra else key_path(path)
        return f"config key '{where}': unknown key (allowed here: {allowed})"
    message = " ".join(error.message.split())
    return f"config key '{key_path(path)}': {message}"


def _validate(instance: Any, schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        # The deepest, most specific error says most about what to fix.
        raise ConfigError(_one_line(jsonschema.exceptions.best_match(errors), prefix))


def validate_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill defaults into `config` in place, validate it, and check cross-key rules.

    Raises ConfigError with a one-line message naming the key.
    """
    schema = load_schema() if schema is None else schema
    _fill_defaults(config, schema)
    _validate(config, schema)
    _check_cross_keys(config)
    return config


# Stages whose settings are not one top-level section of the config but are built from its parts:
#   train  one run of a grid (family, dataset, width, depth, seed, the family's model options, train)
#   grow   one entry of grow.experiments with the section's shared keys (and the family's model options)
#   hf     one entry of pretrained.models with the keys every pretrained model shares
DERIVED_STAGES = ("train", "grow", "hf")


def stage_schema(stage: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON schema of what `growcert <stage> --settings` takes: a top-level section of the config
    (dump, alignment, intervene, depth, grokking, pinn, preference, theory, ...) or a derived stage."""
    properties = (schema or load_schema())["properties"]
    if stage in properties and stage not in DERIVED_STAGES:
        return properties[stage]
    if stage == "train":
        grid = properties["grids"]["items"]["properties"]
        run = {"family": grid["family"], "dataset": grid["dataset"],
               "width": {"type": "integer", "minimum": 1, "description": grid["widths"]["description"]},
               "depth": {"type": "integer", "minimum": 1, "description": grid["depths"]["description"]},
               "seed": {"type": "integer", "minimum": 0, "default": 0, "description": "Seed of initialisation and batch order."},
               "model": {"type": "object", "default": {}, "description": "The family's options (config key models.<family>)."},
               # No default: the key is absent for a run of a grid that does not sweep context, so such
               # a run's settings (and their hash) stay what they were before context became an axis.
               "context": {"type": "integer", "minimum": 2, "description": grid["contexts"]["description"]},
               "train": grid["train"]}
        return {"type": "object", "additionalProperties": False, "required": ["family", "dataset", "width", "depth"],
                "properties": run}
    if stage == "grow":
        section = properties["grow"]["properties"]
        experiment = section["experiments"]["items"]
        shared = {key: value for key, value in section.items() if key != "experiments"}
        model = {"type": "object", "default": {}, "description": "The family's options (config key models.<family>)."}
        return {"type": "object", "additionalProperties": False, "required": experiment["required"],
                "properties": {**shared, **experiment["properties"], "model": model}}
    if stage == "hf":
        pretrained = properties["pretrained"]["properties"]
        model = pretrained["models"]["items"]["properties"]
        # Outside the pipeline a model need not declare name, width and depth (null: as the checkpoint has them).
        optional = {key: value if "default" in value else {**value, "type": [value["type"], "null"], "default": None}
                    for key, value in model.items()}
        return {"type": "object", "additionalProperties": False,
                "properties": {**{key: pretrained[key] for key in HF_KEYS}, **optional}}
    raise ConfigError(f"no settings schema for stage {stage!r}")


def stage_settings(stage: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ONE way a stage gets its settings: `overrides` with the schema's defaults filled in, validated as
    the pipeline validates its config, plus the stage's checks across keys. ConfigError names the key.

    Idempotent, so the pipeline's full section and a bare `growcert <stage> --settings '{}'` give the same
    settings, and a module may resolve again what the command line already resolved.
    """
    schema = load_schema()
    settings = copy.deepcopy(overrides or {})
    if not isinstance(settings, dict):
        raise ConfigError(f"settings of {stage}: expected a mapping of keys to values, got {type(settings).__name__}")
    prefix = () if stage == "train" else (stage,)
    section = stage_schema(stage, schema)
    _fill_defaults(settings, section)
    _validate(settings, section, prefix)
    if stage in ("train", "grow"):  # the family's options: the schema of config key models.<family>
        family_options = schema["properties"]["models"]["properties"][settings["family"]]
        _fill_defaults(settings["model"], family_options)
        _validate(settings["model"], family_options, (*prefix, "model"))
    STAGE_CHECKS.get(stage, lambda _: None)(settings)
    return settings


def _check_grokking(grokking: dict[str, Any]) -> None:
    adamw, model = grokking["adamw"], grokking["model"]
    if grokking["poprisk"]["gates"]:  # every gate variant is judged against AdamW at its own decay
        missing = [decay for decay in grokking["poprisk"]["weight_decays"] if decay not in adamw["weight_decays"]]
        if missing:
            raise ConfigError(f"config key 'grokking.poprisk.weight_decays': {missing[0]:g} has no AdamW at that decay "
                              f"in grokking.adamw.weight_decays {adamw['weight_decays']} (each variant is compared "
                              "with AdamW at its own decay)")
    rope = model["architecture"] == "llama"
    if model["width"] % model["heads"] or (rope and (model["width"] // model["heads"]) % 2):
        raise ConfigError(f"config key 'grokking.model.heads': width {model['width']} / heads {model['heads']} must be "
                          + ("an even integer (RoPE rotates feature pairs)" if rope else "an integer"))
    train_equations = round(grokking["train_fraction"] * grokking["p"] * (grokking["p"] - 1))
    if grokking["batch_size"] is not None and grokking["batch_size"] >= train_equations:
        raise ConfigError(f"config key 'grokking.batch_size': {grokking['batch_size']} is not below the "
                          f"{train_equations} training equations (the population-risk gate needs batch noise)")
    _check_microbatches("grokking", grokking["poprisk"], grokking["batch_size"] or train_equations)


def _check_pinn(pinn: dict[str, Any]) -> None:
    shared = sorted(set(pinn["seeds"]) & set(pinn["tuning_seeds"]))
    if shared:
        raise ConfigError(f"config key 'pinn.tuning_seeds': seed {shared[0]} is also in pinn.seeds (the lr is chosen on "
                          "seeds that are never judged)")


def _check_microbatches(section: str, poprisk: dict[str, Any], batch: int) -> None:
    """The microbatch variance splits each batch into K equal micro-batches: K must divide it."""
    if poprisk["gates"] and "microbatch" in poprisk["variances"] and batch % poprisk["microbatches"]:
        raise ConfigError(f"config key '{section}.poprisk.microbatches': {poprisk['microbatches']} does not divide "
                          f"the batch of {batch} (the microbatch variance splits each batch into equal parts)")


def _check_preference(preference: dict[str, Any]) -> None:
    if preference["batch_size"] >= preference["pairs_train"]:
        raise ConfigError(f"config key 'preference.batch_size': {preference['batch_size']} must be below pairs_train "
                          f"{preference['pairs_train']} (PopulationRiskAdam's streaming variance needs sampled "
                          "minibatches)")
    _check_microbatches("preference", preference["poprisk"], preference["batch_size"])


def _check_model(where: str, family: str, dataset: str, widths: dict[str, int], depths: dict[str, int],
                 head_dim: int) -> None:
    """A family's rules (models.<family>.FAMILY) on a grid or run: the dataset kind it reads, its depths and
    its widths, given as {key under `where`: value}."""
    from growcert.data import DATASET_KINDS
    from growcert.models import family_of

    rules = family_of(family)
    within = f"{where}." if where else ""
    if DATASET_KINDS[dataset] != rules.data_kind:
        raise ConfigError(f"config key '{within}dataset': family {family} cannot train on {dataset}")
    for key, depth in depths.items():
        if problem := rules.depth_problem(depth):
            raise ConfigError(f"config key '{within}{key}': {problem}")
    for key, width in widths.items():
        if problem := rules.width_problem(width, head_dim):
            raise ConfigError(f"config key '{within}{key}': {problem}")


def _check_grow_experiment(experiment: dict[str, Any], where: str = "grow") -> None:
    from growcert.models import family_of

    depths = {"base_depth": experiment["base_depth"]}
    if experiment["deeper_depth"] is not None:
        depths["deeper_depth"] = experiment["deeper_depth"]
    _check_model(where, experiment["family"], experiment["dataset"], {"width": experiment["width"]}, depths,
                 experiment["model"].get("head_dim", 1))
    if experiment["deeper_depth"] is not None and experiment["deeper_depth"] <= experiment["base_depth"]:
        raise ConfigError(f"config key '{where}.deeper_depth': {experiment['deeper_depth']} is not deeper than base_depth")
    points = family_of(experiment["family"]).point_count(experiment["base_depth"])
    if experiment["blocks"] > points:
        raise ConfigError(f"config key '{where}.blocks': {experiment['blocks']} blocks but the base has {points} points")


def _check_train_run(run: dict[str, Any]) -> None:
    _check_model("", run["family"], run["dataset"], {"width": run["width"]}, {"depth": run["depth"]},
                 run["model"].get("head_dim", 1))
    _check_budget("train", run["train"])
    if "context" in run:
        check_context_family("context", run["family"])
        if run["model"].get("context") != run["context"]:
            raise ConfigError(f"config key 'model.context': {run['model'].get('context')} differs from the run's "
                              f"context axis {run['context']} (train_settings sets both)")


def _check_budget(where: str, train: dict[str, Any]) -> None:
    """Checkpoints are distinct steps within the training budget."""
    for index, step in enumerate(train["save_steps"]):
        if step > train["steps"]:
            raise ConfigError(f"config key '{where}.save_steps[{index}]': step {step} is beyond the budget of "
                              f"{train['steps']} steps")
    if len(set(train["save_steps"])) != len(train["save_steps"]):
        raise ConfigError(f"config key '{where}.save_steps': steps must be distinct")


STAGE_CHECKS = {"grokking": _check_grokking, "preference": _check_preference, "grow": _check_grow_experiment,
                "train": _check_train_run, "pinn": _check_pinn}


def _check_grow(config: dict[str, Any]) -> None:
    for index, experiment in enumerate(config["grow"]["experiments"]):
        _check_grow_experiment({**experiment, "model": config["models"][experiment["family"]]},
                               f"grow.experiments[{index}]")


def _check_pretrained(pretrained: dict[str, Any]) -> None:
    """Each pretrained model names its own results folder: (width, depth, seed, step) and names are unique."""
    folders: dict[tuple[int, int, int, int], int] = {}
    names: dict[str, int] = {}
    for index, model in enumerate(pretrained["models"]):
        where = f"pretrained.models[{index}]"
        if model["name"] in names:
            raise ConfigError(f"config key '{where}.name': {model['name']} is already pretrained.models[{names[model['name']]}]")
        names[model["name"]] = index
        folder = (model["width"], model["depth"], model["seed"], model["step"])
        if folder in folders:
            raise ConfigError(f"config key '{where}': {model['name']} has the width, depth, seed and step of "
                              f"pretrained.models[{folders[folder]}], which name its results folder; label one with "
                              f"another step or seed")
        folders[folder] = index


def preference_runs(config: dict[str, Any]) -> bool:
    """Whether the pipeline runs the DPO experiment: it needs a local Hugging Face model (preference.hf_model)
    or a llama trained on Shakespeare; a config without either (an image-only study) skips it."""
    return bool(config["preference"]["hf_model"]) or any(
        grid["family"] == "llama" and grid["dataset"] == "shakespeare" for grid in config["grids"])


def preference_reference_run(config: dict[str, Any]) -> Run | None:
    """The llama/shakespeare run DPO starts from: config preference.reference, or the grid's first run;
    None when preference.hf_model replaces it or the config trains no such run (DPO is then skipped)."""
    preference = config["preference"]
    if preference["hf_model"] or not preference_runs(config):
        return None
    runs = [run for run in training_runs(config) if (run.family, run.dataset) == ("llama", "shakespeare")]
    if preference["reference"] is None:
        return runs[0]
    run = Run("llama", "shakespeare", **preference["reference"])
    if run not in runs:
        raise ConfigError(f"config key 'preference.reference': no llama/shakespeare grid trains width {run.width}, "
                          f"depth {run.depth}, seed {run.seed}; name one of its runs, null for its first, "
                          f"or set preference.hf_model")
    return run


def _check_cross_keys(config: dict[str, Any]) -> None:
    _check_grokking(config["grokking"])
    _check_preference(config["preference"])
    _check_grow(config)
    _check_pretrained(config["pretrained"])
    preference_reference_run(config)
    if "z" not in config["dump"]["variables"]:  # every store of the pipeline goes through estimate_depth and intervene
        raise ConfigError(f"config key 'dump.variables': {config['dump']['variables']} drops z, which the pipeline's "
                          "depth and intervene stages read from every store; use [q, z] (q alone only for `growcert dump`)")
    if list(config["alignment"]["reference_mk"]) not in [list(pair) for pair in config["alignment"]["MK"]]:
        raise ConfigError(f"config key 'alignment.reference_mk': {config['alignment']['reference_mk']} is not one of alignment.MK")
    seen: dict[tuple[str, str, int, int, int, int | None], int] = {}
    for position, grid in enumerate(config["grids"]):
        where = f"grids[{position}]"
        check_contexts(where, grid)
        # One run folder per (family, dataset, width, depth, seed, context): two grids may share a
        # family/dataset (a width grid and a depth grid) but not a cell, which would be two runs in one folder.
        for cell in sorted(grid_cells(grid), key=str):
            key = (grid["family"], grid["dataset"], *cell)
            if key in seen and seen[key] != position:
                width, depth, seed, context = cell
                raise ConfigError(f"config key '{where}': family/dataset {key[0]}/{key[1]} at width {width}, depth "
                                  f"{depth}, seed {seed}" + (f", context {context}" if context else "")
                                  + f" is already used by grids[{seen[key]}]")
            seen[key] = position
        _check_budget(f"{where}.train", grid["train"])
        if grid["dataset"] == "text":  # the corpus's side of the budget is checked when it is prepared
            from growcert.data.text import grid_budget_problem

            context = config["models"]["llama"]["context"]
            if problem := grid_budget_problem(grid["train"], context, config["datasets"]["text"]):
                raise ConfigError(f"config key '{where}.train': {problem}")
        _check_model(where, grid["family"], grid["dataset"],
                     {f"widths[{index}]": width for index, width in enumerate(grid["widths"])},
                     {f"depths[{index}]": depth for index, depth in enumerate(grid["depths"])},
                     config["models"][grid["family"]].get("head_dim", 1))


def grow_experiment_settings(config: dict[str, Any], index: int) -> dict[str, Any]:
    """What `growcert grow` needs for experiment `index` of a validated config: the entry, the `grow` section's
    shared keys and the family's model options (stage `grow` of `stage_settings`)."""
    section = config["grow"]
    shared = {key: value for key, value in section.items() if key != "experiments"}
    experiment = dict(section["experiments"][index])
    return {**shared, **experiment, "model": dict(config["models"][experiment["family"]])}


def settings_hash(settings: dict[str, Any]) -> str:
    """Stable short hash of a settings dict (canonical JSON)."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# Pretrained Hugging Face models (config key `pretrained`, family `hf`): analysed, never trained.
PRETRAINED_FAMILY = "hf"
HF_KEYS = ("context", "tokenizer", "allow_download")  # the pretrained section's keys every model shares


def pretrained_stores(config: dict[str, Any]) -> list[tuple[Run, int]]:
    """(run, step) of every pretrained model's gradient store, in config order."""
    pretrained = config["pretrained"]
    return [(Run(PRETRAINED_FAMILY, pretrained["dataset"], model["width"], model["depth"], model["seed"]), model["step"])
            for model in pretrained["models"]]


def pretrained_model(config: dict[str, Any], run: Run, step: int) -> dict[str, Any]:
    """The `pretrained.models` entry whose results folder is (run, step)."""
    for (candidate, candidate_step), model in zip(pretrained_stores(config), config["pretrained"]["models"]):
        if (candidate, candidate_step) == (run, step):
            return model
    raise ConfigError(f"config key 'pretrained.models': no model with width {run.width}, depth {run.depth}, "
                      f"seed {run.seed}, step {step} on {run.dataset}")


def pretrained_checkpoint(config: dict[str, Any], model: dict[str, Any]) -> str:
    """The checkpoint folder of a pretrained model: its `path`, else checkpoint_root/name."""
    return model["path"] or str(Path(config["pretrained"]["checkpoint_root"]) / model["name"])


def pretrained_settings(config: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """What `growcert dump --hf` / `intervene --hf` need for one model (growcert.models.hf.HFSettings)."""
    shared = {key: config["pretrained"][key] for key in HF_KEYS}
    return {**shared, **{key: model[key] for key in ("repo", "name", "width", "depth", "step", "seed")}}


def advise_inputs(config: dict[str, Any]) -> dict[str, str]:
    """The files the Snakemake target `advise` depends on: config advise.model (a checkpoint file, or a Hugging Face
    folder's config.json) and advise.data (a text file, or a prepared folder's info.json)."""
    section = config["advise"]
    for key in ("model", "data"):
        if section[key] is None:
            raise ConfigError(f"config key 'advise.{key}': null; the target advise needs the "
                              + ("model to advise on (a growcert step*.pt or a Hugging Face causal-LM folder)"
                                 if key == "model" else "data to read it on (a prepared dataset folder or a text file)"))
    model, data = section["model"], section["data"]
    return {"model": os.path.join(model, "config.json") if os.path.isdir(model) else model,
            "data": os.path.join(data, "info.json") if os.path.isdir(data) else data}
