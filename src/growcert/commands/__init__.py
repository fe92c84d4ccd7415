"""The command registry: every `growcert <command>`, by name, as the module that declares it.

A command module sits in this folder, beside the code it runs (a stage, a report or a task module), rather than
in that module, because most stage modules import torch at module level and `growcert --help` must not. Each
exposes

    NAME                 the subcommand ("advise-check")
    HELP                 its one line in `growcert --help`
    SETTINGS             the stage of growcert.config.stage_settings its --settings holds, or None
    add_arguments(parser)        its arguments
    run(args) -> int | None      the work; a status only when it has one besides 0 (2 is a user error's)

and imports nothing heavy at module level (its package imports go inside `run`). The P2 tasks of
growcert.experiments.EXPERIMENTS share one shape of command, made for each task by growcert.commands.experiment;
the command line (growcert.cli) resolves --settings once, before `run` reads any input, and passes them down.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from growcert.experiments import EXPERIMENTS

TASKS = "<task>"  # where every P2 task's command stands (growcert.experiments.EXPERIMENTS, read when asked)

# In the order of `growcert --help`.
COMMANDS = {
    "prepare": "growcert.commands.prepare",
    "train": "growcert.commands.train",
    "dump": "growcert.commands.dump",
    "inspect": "growcert.commands.inspect",
    "compare-results": "growcert.commands.compare_results",
    "estimate-alignment": "growcert.commands.estimate_alignment",
    "estimate-misalignment": "growcert.commands.estimate_misalignment",
    "summarize-alignment": "growcert.commands.summarize_alignment",
    "summarize-regime": "growcert.commands.summarize_regime",
    "intervene": "growcert.commands.intervene",
    "summarize-interventions": "growcert.commands.summarize_interventions",
    TASKS: "growcert.commands.experiment",
    "estimate-depth": "growcert.commands.estimate_depth",
    "summarize-depth": "growcert.commands.summarize_depth",
    "grow": "growcert.commands.grow",
    "summarize-growth": "growcert.commands.summarize_growth",
    "advise": "growcert.commands.advise",
    "advise-check": "growcert.commands.advise_check",
    "summarize-advise-check": "growcert.commands.summarize_advise_check",
    "tune-advise-check": "growcert.commands.tune_advise_check",
    "summarize-training": "growcert.commands.summarize_training",
    "plot-training": "growcert.commands.plot_training",
    "report": "growcert.commands.report",
    "reference": "growcert.reference_runs.command",
}


def names() -> list[str]:
    """Every command, in the order of `growcert --help`; the P2 tasks are read from the registry now, so a task
    registered at run time (a test's toy task) has its command."""
    return [each for name in COMMANDS for each in (EXPERIMENTS if name == TASKS else [name])]


def command(name: str) -> Any:
    """The module of command `name`; for a P2 task, its `growcert.commands.experiment.ExperimentCommand`, of the
    same interface."""
    if name in EXPERIMENTS:
        return import_module(COMMANDS[TASKS]).for_task(name)
    return import_module(COMMANDS[name])
