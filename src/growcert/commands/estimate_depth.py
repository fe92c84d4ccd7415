"""`growcert estimate-depth`: the first-order value of a zero-output block at every point of a store
(growcert.stages.depth)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument, torch_arguments, write_table

NAME = "estimate-depth"
HELP = "first-order value of a zero-output block at every point of a store"
SETTINGS = "depth"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True)
    settings_argument(parser, "config key depth, as JSON or @file")
    parser.add_argument("--out", required=True)
    torch_arguments(parser)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.depth import estimate_depth

    write_table(estimate_depth(args.store, args.settings, log=log, threads=args.threads, device=args.device), args.out)
