"""`growcert train`: one model of a grid, its checkpoints and metrics.json (growcert.stages.train)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument, torch_arguments
from growcert.pipeline.artifacts import CHECKPOINT, RUN_METRICS

NAME = "train"
HELP = f"train one model of a grid, saving checkpoints and {RUN_METRICS.name}"
SETTINGS = "train"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="prepared dataset folder")
    settings_argument(
        parser,
        "one run of a grid as JSON, or @file: family, dataset, width, depth, seed, model, "
        "train (stage train of growcert.config.stage_settings)",
    )
    parser.add_argument("--out", required=True, help=f"run folder ({CHECKPOINT.at(step='N').name}, {RUN_METRICS.name})")
    torch_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.train import train_model

    train_model(args.settings, args.data, args.out, threads=args.threads, log=log, device=args.device)
