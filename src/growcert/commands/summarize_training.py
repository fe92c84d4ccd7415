"""`growcert summarize-training`: every run's evaluation history as one tidy table (growcert.report.training)."""

from __future__ import annotations

import argparse

from growcert.commands.shared import write_table
from growcert.pipeline.artifacts import RUN_METRICS

NAME = "summarize-training"
HELP = "tidy table of every run's evaluation history"
SETTINGS = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", help=f"run folders holding {RUN_METRICS.name}")
    parser.add_argument("--out", required=True)


def run(args: argparse.Namespace) -> None:
    from growcert.report.training import training_table

    write_table(training_table(args.runs), args.out)
