"""`growcert estimate-misalignment`: empirical misalignment and certificates of a store (growcert.stages.alignment)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument, write_table

NAME = "estimate-misalignment"
HELP = "empirical misalignment and certificates over an (M, K) grid"
SETTINGS = "alignment"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True)
    parser.add_argument("--alignment", required=True, help="the store's estimate-alignment table")
    settings_argument(parser, "config key alignment, as JSON or @file")
    parser.add_argument("--out", required=True)


def run(args: argparse.Namespace) -> None:
    import pandas as pd

    from growcert.stages.alignment import estimate_misalignment

    write_table(estimate_misalignment(args.store, pd.read_csv(args.alignment), args.settings, log=log), args.out)
