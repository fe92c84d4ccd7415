"""The command registry: every `growcert <command>` as the module that declares it, imported here by name (so
go-to-definition reaches it) and known by its own NAME (spelled once, in its module).

A command module sits in this folder, beside the code it runs (a stage, a report or a task module), rather than
in that module, because most stage modules import torch at module level and `growcert --help` must not. Each
exposes

    NAME                 the subcommand ("advise-check")
    HELP                 its one line in `growcert --help`
    SETTINGS             the stage of growcert.config.stage_settings its --settings holds, or None
    add_arguments(parser)        its arguments
    run(args) -> int | None      the work; a status only when it has one besides 0 (2 is a user error's)

and imports nothing heavy at module level (its package imports go inside `run`), so importing them all here
costs `growcert --help` nothing it did not already pay: its parser reads every command. The P2 tasks of
growcert.experiments.EXPERIMENTS share one shape of command, made for each task by growcert.commands.experiment;
the command line (growcert.cli) resolves --settings once, before `run` reads any input, and passes them down.
"""

from __future__ import annotations

from typing import Any

from growcert.commands import (
    advise,
    advise_check,
    compare_results,
    dump,
    estimate_alignment,
    estimate_depth,
    estimate_misalignment,
    experiment,
    grow,
    inspect,
    intervene,
    plot_training,
    prepare,
    report,
    summarize_advise_check,
    summarize_alignment,
    summarize_depth,
    summarize_growth,
    summarize_interventions,
    summarize_regime,
    summarize_training,
    train,
    tune_advise_check,
)
from growcert.experiments import EXPERIMENTS
from growcert.reference_runs import command as reference

# In the order of `growcert --help`. `experiment` stands where every P2 task's command does: the tasks are
# growcert.experiments.EXPERIMENTS, read when asked.
COMMANDS = [
    prepare,
    train,
    dump,
    inspect,
    compare_results,
    estimate_alignment,
    estimate_misalignment,
    summarize_alignment,
    summarize_regime,
    intervene,
    summarize_interventions,
    experiment,
    estimate_depth,
    summarize_depth,
    grow,
    summarize_growth,
    advise,
    advise_check,
    summarize_advise_check,
    tune_advise_check,
    summarize_training,
    plot_training,
    report,
    reference,
]


def names() -> list[str]:
    """Every command, in the order of `growcert --help`; the P2 tasks are read from the registry now, so a task
    registered at run time (a test's toy task) has its command."""
    return [each for module in COMMANDS for each in (EXPERIMENTS if module is experiment else [module.NAME])]


def command(name: str) -> Any:
    """The module of command `name`; for a P2 task, its `growcert.commands.experiment.ExperimentCommand`, of the
    same interface."""
    if name in EXPERIMENTS:
        return experiment.for_task(name)
    found = [module for module in COMMANDS if module is not experiment and module.NAME == name]
    if not found:
        raise KeyError(f"no growcert command {name!r}")
    return found[0]
