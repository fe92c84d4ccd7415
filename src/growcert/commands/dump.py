"""`growcert dump`: a checkpoint's gradient store (growcert.stages.dump)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import checkpoint_arguments, log

NAME = "dump"
HELP = "store per-example activations and activation gradients of a checkpoint"
SETTINGS = "dump"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    checkpoint_arguments(
        parser, "config key dump as JSON, or @file (schema defaults fill the rest)", "store path (PATH.zarr)"
    )


def run(args: argparse.Namespace) -> None:
    from growcert.data import load_prepared
    from growcert.stages.dump import dump_gradients

    dump_gradients(
        args.checkpoint,
        load_prepared(args.data),
        args.out,
        args.settings,
        threads=args.threads,
        log=log,
        hf=args.pretrained_model,
        device=args.device,
    )
