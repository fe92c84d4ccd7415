"""`growcert grow`: a shallow net grown with zero-output blocks against training from scratch
(growcert.stages.grow)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument, torch_arguments
from growcert.pipeline.artifacts import GROWTH_RUN_TABLE, GROWTH_SELECTION

NAME = "grow"
HELP = "grow a shallow net with zero-output blocks vs training from scratch"
SETTINGS = "grow"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True)
    settings_argument(
        parser,
        "one growth experiment as JSON or @file: an entry of config grow.experiments with "
        "the section's shared keys (stage grow of growcert.config.stage_settings)",
    )
    parser.add_argument("--out", required=True, help=f"folder for {GROWTH_RUN_TABLE.name} and {GROWTH_SELECTION.name}")
    torch_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.grow import grow_and_compare

    grow_and_compare(args.settings, args.data, args.out, log=log, threads=args.threads, device=args.device)
