"""`growcert intervene`: residual interventions on a checkpoint (growcert.stages.interventions)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import checkpoint_arguments, log, write_table

NAME = "intervene"
HELP = "residual interventions: predicted vs observed held-out loss change"
SETTINGS = "intervene"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, help="the checkpoint's gradient store")
    checkpoint_arguments(
        parser, "config key intervene, as JSON or @file", "tidy CSV, one row per point x variant x draw x epsilon"
    )


def run(args: argparse.Namespace) -> None:
    from growcert.data import load_prepared
    from growcert.stages.interventions import run_interventions

    table = run_interventions(
        args.checkpoint,
        args.store,
        load_prepared(args.data),
        args.settings,
        log=log,
        hf=args.pretrained_model,
        threads=args.threads,
        device=args.device,
    )
    write_table(table, args.out)
