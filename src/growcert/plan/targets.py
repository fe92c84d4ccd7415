"""The targets a config plans, for the rules: the runs and their gradient stores, the checkpoints each stage
analyses, the growth experiments, the P2 tasks (and their units) the config runs with the wildcard pattern of each
task rule, the figures a config draws, and the report's inputs. File names come from `growcert.pipeline.artifacts`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from growcert.experiments import EXPERIMENTS, has_units, task
from growcert.pipeline import artifacts
from growcert.plan.advise import advise_inputs
from growcert.plan.grids import Run, run_steps, run_wildcards, training_runs
from growcert.plan.preference import preference_reference_run, preference_runs
from growcert.plan.pretrained import pretrained_checkpoint, pretrained_of, pretrained_stores
from growcert.plan.settings import grow_experiment_names, job_settings


def family_pattern(families: list[str]) -> str:
    """A wildcard pattern matching exactly these names (model families, tasks; none: one that matches nothing)."""
    return "|".join(re.escape(name) for name in families) or "(?!)"


class Targets:
    """The targets part of `growcert.plan.Plan`, from its config, results and prepared-data folders; a task's
    units come from its job's settings (`plan.settings.job_settings`)."""

    config: dict[str, Any]
    results: str
    prepared: str

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

    def per_store(self, artifact: artifacts.Place, runs: list[Run] | None = None, analyse: str = "all") -> list[str]:
        """`artifact` of every gradient store: the checkpoints (all, or the last) of each trained run (of `runs`,
        default all), then each pretrained model's."""
        runs = self.runs() if runs is None else runs
        stores = [(run, step) for run in runs for step in self.analysed_steps(run, analyse)]
        return [
            artifact.path(self.results, **run_wildcards(run), step=step)
            for run, step in stores + pretrained_stores(self.config)
        ]

    def advise_check_tables(self) -> list[str]:
        """advise-check's table of every checkpoint of every trained run (growcert checkpoints only: a pretrained
        model is not grown)."""
        return [
            artifacts.ADVISE_CHECK_TABLE.path(self.results, **run_wildcards(run), step=step)
            for run in self.runs()
            for step in self.analysed_steps(run, "all")
        ]

    def run_folders(self) -> list[str]:
        return [artifacts.RUN_DIR.path(self.results, **run_wildcards(run)) for run in self.runs()]

    def intervention_targets(self) -> list[str]:
        """Per run of a fixed-context grid: the last checkpoint, or every checkpoint (config intervene.analyse);
        pretrained models when config pretrained.intervene is true. A context sweep feeds the regime map only."""
        table = artifacts.INTERVENTION_TABLE
        targets = [
            table.path(self.results, **run_wildcards(run), step=step)
            for run in self.fixed_context_runs()
            for step in self.analysed_steps(run, self.config["intervene"]["analyse"])
        ]
        if self.config["pretrained"]["intervene"]:
            targets += [
                table.path(self.results, **run_wildcards(run), step=step)
                for run, step in pretrained_stores(self.config)
            ]
        return targets

    def pretrained_of(self, wildcards: Any) -> dict[str, Any]:
        """The pretrained.models entry a pretrained rule's job is for."""
        return pretrained_of(self.config, wildcards)

    def pretrained_folder(self, wildcards: Any) -> str:
        return pretrained_checkpoint(self.config, self.pretrained_of(wildcards))

    def pretrained_input(self, wildcards: Any) -> list[str]:
        """The checkpoint's config.json when its folder exists (a replaced checkpoint reruns the dump); nothing
        otherwise, so that `growcert dump` looks in the Hugging Face cache and names the fix when it is missing."""
        config_json = artifacts.HF_CONFIG.path(self.pretrained_folder(wildcards))
        return [config_json] if os.path.isfile(config_json) else []

    def preference_reference(self, wildcards: Any = None) -> list[str]:
        """The trained run folder DPO starts from (config preference.reference); none with preference.hf_model."""
        run = preference_reference_run(self.config)
        return [] if run is None else [artifacts.RUN_DIR.path(self.results, **run_wildcards(run))]

    def reference_option(self, wildcards: Any = None) -> str:
        """`--reference <run folder>` of the DPO job, or nothing (preference.hf_model)."""
        return " ".join(f"--reference {folder}" for folder in self.preference_reference())

    def prepared_folder(self, dataset: str) -> str:
        return artifacts.DATASET.path(self.prepared, dataset=dataset)

    def prepared_info(self, dataset: str) -> str:
        """A prepared dataset, by its info file (written last)."""
        return artifacts.INFO.path(self.prepared_folder(dataset))

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
        return grow_experiment_names(self.config)

    def grow_data_dir(self, wildcards: Any) -> str:
        """The prepared dataset folder of the growth experiment a job runs (its `experiment` wildcard)."""
        experiment = self.config["grow"]["experiments"][self.grow_experiments().index(wildcards.experiment)]
        return self.prepared_folder(experiment["dataset"])

    def grow_info(self, wildcards: Any) -> str:
        return artifacts.INFO.path(self.grow_data_dir(wildcards))

    # --- P2 tasks, figures, the report

    def tasks(self) -> list[str]:
        """The tasks of the growcert.experiments registry this config runs (DPO only with a reference model)."""
        return [name for name in EXPERIMENTS if name != "preference" or preference_runs(self.config)]

    def task_pattern(self, gated: bool) -> str:
        """The registry's tasks without INPUTS (those have rules of their own) that draw a gate figure (gated) or
        not, as a wildcard pattern."""
        names = [
            name
            for name in self.tasks()
            if not getattr(task(name), "INPUTS", ()) and bool(getattr(task(name), "GATE_TITLE", None)) == gated
        ]
        return family_pattern(names)

    def unit_task_pattern(self) -> str:
        """The registry's tasks that run as units (`growcert.experiments.units`), as a wildcard pattern."""
        return family_pattern([name for name in self.tasks() if has_units(task(name))])

    def task_units(self, wildcards: Any) -> list[str]:
        """The unit summaries a task rule's job aggregates (its `task` wildcard): none for a task without units."""
        module = task(wildcards.task)
        if not has_units(module):
            return []
        return [
            artifacts.UNIT_SUMMARY.path(self.results, task=wildcards.task, arm=arm, seed=seed)
            for arm, seed in module.units(job_settings(self.config, wildcards.task))
        ]

    def unit_inputs(self, wildcards: Any) -> list[str]:
        """The summaries of the units a p2_unit job's unit reads (grokking.cap paired: its seed's AdamW unit)."""
        module = task(wildcards.task)
        if not hasattr(module, "unit_inputs"):
            return []
        read = module.unit_inputs(job_settings(self.config, wildcards.task), wildcards.arm, int(wildcards.seed))
        return [
            artifacts.UNIT_SUMMARY.path(self.results, task=wildcards.task, arm=arm, seed=seed) for arm, seed in read
        ]

    def aggregate_option(self, wildcards: Any) -> str:
        """`--aggregate` for a task with units (its job gathers them), nothing for one that runs whole."""
        return "--aggregate" if has_units(task(wildcards.task)) else ""

    def unit_settings(self, wildcards: Any) -> str:
        """The JSON of the settings of the unit a p2_unit job runs (its task, arm and seed wildcards)."""
        module = task(wildcards.task)
        return json.dumps(
            module.unit_settings(job_settings(self.config, wildcards.task), wildcards.arm, int(wildcards.seed)),
            sort_keys=True,
        )

    def p1_figures(self) -> list[artifacts.Figure]:
        """The P1 alignment figures this config draws: the misalignment ones need a run of a fixed-context grid."""
        return list(artifacts.P1_DALIGN_FIGURES) + (
            list(artifacts.P1_MISALIGNMENT_FIGURES) if self.fixed_context_runs() else []
        )

    def regime_figures(self) -> list[artifacts.Figure]:
        """The P1 regime figures the config's context sweeps allow (report.regime's drawable): the width
        figures with more than one width, the context figure with more than one context, the seed-spread figure
        with more than one seed; none without a sweep."""
        sweeps = [grid for grid in self.config["grids"] if grid["contexts"] is not None]
        axes = {axis: {value for grid in sweeps for value in grid[axis]} for axis in artifacts.REGIME_FIGURES}
        return [figure for axis, drawn in artifacts.REGIME_FIGURES.items() if len(axes[axis]) > 1 for figure in drawn]

    def report_inputs(self) -> dict[str, list[str]]:
        """Every file results/report.html is built from, by kind."""
        results, tasks = self.results, self.tasks()
        figures = (
            [artifacts.TRAINING_GRID, artifacts.INTERVENTIONS]
            + self.p1_figures()
            + [artifacts.task_figure(name) for name in tasks]
            + [artifacts.DEPTH, artifacts.GROWTH]
            + self.regime_figures()
        )
        ungated = [name for name in tasks if re.fullmatch(self.task_pattern(gated=False), name)]
        tables = [
            artifacts.INTERVENTIONS_SUMMARY.path(results),
            artifacts.ALIGNMENT_SUMMARY.path(results),
            artifacts.REGIME_CELLS.path(results),
            artifacts.REGIME_MAP.path(results),
            artifacts.RECOMMENDED_DEPTH.path(results),
            artifacts.GROWTH_TABLE.path(results),
        ]
        return {
            "training": [artifacts.TRAINING_TABLE.path(results)],
            "figures": [figure.path(results) for figure in figures],
            "checks": [checks.path(results) for checks in artifacts.CHECKS_FILES]
            + [artifacts.task_checks(name).path(results) for name in ungated],
            "claims": [claims.path(results) for claims in artifacts.CLAIMS_FILES]
            + [artifacts.task_claims(name).path(results) for name in tasks],
            "tables": tables + [artifacts.task_table(name).path(results) for name in tasks],
        }
