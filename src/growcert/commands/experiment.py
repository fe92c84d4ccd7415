"""`growcert <task>` for every P2 task of the registry (growcert.experiments.EXPERIMENTS): one shape of command,
made for each task by `for_task`, with the interface of every command module (NAME, HELP, SETTINGS,
add_arguments, run)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from growcert.commands.shared import log, settings_argument, torch_arguments
from growcert.pipeline.artifacts import PROVENANCE


@dataclass(frozen=True)
class ExperimentCommand:
    NAME: str
    HELP: str
    SETTINGS: str | None  # the task's config section; None for a task without one (its settings parsed only)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from growcert.experiments import has_units, task
        from growcert.experiments.units import add_unit_arguments

        experiment = task(self.NAME)
        inputs = getattr(experiment, "INPUTS", ())
        settings_argument(parser, f"config key {self.NAME}, as JSON or @file")
        parser.add_argument(
            "--out",
            required=True,
            help=f"folder for the experiment's CSVs and {PROVENANCE.name} (with --arm and --seed: the unit's folder)",
        )
        parser.add_argument("--figure", help="the task's figure (needed unless --arm and --seed run one unit)")
        parser.add_argument("--claims", help="the task's claim rows (needed unless one unit)")
        parser.add_argument("--checks", help="implementation checks (not claims), for a task that has them")
        parser.add_argument("--table", help="the experiment's table for the report (needed unless one unit)")
        if has_units(experiment):
            add_unit_arguments(parser)
        parser.add_argument("--gate-figure", help="gate diagnostics figure per PopulationRiskAdam variant, if any")
        torch_arguments(parser)
        if "reference_checkpoint" in inputs:
            parser.add_argument(
                "--reference",
                dest="reference_checkpoint",
                default=None,
                help="trained llama run folder (its last step{N}.pt) or checkpoint file; "
                "not needed when the settings name hf_model",
            )
        if "data" in inputs:
            parser.add_argument(
                "--data",
                default=None,
                help="prepared Shakespeare folder (default: prepared afresh with the reference run's dataset settings)",
            )

    def run(self, args: argparse.Namespace) -> None:
        from growcert.experiments import run_experiment, task
        from growcert.experiments.units import run_unit_command

        module = task(self.NAME)
        if run_unit_command(module, args, log=log):  # one unit: --out is its folder, nothing else is written
            return
        inputs = {name: getattr(args, name) for name in getattr(module, "INPUTS", ())}
        run_experiment(
            self.NAME,
            args.settings,
            args.out,
            args.figure,
            args.claims,
            args.table,
            checks=args.checks,
            threads=args.threads,
            log=log,
            gate_figure=args.gate_figure,
            device=args.device,
            aggregate=getattr(args, "aggregate", False),
            **inputs,
        )


def for_task(name: str) -> ExperimentCommand:
    """The command of P2 task `name`."""
    from growcert.experiments import task
    from growcert.schema import load_schema

    sections = load_schema()["properties"]
    return ExperimentCommand(name, task(name).HELP, name if name in sections else None)
