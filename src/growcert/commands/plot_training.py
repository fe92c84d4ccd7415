"""`growcert plot-training`: the trained grid's figure (growcert.report.figures)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import log

NAME = "plot-training"
HELP = "held-out loss/accuracy vs width and depth"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True)
    parser.add_argument("--out", required=True)


def run(args: argparse.Namespace) -> None:
    import pandas as pd

    from growcert.report.figures import plot_training_grid

    plot_training_grid(pd.read_csv(args.table), args.out)
    log(f"figure -> {args.out}")
