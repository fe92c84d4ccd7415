"""`growcert estimate-alignment`: d_align and its intervals at every point of a store (growcert.stages.alignment)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log, settings_argument, write_table

NAME = "estimate-alignment"
HELP = "d_align, intervals, detectability per point x reduction x pool"
SETTINGS = "alignment"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True)
    settings_argument(parser, "config key alignment, as JSON or @file")
    parser.add_argument("--out", required=True)


def run(args: argparse.Namespace) -> None:
    from growcert.stages.alignment import estimate_alignment

    write_table(estimate_alignment(args.store, args.settings, log=log), args.out)
