"""What a config plans: which runs, stores, tasks and figures the pipeline makes, every job's settings and
resources, and the checks that only the pipeline needs.

`validate_config(config)` is the pipeline's validation: `growcert.config.validate_config` (the schema and
every stage's checks on the config's sections), then the grids (`grids.check_grids`: the families' rules,
contexts, budgets, disjoint cells), the growth experiments' families, the pretrained models' folders, the
DPO reference run, and the dump keeping z (the pipeline runs depth and interventions on every store).

`Plan(config)` answers the rules (rules/*.smk), which only name what it returns:
- the runs: every trained run, the fixed-context ones, the checkpoints a stage analyses, the targets of a
  per-store stage (`per_store`), the pretrained models' stores;
- the P2 tasks the config runs and the wildcard pattern of each task rule; the figures a config draws; the
  report's inputs;
- each job's settings, `settings_json(stage, wildcards)`: the JSON of what `growcert <stage> --settings`
  takes for that job (the command resolves it once, through `growcert.config.stage_settings`);
- the resource models (memory and runtime from a job's size).
Family facts come from the family records (`growcert.models`), file names from `growcert.pipeline.artifacts`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

from growcert import config as config_module
from growcert.config import PRETRAINED_SHARED_KEYS
from growcert.errors import ConfigError
from growcert.experiments import EXPERIMENTS, has_units, task
from growcert.models import check_growth, family_of, pretrained_family, trained_families
from growcert.pipeline import artifacts
from growcert.pipeline.grids import Run, check_grids, run_of, run_steps, run_wildcards, train_settings, training_runs


def validate_config(config: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill defaults into `config` in place and validate it as the pipeline runs it (see the module docstring).
    Raises ConfigError with a one-line message naming the key."""
    config_module.validate_config(config, schema)
    check_grids(config)
    for index, experiment in enumerate(config["grow"]["experiments"]):
        check_growth(grow_experiment_settings(config, index), f"grow.experiments[{index}]")
    _check_pretrained(config["pretrained"])
    preference_reference_run(config)
    if "z" not in config["dump"]["variables"]:  # every store of the pipeline goes through estimate_depth and intervene
        raise ConfigError(f"config key 'dump.variables': {config['dump']['variables']} drops z, which the pipeline's "
                          "depth and intervene stages read from every store; use [q, z] (q alone only for `growcert dump`)")
    return config


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


def grow_experiment_settings(config: dict[str, Any], index: int) -> dict[str, Any]:
    """What `growcert grow` needs for experiment `index` of a validated config: the entry, the `grow` section's
    shared keys and the family's model options (stage `grow` of `stage_settings`)."""
    section = config["grow"]
    shared = {key: value for key, value in section.items() if key != "experiments"}
    experiment = dict(section["experiments"][index])
    return {**shared, **experiment, "model": dict(config["models"].get(experiment["family"], {}))}


# The dataset DPO's reference language model is trained on (config preference.reference)
PREFERENCE_DATASET = "shakespeare"


def _preference_families() -> list[str]:
    """The trained families DPO can start from: the language models (families that read text)."""
    return [name for name in trained_families() if family_of(name).data_kind == "text"]


def preference_runs(config: dict[str, Any]) -> bool:
    """Whether the pipeline runs the DPO experiment: it needs a local Hugging Face model (preference.hf_model)
    or a language model trained on Shakespeare; a config without either (an image-only study) skips it."""
    return bool(config["preference"]["hf_model"]) or any(
        grid["family"] in _preference_families() and grid["dataset"] == PREFERENCE_DATASET for grid in config["grids"])


def preference_reference_run(config: dict[str, Any]) -> Run | None:
    """The language-model run on Shakespeare DPO starts from: config preference.reference, or the first such run;
    None when preference.hf_model replaces it or the config trains no such run (DPO is then skipped)."""
    preference = config["preference"]
    if preference["hf_model"] or not preference_runs(config):
        return None
    families = _preference_families()
    runs = [run for run in training_runs(config) if run.family in families and run.dataset == PREFERENCE_DATASET]
    if preference["reference"] is None:
        return runs[0]
    reference = preference["reference"]
    matching = [run for run in runs if (run.width, run.depth, run.seed, run.context) ==
                (reference["width"], reference["depth"], reference["seed"], None)]
    if not matching:
        raise ConfigError(f"config key 'preference.reference': no {'/'.join(families)}/{PREFERENCE_DATASET} grid "
                          f"trains width {reference['width']}, depth {reference['depth']}, seed {reference['seed']}; "
                          f"name one of its runs, null for its first, or set preference.hf_model")
    return matching[0]


def pretrained_stores(config: dict[str, Any]) -> list[tuple[Run, int]]:
    """(run, step) of every pretrained model's gradient store, in config order."""
    pretrained = config["pretrained"]
    return [(Run(pretrained_family(), pretrained["dataset"], model["width"], model["depth"], model["seed"]),
             model["step"]) for model in pretrained["models"]]


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
    """What `growcert dump --hf` / `intervene --hf` need for one model (stage pretrained_model)."""
    shared = {key: config["pretrained"][key] for key in PRETRAINED_SHARED_KEYS}
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


def family_pattern(families: list[str]) -> str:
    """A wildcard pattern matching exactly these family names (none: one that matches nothing)."""
    return "|".join(re.escape(name) for name in families) or "(?!)"


def per_attempt(amount: int) -> Callable[[Any, int], int]:
    """A resource of `amount` on the first attempt, doubled on the second, ... (mem_mb, runtime in minutes)."""
    return lambda wildcards, attempt: amount * attempt


class Plan:
    """The jobs a validated config plans, for the rules: see the module docstring."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.results = config["results"]
        self.prepared = config["prepared_data"]
        self.pretrained = pretrained_family()  # the family of config key pretrained (models.hf)

    # --- runs and stores

    def runs(self) -> list[Run]:
        return training_runs(self.config)

    def fixed_context_runs(self) -> list[Run]:
        """The runs of grids without `contexts`: interventions and depth analyse these; a context sweep (one
        run per context) is for the d_align tables and the regime map, and would multiply their jobs (the
        certificates of estimate-misalignment too)."""
        return [run for run in self.runs() if run.context is None]

    def analysed_steps(self, run: Run, analyse: str) -> list[int]:
        """The checkpoint steps of `run` a stage analyses: its last one, or all (config key `<stage>.analyse`)."""
        steps = run_steps(self.config, run)
        return steps if analyse == "all" else steps[-1:]

    def pretrained_stores(self) -> list[tuple[Run, int]]:
        return pretrained_stores(self.config)

    def per_store(self, artifact: artifacts.StoreArtifact, runs: list[Run] | None = None,
                  analyse: str = "all") -> list[str]:
        """`artifact` of every gradient store: the checkpoints (all, or the last) of each trained run (of `runs`,
        default all), then each pretrained model's."""
        runs = self.runs() if runs is None else runs
        stores = [(run, step) for run in runs for step in self.analysed_steps(run, analyse)]
        return [artifact.path(self.results, **run_wildcards(run), step=step)
                for run, step in stores + self.pretrained_stores()]

    def advise_check_tables(self) -> list[str]:
        """advise-check's table of every checkpoint of every trained run (growcert checkpoints only: a pretrained
        model is not grown)."""
        return [artifacts.ADVISE_CHECK_TABLE.path(self.results, **run_wildcards(run), step=step)
                for run in self.runs() for step in self.analysed_steps(run, "all")]

    def run_folders(self) -> list[str]:
        return [artifacts.run_folder(self.results, **run_wildcards(run)) for run in self.runs()]

    def intervention_targets(self) -> list[str]:
        """Per run of a fixed-context grid: the last checkpoint, or every checkpoint (config intervene.analyse);
        pretrained models when config pretrained.intervene is true. A context sweep feeds the regime map only."""
        table = artifacts.INTERVENTION_TABLE
        targets = [table.path(self.results, **run_wildcards(run), step=step) for run in self.fixed_context_runs()
                   for step in self.analysed_steps(run, self.config["intervene"]["analyse"])]
        if self.config["pretrained"]["intervene"]:
            targets += [table.path(self.results, **run_wildcards(run), step=step)
                        for run, step in self.pretrained_stores()]
        return targets

    def pretrained_of(self, wildcards: Any) -> dict[str, Any]:
        """The pretrained.models entry a pretrained rule's job is for."""
        run = Run(self.pretrained, wildcards.dataset, int(wildcards.width), int(wildcards.depth), int(wildcards.seed))
        return pretrained_model(self.config, run, int(wildcards.step))

    def pretrained_folder(self, wildcards: Any) -> str:
        return pretrained_checkpoint(self.config, self.pretrained_of(wildcards))

    def pretrained_input(self, wildcards: Any) -> list[str]:
        """The checkpoint's config.json when its folder exists (a replaced checkpoint reruns the dump); nothing
        otherwise, so that `growcert dump` looks in the Hugging Face cache and names the fix when it is missing."""
        config_json = os.path.join(self.pretrained_folder(wildcards), "config.json")
        return [config_json] if os.path.isfile(config_json) else []

    def preference_reference(self, wildcards: Any = None) -> list[str]:
        """The trained run folder DPO starts from (config preference.reference); none with preference.hf_model."""
        run = preference_reference_run(self.config)
        return [] if run is None else [artifacts.run_folder(self.results, **run_wildcards(run))]

    def reference_option(self, wildcards: Any = None) -> str:
        """`--reference <run folder>` of the DPO job, or nothing (preference.hf_model)."""
        return " ".join(f"--reference {folder}" for folder in self.preference_reference())

    def prepared_folder(self, dataset: str) -> str:
        return f"{self.prepared}/{dataset}"

    def prepared_info(self, dataset: str) -> str:
        """A prepared dataset, by its info.json (written last)."""
        return f"{self.prepared_folder(dataset)}/info.json"

    def advise_input(self, key: str) -> Callable[[Any], str]:
        """The `advise` target's input file for config advise.<key> (model, data), as a function of the wildcards:
        asked only when the target is (a config without advise.model still plans the rest)."""
        return lambda wildcards: advise_inputs(self.config)[key]

    def advise_path(self, key: str) -> Callable[[Any], str]:
        """config advise.<key> (model, data) as the `advise` job's parameter."""
        return lambda wildcards: self.config["advise"][key]

    # --- growth experiments

    def grow_experiments(self) -> list[str]:
        """Folder names of the growth experiments (artifacts.GROW_EXPERIMENT)."""
        return [artifacts.GROW_EXPERIMENT.format(**experiment) for experiment in self.config["grow"]["experiments"]]

    def grow_data_dir(self, wildcards: Any) -> str:
        """The prepared dataset folder of the growth experiment a job runs (its `experiment` wildcard)."""
        experiment = self.config["grow"]["experiments"][self.grow_experiments().index(wildcards.experiment)]
        return self.prepared_folder(experiment["dataset"])

    def grow_info(self, wildcards: Any) -> str:
        return f"{self.grow_data_dir(wildcards)}/info.json"

    # --- P2 tasks, figures, the report

    def tasks(self) -> list[str]:
        """The tasks of the growcert.experiments registry this config runs (DPO only with a reference model)."""
        return [name for name in EXPERIMENTS if name != "preference" or preference_runs(self.config)]

    def task_pattern(self, gated: bool) -> str:
        """The registry's tasks without INPUTS (those have rules of their own) that draw a gate figure (gated) or
        not, as a wildcard pattern."""
        names = [name for name in self.tasks() if not getattr(task(name), "INPUTS", ())
                 and bool(getattr(task(name), "GATE_TITLE", None)) == gated]
        return "|".join(names) or "(?!)"

    def unit_task_pattern(self) -> str:
        """The registry's tasks that run as units (`growcert.experiments.units`), as a wildcard pattern."""
        return "|".join(name for name in self.tasks() if has_units(task(name))) or "(?!)"

    def task_units(self, wildcards: Any) -> list[str]:
        """The unit summaries a task rule's job aggregates (its `task` wildcard): none for a task without units."""
        module = task(wildcards.task)
        if not has_units(module):
            return []
        return [artifacts.unit_summary(self.results, wildcards.task, arm, seed)
                for arm, seed in module.units(self.job_settings(wildcards.task))]

    def unit_inputs(self, wildcards: Any) -> list[str]:
        """The summaries of the units a p2_unit job's unit reads (grokking.cap paired: its seed's AdamW unit)."""
        module = task(wildcards.task)
        if not hasattr(module, "unit_inputs"):
            return []
        read = module.unit_inputs(self.job_settings(wildcards.task), wildcards.arm, int(wildcards.seed))
        return [artifacts.unit_summary(self.results, wildcards.task, arm, seed) for arm, seed in read]

    def aggregate_option(self, wildcards: Any) -> str:
        """`--aggregate` for a task with units (its job gathers them), nothing for one that runs whole."""
        return "--aggregate" if has_units(task(wildcards.task)) else ""

    def unit_settings(self, wildcards: Any) -> str:
        """The JSON of the settings of the unit a p2_unit job runs (its task, arm and seed wildcards)."""
        module = task(wildcards.task)
        return json.dumps(module.unit_settings(self.job_settings(wildcards.task), wildcards.arm, int(wildcards.seed)),
                          sort_keys=True)

    def aggregate_gpus(self, gpus: int) -> Callable[[Any], int]:
        """A task rule's `gpu` resource: none where it gathers units (they train), `gpus` otherwise."""
        return lambda wildcards: 0 if has_units(task(wildcards.task)) else gpus

    def aggregate_threads(self, wildcards: Any) -> int:
        """A task rule's threads: 1 where it gathers units (the units train), config threads.<task> otherwise."""
        return 1 if has_units(task(wildcards.task)) else self.task_threads(wildcards)

    def p1_figures(self) -> list[artifacts.Figure]:
        """The P1 alignment figures this config draws: the misalignment ones need a run of a fixed-context grid."""
        return list(artifacts.P1_DALIGN_FIGURES) + (list(artifacts.P1_MISALIGNMENT_FIGURES)
                                                    if self.fixed_context_runs() else [])

    def regime_figures(self) -> list[artifacts.Figure]:
        """The P1 regime figures the config's context sweeps allow (growcert.report.regime.drawable): the width
        figures with more than one width, the context figure with more than one context, the seed-spread figure
        with more than one seed; none without a sweep."""
        sweeps = [grid for grid in self.config["grids"] if grid["contexts"] is not None]
        axes = {axis: {value for grid in sweeps for value in grid[axis]} for axis in artifacts.REGIME_FIGURES}
        return [figure for axis, drawn in artifacts.REGIME_FIGURES.items() if len(axes[axis]) > 1 for figure in drawn]

    def report_inputs(self) -> dict[str, list[str]]:
        """Every file results/report.html is built from, by kind."""
        results, tasks = self.results, self.tasks()
        figures = ([artifacts.TRAINING_GRID, artifacts.INTERVENTIONS] + self.p1_figures()
                   + [artifacts.task_figure(name) for name in tasks]
                   + [artifacts.DEPTH, artifacts.GROWTH] + self.regime_figures())
        ungated = [name for name in tasks if re.fullmatch(self.task_pattern(gated=False), name)]
        tables = [artifacts.INTERVENTIONS_SUMMARY.path(results), artifacts.ALIGNMENT_SUMMARY.path(results),
                  artifacts.REGIME_CELLS.path(results), f"{results}/{artifacts.REGIME_MAP}",
                  artifacts.RECOMMENDED_DEPTH.path(results), artifacts.GROWTH_TABLE.path(results)]
        return {"training": [f"{results}/{artifacts.TRAINING_TABLE}"],
                "figures": [figure.path(results) for figure in figures],
                "checks": [checks.path(results) for checks in artifacts.CHECKS_FILES]
                + [artifacts.task_checks(name).path(results) for name in ungated],
                "claims": [claims.path(results) for claims in artifacts.CLAIMS_FILES]
                + [artifacts.task_claims(name).path(results) for name in tasks],
                "tables": tables + [artifacts.task_table(name).path(results) for name in tasks]}

    # --- settings of each job

    @staticmethod
    def _is_pretrained(wildcards: Any, pretrained: bool) -> bool:
        """A job of a pretrained model: of a pretrained model's rule, or with a pretrained family wildcard."""
        return pretrained or (hasattr(wildcards, "family") and family_of(wildcards.family).pretrained)

    def job_settings(self, stage: str, wildcards: Any = None, pretrained: bool = False) -> dict[str, Any]:
        """What `growcert <stage> --settings` takes for the job of these wildcards (`pretrained`: a job of a
        pretrained model's rule, whose paths name no family): a config section, one run of a grid, one growth
        experiment, one pretrained model, a P2 task's section ({} for a task without one); a pretrained
        model's dump and depth jobs take the overrides of config pretrained.dump and pretrained.depth."""
        config = self.config
        if stage == "prepare":
            return config["datasets"][wildcards.dataset]
        if stage == "train":
            return train_settings(config, run_of(wildcards))
        if stage == "grow":
            return grow_experiment_settings(config, self.grow_experiments().index(wildcards.experiment))
        if stage == "pretrained_model":
            return pretrained_settings(config, self.pretrained_of(wildcards))
        if stage in EXPERIMENTS:
            return config.get(stage, {})
        if stage == "intervene":
            return {key: value for key, value in config["intervene"].items() if key != "analyse"}
        if stage in ("dump", "depth") and wildcards is not None and self._is_pretrained(wildcards, pretrained):
            return {**config[stage], **config["pretrained"][stage]}
        return config[stage]

    def settings_json(self, stage: str, wildcards: Any = None, pretrained: bool = False) -> str:
        """The job's settings (`job_settings`) as the JSON of its --settings."""
        return json.dumps(self.job_settings(stage, wildcards, pretrained), sort_keys=True)

    def settings(self, stage: str, pretrained: bool = False) -> Callable[[Any], str]:
        """`settings_json` of `stage` as a rule's params function of the wildcards."""
        return lambda wildcards: self.settings_json(stage, wildcards, pretrained)

    def task_settings(self, wildcards: Any) -> str:
        """The settings of the P2 task a job of the task rules runs (its `task` wildcard)."""
        return self.settings_json(wildcards.task, wildcards)

    # --- resources

    def task_threads(self, wildcards: Any) -> int:
        return self.config["threads"].get(wildcards.task, 1)

    @staticmethod
    def _parameters(wildcards: Any) -> int:
        """~12·width²·depth: the parameters of a decoder of that width and depth (embeddings aside)."""
        return 12 * int(wildcards.width) ** 2 * int(wildcards.depth)

    def pretrained_mem_mb(self, bytes_per_parameter: int) -> Callable[[Any, int], int]:
        """mem_mb of a pretrained model's job: its parameters at `bytes_per_parameter`, as much again for
        activations, plus 4 GB; doubled on a retry."""
        return lambda wildcards, attempt: attempt * (4000 + 2 * bytes_per_parameter * self._parameters(wildcards) // 2**20)

    def pretrained_runtime(self, wildcards: Any, attempt: int) -> int:
        """An hour plus a forward-backward pass over every dumped token (6 flops per parameter and token) at a
        conservative 20 GFLOP/s per thread: pythia-6.9b's 512 x 128 tokens on 8 threads take ~4.5 h.
        Doubled on a retry."""
        dump = self.job_settings("dump", wildcards, pretrained=True)
        tokens = (dump["train_examples"] + dump["test_examples"]) * self.config["pretrained"]["context"]
        seconds = 6 * self._parameters(wildcards) * tokens / (2e10 * self.config["pretrained"]["threads"])
        return attempt * (60 + int(seconds) // 60)

    def store_runtime(self, wildcards: Any, attempt: int) -> int:
        """Minutes of a job that reads a whole gradient store: 20; a pretrained model's store (up to tens of GB)
        gets its dump's time. Doubled on a retry."""
        return self.pretrained_runtime(wildcards, attempt) if family_of(wildcards.family).pretrained else 20 * attempt

    def depth_mem_mb(self, wildcards: Any, attempt: int) -> int:
        """2 GB plus the largest per-point array of block gradients the stage may hold (depth.max_feature_mb,
        raised for large pretrained models); doubled on a retry."""
        return attempt * (2000 + self.job_settings("depth", wildcards)["max_feature_mb"])

    def advise_mem_mb(self, wildcards: Any, attempt: int) -> int:
        """The dump's batch cap (advise.max_batch_mb) on top of a model and its estimates' working memory."""
        return attempt * (4000 + 2 * int(self.config["advise"]["max_batch_mb"]))
